"""Subscripts and iteration over containers: ``c[k]``, ``c[k] = v``, ``del c[k]``, items of a live iterator."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
import enum
import operator

import torch
from ..guards.guard import Guard
from ..guards.source import GetItemSource
from ..tensors.ops import call_tensor_op
from ..variables.base import (
    BuiltinVariable,
    ConstantVariable,
    DictEntry,
    DictVariable,
    NumpyArrayVariable,
    DictViewVariable,
    GeneratorVariable,
    IteratorVariable,
    LazyArgument,
    ListVariable,
    SetVariable,
    DequeVariable,
    LiveIteratorVariable,
    NNModuleVariable,
    PythonObjectVariable,
    RangeVariable,
    SliceVariable,
    TensorVariable,
    TupleVariable,
    same_key,
)
from ..variables.builder import is_lazy_scalar, of_type, wrap
from ..variables.objects import ObjectVariable, SuperVariable
from . import attrs, builtin_calls, known, live_dicts, nn_modules
from .protocol import Protocol
from ..variables.kinds import CALLABLES, CONTEXT_VALUES, INTERNAL


def _not_subscriptable(tx, container, reason, key):
    tx.unsupported("unsupported_subscript", f"indexing a {container.python_type().__name__} value ({reason})")


#: ``container[key]`` on VTs, one rule per kind of container.
subscript = Protocol("subscript", _not_subscriptable)


@subscript.rule(LazyArgument)
def _lazy(tx, container, key):
    return subscript(tx, wrap(tx, container.value, container.source), key)


@subscript.rule(TensorVariable)
def _tensor(tx, container, key):
    return call_tensor_op(tx, "call_function", operator.getitem, (container, key), {})


@subscript.rule(RangeVariable)
def _range(tx, container, key):
    """``range(...)[k]``: an int, or a range for a slice, as eager's (its items never made)."""
    try:
        picked = container.value[known.const_value(tx, key)]
    except (IndexError, TypeError) as e:
        tx.user_error(type(e)(*e.args))
    return RangeVariable(picked) if isinstance(picked, range) else ConstantVariable(picked)


@subscript.rule(TupleVariable, ListVariable)
def _sequence(tx, container, key):
    items = tuple(known.sequence_items(tx, container))
    k = known.const_value(tx, key)
    try:
        picked = items[k]
    except (IndexError, TypeError) as e:
        # eager's message is the base type's: "list index out of range", "range object index out of range", and
        # "tuple index out of range" for every tuple subclass (torch.Size, a namedtuple)
        real = list(items) if isinstance(container, ListVariable) else items
        try:
            real[k]
        except (IndexError, TypeError) as exact:
            e = exact
        tx.user_error(type(e)(*e.args))
    if isinstance(k, slice):
        if isinstance(container, ListVariable):
            return tx.new_list(picked)
        if container.cls is tuple and k.indices(len(items)) == (0, len(items), 1):
            return container  # CPython returns an exact tuple itself for a slice that covers it: t[:] is t
        cls = container.cls if isinstance(container, TupleVariable) and container.cls is torch.Size else tuple
        return TupleVariable(picked, cls)
    return picked


@subscript.rule(DictVariable)
def _dict(tx, container, key):
    k = known.hash_key(tx, key, container)
    v = tx.dict_lookup(container, k, _ABSENT)
    if v is _ABSENT:
        tx.user_error(KeyError(k))
    return v


@subscript.rule(NNModuleVariable)
def _module(tx, container, key):
    module = container.module
    nn_modules.guard_registry_read(tx, container, "indexing")
    k = known.const_value(tx, key)
    if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)) and isinstance(k, slice):
        # a new container of the same modules on every call: guarded by type, its members by identity
        source = GetItemSource(container.source, k) if container.source is not None else None
        if source is not None:
            tx.add_guard(Guard(source, "TYPE", type(module)))
        return NNModuleVariable(module[k], source)
    if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)) and isinstance(k, int):
        names = list(module._modules)
        try:
            name = names[k]
        except IndexError as e:
            tx.user_error(e)
        return attrs.getattr_var(tx, container, name)
    if isinstance(module, torch.nn.ParameterDict) and isinstance(k, str):
        if k not in module._parameters:
            tx.user_error(KeyError(k))
        return attrs.getattr_var(tx, container, k)
    if isinstance(module, torch.nn.ModuleDict) and isinstance(k, str):
        if k not in module._modules:
            tx.user_error(KeyError(k))
        return attrs.getattr_var(tx, container, k)
    return _object(tx, container, key)


def _annotation(tx, var) -> bool:
    """Whether ``var`` is made of constants, classes and typing forms only (what a typing subscript takes)."""
    if isinstance(var, (TupleVariable, ListVariable)):
        return all(_annotation(tx, v) for v in known.sequence_items(tx, var))
    if isinstance(var, (BuiltinVariable, PythonObjectVariable)):
        value = var.fn if isinstance(var, BuiltinVariable) else var.value
        return of_type(value, type) or type(value).__module__ == "typing"
    return known.is_const(tx, var)


@subscript.rule(ObjectVariable, PythonObjectVariable, ConstantVariable)
def _object(tx, container, key):
    tensor_key = live_dicts.key_of(tx, container, key)
    if tensor_key is not None:  # self.state[p] of an optimizer
        return live_dicts.getitem(tx, container, tensor_key)
    if isinstance(container, PythonObjectVariable) and type(container.value).__module__ == "typing" and \
            _annotation(tx, key):  # typing.List[int], typing.Callable[[T], T]: an annotation, a pure value
        return builtin_calls.fold(tx, operator.getitem, [container, key], {})
    result = builtin_calls.call_dunder(tx, container, "__getitem__", [key])
    if result is not None:
        return result
    if (isinstance(container, ConstantVariable) or isinstance(container, PythonObjectVariable) and isinstance(
            container.value, enum.EnumMeta)) and known.is_const(tx, key):
        return builtin_calls.fold(tx, operator.getitem, [container, key], {})
    return _not_subscriptable(tx, container, "its __getitem__ is not Python code stillframe traces", key)


subscript.refuse("a dict view is not subscriptable (the real subscript raises TypeError)", DictViewVariable)
subscript.refuse("indexing an ndarray is not captured (it runs with NumPy itself)", NumpyArrayVariable)
subscript.refuse("it is not a container the trace models", SliceVariable, IteratorVariable, LiveIteratorVariable,
                 GeneratorVariable, SuperVariable, *CALLABLES, *CONTEXT_VALUES)
@subscript.rule(DequeVariable)
def _deque(tx, container, key):
    items = list(tx.list_items(container))
    k = known.const_value(tx, key)
    try:
        return collections.deque(items)[k]  # an int index only: a slice is Python's TypeError
    except (IndexError, TypeError) as e:
        tx.user_error(e)


subscript.refuse("a set is not subscriptable (the real step raises Python's TypeError)", SetVariable)
subscript.refuse("CPython's NULL and internal markers are not values", *INTERNAL)


def store_subscript(tx, container, key, value):
    if isinstance(container, TensorVariable):
        call_tensor_op(tx, "call_function", operator.setitem, (container, key, value), {})
    elif isinstance(container, (ListVariable, DequeVariable)):
        items = list(tx.list_items(container)) if isinstance(container, ListVariable) else \
            collections.deque(tx.list_items(container))
        k = known.const_value(tx, key)
        try:
            items[k] = value if not isinstance(k, slice) else list(known.sequence_items(tx, value))
        except (IndexError, TypeError) as e:
            tx.user_error(e)
        tx.set_list_items(container, tuple(items))
    elif isinstance(container, DictVariable):
        tx.set_dict_entry(container, tx.dict_entry(container).set(known.hash_key(tx, key, container), value))
    elif (tensor_key := live_dicts.key_of(tx, container, key)) is not None:
        live_dicts.setitem(tx, container, tensor_key, value)
    elif builtin_calls.call_dunder(tx, container, "__setitem__", [key, value]) is None:
        tx.unsupported("unsupported_subscript", f"assigning into a {container.python_type().__name__} value")


def _live_item(tx, it, index):
    value = it.values[index]
    source = GetItemSource(it.items_source, index)
    return LazyArgument(value, source) if is_lazy_scalar(value) else wrap(tx, value, source)


_ABSENT = object()


def delete_subscript(tx, container, key) -> None:
    """``del container[key]`` on VTs."""
    if isinstance(container, (ListVariable, DequeVariable)):
        items = list(tx.list_items(container)) if isinstance(container, ListVariable) else \
            collections.deque(tx.list_items(container))
        try:
            del items[known.const_value(tx, key)]
        except (IndexError, TypeError) as e:
            tx.user_error(e)
        tx.set_list_items(container, tuple(items))
    elif isinstance(container, DictVariable):
        k = known.hash_key(tx, key, container)
        entry = tx.dict_entry(container)
        if entry.get(k, _ABSENT) is _ABSENT:
            tx.user_error(KeyError(k))
        tx.set_dict_entry(container, DictEntry(tuple((a, b) for a, b in entry.items
                                                     if not (same_key(a, k))), entry.source))
    elif builtin_calls.call_dunder(tx, container, "__delitem__", [key]) is None:
        tx.unsupported("unsupported_subscript", f"deleting from a {container.python_type().__name__} value")
