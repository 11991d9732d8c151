"""Calling a VariableTracker: inline Python, record torch ops, fold builtins on constants.

``call(tx, fn, args, kwargs)`` either pushes the result on the current stack
or, for a user function, pushes a child frame whose ``RETURN_VALUE`` will push
the result later. Rules are keyed by the type of the callee's VT (a small,
closed set) and, for builtins, by the builtin itself (``BUILTIN_RULES``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import abc
import copy
import enum
import functools
import inspect
import logging
import math
import operator
import sys
import types
from typing import Any, Callable

import torch
from .. import compat
from ..bytecode.reader import read
from ..errors import UserError
from ..guards.guard import Guard
from ..guards.source import AttrSource, DefaultSource, GetItemSource
from ..trace.state import make_frame
from ..variables.base import (
    AutocastExitVariable,
    AutocastVariable,
    BuiltinVariable,
    ConstantVariable,
    ContextExitVariable,
    DictEntry,
    DictVariable,
    GeneratorEntry,
    GeneratorVariable,
    GradModeVariable,
    IteratorVariable,
    LazyArgument,
    ListVariable,
    LiveIteratorVariable,
    NNModuleVariable,
    NestedFunctionVariable,
    PartialVariable,
    PythonObjectVariable,
    RangeVariable,
    SliceVariable,
    TensorMethodVariable,
    TensorVariable,
    TorchFunctionVariable,
    TupleVariable,
    UserFunctionVariable,
    UserMethodVariable,
    VariableTracker,
)
from ..variables.builder import is_constant, wrap, wrap as wrap_value
from ..variables.objects import ContainerMethodVariable, ObjectVariable, SuperVariable, dict_base, storage_of
from ..tensors.ops import call_tensor_op
from .attrs import (
    EMPTY_CELLS,
    _defined_by_dict_base,
    _noop,
    getattr_var,
    has_attr,
    module_hooks_guard,
    module_iterator,
    plain_getattr,
)
from .containers import _live_item, subscript
from .context import exit_autocast, set_grad_mode
from .disable import is_disabled
from .generators import drain, make_generator, resume
from .objects import (
    call_container_method,
    deepcopy_var,
    delete_attr,
    new_object,
    object_setattr,
    record_side_effect,
    store_attr,
)
from .operators import binary_op
from .truthiness import truthiness
from ..variables.builder import load_local

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


# torch functions that are not graph ops but read global state or are context managers.
def _is_grad_enabled(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return ConstantVariable(tx.state.grad_enabled)


TORCH_SPECIAL: dict[Any, Callable] = {
    torch.is_grad_enabled: _is_grad_enabled,
    torch.get_default_dtype: lambda tx, a, k: ConstantVariable(torch.get_default_dtype()),
    torch.is_tensor: lambda tx, a, k: ConstantVariable(isinstance(a[0], TensorVariable)),
    torch.is_floating_point: lambda tx, a, k: ConstantVariable(tx.tensor(a[0]).meta.dtype.is_floating_point),
}

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


TORCH_DENY = {torch.manual_seed, torch.seed, torch.save, torch.load, torch.compile,
              torch.set_default_dtype, torch.use_deterministic_algorithms}

# Pure functions folded at trace time when every argument is a constant.
PURE_MODULES = (math, operator)


# Python modules whose functions are never traced: they only talk to the outside world (and tracing them
# would guard on per-call objects like log records). A call into them is a graph break run for real.
OPAQUE_MODULES = ("logging", "warnings", "traceback", "pdb", "inspect", "threading", "tqdm")


def call(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """Call ``fn`` with VT arguments; push the result (or a child frame that will push it)."""
    target = getattr(fn, "fn", None) or getattr(fn, "value", None)
    if isinstance(target, types.FunctionType) and not args and not kwargs:
        answer = _tracing_answers().get(target)
        if answer is not None:
            return tx.push(ConstantVariable(answer))
    if (target is torch.finfo or target is torch.iinfo) and all(is_const(tx, a) for a in args) and not kwargs:
        return tx.push(ConstantVariable(fold(tx, target, args, kwargs).value))  # torch.finfo(x.dtype).min
    if target is copy.deepcopy and len(args) == 1 and not kwargs:
        return tx.push(deepcopy_var(tx, args[0], {}))
    if target is inspect.signature and len(args) == 1 and not kwargs:
        return tx.push(_signature(tx, args[0]))
    if target is not None and is_disabled(target):
        tx.unsupported("disabled", f"{getattr(target, '__qualname__', target)} is marked @stillframe.disable",
                       ("it runs for real; tracing resumes after it",))
    module = getattr(target, "__module__", None) or ""
    if _is_log_call(fn, target) and _defer_log_call(tx, fn, args, kwargs):
        return tx.push(ConstantVariable(None))
    if isinstance(fn, (UserFunctionVariable, UserMethodVariable)) and module.split(".")[0] in OPAQUE_MODULES:
        tx.unsupported("opaque_module", f"{getattr(target, '__qualname__', target)} ({module}) talks to the "
                       "outside world", ("it runs for real; tracing resumes after it",))
    if isinstance(fn, UserFunctionVariable):
        return inline_call(tx, fn.fn, fn.source, list(args), kwargs)
    if isinstance(fn, UserMethodVariable):
        if isinstance(fn.fn, NestedFunctionVariable):
            return inline_nested(tx, fn.fn, [fn.self_var, *args], kwargs)
        return inline_call(tx, fn.fn, fn.source, [fn.self_var, *args], kwargs)
    if isinstance(fn, NestedFunctionVariable):
        return inline_nested(tx, fn, args, kwargs)
    if isinstance(fn, PartialVariable):
        return call(tx, fn.fn, [*fn.args, *args], {**dict(fn.kwargs), **kwargs})
    if isinstance(fn, NNModuleVariable):
        return call_module(tx, fn, args, kwargs)
    if isinstance(fn, TensorMethodVariable):
        return tx.push(call_tensor_op(tx, "call_method", fn.name, (fn.self_var, *args), kwargs))
    if isinstance(fn, TorchFunctionVariable):
        return tx.push(call_torch_function(tx, fn.fn, args, kwargs))
    if isinstance(fn, BuiltinVariable):
        return call_builtin(tx, fn.fn, args, kwargs)
    if isinstance(fn, PythonObjectVariable):
        return call_python_object(tx, fn, args, kwargs)
    if isinstance(fn, ObjectVariable):
        result = call_dunder(tx, fn, "__call__", list(args), kwargs)
        if result is not None:
            return tx.push(result)
    if isinstance(fn, ContainerMethodVariable):
        return tx.push(call_container_method(tx, fn, args, kwargs))
    if isinstance(fn, AutocastExitVariable):
        exit_autocast(tx, fn)
        return tx.push(ConstantVariable(None))
    if isinstance(fn, ContextExitVariable):
        set_grad_mode(tx, fn.restore)
        return tx.push(ConstantVariable(None))
    tx.unsupported("unsupported_call", f"calling a {fn.python_type().__name__} value")


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


def _is_log_call(fn: VariableTracker, target: Any) -> bool:
    """A logging method of a ``logging.Logger`` (``warning``, ``info``, transformers' ``warning_once`` ...):
    calls that only report, whose result is None, and that do not raise (a failing handler reports its own
    error). ``warnings.warn`` is not one: a filter can turn it into an exception at the user's line."""
    owner = fn.self_var if isinstance(fn, UserMethodVariable) else getattr(target, "__self__", None)
    if isinstance(owner, PythonObjectVariable):
        owner = owner.value
    name = getattr(target, "__name__", "")
    return isinstance(owner, (logging.Logger, logging.LoggerAdapter)) and \
        name.split("_")[0] in ("debug", "info", "warning", "warn", "error", "critical", "exception", "log")


def _defer_log_call(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> bool:
    """Record a logging call to run right after the graph, from the user's line, instead of breaking the graph
    there (TorchDynamo's ``reorderable_logging_functions``, on by default for logging only).

    Only calls whose arguments are immutable Python values qualify (their replay sees what the call saw);
    the call's place among the other replayed side effects is kept. Returns False when it does not qualify.
    """
    def immutable(v: VariableTracker) -> bool:
        if isinstance(v, TupleVariable):
            return all(immutable(i) for i in v.items)
        return isinstance(v, (ConstantVariable, LazyArgument)) or (
            isinstance(v, PythonObjectVariable) and isinstance(v.value, (type, types.ModuleType)))

    if not all(immutable(v) for v in (*args, *kwargs.values())):
        return False
    frame = tx.frame
    line = frame.code.instructions[max(frame.ip - 1, 0)].lineno or frame.code.code.co_firstlineno
    record_side_effect(tx, ("call", tx.new_id()), (fn, tuple(args), tuple(kwargs.items()), frame.code.code, line))
    return True


def call_torch_function(tx: Tracer, target: Any, args: list, kwargs: dict) -> VariableTracker:
    special = TORCH_SPECIAL.get(target)
    if special is not None:
        return special(tx, args, kwargs)
    if target in TORCH_DENY:
        tx.unsupported("unsupported_call", f"calling {getattr(target, '__qualname__', target)} inside a compiled "
                       "function", ("call it outside the compiled function",))
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


def call_module(tx: Tracer, mod: NNModuleVariable, args: list, kwargs: dict) -> None:
    """``module(*args)`` as ``nn.Module.__call__`` does it: forward pre-hooks, ``forward``, forward hooks."""
    module = mod.module
    if module._backward_hooks or module._backward_pre_hooks or getattr(module, "_forward_hooks_always_called", None):
        tx.unsupported("module_hooks", f"calling {type(module).__name__} that has backward hooks",
                       ("forward hooks and forward pre-hooks are supported",))
    module_hooks_guard(tx, mod)
    forward = type(module).forward
    if "forward" in module.__dict__:
        tx.unsupported("unsupported_call", "a module whose forward was replaced on the instance")
    if not isinstance(forward, types.FunctionType):
        tx.unsupported("unsupported_call", f"{type(module).__name__}.forward is not a Python function")
    for hook_id, hook in list(module._forward_pre_hooks.items()):
        if hook_id in module._forward_pre_hooks_with_kwargs:  # hook(module, args, kwargs) -> (args, kwargs)
            result = call_sync(tx, wrap_value(tx, hook, None),
                               [mod, TupleVariable(tuple(args)), tx.new_dict(tuple(kwargs.items()))], {})
            if not (isinstance(result, ConstantVariable) and result.value is None):
                new_args, new_kwargs = sequence_items(tx, result)
                args = list(sequence_items(tx, new_args))
                kwargs = dict(tx.dict_entry(new_kwargs).items)
            continue
        result = call_sync(tx, wrap_value(tx, hook, None), [mod, TupleVariable(tuple(args))], {})
        if not (isinstance(result, ConstantVariable) and result.value is None):
            args = list(result.items) if isinstance(result, TupleVariable) else [result]
    post = list(module._forward_hooks.items())
    if not post:
        return inline_call(tx, forward, None, [mod, *args], kwargs)
    output = call_sync(tx, UserFunctionVariable(forward), [mod, *args], kwargs)
    for hook_id, hook in post:
        hook_args = [mod, TupleVariable(tuple(args))]
        if hook_id in module._forward_hooks_with_kwargs:  # hook(module, args, kwargs, output)
            hook_args.append(tx.new_dict(tuple(kwargs.items())))
        result = call_sync(tx, wrap_value(tx, hook, None), [*hook_args, output], {})
        if not (isinstance(result, ConstantVariable) and result.value is None):
            output = result
    tx.push(output)


def inline_call(tx: Tracer, fn: types.FunctionType, fn_source: Any, args: list, kwargs: dict) -> None:
    """Push a child frame interpreting the live function ``fn`` with ``args`` bound to its parameters."""
    if isinstance(fn, types.MethodType):
        return inline_call(tx, fn.__func__, None, [wrap(tx, fn.__self__, None), *args], kwargs)
    code = fn.__code__
    defaults = fn.__defaults__ or ()

    def default(i: int) -> VariableTracker:
        src = DefaultSource(fn_source, i) if fn_source is not None else None
        return wrap(tx, defaults[i], src) if src is not None else _wrap_default(tx, defaults[i])

    def kwdefault(name: str) -> VariableTracker | None:
        kwdefaults = fn.__kwdefaults__ or {}
        if name not in kwdefaults:
            return None
        src = DefaultSource(fn_source, name, kwonly=True) if fn_source is not None else None
        return wrap(tx, kwdefaults[name], src) if src is not None else _wrap_default(tx, kwdefaults[name])

    cells = []
    for i, cell in enumerate(fn.__closure__ or ()):
        cell_source = GetItemSource(AttrSource(fn_source, "__closure__"), i) if fn_source is not None else None
        cells.append(("real", cell, cell_source))
    root_frame = tx.state.frames[0]
    globals_module = None if fn.__globals__ is root_frame.globals else fn.__globals__.get("__name__")
    push_code_frame(tx, code, fn.__qualname__, args, kwargs, len(defaults), default, kwdefault, tuple(cells),
                    fn.__globals__, globals_module, fn, fn_source)


def inline_nested(tx: Tracer, fn: NestedFunctionVariable, args: list, kwargs: dict) -> None:
    """Push a child frame for a function made during the trace."""
    kwdefaults = dict(fn.kwdefaults)
    push_code_frame(tx, fn.code, fn.qualname, args, kwargs, len(fn.defaults), lambda i: fn.defaults[i],
                    kwdefaults.get, fn.closure, fn.globals, fn.globals_module, None, None)


def push_code_frame(tx: Tracer, code: types.CodeType, qualname: str, args: list, kwargs: dict, ndefaults: int,
                    default: Callable, kwdefault: Callable, closure: tuple, globals_: dict,
                    globals_module: str | None, fn: Any, fn_source: Any) -> None:
    if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
        tx.unsupported("unsupported_call", f"calling the coroutine function {qualname}")
    bound = bind_arguments(tx, code, qualname, args, kwargs, ndefaults, default, kwdefault)
    cells = EMPTY_CELLS.update(dict(zip(code.co_freevars, closure)))
    frame = make_frame(read(code), bound, globals_, globals_module, fn, fn_source, cells)
    if code.co_flags & inspect.CO_GENERATOR:
        if tx.lazy_generators:
            return tx.push(make_generator(tx, frame))
        frame = frame.with_yields(())
    tx.push_frame(frame)


def bind_arguments(tx: Tracer, code: types.CodeType, qualname: str, args: list, kwargs: dict, ndefaults: int,
                   default: Callable, kwdefault: Callable) -> dict:
    """Bind VT arguments to a code object's parameters as CPython does, raising the TypeError eager would."""
    nargs = code.co_argcount
    nkw = code.co_kwonlyargcount
    names = code.co_varnames
    posnames = names[:nargs]
    kwnames = names[nargs:nargs + nkw]
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    bound: dict[str, VariableTracker] = {}
    for name, value in zip(posnames, args):
        bound[name] = value
    extra = args[nargs:]
    if extra and not has_varargs:
        _type_error(tx, f"{qualname}() takes {nargs} positional argument{'s' if nargs != 1 else ''} but "
                        f"{len(args)} were given")
    varkw: list = []
    for key, value in kwargs.items():
        if key in posnames[code.co_posonlyargcount:] or key in kwnames:
            if key in bound:
                _type_error(tx, f"{qualname}() got multiple values for argument '{key}'")
            bound[key] = value
        elif has_varkw:
            varkw.append((key, value))
        else:
            _type_error(tx, f"{qualname}() got an unexpected keyword argument '{key}'")
    first_default = nargs - ndefaults
    missing = [name for i, name in enumerate(posnames) if name not in bound and i < first_default]
    if missing:
        listed = " and ".join(f"'{m}'" for m in missing) if len(missing) <= 2 else \
            ", ".join(f"'{m}'" for m in missing[:-1]) + f", and '{missing[-1]}'"
        _type_error(tx, f"{qualname}() missing {len(missing)} required positional argument"
                        f"{'s' if len(missing) > 1 else ''}: {listed}")
    for i, name in enumerate(posnames):
        if name not in bound:
            bound[name] = default(i - first_default)
    for name in kwnames:
        if name not in bound:
            value = kwdefault(name)
            if value is None:
                _type_error(tx, f"{qualname}() missing 1 required keyword-only argument: '{name}'")
            bound[name] = value
    index = nargs + nkw
    if has_varargs:
        bound[names[index]] = TupleVariable(tuple(extra))
        index += 1
    if has_varkw:
        bound[names[index]] = tx.new_dict(tuple(varkw))
    return bound


def _wrap_default(tx: Tracer, value: Any) -> VariableTracker:
    if is_constant(value):
        return ConstantVariable(value)
    if isinstance(value, tuple) and all(is_constant(v) for v in value):
        return TupleVariable(tuple(ConstantVariable(v) for v in value))
    return wrap(tx, value, None)


def _type_error(tx: Tracer, message: str) -> None:
    tx.user_error(TypeError(message))


# ------------------------------------------------------------------ builtins
def const_value(tx: Tracer, var: VariableTracker) -> Any:
    """The Python value of a VT that is fully known at trace time (raises Unsupported otherwise)."""
    if isinstance(var, LazyArgument):
        var = wrap(tx, var.value, var.source)
    if isinstance(var, ConstantVariable):
        return var.value
    if isinstance(var, TupleVariable):
        items = tuple(const_value(tx, v) for v in var.items)
        if var.cls is tuple:
            return items
        if var.cls is torch.Size:
            return torch.Size(items)
        return var.cls(items) if hasattr(var.cls, "n_fields") else var.cls(*items)
    if isinstance(var, ListVariable):
        return [const_value(tx, v) for v in tx.list_items(var)]
    if isinstance(var, DictVariable):
        return {k: const_value(tx, v) for k, v in tx.dict_entry(var).items}
    if isinstance(var, SliceVariable):
        return slice(const_value(tx, var.start), const_value(tx, var.stop), const_value(tx, var.step))
    if isinstance(var, RangeVariable):
        return var.value
    if isinstance(var, IteratorVariable):
        return iter([const_value(tx, v) for v in tx.heap(var.oid).rest])
    if isinstance(var, (BuiltinVariable, TorchFunctionVariable)):
        return var.fn
    if isinstance(var, PythonObjectVariable) and (callable(var.value) or isinstance(var.value, types.ModuleType)):
        return var.value  # identity-guarded (or trusted) objects: classes, functions, modules
    tx.unsupported("not_constant", f"a {var.python_type().__name__} value is needed as a Python constant here")


def is_const(tx: Tracer, var: VariableTracker) -> bool:
    if isinstance(var, (ConstantVariable, RangeVariable, LazyArgument)):
        return True
    if isinstance(var, IteratorVariable):
        return all(is_const(tx, v) for v in tx.heap(var.oid).rest)
    if isinstance(var, TupleVariable):
        return all(is_const(tx, v) for v in var.items)
    if isinstance(var, SliceVariable):
        return all(is_const(tx, v) for v in (var.start, var.stop, var.step))
    if isinstance(var, ListVariable):
        return all(is_const(tx, v) for v in tx.list_items(var))
    return False


def python_type_of(tx: Tracer, var: VariableTracker) -> type:
    if isinstance(var, LazyArgument):
        var = wrap(tx, var.value, var.source)
    if isinstance(var, ConstantVariable):
        return type(var.value)
    if isinstance(var, TensorVariable):
        entry = tx.tensor(var)
        if entry.source is not None and var.tid in tx.input_values:
            return type(tx.input_values[var.tid])
        return torch.Tensor
    if isinstance(var, (NNModuleVariable,)):
        return type(var.module)
    if isinstance(var, PythonObjectVariable):
        return type(var.value)
    return var.python_type()


def call_dunder(tx: Tracer, obj: VariableTracker, name: str, args: list,
                kwargs: dict | None = None) -> VariableTracker | None:
    """Call ``type(obj).<name>`` when it is a Python function (a user class's ``__len__``, ``__add__`` ...).

    Returns ``None`` when the type has no such Python method.
    """
    if not isinstance(obj, (ObjectVariable, PythonObjectVariable, NNModuleVariable)):
        return None
    cls = python_type_of(tx, obj)
    storage = storage_of(tx, obj)
    if storage is not None and _defined_by_dict_base(cls, name):  # len(out), out[k], iter(out) of a dict subclass
        return call_container_method(tx, ContainerMethodVariable(storage, name), list(args), kwargs or {})
    if cls.__module__ == "builtins" or cls.__module__.startswith("torch."):
        return None
    method = getattr(cls, name, None)
    if not isinstance(method, types.FunctionType):
        return None
    return call_sync(tx, UserMethodVariable(method, obj), list(args), kwargs or {})


def _len(tx: Tracer, var: VariableTracker) -> int:
    result = call_dunder(tx, var, "__len__", [])
    if result is not None:
        return const_value(tx, result)
    if isinstance(var, TupleVariable):
        return len(var.items)
    if isinstance(var, ListVariable):
        return len(tx.list_items(var))
    if isinstance(var, DictVariable):
        return len(tx.dict_entry(var).items)
    if isinstance(var, TensorVariable):
        shape = tx.tensor(var).meta.shape
        if not shape:
            tx.user_error(TypeError("len() of a 0-d tensor"))
        return shape[0]
    if isinstance(var, NNModuleVariable) and hasattr(var.module, "__len__"):
        return len(var.module)
    if isinstance(var, (ConstantVariable, PythonObjectVariable)) and var.source is None and \
            isinstance(var.value, types.MappingProxyType):
        return len(var.value)  # inspect.signature(f).parameters
    if isinstance(var, PythonObjectVariable) and isinstance(var.value, (dict, list, tuple, set, frozenset)):
        if var.source is not None:  # a container subclass (OrderedDict ...): its length is guarded, not its items
            tx.add_guard(Guard(var.source, "LEN", len(var.value)))
        return len(var.value)
    return len(const_value(tx, var))


def _issubclass(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return fold(tx, issubclass, args, kwargs)


def _setattr(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    store_attr(tx, args[0], const_value(tx, args[1]), args[2])
    return ConstantVariable(None)


def _isinstance(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    obj, classes = args
    cls = const_value(tx, classes)
    return ConstantVariable(isinstance_type(python_type_of(tx, obj), cls, tx, obj))


def isinstance_type(t: type, cls: Any, tx: Tracer, obj: VariableTracker) -> bool:
    if isinstance(obj, TensorVariable) and not (isinstance(cls, type) and issubclass(torch.Tensor, cls)):
        if cls is torch.nn.Parameter or (isinstance(cls, tuple) and torch.nn.Parameter in cls):
            return issubclass(t, cls)
    return issubclass(t, cls)


def sequence_items(tx: Tracer, var: VariableTracker) -> tuple:
    """The items of an iterable VT, unrolled at trace time (tuples, lists, dicts' keys, ranges, iterators, tensors)."""
    if isinstance(var, LazyArgument):
        var = wrap(tx, var.value, var.source)
    if isinstance(var, GeneratorVariable):
        var = drain(tx, var)
    if isinstance(var, ConstantVariable) and isinstance(var.value, (frozenset, set)):
        return tuple(ConstantVariable(v) for v in var.value)
    if isinstance(var, PythonObjectVariable) and isinstance(var.value, enum.EnumMeta):
        return tuple(ConstantVariable(m) for m in var.value)
    dunder = call_dunder(tx, var, "__iter__", [])
    if dunder is not None:
        return sequence_items(tx, dunder)
    if isinstance(var, TupleVariable):
        return var.items
    if isinstance(var, ListVariable):
        return tx.list_items(var)
    if isinstance(var, DictVariable):
        return tuple(ConstantVariable(k) for k, _ in tx.dict_entry(var).items)
    if isinstance(var, RangeVariable):
        return tuple(ConstantVariable(i) for i in var.value)
    if isinstance(var, IteratorVariable):
        return tx.iterator_drain(var)  # consumed, as list(it) / unpacking / zip(it) consume it
    if isinstance(var, LiveIteratorVariable):
        tx.add_guard(Guard(var.items_source, "LEN", len(var.values)))
        start = live_iterator_index(tx, var)
        tx.state = tx.state.replace(memo=tx.state.memo.set(("live_iter_index", var.obj_id), len(var.values)))
        return tuple(_live_item(tx, var, i) for i in range(start, len(var.values)))  # consumed, as in eager
    if isinstance(var, ConstantVariable) and isinstance(var.value, str):
        return tuple(ConstantVariable(c) for c in var.value)
    if isinstance(var, NNModuleVariable):
        module = var.module
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            return tuple(getattr_var(tx, var, name) for name in module._modules)
        if isinstance(module, torch.nn.ParameterList):
            return tuple(getattr_var(tx, var, name) for name in module._parameters)
        if isinstance(module, torch.nn.ParameterDict):
            return tuple(ConstantVariable(k) for k in module._parameters)
        if isinstance(module, torch.nn.ModuleDict):
            return tuple(ConstantVariable(k) for k in module._modules)
    if isinstance(var, TensorVariable):
        shape = tx.tensor(var).meta.shape
        if not shape:
            tx.user_error(TypeError("iteration over a 0-d tensor"))
        return tuple(call_tensor_op(tx, "call_function", operator.getitem, (var, ConstantVariable(i)), {})
                     for i in range(shape[0]))
    tx.unsupported("unsupported_iteration", f"iterating over a {var.python_type().__name__}")


def live_iterator_index(tx: Tracer, var: LiveIteratorVariable) -> int:
    """Where a live loop iterator stands in this trace: its index when it entered, unless the trace drained it."""
    return tx.state.memo.get(("live_iter_index", var.obj_id), var.index)


def call_builtin(tx: Tracer, fn: Any, args: list, kwargs: dict) -> None:
    rule = BUILTIN_RULES.get(fn)
    if rule is not None:
        return tx.push(rule(tx, args, kwargs))
    if isinstance(fn, type) and issubclass(fn, BaseException):
        values = [const_value(tx, a) for a in args]
        return tx.push(ConstantVariable(fn(*values, **{k: const_value(tx, v) for k, v in kwargs.items()})))
    if all(is_const(tx, a) for a in args) and all(is_const(tx, v) for v in kwargs.values()) and fn in FOLDABLE:
        return tx.push(fold(tx, fn, args, kwargs))
    if fn in (str, repr) and len(args) == 1 and not kwargs and isinstance(args[0], PythonObjectVariable) and \
            isinstance(args[0].value, (type, types.FunctionType, types.ModuleType)) and \
            (not isinstance(args[0].value, type) or type(args[0].value).__repr__ is type.__repr__):
        # a class, function or module: fixed by its type/identity guards, and so is its text
        return tx.push(ConstantVariable(fn(args[0].value)))
    tx.unsupported("unsupported_builtin", f"the builtin {getattr(fn, '__name__', fn)} is not supported here")


def fold(tx: Tracer, fn: Any, args: list, kwargs: dict) -> VariableTracker:
    """Evaluate a pure function on constants at trace time (errors become the user's exception)."""
    const_args = [const_value(tx, a) for a in args]  # outside the try: an Unsupported here is ours, not the user's
    const_kwargs = {k: const_value(tx, v) for k, v in kwargs.items()}
    try:
        value = fn(*const_args, **const_kwargs)
    except Exception as e:  # the user's own error, raised exactly as eager would
        tx.user_error(e)
    return _const_result(tx, value)


def _const_result(tx: Tracer, value: Any) -> VariableTracker:
    if isinstance(value, range):
        return RangeVariable(value)
    if isinstance(value, tuple):
        return TupleVariable(tuple(_const_result(tx, v) for v in value), type(value))
    if isinstance(value, list):
        return tx.new_list(tuple(_const_result(tx, v) for v in value))
    if isinstance(value, slice):
        return SliceVariable(ConstantVariable(value.start), ConstantVariable(value.stop), ConstantVariable(value.step))
    return ConstantVariable(value)


def _tuple_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if not args:
        return TupleVariable(())
    return TupleVariable(tuple(sequence_items(tx, args[0])))


def _list_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return tx.new_list(tuple(sequence_items(tx, args[0])) if args else ())


def _dict_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    items: list = []
    if args:
        src = args[0]
        if isinstance(src, DictVariable):
            items = list(tx.dict_entry(src).items)
        else:
            for pair in sequence_items(tx, src):
                k, v = sequence_items(tx, pair)
                items.append((const_value(tx, k), v))
    items.extend(kwargs.items())
    entry = DictEntry(())
    for k, v in items:
        entry = entry.set(k, v)
    return tx.new_dict(entry.items)


def attempt(tx: Tracer, exc_type: type, step: Callable[[], VariableTracker]) -> VariableTracker | None:
    """``step()``, or ``None`` when it raises the user's ``exc_type`` (its partial effects rolled back):
    ``getattr(o, n, default)``, ``hasattr``, ``next(it, default)``."""
    token = tx.checkpoint()
    try:
        return step()
    except UserError as e:
        if not isinstance(e.exc, exc_type):
            raise
        tx.restore(token)
        return None


def _getattr(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    obj, name = args[0], const_value(tx, args[1])
    if len(args) == 3:
        found = attempt(tx, AttributeError, lambda: getattr_var(tx, obj, name))
        return args[2] if found is None else found
    return getattr_var(tx, obj, name)


def _hasattr(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    obj, name = args[0], const_value(tx, args[1])
    if isinstance(obj, ObjectVariable):  # hasattr is getattr that catches AttributeError
        return ConstantVariable(attempt(tx, AttributeError, lambda: getattr_var(tx, obj, name)) is not None)
    return ConstantVariable(has_attr(tx, obj, name))


def _range(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return RangeVariable(range(*[const_value(tx, a) for a in args]))


def _zip(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    seqs = [sequence_items(tx, a) for a in args]
    return tx.new_iterator(tuple(TupleVariable(t) for t in zip(*seqs)))


def _enumerate(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    start = const_value(tx, args[1]) if len(args) > 1 else const_value(tx, kwargs.get("start", ConstantVariable(0)))
    return tx.new_iterator(tuple(TupleVariable((ConstantVariable(i + start), v))
                                  for i, v in enumerate(sequence_items(tx, args[0]))))


def _reversed(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return tx.new_iterator(tuple(reversed(sequence_items(tx, args[0]))))


def _iter(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if isinstance(args[0], IteratorVariable):
        return args[0]  # an iterator's iterator is itself
    return tx.new_iterator(tuple(sequence_items(tx, args[0])))


def _minmax(fn: Any) -> Callable:
    def rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
        if len(args) == 1:
            args = list(sequence_items(tx, args[0]))
        if "key" in kwargs:
            keys = _sort_keys(tx, tuple(args), kwargs["key"])
            if not args:
                return kwargs["default"] if "default" in kwargs else fold(tx, fn, [TupleVariable(())], {})
            best = fn(range(len(args)), key=lambda i: keys[i])
            return args[best]
        if any(isinstance(a, TensorVariable) for a in args):
            tx.unsupported("data_dependent", f"{fn.__name__}() over tensors compares their values")
        return fold(tx, fn, args, kwargs)

    return rule


def _bool_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return ConstantVariable(truthiness(tx, args[0]) if args else False)


def _scalar_of(kind: type) -> Callable:
    def rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
        if args and isinstance(args[0], TensorVariable):
            tx.unsupported("data_dependent", f"{kind.__name__}() of a tensor reads its value",
                           ("keep the value in a tensor",))
        return fold(tx, kind, args, kwargs)

    return rule


def _slice(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    parts = list(args) + [ConstantVariable(None)] * (3 - len(args))
    if len(args) == 1:
        parts = [ConstantVariable(None), args[0], ConstantVariable(None)]
    return SliceVariable(*parts)


def _sum(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    items = sequence_items(tx, args[0])
    start = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    if any(isinstance(v, TensorVariable) for v in items):
        acc = start
        for v in items:
            acc = binary_op(tx, "+", acc, v)
        return acc
    return fold(tx, sum, [TupleVariable(tuple(items)), start], {})


def _abs(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if isinstance(args[0], TensorVariable):
        return call_tensor_op(tx, "call_function", operator.abs, (args[0],), {})
    return fold(tx, abs, args, kwargs)


def _type(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if len(args) != 1:
        tx.unsupported("unsupported_builtin", "type() with three arguments")
    return PythonObjectVariable(python_type_of(tx, args[0]))


def _callable(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    v = args[0]
    if isinstance(v, PythonObjectVariable):
        return ConstantVariable(callable(v.value))
    if isinstance(v, NNModuleVariable):
        return ConstantVariable(callable(v.module))
    # what callable() itself asks: does the type (not its metaclass) define __call__
    return ConstantVariable(any("__call__" in vars(k) for k in python_type_of(tx, v).__mro__))


def _id(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    tx.unsupported("unsupported_builtin", "id() of a traced value")


def _all_any(fn: Any) -> Callable:
    def rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
        return ConstantVariable(fn(truthiness(tx, v) for v in sequence_items(tx, args[0])))

    return rule


def _sort_keys(tx: Tracer, items: tuple, key: VariableTracker | None) -> list:
    """The Python sort key of each item: the item itself, or ``key(item)`` traced (both must be constants)."""
    if key is None or (isinstance(key, ConstantVariable) and key.value is None):
        return [const_value(tx, v) for v in items]
    return [const_value(tx, call_sync(tx, key, [v], {})) for v in items]


def _sorted(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    items = tuple(sequence_items(tx, args[0]))
    keys = _sort_keys(tx, items, kwargs.get("key"))
    reverse = bool(const_value(tx, kwargs.get("reverse", ConstantVariable(False))))
    order = sorted(range(len(items)), key=lambda i: keys[i], reverse=reverse)
    return tx.new_list(tuple(items[i] for i in order))


def _map(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    fn, seqs = args[0], [sequence_items(tx, a) for a in args[1:]]
    return tx.new_iterator(tuple(call_sync(tx, fn, list(items), {}) for items in zip(*seqs)))


def _filter(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    fn, items = args[0], sequence_items(tx, args[1])
    kept = []
    for item in items:
        if isinstance(fn, ConstantVariable) and fn.value is None:
            keep = truthiness(tx, item)
        else:
            keep = truthiness(tx, call_sync(tx, fn, [item], {}))
        if keep:
            kept.append(item)
    return tx.new_iterator(tuple(kept))


BUILTIN_RULES: dict[Any, Callable] = {
    all: _all_any(all),
    any: _all_any(any),
    sorted: _sorted,
    map: _map,
    filter: _filter,
    len: lambda tx, a, k: ConstantVariable(_len(tx, a[0])),
    isinstance: _isinstance,
    getattr: _getattr,
    hasattr: _hasattr,
    range: _range,
    zip: _zip,
    enumerate: _enumerate,
    reversed: _reversed,
    iter: _iter,
    tuple: _tuple_of,
    list: _list_of,
    dict: _dict_of,
    min: _minmax(min),
    max: _minmax(max),
    bool: _bool_of,
    int: _scalar_of(int),
    float: _scalar_of(float),
    slice: _slice,
    sum: _sum,
    abs: _abs,
    type: _type,
    callable: _callable,
    id: _id,
}

FOLDABLE = {str, round, divmod, pow, issubclass, repr, ord, chr, hash, format}


def _apply_getter(tx: Tracer, getter: Any, obj: VariableTracker) -> VariableTracker:
    """``operator.itemgetter(...)(obj)`` / ``attrgetter(...)(obj)`` on a VT (the keys are constants)."""
    kind, keys = getter.__reduce__()[0], getter.__reduce__()[1]

    def one(key: Any) -> VariableTracker:
        if kind is operator.itemgetter:
            return subscript(tx, obj, ConstantVariable(key))
        value = obj
        for part in key.split("."):
            value = getattr_var(tx, value, part)
        return value

    results = [one(k) for k in keys]
    return results[0] if len(results) == 1 else TupleVariable(tuple(results))


def _grad_mode_manager(tx: Tracer, cls: Any, args: list, kwargs: dict) -> VariableTracker:
    if cls is torch.no_grad:
        return GradModeVariable(False)
    if cls is torch.enable_grad:
        return GradModeVariable(True)
    mode = bool(const_value(tx, args[0] if args else kwargs["mode"]))
    previous = tx.state.grad_enabled
    set_grad_mode(tx, mode)  # set_grad_enabled(b) takes effect when called, even outside a `with`
    return GradModeVariable(mode, applied=True, previous=previous)


def _autocast(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    names = ("device_type", "dtype", "enabled", "cache_enabled")
    values = dict(zip(names, (const_value(tx, a) for a in args)))
    values.update({k: const_value(tx, v) for k, v in kwargs.items()})
    device_type = values["device_type"]
    dtype = values.get("dtype") or torch.get_autocast_dtype(device_type)
    return AutocastVariable((device_type, dtype, values.get("enabled", True), values.get("cache_enabled")))


GRAD_MODE_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)


def construct(tx: Tracer, cls: type, args: list, kwargs: dict) -> VariableTracker:
    """``cls(*args, **kwargs)`` for a user class: a named tuple, or a new heap object whose ``__init__`` is inlined."""
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        fields = cls._fields
        defaults = getattr(cls, "_field_defaults", {})
        values = dict(zip(fields, args))
        values.update(kwargs)
        missing = [f for f in fields if f not in values and f not in defaults]
        if missing or len(args) > len(fields):
            fold(tx, cls, args, kwargs)  # raises eager's TypeError
        items = tuple(values[f] if f in values else wrap(tx, defaults[f], None) for f in fields)
        return TupleVariable(items, cls)
    import contextlib

    if issubclass(cls, contextlib._GeneratorContextManagerBase) and not tx.lazy_generators:
        # its generator must run lazily, step by step with the `with` body: made and driven for real
        tx.unsupported("generator_context_manager", f"{cls.__name__}: a @contextmanager generator runs for real",
                       ("the body of the `with` block is still traced",))
    if isinstance(cls, enum.EnumMeta):
        return fold(tx, cls, args, kwargs)
    new_ok = cls.__new__ is object.__new__ or (dict_base(cls) is not None and cls.__new__ is dict.__new__)
    if not new_ok or type(cls) not in (type, abc.ABCMeta):
        tx.unsupported("unsupported_call", f"constructing {cls.__qualname__} (custom __new__ or metaclass)")
    obj = new_object(tx, cls)
    init = cls.__init__
    base_init = dict_base(cls).__init__ if dict_base(cls) is not None else None
    if init is object.__init__ or (init is base_init and not args):
        if init is base_init and kwargs:  # dict.__init__(**kwargs) stores through the class's __setitem__
            tx.unsupported("unsupported_call", f"constructing {cls.__qualname__} with dict.__init__ keywords")
        if args or kwargs:
            tx.user_error(TypeError(f"{cls.__name__}() takes no arguments"))
        return obj
    if not isinstance(init, types.FunctionType):
        tx.unsupported("unsupported_call", f"constructing {cls.__qualname__}: its __init__ is not Python")
    depth = len(tx.state.frames)
    inline_call(tx, init, None, [obj, *args], kwargs)
    tx.run_until_return(depth)
    return obj


def _super(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if len(args) == 2:
        return SuperVariable(const_value(tx, args[0]), args[1])
    frame = tx.frame
    cell = frame.cells.get("__class__")
    names = frame.code.code.co_varnames
    if cell is None or not names:
        tx.unsupported("unsupported_builtin", "super() outside a method")
    cls = cell[1].cell_contents if isinstance(cell, tuple) else const_value(tx, tx.heap(cell).contents)
    return SuperVariable(cls, load_local(tx, names[0]))


def _object_setattr(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    object_setattr(tx, args[0], const_value(tx, args[1]), args[2])
    return ConstantVariable(None)


def _object_getattribute(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return plain_getattr(tx, args[0], const_value(tx, args[1]))


def _delattr(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    delete_attr(tx, args[0], const_value(tx, args[1]))
    return ConstantVariable(None)


def _next(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    gen = args[0]
    if isinstance(gen, IteratorVariable):
        item = tx.iterator_next(gen)
        if item is not None:
            return item
        if len(args) == 2:
            return args[1]
        tx.user_error(StopIteration())
    if not isinstance(gen, GeneratorVariable):
        tx.unsupported("unsupported_builtin", f"next() of a {gen.python_type().__name__} value")
    if len(args) == 2:  # next(gen, default)
        item = attempt(tx, StopIteration, lambda: resume(tx, gen))
        if item is None:
            tx.heap_set(gen.oid, GeneratorEntry(None))  # rolled back to before the call: it has finished
            return args[1]
        return item
    return resume(tx, gen)


BUILTIN_RULES[next] = _next
BUILTIN_RULES[delattr] = _delattr
BUILTIN_RULES[object.__setattr__] = _object_setattr
BUILTIN_RULES[object.__getattribute__] = _object_getattribute
BUILTIN_RULES[super] = _super
BUILTIN_RULES[issubclass] = _issubclass
BUILTIN_RULES[setattr] = _setattr


def _set_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """Sets of constants are held as frozenset constants (their only uses in model code: membership, dedup)."""
    items = sequence_items(tx, args[0]) if args else ()
    return ConstantVariable(frozenset(const_value(tx, v) for v in items))


BUILTIN_RULES[set] = _set_of
BUILTIN_RULES[frozenset] = _set_of


def call_python_object(tx: Tracer, var: PythonObjectVariable, args: list, kwargs: dict) -> None:
    value = var.value
    if isinstance(value, functools.partial) and value.func is module_iterator:
        return tx.push(value(tx, args, kwargs))
    if not isinstance(value, type) and not isinstance(value, types.FunctionType):
        result = call_dunder(tx, var, "__call__", list(args), kwargs)
        if result is not None:
            return tx.push(result)
    if value is torch.autocast or value is torch.amp.autocast:
        return tx.push(_autocast(tx, args, kwargs))
    if any(value is cls for cls in GRAD_MODE_CLASSES):
        return tx.push(_grad_mode_manager(tx, value, args, kwargs))
    if value is _noop:
        return tx.push(ConstantVariable(None))
    if value is functools.partial:
        return tx.push(PartialVariable(args[0], tuple(args[1:]), tuple(kwargs.items())))
    if isinstance(value, functools.partial):
        src = var.source
        func = wrap(tx, value.func, AttrSource(src, "func") if src else None)
        bound = [wrap(tx, a, GetItemSource(AttrSource(src, "args"), i) if src else None)
                 for i, a in enumerate(value.args)]
        bound_kw = {k: wrap(tx, v, GetItemSource(AttrSource(src, "keywords"), k) if src else None)
                    for k, v in value.keywords.items()}
        return call(tx, func, [*bound, *args], {**bound_kw, **kwargs})
    if value in (operator.itemgetter, operator.attrgetter) and all(is_const(tx, a) for a in args):
        return tx.push(PythonObjectVariable(value(*[const_value(tx, a) for a in args])))
    if isinstance(value, (operator.itemgetter, operator.attrgetter)) and len(args) == 1:
        return tx.push(_apply_getter(tx, value, args[0]))
    if value is operator.getitem and len(args) == 2:
        return tx.push(subscript(tx, args[0], args[1]))
    owner = getattr(value, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType) and is_constant(owner) and \
            all(is_const(tx, a) for a in args) and all(is_const(tx, v) for v in kwargs.values()):
        return tx.push(fold(tx, value, args, kwargs))  # a method of a constant: "a,b".split(","), ...
    if value is object.__setattr__:
        store_attr(tx, args[0], const_value(tx, args[1]), args[2])
        return tx.push(ConstantVariable(None))
    if isinstance(value, type) and not issubclass(value, torch.nn.Module) and \
            value.__module__ not in ("builtins",) and not value.__module__.startswith("torch"):
        return tx.push(construct(tx, value, args, kwargs))
    module = getattr(value, "__module__", "") or ""
    if module in ("math", "operator", "_operator") or module.startswith("math"):
        if any(isinstance(a, TensorVariable) for a in args) and module in ("operator", "_operator"):
            return tx.push(call_tensor_op(tx, "call_function", value, tuple(args), kwargs))
        if all(is_const(tx, a) for a in args) and all(is_const(tx, v) for v in kwargs.values()):
            return tx.push(fold(tx, value, args, kwargs))
    if isinstance(value, type) and issubclass(value, torch.nn.Module):
        tx.unsupported("unsupported_call", f"constructing the module {value.__qualname__} inside the trace",
                       ("modules created in forward are captured in a later release",))
    tx.unsupported("unsupported_call", f"calling {getattr(value, '__qualname__', type(value).__name__)}",
                   ("stillframe captures torch functions, tensor methods and Python functions",))


