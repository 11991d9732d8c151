"""Pushing a child frame for a Python function: argument binding as CPython does it, defaults, closures.

:func:`inline_call` is how a live ``types.FunctionType`` is entered, :func:`inline_nested` a function made
during the trace; both bind arguments with :func:`bind_arguments`, which raises the ``TypeError`` eager
would (``f() takes 1 positional argument but 2 were given``), naming the user's function.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import inspect
import types
from typing import TYPE_CHECKING, Any, Callable

import immutables

from ..bytecode.reader import read, unsteppable
from ..guards.guard import globals_key
from ..guards.source import AttrSource, DefaultSource, GetItemSource
from ..trace.state import make_frame
from ..variables.base import ConstantVariable, NestedFunctionVariable, TupleVariable, VariableTracker
from ..variables.builder import is_constant, of_type, wrap
from .generators import make_generator

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer

#: A frame's cells before its closure is bound: name -> (kind, cell, source).
EMPTY_CELLS: immutables.Map = immutables.Map()


def unbound_cell_error(code: types.CodeType, name: str) -> NameError:
    """The error CPython raises reading cell ``name`` of ``code`` while it is empty (``_PyEval_FormatExcUnbound``):
    for a cell of the frame's own (a local a nested function captures), ``UnboundLocalError`` as for any local;
    for a free variable, ``NameError`` naming the enclosing scope."""
    if name in code.co_cellvars:
        return UnboundLocalError(f"cannot access local variable '{name}' where it is not associated with a value")
    return NameError(f"cannot access free variable '{name}' where it is not associated with a value in enclosing "
                     "scope")


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
    globals_module = None if fn.__globals__ is root_frame.globals else globals_key(fn.__globals__)
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
    found = unsteppable(read(code))
    if found is not None:
        tx.unsupported("unsupported_opcode", f"{qualname} uses {found.opname} {found.argval or ''} (line "
                       f"{found.lineno}: except*, or a type parameter), which no graph break inside it could step "
                       "through: the call runs for real, whole")
    bound = bind_arguments(tx, code, qualname, args, kwargs, ndefaults, default, kwdefault)
    cells = EMPTY_CELLS.update(dict(zip(code.co_freevars, closure)))
    frame = make_frame(read(code), bound, globals_, globals_module, fn, fn_source, cells)
    if code.co_flags & inspect.CO_GENERATOR:
        if tx.lazy_generators:
            return tx.push(make_generator(tx, frame))
        # Traced again because a generator was suspended at a graph break (no real generator can stand for
        # a traced one mid-way): this one is made for real (calling a generator function runs none of its
        # code), and every next() on it is a real step, so it runs exactly as far as eager's.
        tx.unsupported("suspended_generator", f"the generator {qualname}() runs for real: a graph break "
                       "happened while it was suspended")
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
    if of_type(value, tuple) and all(is_constant(v) for v in value):
        return TupleVariable(tuple(ConstantVariable(v) for v in value))
    return wrap(tx, value, None)


def _type_error(tx: Tracer, message: str) -> None:
    """Arguments that do not bind: the call runs for real, so the ``TypeError`` is CPython's own, whose wording
    depends on defaults, keyword-only and positional-only parameters (``message`` is what the trace reports)."""
    tx.user_error(TypeError(message), traceable=False)


def make_binder(fn: types.FunctionType) -> Callable[..., dict]:
    """A function with ``fn``'s signature returning its arguments as a dict (defaults applied)."""
    sig = inspect.signature(fn, follow_wrapped=False)  # the code we trace is fn's own
    params, names, defaults = [], [], {}
    seen_kwonly = False
    last_posonly = None
    for i, p in enumerate(sig.parameters.values()):
        text = p.name
        if p.default is not inspect.Parameter.empty:
            defaults[f"___d{i}"] = p.default
            text += f"=___d{i}"
        if p.kind is p.VAR_POSITIONAL:
            text, seen_kwonly = "*" + p.name, True
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + p.name
        elif p.kind is p.KEYWORD_ONLY and not seen_kwonly:
            params.append("*")
            seen_kwonly = True
        if p.kind is p.POSITIONAL_ONLY:
            last_posonly = len(params)
        params.append(text)
        names.append(p.name)
    if last_posonly is not None:
        params.insert(last_posonly + 1, "/")
    body = ", ".join(f"{n!r}: {n}" for n in names)
    text = f"def ___bind({', '.join(params)}):\n    return {{{body}}}\n"
    ns = dict(defaults)
    exec(compile(text, "<stillframe bind>", "exec"), ns)
    bind = ns.pop("___bind")  # popped: no cycle through its globals keeps a default value alive
    # named as fn: a call with the wrong arguments raises Python's TypeError naming the user's function
    bind.__code__ = bind.__code__.replace(co_name=fn.__name__, co_qualname=fn.__qualname__)
    bind.__name__, bind.__qualname__ = fn.__name__, fn.__qualname__
    return bind
