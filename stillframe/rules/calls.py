"""Calling a VariableTracker: inline Python, record torch ops, dispatch builtins (:mod:`.builtin_calls`).

``call(tx, fn, args, kwargs)`` either pushes the result on the current stack
or, for a user function, pushes a child frame whose ``RETURN_VALUE`` will push
the result later. Rules are keyed by the type of the callee's VT (a small,
closed set) and, for builtins, by the builtin itself (``BUILTIN_RULES``).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)
from ..own_builtins import BUILTINS

import collections
from typing import TYPE_CHECKING

import copy
import dataclasses
import functools
import inspect
import logging
import math
import operator
import sys
import types
import weakref
from typing import Any, Callable

import torch
from .. import compat
from ..errors import InternalError
from ..bytecode.operators import BINARY_OPERATORS, COMPARE_OPERATORS
from ..guards.guard import Guard
from ..guards.source import AttrSource, CallSource, GetItemSource
from ..variables.base import (
    AutocastExitVariable,
    AutocastVariable,
    BuiltinVariable,
    ConstantVariable,
    ContextExitVariable,
    DictVariable,
    NumpyArrayVariable,
    DictViewVariable,
    GeneratorVariable,
    GradModeVariable,
    InferenceModeExitVariable,
    InferenceModeVariable,
    IteratorVariable,
    LazyArgument,
    ListVariable,
    LiveIteratorVariable,
    NNModuleVariable,
    NestedFunctionVariable,
    PartialVariable,
    PythonObjectVariable,
    RangeVariable,
    SetVariable,
    DequeVariable,
    SliceVariable,
    TensorMethodVariable,
    TensorVariable,
    TorchFunctionVariable,
    TupleVariable,
    UserFunctionVariable,
    UserMethodVariable,
    VariableTracker,
)
from ..variables.base import is_builtin_class
from ..variables.builder import is_constant, of_type, wrap
from ..variables.kinds import INTERNAL
from ..variables.objects import ContainerMethodVariable, ObjectVariable, SuperVariable
from ..tensors.effects import hashable_key, never_traced, runs_for_real
from ..tensors.ops import RUNS_FOR_REAL, call_tensor_op
# builtin_calls first: it imports the lower rules modules by name, and they reach it as a module object
from .builtin_calls import (
    BUILTIN_RULES,
    GRAD_MODE_CLASSES,
    _apply_getter,
    _autocast,
    _callable,
    _grad_mode_manager,
    call_builtin,
    call_dunder,
    const_value,
    construct,
    fold,
    is_const,
    sequence_items,
)
from .attrs import (
    _noop,
    getattr_var,
)
from .containers import delete_subscript, store_subscript, subscript
from .context import (exit_autocast, exit_inference_mode, inference_mode_manager, profiler_off, record_function_manager,
                      set_grad_mode)
from .deques import make_deque
from .disable import compiled_original, is_disabled
from .higher_order import higher_order_rule
from .optimizers import TRACED_METHODS
from . import exceptions, live_dicts, nn_modules, numpy_interop, operators
from .protocol import Protocol
from .generators import drain
from .frames import inline_call, inline_nested
from .objects import (
    call_container_method,
    deepcopy_var,
    record_side_effect,
    store_attr,
)


if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


# torch functions that are not graph ops but read global state or are context managers.
def _is_grad_enabled(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return ConstantVariable(tx.state.grad_enabled)


TORCH_SPECIAL: dict[Any, Callable] = {
    torch.is_grad_enabled: _is_grad_enabled,
    torch.is_inference_mode_enabled: lambda tx, a, k: ConstantVariable(tx.state.inference_mode),
    torch.get_default_dtype: lambda tx, a, k: ConstantVariable(torch.get_default_dtype()),
    torch.jit.annotate: lambda tx, a, k: a[1] if len(a) == 2 and not k else _arity_error(tx, torch.jit.annotate, a, k),
    torch.is_tensor: lambda tx, a, k: ConstantVariable(isinstance(a[0], TensorVariable)) if len(a) == 1 and not k
    else _arity_error(tx, torch.is_tensor, a, k),
}


def _arity_error(tx: Tracer, fn: Any, args: list, kwargs: dict) -> None:
    """Python's TypeError for calling ``fn`` with this many arguments and these keywords (``fn`` is called with
    placeholders, so the message is its own)."""
    try:
        fn(*[None] * len(args), **dict.fromkeys(kwargs))
    except TypeError as e:
        tx.user_error(e)
    raise InternalError(f"{fn.__qualname__} accepted the arguments its rule refused")

def _tracing_answers() -> dict:
    """Functions that libraries call to ask whether they are being compiled, with the answer a trace gives.

    Inside a trace they answer as under torch.compile (``torch.compiler.is_compiling()`` is True), so
    libraries take their compile-friendly paths (transformers does); a step run for real between two
    graphs calls the real function and gets eager's answer, as with TorchDynamo.
    """
    dynamo = sys.modules.get("torch._dynamo")  # never imported by us: it is heavy and registers hooks
    cached = _TRACING_ANSWERS.get(dynamo is not None)
    if cached is not None:
        return cached
    answers = {torch.compiler.is_compiling: True, torch.compiler.is_dynamo_compiling: True,
               torch.compiler.is_exporting: False, torch.jit.is_tracing: False, torch.jit.is_scripting: False}
    if compat.utils_is_compiling is not None:
        answers[compat.utils_is_compiling] = True
    if dynamo is not None and hasattr(dynamo, "is_compiling"):
        answers[dynamo.is_compiling] = True
    _TRACING_ANSWERS[dynamo is not None] = answers
    return answers


_TRACING_ANSWERS: dict[bool, dict] = {}  # by whether torch._dynamo was imported when it was built


# Pure functions folded at trace time when every argument is a constant.
PURE_MODULES = (math, operator)
#: Other C functions that compute on their (constant) arguments alone: ``sys.intern`` returns an equal string.
PURE_FUNCTIONS = {sys.intern}


# Python modules whose functions are never traced: they only talk to the outside world (and tracing them
# would guard on per-call objects like log records), or keep process-wide state (``random``: traced through,
# ``random.seed`` held a ``super()`` object across the break at its C call, and the frame ran eagerly). A call
# into them is a graph break run for real.
OPAQUE_MODULES = ("logging", "warnings", "traceback", "pdb", "inspect", "threading", "tqdm", "random")


def call(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """Call ``fn`` with VT arguments; push the result (or a child frame that will push it)."""
    target = getattr(fn, "fn", None) or getattr(fn, "value", None)
    if of_type(target, types.FunctionType) and not args and not kwargs:
        answer = _tracing_answers().get(target)
        if answer is not None:
            return tx.push(ConstantVariable(answer))
    if (target is torch.finfo or target is torch.iinfo) and all(is_const(tx, a) for a in args) and not kwargs:
        return tx.push(ConstantVariable(fold(tx, target, args, kwargs).value))  # torch.finfo(x.dtype).min
    if (target is copy.copy or target is copy.deepcopy) and any(isinstance(a, (IteratorVariable, LiveIteratorVariable))
                                                    for a in args):
        # copy reduces it (__reduce_ex__) and rebuilds one with __setstate__: the real call copies the iterator that
        # stands for it at the break, which reduces itself as eager's (standins.ResumableIterator._eager)
        tx.unsupported("unsupported_call", "copying an iterator", ("it runs for real; tracing resumes after it",))
    if target is copy.deepcopy and len(args) == 1 and not kwargs:
        return tx.push(deepcopy_var(tx, args[0], {}))
    if target is inspect.signature and len(args) == 1 and not kwargs:
        return tx.push(_signature(tx, args[0]))
    if target is not None and numpy_interop.is_numpy_function(target):
        result = numpy_interop.call_numpy(tx, target, args, kwargs)
        if result is not None:
            return tx.push(result)
    hop = higher_order_rule(target) if target is not None else None
    if hop is not None:  # torch.cond ...: its callables become subgraphs (rules/higher_order.py)
        return hop(tx, fn, args, kwargs)
    if target is not None and is_disabled(target):
        tx.unsupported("disabled", f"{getattr(target, '__qualname__', target)} is marked never to be compiled "
                       "(stillframe.disable or torch.compiler.disable)",
                       ("it runs for real; tracing resumes after it",))
    wrapped = compiled_original(fn.module if isinstance(fn, NNModuleVariable) else target)
    if wrapped is not None:
        attr, original = wrapped
        source = getattr(fn, "source", None)
        return call(tx, wrap(tx, original, AttrSource(source, attr) if source else None), args, kwargs)
    if target is torch.optim.Optimizer._optimizer_step_code and profiler_off(tx):
        return tx.push(ConstantVariable(None))  # empty: only an active profiler's Python tracer hooks it
    traced = TRACED_METHODS.get(hashable_key(target)) if isinstance(fn, (UserFunctionVariable,
                                                                        UserMethodVariable)) else None
    if traced is not None:  # opt.zero_grad(): its body, not torch's _disable_dynamo wrapper (rules/optimizers.py)
        source = AttrSource(fn.source, "__wrapped__") if fn.source is not None else None
        return CALL(tx, dataclasses.replace(fn, fn=traced, source=source), args, kwargs)
    module = getattr(target, "__module__", None) or ""
    stateful = runs_for_real(target) if target is not None else None
    if stateful is not None:
        tx.unsupported("effectful_call", stateful, ("it runs for real; tracing resumes after it",))
    if _is_log_call(fn, target) and _defer_log_call(tx, fn, target, args, kwargs):
        return tx.push(ConstantVariable(None))
    if isinstance(fn, (UserFunctionVariable, UserMethodVariable)) and module.split(".")[0] in OPAQUE_MODULES:
        tx.unsupported("opaque_module", f"{getattr(target, '__qualname__', target)} ({module}) talks to the "
                       "outside world", ("it runs for real; tracing resumes after it",))
    return CALL(tx, fn, args, kwargs)


def _call_refused(tx: Tracer, fn: VariableTracker, reason: str, args: list, kwargs: dict) -> None:
    tx.unsupported("unsupported_call", f"calling a {fn.python_type().__name__} value: {reason}")


#: Calling a value, by the VariableTracker kind of the callee (issue 10: this was an isinstance ladder). Each rule
#: pushes the result, or a child frame that will push it.
CALL = Protocol("call", _call_refused)


@CALL.rule(UserFunctionVariable)
def _call_function(tx: Tracer, fn: UserFunctionVariable, args: list, kwargs: dict) -> None:
    inline_call(tx, fn.fn, fn.source, list(args), kwargs)


@CALL.rule(UserMethodVariable)
def _call_method(tx: Tracer, fn: UserMethodVariable, args: list, kwargs: dict) -> None:
    if isinstance(fn.self_var, NNModuleVariable) and any(fn.fn is f for f in nn_modules.MODULE_CALL_IMPLS):
        return nn_modules.call_module_impl(tx, fn.self_var, list(args), kwargs)  # super().__call__(...) in a module
    if isinstance(fn.fn, NestedFunctionVariable):
        return inline_nested(tx, fn.fn, [fn.self_var, *args], kwargs)
    inline_call(tx, fn.fn, fn.source, [fn.self_var, *args], kwargs)


@CALL.rule(NestedFunctionVariable)
def _call_nested(tx: Tracer, fn: NestedFunctionVariable, args: list, kwargs: dict) -> None:
    inline_nested(tx, fn, args, kwargs)


def _make_partial(tx: Tracer, args: list, kwargs: dict) -> PartialVariable:
    """``functools.partial(fn, *args, **kwargs)``: eager checks ``fn`` is callable, and a partial of a partial is
    flattened (``func`` is the inner partial's function, its arguments and keywords come first). A partial made in
    the trace has no ``__dict__`` so it always flattens; a live one flattens only while it has none, which the
    trace does not model, so partial() of a live partial runs for real."""
    if not args:
        tx.user_error(TypeError("type 'partial' takes at least one argument"))
    fn, bound = args[0], tuple(args[1:])
    if isinstance(fn, PartialVariable):
        return PartialVariable(fn.fn, (*fn.args, *bound), tuple({**dict(fn.kwargs), **kwargs}.items()))
    if isinstance(fn, PythonObjectVariable) and of_type(fn.value, functools.partial):
        tx.unsupported("unsupported_call", "functools.partial of a live partial (flattened only while it has no "
                       "__dict__)")
    if not _callable(tx, [fn], {}).value:
        tx.user_error(TypeError("the first argument must be callable"))
    return PartialVariable(fn, bound, tuple(kwargs.items()))


@CALL.rule(PartialVariable)
def _call_partial(tx: Tracer, fn: PartialVariable, args: list, kwargs: dict) -> None:
    call(tx, fn.fn, [*fn.args, *args], {**dict(fn.kwargs), **kwargs})


CALL.rule(NNModuleVariable)(nn_modules.call_module)
CALL.rule(BuiltinVariable)(lambda tx, fn, args, kwargs: call_builtin(tx, fn.fn, args, kwargs))
CALL.rule(PythonObjectVariable)(lambda tx, fn, args, kwargs: call_python_object(tx, fn, args, kwargs))


@CALL.rule(TensorMethodVariable)
def _call_tensor_method(tx: Tracer, fn: TensorMethodVariable, args: list, kwargs: dict) -> None:
    if fn.name == "numpy" and numpy_interop.np is not None:
        return tx.push(numpy_interop.tensor_numpy(tx, fn.self_var, args, kwargs))
    tx.push(call_tensor_op(tx, "call_method", fn.name, (fn.self_var, *args), kwargs))


@CALL.rule(TorchFunctionVariable)
def _call_torch_function(tx: Tracer, fn: TorchFunctionVariable, args: list, kwargs: dict) -> None:
    if fn.fn is torch.from_numpy and len(args) == 1 and not kwargs and isinstance(args[0], NumpyArrayVariable):
        return tx.push(numpy_interop.from_numpy(tx, args[0]))
    tx.push(call_torch_function(tx, fn.fn, args, kwargs))


@CALL.rule(ObjectVariable)
def _call_object(tx: Tracer, fn: ObjectVariable, args: list, kwargs: dict) -> None:
    result = call_dunder(tx, fn, "__call__", list(args), kwargs)
    if result is None:
        _call_refused(tx, fn, "its class has no __call__ the trace can run", args, kwargs)
    tx.push(result)


@CALL.rule(ContainerMethodVariable)
def _call_container_method(tx: Tracer, fn: ContainerMethodVariable, args: list, kwargs: dict) -> None:
    tx.push(call_container_method(tx, fn, args, kwargs))


@CALL.rule(AutocastExitVariable)
def _call_autocast_exit(tx: Tracer, fn: AutocastExitVariable, args: list, kwargs: dict) -> None:
    exit_autocast(tx, fn)
    tx.push(ConstantVariable(None))


@CALL.rule(InferenceModeExitVariable)
def _call_inference_mode_exit(tx: Tracer, fn: InferenceModeExitVariable, args: list, kwargs: dict) -> None:
    exit_inference_mode(tx, fn)
    tx.push(ConstantVariable(None))


@CALL.rule(ContextExitVariable)
def _call_context_exit(tx: Tracer, fn: ContextExitVariable, args: list, kwargs: dict) -> None:
    set_grad_mode(tx, fn.restore)
    tx.push(ConstantVariable(None))


CALL.refuse("a constant, container or range is not callable (the real call raises TypeError)",
            ConstantVariable, ListVariable, DictVariable, TupleVariable, RangeVariable, SliceVariable, SetVariable,
            DequeVariable, DictViewVariable, NumpyArrayVariable)
CALL.refuse("a tensor's __call__ is not modelled", TensorVariable)
CALL.refuse("iterators and generators are not callable", IteratorVariable, LiveIteratorVariable, GeneratorVariable)
CALL.refuse("a grad-mode, inference-mode or autocast object made in the trace is called for real (as a decorator)",
            GradModeVariable, AutocastVariable, InferenceModeVariable)
CALL.refuse("a super() object is not callable", SuperVariable)
CALL.refuse("not a Python value (an internal stack or cell marker)", *INTERNAL)
CALL.refuse("an argument not wrapped yet is wrapped before it is called", LazyArgument)


def _signature(tx: Tracer, fn: VariableTracker) -> VariableTracker:
    """``inspect.signature(f)`` of a traced Python function or method (transformers counts a forward's
    parameters): a constant, since a function's code is guarded by identity and its defaults by value."""
    if isinstance(fn, UserMethodVariable) and isinstance(fn.fn, types.FunctionType):
        func, bound = fn.fn, True
    elif isinstance(fn, UserFunctionVariable):
        func, bound = fn.fn, False
    elif isinstance(fn, NestedFunctionVariable) and all(is_const(tx, d) for d in fn.defaults) and \
            all(is_const(tx, v) for _, v in fn.kwdefaults):
        code = fn.code.code if hasattr(fn.code, "code") else fn.code  # made in the trace: a stand-in, same code
        func = types.FunctionType(code.replace(co_freevars=()) if code.co_freevars else code, {}, fn.qualname,
                                  tuple(const_value(tx, d) for d in fn.defaults) or None)
        func.__kwdefaults__ = {k: const_value(tx, v) for k, v in fn.kwdefaults} or None
        bound = False
    else:
        tx.unsupported("opaque_module", f"inspect.signature of a {fn.python_type().__name__} value")
    if func.__defaults__ is not None and not all(is_constant(d) for d in func.__defaults__):
        tx.unsupported("opaque_module", "inspect.signature of a function whose defaults are not constants")
    if isinstance(fn, UserFunctionVariable) and fn.source is not None and func.__defaults__:
        tx.add_guard(Guard(AttrSource(fn.source, "__defaults__"), "EQUALS", func.__defaults__))
    sig = inspect.signature(func)
    if bound:  # the signature of the bound method: without its first parameter
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    return ConstantVariable(sig)


def _log_owner(fn: VariableTracker, target: Any) -> Any:
    """The object a logging method is bound to (a ``Logger``, a ``LoggerAdapter``), or what else ``fn`` is."""
    owner = fn.self_var if isinstance(fn, UserMethodVariable) else getattr(target, "__self__", None)
    return owner.value if of_type(owner, PythonObjectVariable) else owner


def _is_log_call(fn: VariableTracker, target: Any) -> bool:
    """A logging method of a ``logging.Logger`` (``warning``, ``info``, transformers' ``warning_once`` ...):
    calls that only report, whose result is None, and that do not raise (a failing handler reports its own
    error). ``warnings.warn`` is not one: a filter can turn it into an exception at the user's line."""
    owner = _log_owner(fn, target)
    name = getattr(target, "__name__", "")
    return issubclass(type(owner), (logging.Logger, logging.LoggerAdapter)) and \
        name.split("_")[0] in ("debug", "info", "warning", "warn", "error", "critical", "exception", "log")


#: Logging keywords whose effect a replay after the graph would not reproduce: ``exc_info`` reads the exception being
#: handled, ``stack_info`` and ``stacklevel`` the call stack.
_REPLAY_DIFFERS = frozenset({"exc_info", "stack_info", "stacklevel"})

#: The handler and formatter classes whose work only writes the record out: a logging call that reaches only
#: these may be replayed after the graph (a filter, or a handler of the user's, may do anything in between).
_PLAIN_HANDLERS = (logging.StreamHandler, logging.FileHandler, logging.NullHandler, logging._StderrHandler)


def _plain(cls: type, plain: tuple) -> bool:
    """Whether a handler or formatter class only writes records out: one of ``plain``, or pytest's capture
    classes (which pytest puts on the loggers it captures, and which only record)."""
    return cls in plain or cls.__module__ == "_pytest.logging"


def plain_logging(logger: logging.Logger) -> bool:
    """Whether a record ``logger`` handles meets no code of the user's: no filter on the loggers it propagates
    through or on their handlers, and only :data:`_PLAIN_HANDLERS` (``FileHandler`` is one) with
    ``logging.Formatter`` itself (or none). A log call that may meet such code runs in place: its filter may count
    what the function then reads (found by a probe). Checked again on every call (a guard)."""
    current: Any = logger
    while current is not None:
        if current.filters:
            return False
        for handler in current.handlers:
            if not _plain(type(handler), _PLAIN_HANDLERS) or handler.filters or \
                    not _plain(type(handler.formatter), (logging.Formatter, type(None))):
                return False
        current = current.parent if current.propagate else None
    return True


def _defer_log_call(tx: Tracer, fn: VariableTracker, target: Any, args: list, kwargs: dict) -> bool:
    """Record a logging call to run right after the graph, from the user's line, instead of breaking the graph
    there (TorchDynamo's ``reorderable_logging_functions``, on by default for logging only).

    Only calls whose arguments are immutable Python values qualify (their replay sees what the call saw);
    the call's place among the other replayed side effects is kept. Returns False when it does not qualify.
    """
    def immutable(v: VariableTracker) -> bool:
        if isinstance(v, TupleVariable):
            return all(immutable(i) for i in v.items)
        return isinstance(v, (ConstantVariable, LazyArgument)) or (
            isinstance(v, PythonObjectVariable) and of_type(v.value, (type, types.ModuleType)))

    if not all(immutable(v) for v in (*args, *kwargs.values())):
        return False
    if getattr(target, "__name__", "") == "exception" or _REPLAY_DIFFERS & kwargs.keys():
        return False  # they read the exception being handled, or the stack: only the call in place sees eager's
    logger = _log_owner(fn, target)
    logger = getattr(logger, "logger", logger)  # (a LoggerAdapter's)
    if not of_type(logger, logging.Logger) or not plain_logging(logger):
        return False
    tx.add_guard(Guard(None, "GLOBAL", ("query", (plain_logging, (logger,), True))))
    frame = tx.frame
    line = frame.code.instructions[max(frame.ip - 1, 0)].lineno or frame.code.code.co_firstlineno
    record_side_effect(tx, ("call", tx.new_id()), (fn, tuple(args), tuple(kwargs.items()), frame.code.code, line))
    return True


def call_torch_function(tx: Tracer, target: Any, args: list, kwargs: dict) -> VariableTracker:
    special = TORCH_SPECIAL.get(target)
    if special is not None:
        return special(tx, args, kwargs)
    denied = never_traced(target)
    if denied is not None:
        tx.unsupported("effectful_call", denied, RUNS_FOR_REAL)
    name = getattr(target, "__name__", "")
    objclass = getattr(target, "__objclass__", None)
    if objclass in (torch.Tensor, compat.TensorBase) and args and isinstance(args[0], TensorVariable):
        return call_tensor_op(tx, "call_method", name, tuple(args), kwargs)
    if isinstance(target, type):
        tx.unsupported("unsupported_call", f"constructing {target.__qualname__}")
    return call_tensor_op(tx, "call_function", target, tuple(args), kwargs)


def call_sync(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
    """Call ``fn`` and interpret until it returns; the result (not pushed)."""
    depth = len(tx.state.frames)
    call(tx, fn, args, kwargs)
    return tx.run_until_return(depth) if len(tx.state.frames) > depth else tx.pop()


def _size(tx: Tracer, args: list) -> TupleVariable:
    """``torch.Size(sizes)``: a tuple of ints typed ``torch.Size``, with torch's TypeError for anything else."""
    items = tuple(sequence_items(tx, args[0])) if args else ()
    for item in items:
        value = item.value if isinstance(item, ConstantVariable) else None
        if not isinstance(value, int):
            if isinstance(item, ConstantVariable):
                tx.user_error(TypeError(f"torch.Size() takes an iterable of 'int' (item {items.index(item)} is "
                                        f"'{type(value).__name__}')"))
            tx.unsupported("unsupported_call", f"torch.Size() of a {item.python_type().__name__}")
    return TupleVariable(tuple(ConstantVariable(int(item.value)) for item in items), torch.Size)


def call_python_object(tx: Tracer, var: PythonObjectVariable, args: list, kwargs: dict) -> None:
    value = var.value
    if of_type(value, functools.partial) and value.func is nn_modules.module_iterator:
        return tx.push(value(tx, args, kwargs))
    if not of_type(value, type) and not of_type(value, types.FunctionType):
        result = call_dunder(tx, var, "__call__", list(args), kwargs)
        if result is not None:
            return tx.push(result)
    if of_type(value, types.BuiltinMethodType) and of_type(value.__self__, (type, types.ModuleType)) and \
            value in BUILTIN_RULES:  # a C classmethod or module function with a rule: itertools.chain.from_iterable
        return call_builtin(tx, value, args, kwargs)
    if exceptions.is_c_method(value) and value in BUILTIN_RULES:  # Exception.__init__(self, msg)
        return call_builtin(tx, value, args, kwargs)
    if of_type(value, type) and value.__module__ == "builtins" and BUILTINS.get(value.__name__) is value:
        return call_builtin(tx, value, args, kwargs)  # a builtin type reached as a value: type(3)(4)
    if value is collections.deque:
        return tx.push(make_deque(tx, args, kwargs))
    if value is torch.device and all(is_const(tx, a) for a in (*args, *kwargs.values())):
        return tx.push(fold(tx, value, args, kwargs))  # a device is a value: torch.device("cpu")
    if value is torch.Size and len(args) <= 1 and not kwargs:
        return tx.push(_size(tx, args))
    if value is torch.autocast or value is torch.amp.autocast:
        return tx.push(_autocast(tx, args, kwargs))
    if any(value is cls for cls in GRAD_MODE_CLASSES):
        return tx.push(_grad_mode_manager(tx, value, args, kwargs))
    if value is torch.inference_mode:
        return tx.push(inference_mode_manager(tx, args, kwargs))
    if value is torch.autograd.profiler.record_function and (manager := record_function_manager(tx, args, kwargs)):
        return tx.push(manager)
    if value is _noop:
        return tx.push(ConstantVariable(None))
    if value is functools.partial:
        return tx.push(_make_partial(tx, args, kwargs))
    if of_type(value, functools.partial):
        src = var.source
        func = wrap(tx, value.func, AttrSource(src, "func") if src else None)
        bound = [wrap(tx, a, GetItemSource(AttrSource(src, "args"), i) if src else None)
                 for i, a in enumerate(value.args)]
        bound_kw = {k: wrap(tx, v, GetItemSource(AttrSource(src, "keywords"), k) if src else None)
                    for k, v in value.keywords.items()}
        return call(tx, func, [*bound, *args], {**bound_kw, **kwargs})
    if any(value is maker for maker in (operator.itemgetter, operator.attrgetter, operator.methodcaller)) and \
            all(is_const(tx, a) for a in (*args, *kwargs.values())):
        return tx.push(PythonObjectVariable(value(*[const_value(tx, a) for a in args],
                                                  **{k: const_value(tx, v) for k, v in kwargs.items()})))
    if of_type(value, (operator.itemgetter, operator.attrgetter)) and len(args) == 1:
        return tx.push(_apply_getter(tx, value, args[0]))
    if of_type(value, operator.methodcaller) and len(args) == 1 and not kwargs:
        return _apply_methodcaller(tx, value, args[0])
    if value is operator.getitem and len(args) == 2:
        return tx.push(subscript(tx, args[0], args[1]))
    owner = getattr(value, "__self__", None)
    if owner is not None and not of_type(owner, types.ModuleType) and is_constant(owner):
        # A method of a constant (str.join, bytes.join, tuple.count ...) consumes a generator argument whole,
        # before anything else runs, as eager does: running it to completion here is the same order.
        args = [drain(tx, a) if isinstance(a, GeneratorVariable) else a for a in args]
    if owner is not None and not of_type(owner, types.ModuleType) and is_constant(owner) and \
            all(is_const(tx, a) for a in args) and all(is_const(tx, v) for v in kwargs.values()):
        return tx.push(fold(tx, value, args, kwargs))  # a method of a constant: "a,b".split(","), ...
    if value is object.__setattr__:
        store_attr(tx, args[0], const_value(tx, args[1]), args[2])
        return tx.push(ConstantVariable(None))
    if of_type(value, type) and not issubclass(value, torch.nn.Module) and \
            not is_builtin_class(value) and not value.__module__.startswith("torch"):
        return tx.push(construct(tx, value, args, kwargs))
    module = getattr(value, "__module__", "") or ""
    if hashable_key(value) in PURE_FUNCTIONS and all(is_const(tx, a) for a in args) and \
            all(is_const(tx, v) for v in kwargs.values()):  # (a weakref.ref to a dict hashes as the dict: raises)
        return tx.push(fold(tx, value, args, kwargs))
    if module in ("operator", "_operator"):
        made = _operator_call(tx, value, args, kwargs)
        if made is not None:
            return tx.push(made)
    if module in ("math", "operator", "_operator") or module.startswith("math"):
        if any(isinstance(a, TensorVariable) for a in args) and module in ("operator", "_operator"):
            return tx.push(call_tensor_op(tx, "call_function", value, tuple(args), kwargs))
        if all(is_const(tx, a) for a in args) and all(is_const(tx, v) for v in kwargs.values()):
            return tx.push(fold(tx, value, args, kwargs))
    if getattr(value, "__name__", None) == "__subclasses__" and of_type(getattr(value, "__self__", None), type) \
            and not args and not kwargs:
        return tx.push(_subclasses(tx, value.__self__))
    if type(value) is weakref.ref and var.source is not None and not args and not kwargs:
        # a weak reference followed (nn.RNNBase checks its _flat_weight_refs): the referent, or None, read afresh
        # from the reference on each call and guarded as any value read from it is; following one has no effect
        return tx.push(wrap(tx, value(), CallSource(var.source, operator.call)))
    view = live_dicts.view_call(tx, value, var.source, args, kwargs)  # od.values() of a live OrderedDict
    if view is not None:
        return tx.push(view)
    if of_type(value, type) and issubclass(value, torch.nn.Module):
        tx.unsupported("unsupported_call", f"constructing the module {value.__qualname__} inside the trace",
                       ("construct the module outside the compiled function and call it inside",))
    tx.unsupported("unsupported_call", f"calling {getattr(value, '__qualname__', type(value).__name__)}",
                   ("stillframe captures torch functions, tensor methods and Python functions",))




#: ``operator`` functions that are a statement or an operator of the bytecode, traced by the same rule (a write, an
#: identity or membership test: folding them on constant copies of their arguments would drop the write, or compare
#: the copies).
_OPERATOR_STATEMENTS: dict = {
    operator.setitem: lambda tx, a, k, v: (store_subscript(tx, a, k, v), ConstantVariable(None))[1],
    operator.delitem: lambda tx, a, k: (delete_subscript(tx, a, k), ConstantVariable(None))[1],
    operator.is_: lambda tx, a, b: ConstantVariable(operators.identical(tx, a, b)),
    operator.is_not: lambda tx, a, b: ConstantVariable(not operators.identical(tx, a, b)),
    operator.contains: lambda tx, a, b: ConstantVariable(operators.contains(tx, a, b)),
    **{fn: functools.partial(lambda symbol, tx, a, b: operators.binary_op(tx, symbol, a, b), symbol)
       for symbol, fn in BINARY_OPERATORS.items()},
    **{fn: functools.partial(lambda symbol, tx, a, b: operators.compare(tx, symbol, a, b), symbol)
       for symbol, fn in COMPARE_OPERATORS.items()},
}

#: The statements of :data:`_OPERATOR_STATEMENTS` whose rule takes tensor arguments as the bytecode's does.
_OPERATOR_STATEMENTS_ON_TENSORS = frozenset({operator.setitem, operator.delitem, operator.is_, operator.is_not,
                                             operator.contains})


def _operator_call(tx: Tracer, value: Any, args: list, kwargs: dict) -> VariableTracker | None:
    """``operator.f(*args)``: the bytecode's own rule where ``f`` is a statement or an operator
    (:data:`_OPERATOR_STATEMENTS`: ``operator.setitem(l, 0, 2)`` writes ``l``, ``operator.iadd(l, m)`` extends it,
    ``operator.is_(a, a)`` is True); a fold where every argument is an immutable constant; ``None`` for the caller's
    other rules (a tensor argument: a graph op). Anything else (a list given to ``operator.indexOf``, which may run
    its items' ``__eq__``) breaks the graph and runs for real.

    Raises:
        Unsupported: a mutable or opaque argument to an ``operator`` function with no rule.
    """
    rule = _OPERATOR_STATEMENTS.get(hashable_key(value))
    tensors = any(isinstance(a, TensorVariable) for a in args)
    if rule is not None and not kwargs and len(args) == (3 if value is operator.setitem else 2) and \
            (not tensors or value in _OPERATOR_STATEMENTS_ON_TENSORS):
        return rule(tx, *args)
    if tensors:  # (operator.add(t, 1): a graph op, the caller's rule)
        return None
    if all(_immutable_constant(a) for a in (*args, *kwargs.values())):
        return fold(tx, value, args, kwargs)
    tx.unsupported("unsupported_call", f"operator.{getattr(value, '__name__', value)} of a mutable or opaque value",
                   ("it runs for real",))


def _immutable_constant(var: VariableTracker) -> bool:
    """Whether ``var`` is a constant no call can change (a number, a string, None, a range, a tuple or slice of
    such): folding a function on it gives eager's answer."""
    if isinstance(var, (ConstantVariable, RangeVariable)):
        return True
    if isinstance(var, TupleVariable):
        return all(_immutable_constant(v) for v in var.items)
    if isinstance(var, SliceVariable):
        return all(_immutable_constant(v) for v in (var.start, var.stop, var.step))
    return False


def _apply_methodcaller(tx: Tracer, caller: operator.methodcaller, obj: VariableTracker) -> None:
    """``operator.methodcaller(name, *args, **kwargs)(obj)`` is ``obj.name(*args, **kwargs)`` (CPython's
    ``methodcaller_call``: ``getattr(obj, name)`` then the call). Its name and arguments are what its
    ``__reduce__`` gives (``partial(methodcaller, name, **kwargs), args`` when it has keywords)."""
    maker, rest = caller.__reduce__()
    if isinstance(maker, functools.partial):
        name, args, kwargs = maker.args[0], rest, maker.keywords
    else:
        name, args, kwargs = rest[0], rest[1:], {}
    if not all(is_constant(v) for v in (*args, *kwargs.values())):
        tx.unsupported("unsupported_call", f"operator.methodcaller({name!r}, ...) with arguments that are not "
                       "constants")
    method = getattr_var(tx, obj, name)
    call(tx, method, [wrap(tx, a, None) for a in args], {k: wrap(tx, v, None) for k, v in kwargs.items()})


def _subclasses(tx: Tracer, cls: type) -> VariableTracker:
    """``cls.__subclasses__()``: a new list of the classes alive now; the plan is guarded on that list (a class
    made or collected later changes it)."""
    found = subclasses_of(cls)
    tx.add_guard(Guard(None, "GLOBAL", ("query", (subclasses_of, (cls,), found))))
    return tx.new_list(tuple(wrap(tx, c, None) for c in found))


def subclasses_of(cls: type) -> tuple:
    return tuple(cls.__subclasses__())
