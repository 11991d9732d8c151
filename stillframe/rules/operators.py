"""Operators on VariableTrackers: binary and unary operators, comparisons, identity, ``in``."""

from __future__ import annotations

import types

import torch
from ..bytecode.operators import BINARY_OPERATORS, COMPARE_OPERATORS
from ..guards.guard import Guard
from ..guards.source import AttrSource
from ..tensors.ops import call_tensor_op
from ..tensors import symbolic
from ..variables.base import (
    BuiltinVariable,
    ConstantVariable,
    DictVariable,
    NumpyArrayVariable,
    DictViewVariable,
    GeneratorVariable,
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
    SymNodeVariable,
    TensorMethodVariable,
    TensorVariable,
    TorchFunctionVariable,
    TupleVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from ..variables.kinds import CONTEXT_VALUES, INTERNAL
from ..variables.objects import ContainerMethodVariable, ObjectVariable, SuperVariable
from . import builtin_calls, known, numpy_interop, type_checks
from .protocol import Protocol
from .truthiness import truthiness


_DUNDERS = {"+": "__add__", "-": "__sub__", "*": "__mul__", "/": "__truediv__", "//": "__floordiv__",
            "%": "__mod__", "**": "__pow__", "@": "__matmul__", "&": "__and__", "|": "__or__", "^": "__xor__",
            "<<": "__lshift__", ">>": "__rshift__"}


def binary_op(tx, symbol, a, b):
    """``a <symbol> b`` on VTs (``symbol`` as ``dis`` spells it: ``'+'``, ``'+='`` ...)."""
    fn = BINARY_OPERATORS[symbol]
    if isinstance(a, NumpyArrayVariable) or isinstance(b, NumpyArrayVariable):
        return numpy_interop.binary(tx, symbol, a, b)
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        if not isinstance(a, TensorVariable) and symbol.endswith("=") and symbol != "==":
            fn = BINARY_OPERATORS[symbol[:-1]]  # int += tensor falls back to int + tensor
        return call_tensor_op(tx, "call_function", fn, (a, b), {})
    if isinstance(a, ListVariable) and symbol == "+=":
        tx.set_list_items(a, tx.list_items(a) + tuple(known.sequence_items(tx, b)))
        return a
    if isinstance(a, (TupleVariable, ListVariable)) and symbol in ("+", "+=", "*", "*="):
        if symbol.startswith("+"):
            if type(a) is not type(b):
                tx.user_error(TypeError(f"can only concatenate {a.python_type().__name__} (not "
                                        f"\"{b.python_type().__name__}\") to {a.python_type().__name__}"))
            items = tuple(known.sequence_items(tx, a)) + tuple(known.sequence_items(tx, b))
        else:
            items = tuple(known.sequence_items(tx, a)) * known.const_value(tx, b)
        if isinstance(a, ListVariable):
            return tx.new_list(items)
        return TupleVariable(items, a.cls if a.cls is torch.Size else tuple)
    if isinstance(b, (TupleVariable, ListVariable)) and symbol in ("*", "*="):
        items = tuple(known.sequence_items(tx, b)) * known.const_value(tx, a)
        return tx.new_list(items) if isinstance(b, ListVariable) else TupleVariable(items)
    if any(isinstance(v, DictViewVariable) and v.kind != "values" for v in (a, b)) and \
            symbol.rstrip("=") in ("|", "&", "-", "^"):
        return _view_operator(tx, fn, a, b)
    if (isinstance(a, SetVariable) or isinstance(b, SetVariable)) and \
            all(isinstance(v, SetVariable) or known.is_const(tx, v) for v in (a, b)):
        return _set_operator(tx, fn, symbol, a, b)
    if isinstance(a, SymNodeVariable) or isinstance(b, SymNodeVariable):  # arithmetic on symbolic sizes
        return symbolic.apply(tx, BINARY_OPERATORS[symbol[:-1]] if symbol.endswith("=") else fn, (a, b))
    if known.is_const(tx, a) and known.is_const(tx, b):
        return builtin_calls.fold(tx, fn, [a, b], {})
    dunder = _DUNDERS.get(symbol.rstrip("=") if symbol not in ("==",) else symbol)
    if dunder is not None:
        inplace = symbol.endswith("=") and "__i" + dunder[2:]
        for obj, name, other in ((a, inplace, b), (a, dunder, b), (b, "__r" + dunder[2:], a)):
            if name:
                result = builtin_calls.call_dunder(tx, obj, name, [other])
                if result is not None and not (isinstance(result, ConstantVariable) and result.value is NotImplemented):
                    return result
    tx.unsupported("unsupported_operator", f"the operator {symbol} on {a.python_type().__name__} and "
                   f"{b.python_type().__name__}")


def _set_operator(tx, fn, symbol, a, b):
    """``|``, ``&``, ``-``, ``^`` (and in place) with a set made in the trace: a set result is a new traced set,
    or, in place, the same set with new members (its identity kept, as ``s |= t`` keeps it)."""
    left, right = (tx.set_values(v) if isinstance(v, SetVariable) else known.const_value(tx, v) for v in (a, b))
    try:
        value = fn(left, right)
    except Exception as e:  # the user's own error, as eager raises it
        tx.user_error(e)
    if type(value) is not set:
        return builtin_calls.fold(tx, lambda: value, [], {})
    if symbol.endswith("=") and isinstance(a, SetVariable):
        tx.set_set_values(a, value)
        return a
    return tx.new_set(value)


def _view_operator(tx, fn, a, b):
    """``d.keys() | e.keys()``, ``d.items() - s`` ...: a keys or items view is a set of its members, and the
    result a new set (as ``dict_keys.__or__`` gives), whichever side the view is on."""
    left, right = (_members(tx, v) for v in (a, b))
    try:
        value = fn(left, right)
    except Exception as e:  # the user's own error (an unhashable member ...), as eager raises it
        tx.user_error(e)
    return tx.new_set(value)


def _members(tx, v):
    if isinstance(v, SetVariable):
        return set(tx.set_values(v))
    if isinstance(v, (DictViewVariable, ListVariable, TupleVariable)):
        return {known.hash_key(tx, item) for item in known.sequence_items(tx, v)}
    return set(known.const_value(tx, v))


def _unary(tx, fn, name):
    v = tx.pop()
    if isinstance(v, TensorVariable):
        tx.push(call_tensor_op(tx, "call_function", fn, (v,), {}))
    elif isinstance(v, SymNodeVariable):
        tx.push(symbolic.apply(tx, fn, (v,)))
    elif known.is_const(tx, v):
        tx.push(builtin_calls.fold(tx, fn, [v], {}))
    else:
        result = builtin_calls.call_dunder(tx, v, _UNARY_DUNDERS[name], [])
        if result is None:
            tx.unsupported("unsupported_operator", f"unary {name} on a {v.python_type().__name__}")
        tx.push(result)


_UNARY_DUNDERS = {"-": "__neg__", "+": "__pos__", "~": "__invert__"}


def compare(tx, symbol, a, b):
    fn = COMPARE_OPERATORS[symbol]
    if isinstance(a, NumpyArrayVariable) or isinstance(b, NumpyArrayVariable):
        return numpy_interop.binary(tx, symbol, a, b)
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return call_tensor_op(tx, "call_function", fn, (a, b), {})
    if isinstance(a, SymNodeVariable) or isinstance(b, SymNodeVariable):  # symbolic: guarded when tested
        return symbolic.apply(tx, fn, (a, b))
    if known.is_const(tx, a) and known.is_const(tx, b):
        return builtin_calls.fold(tx, fn, [a, b], {})
    if symbol in ("==", "!=") and _eq_is_identity(tx, a) and _eq_is_identity(tx, b):
        same = identical(tx, a, b)
        return ConstantVariable(same if symbol == "==" else not same)
    if isinstance(a, (ListVariable, TupleVariable)) and isinstance(b, (ListVariable, TupleVariable)):
        as_tuples = [TupleVariable(tuple(known.sequence_items(tx, v))) for v in (a, b)]
        return builtin_calls.fold(tx, fn, as_tuples, {})
    for obj, name, other in ((a, _COMPARE_DUNDERS[symbol], b), (b, _COMPARE_DUNDERS[_REFLECTED[symbol]], a)):
        result = _rich_compare(tx, obj, name, other)
        if result is not None and not (isinstance(result, ConstantVariable) and result.value is NotImplemented):
            return result
    if symbol in ("==", "!=") and _eq_is_identity(tx, a, user_eq=True) and _eq_is_identity(tx, b, user_eq=True):
        same = identical(tx, a, b)  # both returned NotImplemented (or have no __eq__): Python compares identity
        return ConstantVariable(same if symbol == "==" else not same)
    tx.unsupported("unsupported_operator", f"comparing {a.python_type().__name__} {symbol} "
                   f"{b.python_type().__name__}")


_COMPARE_DUNDERS = {"<": "__lt__", "<=": "__le__", "==": "__eq__", "!=": "__ne__", ">": "__gt__", ">=": "__ge__"}


_REFLECTED = {"<": ">", "<=": ">=", "==": "==", "!=": "!=", ">": "<", ">=": "<="}


def _rich_compare(tx, obj, name, other):
    """``type(obj).<name>(obj, other)`` where it is Python code; ``__ne__`` inherited from ``object`` is
    ``not __eq__`` (NotImplemented passed through), as ``object.__ne__`` does."""
    result = builtin_calls.call_dunder(tx, obj, name, [other])
    if result is None and name == "__ne__" and getattr(_type_of_value(tx, obj), "__ne__", None) is object.__ne__:
        eq = builtin_calls.call_dunder(tx, obj, "__eq__", [other])
        if eq is not None and not (isinstance(eq, ConstantVariable) and eq.value is NotImplemented):
            return ConstantVariable(not truthiness(tx, eq))
        return eq
    return result


def _type_of_value(tx, v):
    return type_checks.python_type_of(tx, v)


def _eq_is_identity(tx, v, user_eq=False):
    """Whether ``==`` on ``v`` is identity: a function, or an object whose type keeps ``object``'s ``__eq__`` and
    ``__ne__``. With ``user_eq``, a Python ``__eq__`` that returned NotImplemented also falls back to identity."""
    if isinstance(v, (UserFunctionVariable, TorchFunctionVariable, BuiltinVariable)):
        return True
    if not isinstance(v, (NNModuleVariable, PythonObjectVariable, ObjectVariable)):
        return False
    cls = _type_of_value(tx, v)
    if user_eq:
        return all(getattr(cls, name) is getattr(object, name) or isinstance(getattr(cls, name), types.FunctionType)
                   for name in ("__eq__", "__ne__"))
    return cls.__eq__ is object.__eq__ and cls.__ne__ is object.__ne__


def _no_identity(tx, v, reason):
    return None


#: ``identity(tx, v)``: a key equal for two VTs exactly when they are one live object (``a is b``), or ``None``
#: where the trace does not know the object's identity (values rebuilt per use: tuples, slices, ranges ...).
IDENTITY = Protocol("identity", _no_identity)
IDENTITY.rule(TensorVariable)(lambda tx, v: ("tensor", v.tid))
IDENTITY.rule(ListVariable, DictVariable, ObjectVariable, IteratorVariable, GeneratorVariable, SetVariable,
              DequeVariable)(
    lambda tx, v: ("heap", v.oid))
IDENTITY.rule(NNModuleVariable)(lambda tx, v: ("obj", id(v.module)))
IDENTITY.rule(PythonObjectVariable, ConstantVariable)(lambda tx, v: ("obj", id(v.value)))
IDENTITY.rule(UserFunctionVariable, TorchFunctionVariable, BuiltinVariable)(lambda tx, v: ("obj", id(v.fn)))
IDENTITY.refuse("an immutable value made in the trace has no identity of its own (compared by value for tuples)",
                TupleVariable, SliceVariable, RangeVariable)
IDENTITY.refuse("a function, partial or bound method made in the trace: identity not tracked",
                NestedFunctionVariable, PartialVariable, UserMethodVariable, TensorMethodVariable,
                ContainerMethodVariable)
IDENTITY.refuse("a context object, iterator over live data or super() made in the trace: identity not tracked",
                *CONTEXT_VALUES, LiveIteratorVariable, SuperVariable)
IDENTITY.refuse("not a Python value (an internal stack or cell marker)", *INTERNAL)
IDENTITY.refuse("an argument is wrapped on its first read, before any `is`", LazyArgument)
IDENTITY.refuse("an ndarray of the trace: its identity is not tracked", NumpyArrayVariable)
IDENTITY.refuse("a dict view is made anew by each keys()/values()/items() call: identity not tracked",
                DictViewVariable)


def identical(tx, a, b) -> bool:
    """``a is b`` at trace time."""
    ka, kb = IDENTITY(tx, a), IDENTITY(tx, b)
    if ka is None or kb is None:
        if isinstance(a, TupleVariable) and isinstance(b, TupleVariable):
            return a == b
        if type(a) is not type(b):
            return False
        tx.unsupported("unsupported_operator", f"`is` between {a.python_type().__name__} values")
    return ka == kb


_ABSENT = object()


def contains(tx, container, item) -> bool:
    """``item in container`` at trace time (Unsupported when it reads tensor data)."""
    result = builtin_calls.call_dunder(tx, container, "__contains__", [item])
    if result is not None:
        return truthiness(tx, result)
    if isinstance(container, NNModuleVariable) and isinstance(container.module, (torch.nn.ModuleDict,
                                                                                   torch.nn.ParameterDict)):
        registry = "_modules" if isinstance(container.module, torch.nn.ModuleDict) else "_parameters"
        keys = getattr(container.module, registry)
        if container.source is not None:
            tx.add_guard(Guard(AttrSource(container.source, registry), "KEYS", tuple(keys)))
        return known.const_value(tx, item) in keys
    if isinstance(container, DictViewVariable):
        if container.kind == "keys":
            return contains(tx, container.mapping, item)
        return contains(tx, TupleVariable(known.view_items(tx, container)), item)
    if isinstance(container, DictVariable):
        key = known.hash_key(tx, item, container)
        found = tx.dict_lookup(container, key, _ABSENT) is not _ABSENT
    elif isinstance(container, SetVariable):
        key = known.hash_key(tx, item)
        try:
            found = key in tx.set_values(container)
        except TypeError as e:  # an unhashable item: Python's error
            tx.user_error(e)
    elif isinstance(container, TensorVariable) or isinstance(item, TensorVariable):
        if isinstance(container, TensorVariable):
            tx.unsupported("data_dependent", "`in` on a tensor reads its values")
        found = any(identical(tx, item, v) for v in known.sequence_items(tx, container)
                    if isinstance(v, TensorVariable))
        if not found and any(isinstance(v, TensorVariable) for v in known.sequence_items(tx, container)):
            tx.unsupported("data_dependent", "`in` compares a tensor by value")
    else:
        found = known.const_value(tx, item) in known.const_value(tx, container)
    return found
