"""Continuations: the live state of a symbolic call stack at a graph break, and the one real step.

When tracing stops at an instruction it cannot capture (DESIGN invariant 6),
the plan's exit rebuilds every frame of the symbolic call stack as a
:class:`LiveFrame` of real Python values (tensors come from the graph's
outputs), and :meth:`Continuation.step` executes that one instruction for
real, with CPython's semantics for it. Tracing then resumes at the next
instruction: :func:`flatten` names every live value (``'0:x'`` is local ``x``
of the outermost frame, ``'1:s2'`` the third stack slot of the frame it
called), and the resumed trace reads them through those names, so it is
guarded and cached like any other entry, keyed by :meth:`Continuation.key`.

Values only the interpreter models get small real stand-ins that the resumed
trace recognises: :data:`NULL` (CPython's NULL stack marker),
:class:`ResumableIterator` (an iterator over a fixed list),
:class:`GradModeExit` (the ``__exit__`` of a grad-mode block).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..bytecode import Bytecode, Instruction


class _Null:
    """CPython's NULL stack marker, as a live value between graphs."""

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()


class ResumableIterator:
    """An iterator over a fixed list of values at position ``index`` (what ``FOR_ITER`` loops over)."""

    __slots__ = ("items", "index")

    def __init__(self, items: list, index: int = 0):
        self.items = items
        self.index = index

    def __iter__(self) -> "ResumableIterator":
        return self

    def __next__(self) -> Any:
        if self.index >= len(self.items):
            raise StopIteration
        self.index += 1
        return self.items[self.index - 1]


@dataclass(frozen=True)
class GradModeExit:
    """The ``__exit__`` of a grad-mode block entered in traced code: calling it restores ``restore``."""

    restore: bool

    def __call__(self, *exc_info: Any) -> None:
        torch._C._set_grad_enabled(self.restore)


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


@dataclass
class Continuation:
    """The live call stack at a graph break; ``frames[-1].ip`` is the instruction to execute for real."""

    frames: list
    reason: Any = None
    returned: Any = field(default=None)

    def key(self) -> tuple:
        """What resumed cache entries are keyed by: the code objects and instruction indexes of the stack."""
        return tuple((f.code.code, f.ip) for f in self.frames)

    def step(self) -> bool:
        """Execute the top frame's instruction for real. True if the outermost frame returned."""
        frame = self.frames[-1]
        inst = frame.code.instructions[frame.ip]
        frame.ip += 1
        EXECUTORS[inst.opname](self, frame, inst)
        return False


def flatten(frames: list) -> dict:
    """Name every live value of a call stack (the ``L`` of a resumed trace)."""
    L: dict[str, Any] = {}
    for i, f in enumerate(frames):
        for j, v in enumerate(f.stack):
            L[f"{i}:s{j}"] = v
        for name, v in f.locals.items():
            L[f"{i}:{name}"] = v
        for name, cell in f.cells.items():
            L[f"{i}:cell:{name}"] = cell
        if f.yields is not None:
            L[f"{i}:yields"] = f.yields
    return L


# --------------------------------------------------------------- real execution
def _call(cont: Continuation, frame: LiveFrame, fn: Any, args: list, kwargs: dict) -> None:
    frame.stack.append(fn(*args, **kwargs))


def _CALL(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    argc = inst.arg
    args = frame.stack[len(frame.stack) - argc:] if argc else []
    del frame.stack[len(frame.stack) - argc:]
    second = frame.stack.pop()
    first = frame.stack.pop()
    if first is NULL:
        fn = second
    else:
        fn, args = first, [second, *args]
    kwargs = {}
    if frame.kw_names:
        n = len(frame.kw_names)
        kwargs = dict(zip(frame.kw_names, args[-n:]))
        args = args[:-n]
        frame.kw_names = ()
    _call(cont, frame, fn, args, kwargs)


def _CALL_FUNCTION_EX(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    kwargs = frame.stack.pop() if inst.arg & 1 else {}
    args = frame.stack.pop()
    fn = frame.stack.pop()
    below = frame.stack.pop()
    if below is not NULL:
        fn, args = below, (fn, *args)
    _call(cont, frame, fn, list(args), dict(kwargs))


def _unary(fn: Any) -> Any:
    def run(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
        frame.stack.append(fn(frame.stack.pop()))

    return run


def _BINARY_OP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    from ..trace.ops.operators import BINARY_OPERATORS

    b = frame.stack.pop()
    a = frame.stack.pop()
    frame.stack.append(BINARY_OPERATORS[inst.argval](a, b))


def _COMPARE_OP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    from ..trace.ops.operators import COMPARE_OPERATORS

    b = frame.stack.pop()
    a = frame.stack.pop()
    frame.stack.append(COMPARE_OPERATORS[inst.argval](a, b))


def _CONTAINS_OP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    container = frame.stack.pop()
    item = frame.stack.pop()
    frame.stack.append((item in container) != bool(inst.argval))


def _jump_if(test: Any, pop: bool = True, keep_on_jump: bool = False) -> Any:
    def run(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
        value = frame.stack[-1]
        taken = test(value)
        if pop or not (taken and keep_on_jump):
            frame.stack.pop()
        if taken:
            frame.ip = inst.target

    return run


def _FOR_ITER(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    try:
        frame.stack.append(next(frame.stack[-1]))
    except StopIteration:
        frame.stack.pop()
        frame.ip = inst.target


def _GET_ITER(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(iter(frame.stack.pop()))


def _UNPACK_SEQUENCE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    values = list(frame.stack.pop())
    if len(values) != inst.arg:
        if len(values) > inst.arg:
            raise ValueError(f"too many values to unpack (expected {inst.arg})")
        raise ValueError(f"not enough values to unpack (expected {inst.arg}, got {len(values)})")
    frame.stack.extend(reversed(values))


def _LOAD_ATTR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(getattr(frame.stack.pop(), inst.argval))


def _LOAD_METHOD(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.extend((NULL, getattr(frame.stack.pop(), inst.argval)))


def _STORE_ATTR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    obj = frame.stack.pop()
    value = frame.stack.pop()
    setattr(obj, inst.argval, value)


def _BINARY_SUBSCR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    key = frame.stack.pop()
    frame.stack.append(frame.stack.pop()[key])


def _STORE_SUBSCR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    key = frame.stack.pop()
    container = frame.stack.pop()
    container[key] = frame.stack.pop()


def _FORMAT_VALUE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    spec = frame.stack.pop() if inst.arg & 0x04 else ""
    value = frame.stack.pop()
    convert = {0: None, 1: str, 2: repr, 3: ascii}[inst.arg & 0x03]
    frame.stack.append(format(convert(value) if convert else value, spec))


def _BUILD_STRING(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    parts = frame.stack[len(frame.stack) - inst.arg:]
    del frame.stack[len(frame.stack) - inst.arg:]
    frame.stack.append("".join(parts))


def _RAISE_VARARGS(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    if inst.arg == 2:
        cause = frame.stack.pop()
        raise frame.stack.pop() from cause
    raise frame.stack.pop()


def _is_none(v: Any) -> bool:
    return v is None


EXECUTORS = {
    "CALL": _CALL,
    "CALL_FUNCTION_EX": _CALL_FUNCTION_EX,
    "BINARY_OP": _BINARY_OP,
    "COMPARE_OP": _COMPARE_OP,
    "CONTAINS_OP": _CONTAINS_OP,
    "UNARY_NEGATIVE": _unary(operator.neg),
    "UNARY_POSITIVE": _unary(operator.pos),
    "UNARY_INVERT": _unary(operator.invert),
    "UNARY_NOT": _unary(operator.not_),
    "POP_JUMP_IF_TRUE": _jump_if(bool),
    "POP_JUMP_IF_FALSE": _jump_if(operator.not_),
    "POP_JUMP_IF_NONE": _jump_if(_is_none),
    "POP_JUMP_IF_NOT_NONE": _jump_if(lambda v: v is not None),
    "JUMP_IF_TRUE_OR_POP": _jump_if(bool, pop=False, keep_on_jump=True),
    "JUMP_IF_FALSE_OR_POP": _jump_if(operator.not_, pop=False, keep_on_jump=True),
    "FOR_ITER": _FOR_ITER,
    "GET_ITER": _GET_ITER,
    "UNPACK_SEQUENCE": _UNPACK_SEQUENCE,
    "LOAD_ATTR": _LOAD_ATTR,
    "LOAD_METHOD": _LOAD_METHOD,
    "STORE_ATTR": _STORE_ATTR,
    "BINARY_SUBSCR": _BINARY_SUBSCR,
    "STORE_SUBSCR": _STORE_SUBSCR,
    "FORMAT_VALUE": _FORMAT_VALUE,
    "BUILD_STRING": _BUILD_STRING,
    "RAISE_VARARGS": _RAISE_VARARGS,
}

