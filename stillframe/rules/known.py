"""What is known of a VariableTracker at trace time, as protocol tables: its Python constant (``const_value``,
``is_const``) and its items when iterated (``sequence_items``).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
from typing import TYPE_CHECKING

import enum
import operator
import sys
import types
from typing import Any

import torch
from ..errors import UserError
from ..guards.guard import Guard
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
    SetVariable,
    TensorKey,
    DequeVariable,
    LiveIteratorVariable,
    NestedFunctionVariable,
    NNModuleVariable,
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
from ..variables.builder import of_type, wrap
from ..variables.objects import (ContainerMethodVariable, ObjectVariable, SuperVariable)
from ..tensors.ops import call_tensor_op
from .attrs import (
    getattr_var,
)
from .containers import _live_item
from .generators import drain
from .protocol import Protocol
from ..variables.kinds import CALLABLES, CONTEXT_VALUES, INTERNAL

from . import builtin_calls, calls, live_dicts, nn_modules, polyfills

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


def _not_constant(tx: Tracer, var: VariableTracker, reason: str) -> Any:
    tx.unsupported("not_constant", f"a {var.python_type().__name__} value is needed as a Python constant here "
                   f"({reason})")


#: The Python value of a VT that is fully known at trace time (raises Unsupported otherwise).
const_value = Protocol("const_value", _not_constant)


@const_value.rule(LazyArgument)
def _lazy_value(tx: Tracer, var: LazyArgument) -> Any:
    return const_value(tx, wrap(tx, var.value, var.source))


@const_value.rule(ConstantVariable, RangeVariable)
def _constant_value(tx: Tracer, var: VariableTracker) -> Any:
    return var.value


@const_value.rule(TupleVariable)
def _tuple_value(tx: Tracer, var: TupleVariable) -> Any:
    items = tuple(const_value(tx, v) for v in var.items)
    if var.cls is tuple:
        return items
    if var.cls is torch.Size:
        return torch.Size(items)
    if not hasattr(var.cls, "n_fields"):
        return var.cls(*items)
    if var.cls in _STRUCTSEQ_SINGLETONS:  # sys.version_info >= (3, 8): a struct sequence Python makes no more of
        live = _STRUCTSEQ_SINGLETONS[var.cls]
        return live if tuple(live) == items else _not_constant(tx, var, f"a {var.cls.__name__} Python cannot build")
    return var.cls(items)  # os.stat_result, time.struct_time ...


#: The struct sequences of ``sys`` whose types refuse new instances ("cannot create 'sys.version_info' instances"):
#: their one instance, by type.
_STRUCTSEQ_SINGLETONS = {type(v): v for v in (sys.version_info, sys.flags, sys.float_info, sys.int_info,
                                              sys.hash_info, sys.thread_info)}


@const_value.rule(ListVariable)
def _list_value(tx: Tracer, var: ListVariable) -> Any:
    return [const_value(tx, v) for v in tx.list_items(var)]


@const_value.rule(DequeVariable)
def _deque_value(tx: Tracer, var: DequeVariable) -> Any:
    return collections.deque((const_value(tx, v) for v in tx.list_items(var)), var.maxlen)


@const_value.rule(SetVariable)
def _set_value(tx: Tracer, var: SetVariable) -> Any:
    values = tx.set_values(var)
    if any(type(v) is TensorKey for v in values):
        return _not_constant(tx, var, "it holds tensors")
    return values


@const_value.rule(DictVariable)
def _dict_value(tx: Tracer, var: DictVariable) -> Any:
    items = tx.dict_entry(var).items
    if any(type(k) is TensorKey for k, _ in items):
        return _not_constant(tx, var, "it has tensor keys")
    return {k: const_value(tx, v) for k, v in items}


@const_value.rule(SliceVariable)
def _slice_value(tx: Tracer, var: SliceVariable) -> Any:
    return slice(const_value(tx, var.start), const_value(tx, var.stop), const_value(tx, var.step))


@const_value.rule(IteratorVariable)
def _iterator_value(tx: Tracer, var: IteratorVariable) -> Any:
    return iter([const_value(tx, v) for v in tx.iterator_rest(var)])


@const_value.rule(BuiltinVariable, TorchFunctionVariable)
def _function_value(tx: Tracer, var: VariableTracker) -> Any:
    return var.fn


@const_value.rule(PythonObjectVariable)
def _object_value(tx: Tracer, var: PythonObjectVariable) -> Any:
    if callable(var.value) or of_type(var.value, types.ModuleType) or type(var.value).__module__ == "typing":
        return var.value  # identity-guarded (or trusted) objects: classes, functions, modules, typing forms
    return _not_constant(tx, var, "only classes, functions and modules are used by identity")


def hash_key(tx: Tracer, var: VariableTracker, container: VariableTracker | None = None) -> Any:
    """The key ``var`` is in a dict or set: its constant value, or for a tensor its identity (a
    :class:`TensorKey`; ``torch.Tensor.__hash__`` is ``id``-based). A dict from outside the trace is guarded and
    replayed by key, which a tensor key cannot be, so a tensor key there breaks the graph."""
    if isinstance(var, TensorVariable):
        if isinstance(container, DictVariable):
            entry = tx.heap(container.oid)
            if entry.source is not None or entry.live is not None:
                tx.unsupported("not_constant", "a tensor as a key of a dict from outside the trace")
        return TensorKey(var.tid)
    value = const_value(tx, var)
    unhashable = _unhashable(value)
    if unhashable is not None:  # ({[k]: x}, d.get([k]), [k] in d): Python's error, from the real step
        tx.user_error(TypeError(f"unhashable type: '{unhashable.__name__}'"))
    return value


def _unhashable(value: Any) -> type | None:
    """The type of the first unhashable part of ``value`` that ``hash(value)`` would meet: one whose class sets
    ``__hash__ = None`` (a list, dict, set, a slice before 3.12), in a tuple or frozenset too. Only class attributes
    are read: no ``__hash__`` of the user's runs at trace time."""
    if type(value).__hash__ is None:
        return type(value)
    if type(value) in (tuple, frozenset):
        for item in value:
            found = _unhashable(item)
            if found is not None:
                return found
    return None


def view_items(tx: Tracer, view: DictViewVariable) -> tuple:
    """What iterating a dict view gives now: the dict's keys, values or ``(key, value)`` pairs, in order."""
    items = tx.dict_entry(view.mapping).items
    if view.kind == "keys":
        return tuple(key_variable(k) for k, _ in items)
    if view.kind == "values":
        return tuple(v for _, v in items)
    return tuple(TupleVariable((key_variable(k), v)) for k, v in items)


def key_variable(key: Any) -> VariableTracker:
    """The VT of a dict key or set member (the inverse of :func:`hash_key`)."""
    return TensorVariable(key.tid) if type(key) is TensorKey else ConstantVariable(key)


const_value.refuse("its value is tensor data", TensorVariable)
const_value.refuse("a view of a dict the trace models: it changes with the dict", DictViewVariable)
const_value.refuse("an ndarray's value is tensor data", NumpyArrayVariable)
const_value.refuse("it is an object the trace models, with state that can change", ObjectVariable,
                   NNModuleVariable,
                   SuperVariable, ContainerMethodVariable, GeneratorVariable, LiveIteratorVariable,
                   UserFunctionVariable, UserMethodVariable, NestedFunctionVariable, PartialVariable,
                   TensorMethodVariable, *CONTEXT_VALUES)
const_value.refuse("CPython's NULL and internal markers are not values", *INTERNAL)

#: Whether :data:`const_value` of a VT succeeds without tracing anything (a constant, or a container of them).
is_const = Protocol("is_const", lambda tx, var, reason: False)
is_const.rule(ConstantVariable, RangeVariable, LazyArgument)(lambda tx, var: True)
is_const.rule(IteratorVariable)(lambda tx, var: all(is_const(tx, v) for v in tx.iterator_rest(var)))
is_const.rule(TupleVariable)(lambda tx, var: all(is_const(tx, v) for v in var.items))
is_const.rule(SliceVariable)(lambda tx, var: all(is_const(tx, v) for v in (var.start, var.stop, var.step)))
is_const.rule(ListVariable, DequeVariable)(lambda tx, var: all(is_const(tx, v) for v in tx.list_items(var)))
is_const.rule(SetVariable)(lambda tx, var: not any(type(v) is TensorKey for v in tx.heap(var.oid).values))
for _kind, _reason in const_value.reasons.items():
    is_const.refuse(_reason, _kind)
is_const.refuse("a dict, function or object may be used as a constant by const_value, but folding is only "
                "offered for plain constants and sequences of them", DictVariable, BuiltinVariable,
                TorchFunctionVariable, PythonObjectVariable)


def _not_iterable(tx: Tracer, var: VariableTracker, reason: str) -> tuple:
    tx.unsupported("unsupported_iteration", f"iterating over a {var.python_type().__name__} ({reason})")


#: The items of an iterable VT, unrolled at trace time (tuples, lists, dicts' keys, ranges, iterators, tensors).
sequence_items = Protocol("iteration", _not_iterable)


def items_or_real_error(tx: Any, var: Any) -> tuple:
    """``tuple(sequence_items(tx, var))``, where a ``TypeError`` (``var`` is not iterable) is left to the real step:
    CPython words it by the instruction (``f(*k)``: "f() argument after * must be an iterable, not int"; ``a, b =
    k``: "cannot unpack non-iterable int object"), and the executor words it as CPython does."""
    try:
        return tuple(sequence_items(tx, var))
    except UserError as e:
        if not isinstance(e.exc, TypeError) or not e.traceable:
            raise
        tx.user_error(e.exc, traceable=False)


@sequence_items.rule(LazyArgument)
def _lazy_items(tx: Tracer, var: LazyArgument) -> tuple:
    return sequence_items(tx, wrap(tx, var.value, var.source))


@sequence_items.rule(GeneratorVariable)
def _generator_items(tx: Tracer, var: GeneratorVariable) -> tuple:
    return sequence_items(tx, drain(tx, var))  # consumed whole, as list(gen) / sum(gen) consume it


@sequence_items.rule(ConstantVariable)
def _constant_items(tx: Tracer, var: ConstantVariable) -> tuple:
    if isinstance(var.value, (frozenset, set, str)):
        return tuple(ConstantVariable(v) for v in var.value)
    return _not_iterable(tx, var, "not an iterable constant")


def _dunder_items(tx: Tracer, var: VariableTracker) -> tuple | None:
    """``iter(obj)`` through its class's own ``__iter__`` written in Python, if it has one."""
    dunder = builtin_calls.checked_iterator(tx, builtin_calls.call_dunder(tx, var, "__iter__", []))
    if dunder is not None and builtin_calls.has_python_next(dunder):  # an iterator object: drained by __next__
        dunder = calls.call_sync(tx, UserFunctionVariable(polyfills.drive), [dunder], {})
    return None if dunder is None else sequence_items(tx, dunder)


@sequence_items.rule(PythonObjectVariable, ObjectVariable)
def _object_items(tx: Tracer, var: VariableTracker) -> tuple:
    if isinstance(var, PythonObjectVariable) and of_type(var.value, enum.EnumMeta):
        return tuple(ConstantVariable(m) for m in var.value)
    if isinstance(var, PythonObjectVariable) and var.source is None and of_type(var.value, types.MappingProxyType) \
            and all(isinstance(k, str) for k in var.value):
        return tuple(ConstantVariable(k) for k in var.value)  # inspect.signature(f).parameters: its names
    if live_dicts.empty_view(tx, var):  # list(od.values()) of an empty live mapping (rules/live_dicts.py)
        return ()
    items = _dunder_items(tx, var)
    return items if items is not None else _not_iterable(tx, var, "its __iter__ is not Python code")


@sequence_items.rule(NNModuleVariable)
def _module_items(tx: Tracer, var: NNModuleVariable) -> tuple:
    items = _dunder_items(tx, var)
    if items is not None:
        return items
    module = var.module
    nn_modules.guard_registry_read(tx, var, "iterating")
    if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
        return tuple(getattr_var(tx, var, name) for name in module._modules)
    if isinstance(module, torch.nn.ParameterList):
        return tuple(getattr_var(tx, var, name) for name in module._parameters)
    if isinstance(module, torch.nn.ParameterDict):
        return tuple(ConstantVariable(k) for k in module._parameters)
    if isinstance(module, torch.nn.ModuleDict):
        return tuple(ConstantVariable(k) for k in module._modules)
    return _not_iterable(tx, var, "a module that is not a container")


sequence_items.rule(TupleVariable)(lambda tx, var: var.items)
sequence_items.rule(ListVariable, DequeVariable)(lambda tx, var: tx.list_items(var))
sequence_items.rule(SetVariable)(lambda tx, var: tuple(key_variable(v) for v in tx.heap(var.oid).values))
sequence_items.rule(DictVariable)(lambda tx, var: tuple(key_variable(k) for k, _ in tx.dict_entry(var).items))
sequence_items.refuse("iterating an ndarray (its rows) is not captured", NumpyArrayVariable)
sequence_items.rule(DictViewVariable)(lambda tx, var: view_items(tx, var))
sequence_items.rule(RangeVariable)(lambda tx, var: tuple(ConstantVariable(i) for i in var.value))
# Consumed, as list(it) / unpacking / zip(it) consume it.
sequence_items.rule(IteratorVariable)(lambda tx, var: tx.iterator_drain(var))


@sequence_items.rule(LiveIteratorVariable)
def _live_iterator_items(tx: Tracer, var: LiveIteratorVariable) -> tuple:
    if var.real:
        tx.unsupported("unsupported_iteration", "an iterator stepping CPython's own over a container is read for real")
    tx.add_guard(Guard(var.items_source, "LEN", len(var.values)))
    start = live_iterator_index(tx, var)
    tx.state = tx.state.replace(memo=tx.state.memo.set(("live_iter_index", var.obj_id), len(var.values)))
    key = ("live_iter", var.obj_id)  # the live iterator itself is moved too: a real object may hold it (map, tee)
    if key not in tx.state.side_effects:
        tx.state = tx.state.replace(side_effects=tx.state.side_effects.set(key, (tx.new_id(), var)))
    return tuple(_live_item(tx, var, i) for i in range(start, len(var.values)))  # consumed, as in eager


@sequence_items.rule(TensorVariable)
def _tensor_items(tx: Tracer, var: TensorVariable) -> tuple:
    shape = tx.tensor(var).meta.shape
    if not shape:
        tx.user_error(TypeError("iteration over a 0-d tensor"))
    return tuple(call_tensor_op(tx, "call_function", operator.getitem, (var, ConstantVariable(i)), {})
                 for i in range(int(shape[0])))  # a symbolic size is specialized (and guarded)


sequence_items.refuse("iterating it at trace time is not modelled; the loop runs for real", SliceVariable,
                      SuperVariable, *CALLABLES, *CONTEXT_VALUES)
sequence_items.refuse("CPython's NULL and internal markers are not values", *INTERNAL)


def live_iterator_index(tx: Tracer, var: LiveIteratorVariable) -> int:
    """Where a live loop iterator stands in this trace: its index when it entered, unless the trace drained it."""
    return tx.state.memo.get(("live_iter_index", var.obj_id), var.index)
