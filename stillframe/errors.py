"""Errors and warnings raised by stillframe.

Two families, kept apart as byterun keeps ``VirtualMachineError`` apart from
the user's own exceptions:

* faults of ours: :class:`InternalError` (a bug in stillframe). It never
  reaches the user as a crash: the frame falls back to eager with a warning.
* things the tracer cannot capture: :class:`Unsupported`, carrying a
  :class:`GraphBreak` value (kind, explanation, hints, user location). Without
  ``fullgraph=True`` it becomes an eager fallback plus one
  :class:`StillframeWarning`; with ``fullgraph=True`` it is raised to the user
  (matches torch.compile's ``fullgraph``).

Exceptions raised by the user's own code are never wrapped: the call runs
eagerly and the user sees exactly the exception eager Python raises.
"""

from __future__ import annotations
from .own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import enum
from typing import Any
from dataclasses import dataclass


class GraphBreakKind(enum.StrEnum):
    """Why tracing stopped: the closed vocabulary of ``GraphBreak.kind`` (each value one short stable tag).

    ``Tracer.unsupported`` accepts only these; a test checks every tag written in the package is one.
    """

    UNSUPPORTED_CALL = "unsupported_call"  # a call stillframe has no rule for (it runs for real)
    UNSUPPORTED_ATTRIBUTE = "unsupported_attribute"  # an attribute read or write with no rule (a descriptor, a C-level slot ...)
    DATA_DEPENDENT = "data_dependent"  # Python needs a tensor's values (`if t:`, `t.item()`, an op whose output shape depends on data)
    SIDE_EFFECT = "side_effect"  # a side effect on an outside object that cannot be replayed after the graph
    UNSUPPORTED_BUILTIN = "unsupported_builtin"  # a builtin called on values it cannot be evaluated on at trace time
    UNSUPPORTED_OPERATOR = "unsupported_operator"  # an operator on values with no rule
    UNSUPPORTED_OPCODE = "unsupported_opcode"  # an instruction the interpreter has no handler for
    UNSUPPORTED_SUBSCRIPT = "unsupported_subscript"  # indexing a value with no rule
    OPAQUE_MODULE = "opaque_module"  # a call into a module stillframe never traces (logging, warnings, threading ...)
    UNSUPPORTED_LIVE_VALUE = "unsupported_live_value"  # a live object that cannot be wrapped as a VariableTracker
    UNSUPPORTED_ITERATION = "unsupported_iteration"  # iterating a value with no rule
    UNSUPPORTED_IMPORT = "unsupported_import"  # an import inside the compiled function that cannot be resolved at trace time
    HIDDEN_BASE = "hidden_base"  # a view whose base tensor the trace cannot see
    DICT_KEYS = "dict_keys"  # dict keys that are not constants
    AUTOGRAD_LEAF = "autograd_leaf"  # an in-place op on a leaf that requires grad, or another autograd-state rule eager enforces
    UNSUPPORTED_RESULT = "unsupported_result"  # a result that cannot be returned from a graph
    UNSUPPORTED_RAISE = "unsupported_raise"  # a raise of a value that is not an exception
    UNSUPPORTED_CONTEXT_MANAGER = "unsupported_context_manager"  # a `with` on a context manager with no rule
    UNSUPPORTED_CONDITION = "unsupported_condition"  # a branch on a value whose truth cannot be known at trace time
    UNSUPPORTED_ARGUMENT = "unsupported_argument"  # an argument form with no rule
    TRACE_TOO_LONG = "trace_too_long"  # the trace passed config.max_trace_steps instructions
    TENSOR_SUBCLASS = "tensor_subclass"  # a tensor subclass
    SUSPENDED_GENERATOR = "suspended_generator"  # a generator suspended mid-way at a graph break (the runtime retries, draining generators)
    NUMPY = "numpy"  # a NumPy call or array
    NOT_CONSTANT = "not_constant"  # a value that must be a constant at trace time is not
    MODULE_HOOKS = "module_hooks"  # module hooks with no rule
    LOOP_ITERATION = "loop_iteration"  # a loop whose iterations cannot be unrolled
    INLINE_DEPTH = "inline_depth"  # calls nested deeper than config.max_inline_depth
    GLOBAL_STATE = "global_state"  # a call that reads or writes global torch or Python state
    GENERATOR_CONTEXT_MANAGER = "generator_context_manager"  # a @contextmanager generator used in a way with no rule
    DYNAMIC_SHAPE = "dynamic_shape"  # a shape that is not static
    DISABLED = "disabled"  # a call to a function marked never to be traced (stillframe.disable)
    CONSTANT_TENSOR = "constant_tensor"  # a tensor created outside the trace and captured as a constant
    AUTOCAST_EXIT = "autocast_exit"  # leaving an autocast block in a way with no rule
    USER_EXCEPTION = "user_exception"  # the traced code raises: the step runs for real, so eager raises it
    SAVED_FOR_BACKWARD = "saved_for_backward"  # an op saving for backward a tensor written in place later: it runs for real
    HIGHER_ORDER = "higher_order"  # a higher-order op (torch.cond ...) whose callables cannot become subgraphs
    EFFECTFUL_CALL = "effectful_call"  # a torch call whose effect a fake tensor cannot show (loss.backward(), hooks, RNG state ...)


@dataclass(frozen=True, slots=True)
class UserLocation:
    """Where in the user's source something happened: ``file:line`` plus the line's text."""

    filename: str
    lineno: int | None
    source: str = ""

    def __str__(self) -> str:
        text = f"{self.filename}:{self.lineno}"
        if self.source:
            text += f"\n    {self.source.strip()}"
        return text


@dataclass(frozen=True, slots=True)
class GraphBreak:
    """A reason tracing had to stop, as data (STYLE habit 8).

    ``kind`` is a :class:`GraphBreakKind` (``"unsupported_opcode"``,
    ``"data_dependent"``, ``"unsupported_call"`` ...), ``explanation`` one
    sentence for a user, ``hints`` what they can do about it, ``location`` the
    innermost user frame being traced when it happened.
    """

    kind: GraphBreakKind
    explanation: str
    hints: tuple[str, ...] = ()
    location: UserLocation | None = None

    def format(self) -> str:
        lines = [f"{self.kind}: {self.explanation}"]
        if self.location is not None:
            lines.append(f"  at {self.location}")
        for hint in self.hints:
            lines.append(f"  hint: {hint}")
        return "\n".join(lines)


class StillframeError(Exception):
    """Base class of every exception stillframe itself raises."""


class Unsupported(StillframeError):
    """The traced program does something stillframe cannot capture.

    Raised to the user only with ``fullgraph=True`` (matches torch.compile's
    ``fullgraph``); otherwise the call runs eagerly with one warning carrying
    the same text. ``.graph_break`` holds the structured reason.
    """

    def __init__(self, graph_break: GraphBreak):
        super().__init__(graph_break.format())
        self.graph_break = graph_break


class InternalError(StillframeError):
    """A bug in stillframe (an invariant of the tracer did not hold)."""


class RetraceSymbolic(StillframeError):
    """A trace with static shapes met a tensor that must have symbolic sizes (marked dynamic, or a size that
    changed since the last trace): the runtime traces the frame again with a ShapeEnv. Never reaches the user."""


class RetraceRunForReal(StillframeError):
    """The trace found that calls it captured (instructions in ``locations``: ``(code object, instruction
    index)``) must run for real for the graph to be exact (``why`` says why): the runtime traces the frame again
    with those calls as graph breaks. Never reaches the user."""

    def __init__(self, locations: frozenset, why: str = "") -> None:
        super().__init__(f"{len(locations)} call(s) must run for real: {why}")
        self.locations = locations
        self.why = why


class RetraceSavedTensor(RetraceRunForReal):
    """An in-place op writes a tensor that an op traced earlier saved for backward (``t3 = t2.sin(); t2.add_(1)``):
    eager's backward through that op then raises "one of the variables needed for gradient computation has been
    modified by an inplace operation", which no graph reproduces (a backend saves the value from before the
    write, or saves it where no version is checked). The runtime traces the frame again with the saving calls
    (instructions in ``locations``: ``(code object, instruction index)``) run for real, so autograd saves the
    real tensor and checks its version, as in eager. Never reaches the user."""

    def __init__(self, locations: frozenset) -> None:
        super().__init__(locations)
        self.args = (f"{len(locations)} call(s) save for backward a tensor written in place later",)


class StillframeWarning(UserWarning):
    """Emitted once when a function (or one of its cache entries) runs eagerly."""


class UserError(Exception):
    """The user's code raised (or would raise) ``exc`` at trace time; eager must run to show it.

    ``traceable``: the exception is certainly eager's own (a ``raise`` in the user's code, or a Python rule
    that mirrors CPython's), so a traced ``except`` may catch it. An error from running an op on fake
    tensors is not: fake tensors may fail where real ones do not, so it is never caught in the trace; the
    instruction runs for real instead, and the real exception (if any) reaches the user's handlers.

    ``var``: the exception as a value of the trace (rules/exceptions.py), once it has one: ``exc`` then only
    stands for it in stillframe's own checks and messages. ``reraised``: raised again as it is (a bare ``raise``,
    ``RERAISE``): the frame raising it adds no traceback entry.
    """

    def __init__(self, exc: BaseException, location: UserLocation | None, traceable: bool = True, var: Any = None,
                 reraised: bool = False):
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.exc = exc
        self.location = location
        self.traceable = traceable
        self.var = var
        self.reraised = reraised
