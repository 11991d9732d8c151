"""Continuations: the live state of a symbolic call stack at a graph break, and the one real step.

When tracing stops at an instruction it cannot capture (DESIGN invariant 6),
the plan's exit rebuilds every frame of the symbolic call stack as a
:class:`LiveFrame` of real Python values (tensors come from the graph's
outputs), and :meth:`Continuation.step` executes that one instruction for
real with its executor (:mod:`stillframe.runtime.executors`). Tracing then resumes at the next
instruction: :func:`flatten` names every live value (``'0:x'`` is local ``x``
of the outermost frame, ``'1:stack:2'`` the third stack slot of the frame it
called), and the resumed trace reads them through those names, so it is
guarded and cached like any other entry, keyed by :meth:`Continuation.key`.

Values only the interpreter models get small real stand-ins that the resumed
trace recognises (:mod:`stillframe.variables.standins`).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from dataclasses import dataclass, field
from typing import Any

from ..bytecode.reader import Bytecode
from ..config import config
from ..errors import InternalError, StillframeError
from ..variables.objects import TracebackEntry
from ..variables.standins import ResumableIterator
from .executors import EXECUTORS
from .tracebacks import handled_traceback, raise_in_user_frames
from . import stack_executors  # noqa: F401  (registers the executors that only move values)


@dataclass
class LiveFrame:
    """One frame of the call stack with real values: what ``Frame`` is with VariableTrackers."""

    code: Bytecode
    ip: int
    stack: list
    locals: dict
    cells: dict
    globals: dict
    globals_module: str | None
    kw_names: tuple = ()
    yields: list | None = None
    data: frozenset = frozenset()  # locals holding floats produced at run time: never guarded by value


@dataclass
class Continuation:
    """The live call stack at a graph break; ``frames[-1].ip`` is the instruction to execute for real."""

    frames: list
    reason: Any = None
    returned: Any = field(default=None)
    concrete: bool = False  # running instruction by instruction (no plan for where the stack stands)
    observed: bool = False  # concrete because the user's saved-tensor hooks or torch mode are active (traced anew
                            # once a real step leaves them)
    handling: Any = None  # the exception an `except` block of the user's code is handling, if any
    # what was symbolic at the break, by the source name the resumed trace reads it from: the dimensions of a
    # tensor (a tuple of bools), or "int" (so the code after a break stays dynamic where the code before was)
    dynamic: dict = field(default_factory=dict)
    # called with each callable a real step calls, returns what to call instead (runtime/optimizer_step.py's
    # StepRouter: a compiled opt.step); None: call it as is
    reroute: Any = None
    # the current step called the user's code inside ``handling`` (executors._handling): CPython chained what it
    # raised already, an explicit ``__context__ = None`` included
    chained: bool = False

    def key(self) -> tuple:
        """What resumed cache entries are keyed by: the code objects and instruction indexes of the stack."""
        return tuple((f.code.code, f.ip) for f in self.frames)

    def step(self) -> bool:
        """Execute the top frame's instruction for real. True once the outermost frame has returned
        (its value is then in ``returned``)."""
        frame = self.frames[-1]
        inst = frame.code.instructions[frame.ip]
        frame.ip += 1
        run = EXECUTORS.get(inst.opname)
        if run is None:  # (code with such an opcode is never traced: executors.unsteppable)
            raise InternalError(f"no real step for the opcode {inst.opname}")
        self.chained = False
        try:
            run(self, frame, inst)
        except StillframeError:  # ours, never the user's: no `except` of the user's code may see it
            raise
        except BaseException as exc:  # SystemExit, GeneratorExit, KeyboardInterrupt reach the user's handlers too
            if inst.opname not in ("RERAISE", "RAISE_VARARGS") and not self.chained and exc.__context__ is None and \
                    isinstance(self.handling, BaseException) and exc is not self.handling:
                exc.__context__ = self.handling  # raised inside the user's `except`, as CPython chains it
            self._unwind(exc, inst.index)
        return not self.frames

    def _unwind(self, exc: BaseException, index: int) -> None:
        """Send an exception raised by a real step to the innermost ``except``/``finally`` of the user's frames
        (their exception tables), as CPython would; with none, it reaches the caller through stand-ins of
        the user's frames it passed through (:mod:`stillframe.runtime.tracebacks`)."""
        unwound = []
        passed = []  # the user's frames it passes through, for the traceback its handler sees
        while self.frames:
            frame = self.frames[-1]
            entry = frame.code.exception_handler(index)
            inst = frame.code.instructions[index]
            module = frame.globals.get("__name__") if isinstance(frame.globals, dict) else None
            passed.append(TracebackEntry(frame.code.code, inst.lineno, inst.positions,
                                         module if isinstance(module, str) else None))
            if entry is not None:
                if not config.verbose_tracebacks:  # eager's entries: the user's frames, not our executors'
                    exc.__traceback__ = handled_traceback(exc.__traceback__, passed)
                del frame.stack[entry.depth:]
                if entry.lasti:
                    frame.stack.append(frame.code.instructions[index].offset)
                frame.stack.append(exc)
                frame.ip = entry.target
                self.concrete = True  # handlers run instruction by instruction
                return
            if config.verbose_tracebacks:
                filename, line = frame.code.location(index)
                exc.add_note(f"  (stillframe) in the user's frame {frame.code.code.co_qualname} at {filename}:{line}")
            unwound.append((frame.code.code, frame.code.instructions[index].positions))
            self.frames.pop()
            if self.frames:
                index = self.frames[-1].ip - 1
        raise_in_user_frames(exc, unwound[::-1])  # the traceback names the user's frames, as eager's does

    def return_value(self, value: Any) -> None:
        frame = self.frames.pop()
        if frame.yields is not None:
            value = ResumableIterator(frame.yields)
        if self.frames:
            self.frames[-1].stack.append(value)
        else:
            self.returned = value


def stack_name(i: int, j: int) -> str:
    """The name of stack slot ``j`` of frame ``i`` in a resumed trace's ``L``. A local's name is ``'{i}:{name}'``,
    and no identifier holds a ``:``, so no local can take a slot's name (a local ``s0`` did: fuzz-free probe,
    silent wrong values)."""
    return f"{i}:stack:{j}"


def yields_name(i: int) -> str:
    """The name of the values frame ``i`` (a generator's) yielded but its consumer has not taken yet."""
    return f"{i}:yields:"


def flatten(frames: list) -> dict:
    """Name every live value of a call stack (the ``L`` of a resumed trace)."""
    L: dict[str, Any] = {}
    for i, f in enumerate(frames):
        for j, v in enumerate(f.stack):
            L[stack_name(i, j)] = v
        for name, v in f.locals.items():
            L[f"{i}:{name}"] = v
        for name, cell in f.cells.items():
            L[f"{i}:cell:{name}"] = cell
        if f.yields is not None:
            L[yields_name(i)] = f.yields
    return L
