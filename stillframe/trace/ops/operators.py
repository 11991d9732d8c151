"""Operators: ``BINARY_OP``, ``UNARY_*``, ``COMPARE_OP``, ``IS_OP``, ``CONTAINS_OP``.

On tensors an operator becomes a graph node whose target is the ``operator``
function (``operator.add``, ``operator.iadd`` for ``+=``, which is in-place on a
tensor); on Python constants it is evaluated at trace time.
"""

from __future__ import annotations

import operator

import torch

from ...tensors.ops import call_tensor_op
from ...variables.base import (
    BuiltinVariable,
    ConstantVariable,
    DictVariable,
    ListVariable,
    NNModuleVariable,
    PythonObjectVariable,
    TensorVariable,
    TorchFunctionVariable,
    TupleVariable,
    UserFunctionVariable,
)
from ...variables.calls import const_value, fold, is_const, sequence_items
from ..interpreter import handler
from .jumps import truthiness

BINARY_OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "@": operator.matmul, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift,
    ">>=": operator.irshift,
}
_DUNDERS = {"+": "__add__", "-": "__sub__", "*": "__mul__", "/": "__truediv__", "//": "__floordiv__",
            "%": "__mod__", "**": "__pow__", "@": "__matmul__", "&": "__and__", "|": "__or__", "^": "__xor__",
            "<<": "__lshift__", ">>": "__rshift__"}
COMPARE_OPERATORS = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
}


def binary_op(tx, symbol, a, b):
    """``a <symbol> b`` on VTs (``symbol`` as ``dis`` spells it: ``'+'``, ``'+='`` ...)."""
    fn = BINARY_OPERATORS[symbol]
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        if not isinstance(a, TensorVariable) and symbol.endswith("=") and symbol != "==":
            fn = BINARY_OPERATORS[symbol[:-1]]  # int += tensor falls back to int + tensor
        return call_tensor_op(tx, "call_function", fn, (a, b), {})
    if isinstance(a, ListVariable) and symbol == "+=":
        tx.set_list_items(a, tx.list_items(a) + tuple(sequence_items(tx, b)))
        return a
    if isinstance(a, (TupleVariable, ListVariable)) and symbol in ("+", "+=", "*", "*="):
        if symbol.startswith("+"):
            if type(a) is not type(b):
                tx.user_error(TypeError(f"can only concatenate {a.python_type().__name__} (not "
                                        f"\"{b.python_type().__name__}\") to {a.python_type().__name__}"))
            items = tuple(sequence_items(tx, a)) + tuple(sequence_items(tx, b))
        else:
            items = tuple(sequence_items(tx, a)) * const_value(tx, b)
        if isinstance(a, ListVariable):
            return tx.new_list(items)
        return TupleVariable(items, a.cls if a.cls is torch.Size else tuple)
    if isinstance(b, (TupleVariable, ListVariable)) and symbol in ("*", "*="):
        items = tuple(sequence_items(tx, b)) * const_value(tx, a)
        return tx.new_list(items) if isinstance(b, ListVariable) else TupleVariable(items)
    if is_const(tx, a) and is_const(tx, b):
        return fold(tx, fn, [a, b], {})
    dunder = _DUNDERS.get(symbol.rstrip("=") if symbol not in ("==",) else symbol)
    if dunder is not None:
        from ...variables.calls import call_dunder

        inplace = symbol.endswith("=") and "__i" + dunder[2:]
        for obj, name, other in ((a, inplace, b), (a, dunder, b), (b, "__r" + dunder[2:], a)):
            if name:
                result = call_dunder(tx, obj, name, [other])
                if result is not None and not (isinstance(result, ConstantVariable) and result.value is NotImplemented):
                    return result
    tx.unsupported("unsupported_operator", f"the operator {symbol} on {a.python_type().__name__} and "
                   f"{b.python_type().__name__}")


@handler("BINARY_OP")
def BINARY_OP(tx, inst):
    b = tx.pop()
    a = tx.pop()
    tx.push(binary_op(tx, inst.argval, a, b))


def _unary(tx, fn, name):
    v = tx.pop()
    if isinstance(v, TensorVariable):
        tx.push(call_tensor_op(tx, "call_function", fn, (v,), {}))
    elif is_const(tx, v):
        tx.push(fold(tx, fn, [v], {}))
    else:
        from ...variables.calls import call_dunder

        result = call_dunder(tx, v, _UNARY_DUNDERS[name], [])
        if result is None:
            tx.unsupported("unsupported_operator", f"unary {name} on a {v.python_type().__name__}")
        tx.push(result)


_UNARY_DUNDERS = {"-": "__neg__", "+": "__pos__", "~": "__invert__"}


@handler("UNARY_NEGATIVE")
def UNARY_NEGATIVE(tx, inst):
    _unary(tx, operator.neg, "-")


@handler("UNARY_POSITIVE")
def UNARY_POSITIVE(tx, inst):
    _unary(tx, operator.pos, "+")


@handler("UNARY_INVERT")
def UNARY_INVERT(tx, inst):
    _unary(tx, operator.invert, "~")


@handler("UNARY_NOT")
def UNARY_NOT(tx, inst):
    tx.push(ConstantVariable(not truthiness(tx, tx.pop())))


def compare(tx, symbol, a, b):
    fn = COMPARE_OPERATORS[symbol]
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return call_tensor_op(tx, "call_function", fn, (a, b), {})
    if is_const(tx, a) and is_const(tx, b):
        return fold(tx, fn, [a, b], {})
    if symbol in ("==", "!=") and _has_identity(a) and _has_identity(b):
        same = identical(tx, a, b)
        return ConstantVariable(same if symbol == "==" else not same)
    if isinstance(a, (ListVariable, TupleVariable)) and isinstance(b, (ListVariable, TupleVariable)):
        return fold(tx, fn, [TupleVariable(tuple(sequence_items(tx, a))), TupleVariable(tuple(sequence_items(tx, b)))],
                    {})
    from ...variables.calls import call_dunder

    for obj, name, other in ((a, _COMPARE_DUNDERS[symbol], b), (b, _COMPARE_DUNDERS[_REFLECTED[symbol]], a)):
        result = call_dunder(tx, obj, name, [other])
        if result is not None and not (isinstance(result, ConstantVariable) and result.value is NotImplemented):
            return result
    if symbol in ("==", "!="):  # objects without __eq__ compare by identity
        same = identical(tx, a, b)
        return ConstantVariable(same if symbol == "==" else not same)
    tx.unsupported("unsupported_operator", f"comparing {a.python_type().__name__} {symbol} "
                   f"{b.python_type().__name__}")


_COMPARE_DUNDERS = {"<": "__lt__", "<=": "__le__", "==": "__eq__", "!=": "__ne__", ">": "__gt__", ">=": "__ge__"}
_REFLECTED = {"<": ">", "<=": ">=", "==": "==", "!=": "!=", ">": "<", ">=": "<="}


def _has_identity(v):
    return isinstance(v, (NNModuleVariable, PythonObjectVariable, UserFunctionVariable, TorchFunctionVariable,
                          BuiltinVariable))


@handler("COMPARE_OP")
def COMPARE_OP(tx, inst):
    b = tx.pop()
    a = tx.pop()
    tx.push(compare(tx, inst.argval, a, b))


def _identity_key(v):
    if isinstance(v, TensorVariable):
        return ("tensor", v.tid)
    from ...variables.base import GeneratorVariable, IteratorVariable
    from ...variables.objects import ObjectVariable

    if isinstance(v, (ListVariable, DictVariable, ObjectVariable, IteratorVariable, GeneratorVariable)):
        return ("heap", v.oid)
    if isinstance(v, NNModuleVariable):
        return ("obj", id(v.module))
    if isinstance(v, PythonObjectVariable):
        return ("obj", id(v.value))
    if isinstance(v, (UserFunctionVariable, TorchFunctionVariable, BuiltinVariable)):
        return ("obj", id(v.fn))
    if isinstance(v, ConstantVariable):
        return ("obj", id(v.value))
    return None


def identical(tx, a, b) -> bool:
    """``a is b`` at trace time."""
    ka, kb = _identity_key(a), _identity_key(b)
    if ka is None or kb is None:
        if isinstance(a, TupleVariable) and isinstance(b, TupleVariable):
            return a == b
        if type(a) is not type(b):
            return False
        tx.unsupported("unsupported_operator", f"`is` between {a.python_type().__name__} values")
    return ka == kb


@handler("IS_OP")
def IS_OP(tx, inst):
    b = tx.pop()
    a = tx.pop()
    result = identical(tx, a, b)
    tx.push(ConstantVariable(result != bool(inst.argval)))


@handler("CONTAINS_OP")
def CONTAINS_OP(tx, inst):
    container = tx.pop()
    item = tx.pop()
    from ...variables.calls import call_dunder

    result = call_dunder(tx, container, "__contains__", [item])
    if result is not None:
        tx.push(ConstantVariable(truthiness(tx, result) != bool(inst.argval)))
        return
    if isinstance(container, NNModuleVariable) and isinstance(container.module, (torch.nn.ModuleDict,
                                                                                   torch.nn.ParameterDict)):
        from ...guards.guard import Guard
        from ...guards.source import AttrSource

        registry = "_modules" if isinstance(container.module, torch.nn.ModuleDict) else "_parameters"
        keys = getattr(container.module, registry)
        if container.source is not None:
            tx.add_guard(Guard(AttrSource(container.source, registry), "KEYS", tuple(keys)))
        tx.push(ConstantVariable((const_value(tx, item) in keys) != bool(inst.argval)))
        return
    if isinstance(container, DictVariable):
        key = const_value(tx, item)
        found = tx.dict_lookup(container, key, _ABSENT) is not _ABSENT
    elif isinstance(container, TensorVariable) or isinstance(item, TensorVariable):
        if isinstance(container, TensorVariable):
            tx.unsupported("data_dependent", "`in` on a tensor reads its values")
        found = any(identical(tx, item, v) for v in sequence_items(tx, container)
                    if isinstance(v, TensorVariable))
        if not found and any(isinstance(v, TensorVariable) for v in sequence_items(tx, container)):
            tx.unsupported("data_dependent", "`in` compares a tensor by value")
    else:
        found = const_value(tx, item) in const_value(tx, container)
    tx.push(ConstantVariable(found != bool(inst.argval)))


_ABSENT = object()
