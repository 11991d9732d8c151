"""Calls: ``KW_NAMES``, ``CALL``, ``CALL_FUNCTION_EX``."""

from __future__ import annotations
from ...own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)
from ...variables.base import (
    ConstantVariable,
    DictVariable,
    LazyArgument,
    NestedFunctionVariable,
    NullVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from ...variables.builder import wrap
from ...variables.objects import ContainerMethodVariable
from ...rules.known import const_value, items_or_real_error, sequence_items
from ...rules.objects import function_attr_key
from ...rules.calls import call
from ..interpreter import handler


@handler("KW_NAMES")
def KW_NAMES(tx, inst):
    tx.set_frame(tx.frame.with_kw_names(tuple(inst.argval)))


@handler("CALL")
def CALL(tx, inst):
    """Stack: ``[NULL, callable, args...]`` or ``[callable, self, args...]``; the last ``len(kw_names)`` are
    keywords."""
    kw_names = tx.frame.kw_names
    if kw_names:
        tx.set_frame(tx.frame.with_kw_names(()))
    args = tx.popn(inst.arg)
    second = tx.pop()
    first = tx.pop()
    if isinstance(first, NullVariable):
        fn = second
    else:
        fn, args = first, [second, *args]
    kwargs = {}
    if kw_names:
        values = args[-len(kw_names):]
        args = args[:-len(kw_names)]
        kwargs = dict(zip(kw_names, values))
    if not _passes_values_through(fn):
        args = [realize(tx, a) for a in args]
        kwargs = {k: realize(tx, v) for k, v in kwargs.items()}
    call(tx, fn, args, kwargs)


def _passes_values_through(fn) -> bool:
    """Callees that bind or store their arguments without looking at them: lazy scalars stay lazy."""
    if isinstance(fn, ContainerMethodVariable):
        return fn.name in ("append", "insert", "extend")
    return isinstance(fn, (UserFunctionVariable, UserMethodVariable, NestedFunctionVariable))


def realize(tx, var):
    return wrap(tx, var.value, var.source) if isinstance(var, LazyArgument) else var


@handler("CALL_FUNCTION_EX")
def CALL_FUNCTION_EX(tx, inst):
    kwargs_var = tx.pop() if inst.arg & 1 else None
    args_var = tx.pop()
    fn = tx.pop()
    below = tx.pop()
    items = items_or_real_error(tx, args_var)
    if not isinstance(below, NullVariable):  # a method form: [callable, self]
        fn, args = below, [fn, *items]
    else:
        args = list(items)
    kwargs = {}
    if kwargs_var is not None:
        if not isinstance(kwargs_var, DictVariable):
            tx.unsupported("unsupported_call", "** of a value that is not a dict")
        kwargs = {const_value(tx, _k(k)): v for k, v in tx.dict_entry(kwargs_var).items}
        if not all(isinstance(k, str) for k in kwargs):
            _non_string_keywords(tx, fn)
    call(tx, fn, args, kwargs)


def _non_string_keywords(tx, fn):
    """``f(**{1: 2})``: CPython's vectorcall of a Python function (``_PyStack_UnpackDict``) raises
    ``TypeError: keywords must be strings``; another callee (a C function called through ``tp_call`` sees the dict
    as it is) runs for real."""
    if _passes_values_through(fn) and not isinstance(fn, ContainerMethodVariable):
        tx.user_error(TypeError("keywords must be strings"))
    tx.unsupported("unsupported_call", "a call with ** of a dict whose keys are not all strings: it runs for real")


def _k(key):
    return ConstantVariable(key)


@handler("MAKE_FUNCTION")
def MAKE_FUNCTION(tx, inst):
    """Stack (bottom to top): defaults?, kwdefaults?, annotations?, closure?, code (by ``inst.arg`` flags)."""
    code = tx.pop().value
    flags = inst.arg
    closure = tuple(cell.ref for cell in tx.pop().items) if flags & 0x08 else ()
    annotations = _annotations(tx, tx.pop()) if flags & 0x04 else None
    kwdefaults = tuple(tx.dict_entry(tx.pop()).items) if flags & 0x02 else ()
    defaults = tx.pop().items if flags & 0x01 else ()
    frame = tx.frame
    attrs = () if annotations is None else ((function_attr_key("__annotations__"), annotations),)
    tx.push(NestedFunctionVariable(code, code.co_qualname, tuple(defaults), kwdefaults, closure, frame.globals,
                                   frame.globals_module, tx.new_dict(attrs).oid))


def _annotations(tx, var):
    """The function's ``__annotations__`` from what ``MAKE_FUNCTION`` (3.13: ``SET_FUNCTION_ATTRIBUTE 0x04``) takes:
    a tuple of name/value pairs, flattened (``('v', int, 'return', str)``), made into a dict as CPython's
    ``func_get_annotations`` does; a dict is the function's own."""
    if isinstance(var, DictVariable):
        return var
    items = tuple(sequence_items(tx, var))
    return tx.new_dict(tuple((const_value(tx, k), v) for k, v in zip(items[::2], items[1::2])))
