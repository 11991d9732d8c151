"""Wrapping live Python values that enter the trace, with their Source and guards.

``wrap(tx, value, source)`` turns a value read from the caller's world (an
argument, a global, a module attribute, a closure cell) into a VT and installs
the guards that make the trace valid for it, from its state *now*, before the
traced code could change it (DESIGN invariant 5)::

    wrap(tx, torch.randn(2, 3), LocalSource("x"))
        -> TensorVariable(tid)     + Guard(L['x'], TENSOR, (Tensor, float32, cpu, (2, 3), (3, 1), 0, False, True, False))
    wrap(tx, 3, LocalSource("n"))
        -> ConstantVariable(3)     + Guard(L['n'], EQUALS, 3)

A value reached twice (by one source, or by two sources that are the same
object) is wrapped once, so tensor identity and aliasing are preserved.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)
from ..own_builtins import BUILTINS

import enum
import numbers
import functools
import itertools
import math
import operator
import types
import weakref
from dataclasses import replace
from typing import Any

import torch
from .. import compat
from ..errors import RetraceSymbolic
from ..guards.guard import Guard, tensor_signature
from ..guards.source import (AttrSource, BuiltinsSource, CallSource, GetItemSource, GlobalSource, KeyedItemSource,
                             LocalSource, ScalarOutputSource, SizeSource, Source)
from ..tensors.meta import TensorEntry, TensorMeta, fresh_view
from . import standins
from .base import (
    HEAPTYPE_FLAG,
    NumpyArrayVariable,
    AutocastExitVariable,
    BuiltinVariable,
    ConstantVariable,
    SliceVariable,
    ContextExitVariable,
    InferenceModeExitVariable,
    DictEntry,
    DictVariable,
    LazyArgument,
    ListEntry,
    ListVariable,
    LiveIteratorVariable,
    NNModuleVariable,
    NULL,
    PythonObjectVariable,
    SymNodeVariable,
    TensorMethodVariable,
    TensorVariable,
    TorchFunctionVariable,
    TupleVariable,
    UserFunctionVariable,
    UserMethodVariable,
    VariableTracker,
)
from .objects import ContainerMethodVariable


CONSTANT_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented),
                  torch.dtype, torch.device, torch.layout, torch.memory_format, enum.Enum)

#: Members a guarded frozenset may have besides constants: compared by identity (or by name, for builtins).
_IDENTITY_MEMBERS = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType, type)

# Modules whose attributes are stable: reading ``torch.add`` guards ``torch`` only. Not ``builtins``: programs
# rebind its names (``builtins.len = ...``, ``mock.patch("builtins.open")``), so ``builtins.len`` is guarded by
# identity, as a builtin read by name is (``trace/ops/names.py``).
TRUSTED_MODULES = (torch, math, operator, functools, torch.nn.functional, torch.linalg, torch.fft, torch.special)


def of_type(value: Any, classes: Any) -> bool:
    """``isinstance(value, classes)`` by ``value``'s real type alone. ``isinstance`` reads ``value.__class__`` when
    the type does not match, and that runs a ``__getattribute__`` or ``__class__`` property written in Python (a
    logging proxy, a lazy object that loads itself): wrapping a value must not run the user's code (test_descr
    test_module_subclasses), and what the trace models is the object's real layout, not the class it shows. The one
    helper for classifying a live value (a VT's ``.value``) anywhere in the trace, the rules and the runtime."""
    return issubclass(type(value), classes)


def is_lazy_scalar(value: Any) -> bool:
    """Python scalars that may travel through a trace unguarded until their value is used."""
    return type(value) in (int, float, bool, str, bytes, type(None))


def is_constant(value: Any) -> bool:
    """Immutable values a trace may bake in (behind an EQUALS guard): Python scalars, dtypes, NumPy scalars ...
    A subclass of a scalar type whose own classes define a dunder method (``class g(int): def __lt__``) is not one:
    folding its operators at trace time would run that Python code then, not at each call (test_heapq)."""
    if of_type(value, CONSTANT_TYPES):
        return type(value) in CONSTANT_TYPES or of_type(value, enum.Enum) or \
            (not _own_dunders(type(value)) and not _has_instance_state(type(value)))
    return type(value).__module__ == "numpy" and of_type(value, numbers.Number)


#: Dunders every class statement gives its class (no behaviour of their own).
_CLASS_BOOKKEEPING = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__",
                                "__annotations__", "__firstlineno__", "__static_attributes__", "__orig_bases__",
                                "__parameters__", "__match_args__"})


def _own_dunders(cls: type) -> bool:
    """Whether a class written in Python (a heap type: not NumPy's ``float64``, a C subclass of ``float``) between
    ``cls`` and its builtin scalar base defines a dunder method of its own."""
    for klass in cls.__mro__:
        if klass in CONSTANT_TYPES or klass is object:
            break
        if klass.__flags__ & HEAPTYPE_FLAG and any(name.startswith("__") and name.endswith("__") and
                                                   name not in _CLASS_BOOKKEEPING for name in vars(klass)):
            return True
    return False


def _has_instance_state(cls: type) -> bool:
    """Whether a Python subclass of a scalar type gives its instances state of their own: a ``__dict__``, slots or
    weak references (``class S(str): pass`` has all three). Such an instance is an object, not a value: baked in
    as a constant, its attributes would be read from the first call's instance (``s.tag`` of another equal ``S``
    answered the first one's) and the plan would keep that instance alive."""
    base = next(klass for klass in cls.__mro__ if not klass.__flags__ & HEAPTYPE_FLAG)
    return cls.__dictoffset__ != base.__dictoffset__ or cls.__weakrefoffset__ != base.__weakrefoffset__ or \
        cls.__basicsize__ != base.__basicsize__


def is_class_key(value: Any) -> bool:
    """A class or typing form as a dict key (a dispatch table keyed by type): hashed and compared by identity."""
    return (of_type(value, type) or type(value).__module__ == "typing") and \
        type(value).__eq__ is object.__eq__ and type(value).__hash__ is object.__hash__


def is_torch_callable(value: Any) -> bool:
    """A callable from torch's own namespace that becomes an FX node (``torch.add``, ``F.relu``, ``Tensor.add``)."""
    if of_type(value, (types.BuiltinFunctionType, types.FunctionType, types.MethodDescriptorType,
                          types.WrapperDescriptorType, types.BuiltinMethodType)) or callable(value):
        module = getattr(value, "__module__", None) or ""
        if of_type(value, (types.MethodDescriptorType, types.WrapperDescriptorType)):
            return getattr(value, "__objclass__", None) in (torch.Tensor, compat.TensorBase)
        if of_type(value, type) or hasattr(type(value), "__enter__"):
            return False  # a class, or a context-manager object (an inference_mode() made per call): not an op
        owner = getattr(value, "__self__", None)
        if owner is not None and not of_type(owner, types.ModuleType):
            return False  # a method bound to some torch object (a context, a generator): not a graph op
        if of_type(value, types.FunctionType) and (value.__qualname__ != value.__name__ or
                                                      module in _TRACED_MODULES):
            return False  # traced into as Python code: see _TRACED_MODULES
        if not of_type(value, (types.FunctionType, types.BuiltinFunctionType)) and \
                module.startswith(_TRACED_OBJECT_MODULES):
            return False  # an object of torch's Python classes with a __call__ (a distribution's transform)
        return module == "torch" or module.startswith(("torch.", "torch._C"))
    return False


# torch's Python functions that are traced into rather than made FX nodes: those a graph's code cannot name as
# a module attribute (a staticmethod such as ``nn.Transformer.generate_square_subsequent_mask``, whose node
# named a ``torch.nn.modules.transformer`` attribute that does not exist, so the graph raised), and those of
# ``torch.nn.utils.rnn``, which take and return ``PackedSequence`` named tuples a fake call gets as plain tuples
# (``pad_packed_sequence(p)``: "'tuple' object has no attribute 'batch_sizes'"). Both found by probes.
_TRACED_MODULES = frozenset({"torch.nn.utils.rnn"})
# The modules whose callable objects are traced into (their class's ``__call__``): ``AffineTransform(1.0, 2.0)(x)``
# reached the graph as a call target, and an internal error ("unhashable type"), found by a probe.
_TRACED_OBJECT_MODULES = ("torch.distributions",)


def wrap(tx: Any, value: Any, source: Source | None, trusted: bool = False) -> VariableTracker:
    """Wrap ``value`` (read from ``source``; ``None`` for values with no outside home) and guard it.

    ``trusted``: the value is an attribute of a module whose attributes do not
    change (``torch.add``): it needs no identity guard of its own.
    """
    memo = tx.state.memo
    if source is not None:
        hit = memo.get(source.name)
        if hit is not None:
            return hit
    var = _wrap(tx, value, source, trusted)
    if source is not None:
        tx.state = tx.state.replace(memo=tx.state.memo.set(source.name, var))
    return var


def shows_other_class(cls: type) -> bool:
    """Whether ``obj.__class__`` of an instance of ``cls`` may be other than ``cls``: its class defines its own
    ``__class__`` or a ``__getattribute__`` written in Python (a proxy). CPython's ``isinstance`` then tries that
    class too, running that code."""
    return own_class_attribute(cls) is not object.__dict__["__class__"] or \
        isinstance(getattr(cls, "__getattribute__", None), types.FunctionType)


def own_class_attribute(cls: type) -> Any:
    """The first ``__class__`` in ``cls``'s MRO (a class may define its own: ``__class__ = 413``, a property that
    makes a proxy); ``object``'s getset descriptor unless shadowed, as CPython's generic lookup finds it."""
    for klass in cls.__mro__:
        if "__class__" in klass.__dict__:
            return klass.__dict__["__class__"]
    return None


def _guard(tx: Any, source: Source | None, kind: str, expected: Any = None) -> None:
    if source is not None:
        tx.add_guard(Guard(source, kind, expected))


def _wrap(tx: Any, value: Any, source: Source | None, trusted: bool) -> VariableTracker:
    if isinstance(source, ScalarOutputSource):
        if tx.shapes is not None and tx.shapes.data_dynamic(source, value):
            return _symbolic_float(tx, value, source)
        tx.unsupported("data_dependent", "a float produced at run time (read from a tensor by .item() or float(t), "
                       "or returned by a call that ran for real) is used in Python code",
                       ("that step runs for real, so the plan does not depend on the value",))
    if shows_other_class(type(value)) or type(value) in (weakref.ProxyType, weakref.CallableProxyType):
        # isinstance() of such an object reads its __class__, user code (a property that raises, a proxy's or a
        # Mock's spec), and a weakref.proxy shows its referent's (a dead one raises ReferenceError): it is
        # classified by its type alone, an object the trace keeps by reference (a proxy's every use runs for real)
        _guard(tx, source, "TYPE", type(value))
        return PythonObjectVariable(value, source)
    if of_type(value, torch.Tensor):
        return wrap_tensor(tx, value, source)
    if source is not None and type(value).__name__ == "ndarray" and type(value).__module__ == "numpy" and \
            compat.torch_numpy is not None and value.dtype.kind in "biufc" and value.flags.writeable:
        # an ndarray argument or global: its data enters as a tensor input, torch.from_numpy(value) each call
        _guard(tx, source, "TYPE", type(value))
        tensor = wrap_tensor(tx, torch.from_numpy(value), CallSource(source, torch.from_numpy))
        return NumpyArrayVariable(tensor.tid, False, source)
    live_var = _wrap_live_marker(tx, value, source)
    if live_var is not None:
        return live_var
    if value is None or value is True or value is False or value is Ellipsis:
        _guard(tx, source, "IS", value)
        return ConstantVariable(value, source)
    if type(value) is int and source is not None and tx.shapes is not None and \
            tx.shapes.scalar_dynamic(source, value, _unspecializable(tx, source)):
        return _symbolic_int(tx, value, source)
    if type(value) is float and source is not None and tx.shapes is not None and \
            tx.shapes.scalar_dynamic(source, value, True):
        return _symbolic_float(tx, value, source)
    if is_constant(value):
        _guard(tx, source, "EQUALS", value)
        return ConstantVariable(value, source)
    if type(value) is frozenset and source is not None and all(
            is_constant(m) or of_type(m, _IDENTITY_MEMBERS) for m in value):
        # a frozenset of constants, functions or classes (``func in SUPPORTED``): fixed by its members, guarded
        _guard(tx, source, "EQUALS", value)
        tx.keepalive.append(value)
        return ConstantVariable(value, source)
    if type(value) is slice and all(is_constant(p) for p in (value.start, value.stop, value.step)):
        _guard(tx, source, "EQUALS", value)  # a slice passed in (x[s]): its parts are Python values
        return SliceVariable(ConstantVariable(value.start), ConstantVariable(value.stop), ConstantVariable(value.step))
    if of_type(value, torch.nn.Module):
        return _identity(tx, value, source, lambda: NNModuleVariable(value, source))
    if type(value) is tuple or of_type(value, torch.Size) or _is_namedtuple(value):
        hit = wrapped(tx, value)
        if hit is not None and hit.source is None and source is not None:
            # met first with no source (inside an object the trace keeps opaque): read now through a source, it is
            # guarded by that read's own guards (a tuple is immutable: a second VT of it loses its identity alone)
            return _wrap_tuple(tx, value, source)
        return _identity(tx, value, source, lambda: _wrap_tuple(tx, value, source))
    if type(value) is list:
        return _identity(tx, value, source, lambda: _wrap_list(tx, value, source))
    if type(value) is dict:
        return _identity(tx, value, source, lambda: _wrap_dict(tx, value, source))
    if id(value) in _BUILTIN_IDS:
        if not trusted:
            _guard(tx, source, "ID", id(value))
        return BuiltinVariable(value, source)
    if compat.CustomOpDef is not None and of_type(value, compat.CustomOpDef):  # a torch.library.custom_op
        _guard(tx, source, "ID", id(value))
        return TorchFunctionVariable(value._opoverload, source)  # (its schema says what it writes)
    if is_torch_callable(value):
        if not trusted:
            _guard(tx, source, "ID", id(value))
        return TorchFunctionVariable(value, source)
    if of_type(value, types.FunctionType):
        return _function(tx, value, source)
    if of_type(value, (types.ModuleType, type, types.BuiltinFunctionType, types.MethodType, functools.partial)) or \
            type(value).__module__ == "typing":  # a TypeVar, typing.List[int] ...: used by identity
        if not trusted:
            _guard(tx, source, "ID", id(value))
        tx.keepalive.append(value)
        return PythonObjectVariable(value, source)
    _guard(tx, source, "TYPE", type(value))
    return PythonObjectVariable(value, source)


#: Builtins, and the C iterators and functions of the standard library that stillframe has rules for.
_BUILTIN_IDS = {id(v) for v in (*BUILTINS.values(), *vars(itertools).values(),
                                functools.reduce) if callable(v)}
_NEVER_LIVE_MARKERS = frozenset({int, float, bool, str, bytes, type(None), tuple, list, dict, type,
                                 types.FunctionType, types.ModuleType})


def _wrap_live_marker(tx: Any, value: Any, source: Source | None) -> VariableTracker | None:
    """Values that exist only between two graphs of one call (see :mod:`stillframe.runtime.live`)."""
    if type(value) in _NEVER_LIVE_MARKERS:
        return None
    if value is standins.NULL:
        return NULL
    if of_type(value, standins.ResumableIterator):
        _guard(tx, source, "TYPE", standins.ResumableIterator)
        _guard(tx, AttrSource(source, "_real"), "TYPE", type(value._real))
        if value._real is not None:  # CPython's own iterator: each next is taken for real (FOR_ITER breaks on it)
            return LiveIteratorVariable(AttrSource(source, "_items"), (), 0, id(value), value._kind,
                                        real=type(value._real))
        _guard(tx, AttrSource(source, "_index"), "EQUALS", value._index)
        _guard(tx, AttrSource(source, "_kind"), "EQUALS", value._kind)
        items = value._items if type(value._items) is range else tuple(value._items)  # (range(10**9): as it is)
        cls = standins.eager_type(value)
        _guard(tx, AttrSource(source, "_items"), "TYPE", type(value._items))  # (eager_type reads the types only)
        _guard(tx, AttrSource(source, "_over"), "TYPE", type(value._over))
        _guard(tx, AttrSource(source, "_view"), "EQUALS", value._view)
        _guard(tx, AttrSource(source, "_cls"), "ID", id(value._cls))
        return LiveIteratorVariable(AttrSource(source, "_items"), items, value._index, id(value), value._kind, cls=cls)
    if of_type(value, standins.AutocastExit):
        _guard(tx, source, "TYPE", standins.AutocastExit)
        return AutocastExitVariable(None, value.args, source)
    if of_type(value, standins.InferenceModeExit):
        _guard(tx, source, "TYPE", standins.InferenceModeExit)
        return InferenceModeExitVariable(None, value.mode, source=source)
    if of_type(value, standins.GradModeExit):
        _guard(tx, source, "EQUALS", value)
        return ContextExitVariable(value.restore)
    if of_type(value, types.MethodType) and of_type(value.__func__, types.FunctionType):
        _guard(tx, source, "TYPE", types.MethodType)
        fn = wrap(tx, value.__func__, AttrSource(source, "__func__") if source else None)
        self_var = wrap(tx, value.__self__, AttrSource(source, "__self__") if source else None)
        return UserMethodVariable(fn.fn, self_var, source)
    if of_type(value, types.BuiltinMethodType) and of_type(getattr(value, "__self__", None), torch.Tensor):
        self_var = wrap(tx, value.__self__, AttrSource(source, "__self__") if source else None)
        _guard(tx, AttrSource(source, "__name__") if source else None, "EQUALS", value.__name__)
        return TensorMethodVariable(value.__name__, self_var, source)
    if of_type(value, types.BuiltinMethodType) and type(getattr(value, "__self__", None)) in (list, dict):
        owner = wrap(tx, value.__self__, AttrSource(source, "__self__") if source else None)
        _guard(tx, AttrSource(source, "__name__") if source else None, "EQUALS", value.__name__)
        return ContainerMethodVariable(owner, value.__name__, source=source)
    if of_type(value, (types.BuiltinMethodType, types.MethodWrapperType)) and source is not None and \
            not of_type(getattr(value, "__self__", None), (types.ModuleType, type(None))):
        # A C method bound to an object (``od.values``, ``dq.append``, a context's ``__enter__``) is a new object
        # on every attribute read: guarded by what it is, not by its own id, which never holds again. Its owner
        # is guarded by value where the trace may fold the call (a constant's method), by identity where it is
        # a class, and by type otherwise: no rule reads such a method but to call it for real.
        owner = value.__self__
        _guard(tx, source, "TYPE", type(value))
        _guard(tx, AttrSource(source, "__name__"), "EQUALS", value.__name__)
        if is_constant(owner):
            _guard(tx, AttrSource(source, "__self__"), "EQUALS", owner)
        elif of_type(owner, type):
            _guard(tx, AttrSource(source, "__self__"), "ID", id(owner))
            tx.keepalive.append(owner)
        else:
            _guard(tx, AttrSource(source, "__self__"), "TYPE", type(owner))
        return PythonObjectVariable(value, source)
    return None


def _is_namedtuple(value: Any) -> bool:
    return of_type(value, tuple) and (hasattr(type(value), "_fields") or hasattr(type(value), "n_fields"))


def wrapped(tx: Any, value: Any) -> VariableTracker | None:
    """The VT this trace already holds for the live object ``value`` (an exact list, dict or tuple, a module, a
    tensor: the objects with identity, :func:`_identity`), or ``None``: not met yet in this trace."""
    return tx.state.memo.get(("id", id(value)))


def _identity(tx: Any, value: Any, source: Source | None, build: Any) -> VariableTracker:
    """Objects with identity: one VT per live object; a second source gets a SAME guard."""
    key = ("id", id(value))
    hit = tx.state.memo.get(key)
    if hit is not None:
        if source is not None and hit.source is not None:
            _guard(tx, source, "SAME", hit.source)
        return hit
    if of_type(value, torch.nn.Module):
        _guard(tx, source, "ID", id(value))
    var = build()
    tx.state = tx.state.replace(memo=tx.state.memo.set(key, var))
    tx.keepalive.append(value)
    return var


def _function(tx: Any, value: types.FunctionType, source: Source | None) -> VariableTracker:
    """A Python function: guarded by the identity of its code (as TorchDynamo does), not of the function.

    A closure or lambda made afresh on every call (or rebuilt after a graph
    break) is the same code; what differs between instances -- closure cells,
    defaults -- is read through sources and guarded where the trace uses it.
    """
    key = ("id", id(value))
    hit = tx.state.memo.get(key)
    if hit is not None:
        if source is not None and hit.source is not None:
            _guard(tx, source, "SAME", hit.source)
        return hit
    if source is not None and _rooted_in_globals(source):
        # a module's function (or one in a module-level registry): the same object on every call, so its
        # identity is guarded (one check, as TorchDynamo's FUNCTION_MATCH); the entry dies with it
        _guard(tx, source, "ID", id(value))
    else:
        _guard(tx, source, "TYPE", types.FunctionType)
        _guard(tx, AttrSource(source, "__code__") if source else None, "ID", id(value.__code__))
        if value.__closure__ and source is not None:
            _guard(tx, AttrSource(source, "__closure__"), "LEN", len(value.__closure__))
    var = UserFunctionVariable(value, source)
    tx.state = tx.state.replace(memo=tx.state.memo.set(key, var))
    tx.keepalive.append(value)
    return var


def _rooted_in_globals(source: Source) -> bool:
    """Whether ``source`` is read from a module's globals or builtins (``G['f']``, ``___module_globals('m')['f']``,
    ``G['REGISTRY']['key']``, ``___builtins(G)['len']``) rather than from the call's arguments, closure or
    defaults."""
    while hasattr(source, "base"):
        source = source.base
    return isinstance(source, (GlobalSource, BuiltinsSource))


def _wrap_tuple(tx: Any, value: tuple, source: Source | None) -> VariableTracker:
    """A tuple, a ``torch.Size`` or a named tuple: guarded by type and length, its items wrapped. One VT per live
    tuple (``_identity``), so two locals holding one tuple are one object again when a graph break rebuilds them."""
    _guard(tx, source, "TYPE", type(value))
    _guard(tx, source, "LEN", len(value))
    items = tuple(wrap(tx, item, GetItemSource(source, i) if source else None) for i, item in enumerate(value))
    return TupleVariable(items, type(value), source)


def _wrap_list(tx: Any, value: list, source: Source | None) -> VariableTracker:
    _guard(tx, source, "TYPE", list)
    # Contents are read (and guarded) only when the trace looks at them; the live list is kept so that
    # mutations are replayed on it even when it has no source (a list in a hook's closure).
    oid = tx.new_id()
    tx.heap_set(oid, ListEntry(None, source, value))
    return ListVariable(oid)


def read_list(tx: Any, oid: int) -> tuple:
    """The items of a heap list, reading (and guarding) a caller's list on first use."""
    entry = tx.state.heap[oid]
    if entry.items is not None:
        return entry.items
    value, source = entry.live, entry.source
    _guard(tx, source, "LEN", len(value))
    items = tuple(wrap(tx, item, GetItemSource(source, i) if source else None) for i, item in enumerate(value))
    items += entry.appended
    tx.heap_set(oid, ListEntry(items, source, value))
    return items


#: The dicts whose items are being wrapped, by id: the DictVariable each becomes and its source (traces run one at a
#: time: the compile lock).
_WRAPPING_DICTS: dict = {}


def _wrap_dict(tx: Any, value: dict, source: Source | None) -> VariableTracker:
    _guard(tx, source, "TYPE", dict)
    keys = list(value.keys())
    if not all(is_constant(k) or is_class_key(k) for k in keys):
        # keys the plan cannot name (tensors, objects): an opaque dict, guarded by type; each use of it (a lookup,
        # a method) runs for real where it happens, instead of the whole resumed segment running uncompiled
        tx.keepalive.append(value)
        return PythonObjectVariable(value, source)
    outer = _WRAPPING_DICTS.get(id(value))
    if outer is not None:
        # a dict that holds itself (d["self"] = d; the builtins' dict once an eval has put its own __builtins__ in
        # it, as inspect.signature does on 3.13): the inner reference is the outer DictVariable, guarded to be the
        # same object (`y["self"] is y` holds in the trace, and after a graph break the rebuilt dict holds itself)
        var, outer_source = outer
        if source is not None and outer_source is not None:
            _guard(tx, source, "SAME", outer_source)
        return var
    # scalar values are read (and guarded) only when the trace uses them: a dict like os.environ is
    # consulted for one key, and must not guard every other entry's value
    oid = tx.new_id()
    _WRAPPING_DICTS[id(value)] = (DictVariable(oid), source)
    try:
        items = tuple((k, LazyArgument(v, GetItemSource(source, k)) if source is not None and is_lazy_scalar(v) else
                       wrap(tx, v, GetItemSource(source, k) if source else None)) for k, v in value.items())
    finally:
        del _WRAPPING_DICTS[id(value)]
    tx.heap_set(oid, DictEntry(items, source, value, keys_unguarded=source is not None))
    return DictVariable(oid)


def wrap_tensor(tx: Any, value: torch.Tensor, source: Source | None) -> VariableTracker:
    """A live tensor entering the trace: a graph input (placeholder) guarded by its entry snapshot."""
    key = ("id", id(value))
    hit = tx.state.memo.get(key)
    if hit is not None:
        if source is not None and tx.tensor(hit).source is not None:
            _guard(tx, source, "SAME", tx.tensor(hit).source)
        return hit
    if source is None:
        tx.unsupported("constant_tensor", "a tensor with no source (created outside the trace and reached "
                       "through an object stillframe cannot name)")
    if type(value) not in (torch.Tensor, torch.nn.Parameter) and not of_type(value, torch.nn.parameter.Buffer):
        tx.unsupported("tensor_subclass", f"tensor subclass {type(value).__name__} is not supported")
    fake, meta_fields = _fakeified(tx, value, source)
    existing = tx.tid_of_fake(fake)
    node = tx.graph.placeholder(source.name, fake)  # the fake: a graph must not keep the real input alive
    if existing is not None:  # a hidden base (seen as the base of a view) now read directly
        entry = tx.state.heap[existing]
        tx.heap_set(existing, TensorEntry(entry.meta, entry.fake, node, source))
        var = TensorVariable(existing)
    else:
        var = tx.new_tensor(fake, node, source)
    if meta_fields:  # what the stand-in's fake does not show (see _fakeified)
        entry = tx.state.heap[var.tid]
        tx.heap_set(var.tid, replace(entry, meta=replace(entry.meta, **meta_fields)))
    if existing is None:
        _view_of_written_base(tx, var, fake)
    tx.state = tx.state.replace(memo=tx.state.memo.set(key, var),
                                inputs=tx.state.inputs.append((source, var.tid)))
    tx.input_values[var.tid] = value
    tx.input_nodes[var.tid] = node
    if tx.fake_mode.shape_env is not None and value.layout == torch.strided and \
            any(compat.is_symbolic(n) for n in (*fake.shape, *fake.stride())):
        # the entry snapshot the ShapeEnv's guards are produced from, and which sizes and strides were symbolic
        # then (the TENSOR guard left those out: one the trace specializes is guarded by its value)
        tx.entry_fakes.append((source, fake, (tuple(compat.is_symbolic(n) for n in fake.shape),
                                              tuple(compat.is_symbolic(n) for n in fake.stride()))))
    base = fake._base if tx.fake_mode.shape_env is not None else None
    if base is not None and base.layout == torch.strided and \
            any(compat.is_symbolic(n) for n in (*base.shape, *base.stride())):
        # a view's symbolic base: the ShapeEnv's guards may name its sizes (L['v']._base.size()[0])
        tx.entry_fakes.append((AttrSource(source, "_base"), base, (
            tuple(compat.is_symbolic(n) for n in base.shape), tuple(compat.is_symbolic(n) for n in base.stride()))))
    return var


def _view_of_written_base(tx: Any, var: TensorVariable, fake: Any) -> None:
    """An input view entering the trace after the trace wrote its base (``t1 = x.t()`` before a break, then
    ``x[:, 0] = w; t1.requires_grad``): its fake, made by the fake converter from the base's fake at entry, shows
    the base as it was before the write (no grad, a leaf), where eager's view shares the written base's autograd
    state (requires grad, no leaf; fuzz 63:253). It is remade from the base's current fake, as the write remade
    the views the trace knew (tensors/ops.py), at the base's version."""
    entry = tx.state.heap[var.tid]
    base_tid = entry.meta.base
    if base_tid is None or fake._base is None:
        return
    base = tx.state.heap[base_tid]
    if base.fake is fake._base:  # not written by the trace since it entered
        return
    with tx.fake_mode:
        view = fresh_view(base.fake, entry.meta, stale=entry.meta.grad_fn_pending and base.meta.requires_grad)
    meta = replace(TensorMeta.of(view, base_tid, entry.meta.view_creation, base.meta.version),
                   counter=base.meta.counter)
    tx.heap_set(var.tid, replace(entry, meta=meta, fake=view))
    tx.state = tx.state.replace(fakes=tx.state.fakes.set(id(view), (var.tid, view)))


def _fakeified(tx: Any, value: torch.Tensor, source: Source) -> tuple[Any, dict]:
    """The fake of graph input ``value`` (:func:`_fake_input`), and the fields of its TensorMeta that the fake
    does not show, made from a stand-in where fakeifying the tensor itself would change it or fail:

    * a stale view (``compat.is_stale_view``): fakeifying reads ``is_leaf``, which would end that state; a
      stand-in view with its geometry is fakeified, and its fake made stale;
    * a view made under ``no_grad`` whose base was written in place since: reading its ``is_leaf`` (or
      ``requires_grad``) raises, in eager as when fakeifying, though eager may never read it; a stand-in view
      made under ``no_grad`` now, and the error kept in ``TensorMeta.autograd_error`` for a traced read;
    * a leaf (or a view of one) whose ``.grad`` no longer has its shape, dtype or device (``w.unsqueeze_(0)``
      under ``no_grad`` after a backward: eager allows it; fakeifying copies ``.grad`` and refuses): a stand-in
      leaf sharing its storage, without the ``.grad``, which the trace never reads from the fake (``.grad`` is
      an input of its own), one per leaf (so that the fakes of its views share its fake);
    * a view whose ``is_leaf`` differs from its fake's (made while its base required no grad, and never written
      since: eager's has no grad_fn): the live flags.
    """
    if compat.is_stale_view(value):  # asked before anything asks for its grad_fn, which would end that state
        stand_in = compat.stale_view(value._base, value.shape, value.stride(), value.storage_offset())
        fake = _fake_input(tx, value, source, stand_in)
        with tx.fake_mode:
            fake = compat.stale_view(fake._base, fake.shape, fake.stride(), fake.storage_offset())
        return fake, {"grad_fn_pending": True}
    try:
        _, is_leaf, has_grad_fn = compat.autograd_flags(value)
    except RuntimeError as e:
        with torch.no_grad():
            stand_in = value._base.as_strided(value.shape, value.stride(), value.storage_offset())
        fake = _fake_input(tx, value, source, stand_in)
        compat.increment_version(fake)  # now its base was written after it was made, as the live one's
        return fake, {"autograd_error": str(e), "is_leaf": None, "has_grad_fn": None}
    stand_in = grad_stand_in(tx, value)
    fake = _fake_input(tx, value, source, stand_in) if stand_in is not None else _fake_input(tx, value, source)
    if value._is_view() and compat.autograd_flags(fake)[1:] != (is_leaf, has_grad_fn):
        # a view made while its base required no grad, never written since: eager's has no grad_fn (fuzz 30:1078)
        # where the fake, made from its base's fake in grad mode, has one
        return fake, {"is_leaf": is_leaf, "has_grad_fn": has_grad_fn}
    return fake, {}


def grad_stand_in(tx: Any, value: torch.Tensor) -> torch.Tensor | None:
    """For a leaf (or a view of one) whose ``.grad`` no longer has its shape (:func:`grad_mismatch`), the
    stand-in fakeified in its place, and handed to the backend as its example (runtime/compiler.py): a leaf
    sharing its storage, without the ``.grad``, one per leaf (so that the fakes of its views share its fake),
    viewed as ``value`` is; ``None`` for any other tensor."""
    base = value._base if value._base is not None else value
    if not grad_mismatch(base):
        return None
    stand_in = tx.stand_ins.get(id(base))
    if stand_in is None:
        stand_in = tx.stand_ins[id(base)] = base.detach().requires_grad_(True)
        tx.keepalive.append(base)
    if base is not value:
        with torch.enable_grad():
            stand_in = stand_in.as_strided(value.shape, value.stride(), value.storage_offset())
    return stand_in


def grad_mismatch(t: torch.Tensor) -> bool:
    """Whether leaf ``t``'s ``.grad`` no longer has its shape, dtype or device."""
    grad = t.grad if t.requires_grad and t.is_leaf else None
    return grad is not None and (grad.shape != t.shape or grad.dtype != t.dtype or grad.device != t.device)


def _unspecializable(tx: Any, source: Source) -> bool:
    """Whether an int read from ``source`` may become a symbolic graph input when it changes: one reached from a
    local of the frame (an argument, or a live value where a graph break resumes) through items and attributes
    of objects that are not ``nn.Module``s (``L['n']``, ``L['state'].step``, ``L['cfg']['n']``), as
    torch.compile unspecializes ints; a global's, a module attribute's or a default's stays specialized. An
    optimizer's ``state[p]['step']`` (a :class:`KeyedItemSource`) is an item too."""
    while isinstance(source, (AttrSource, GetItemSource, KeyedItemSource)):
        source = source.base
        if isinstance(tx.state.memo.get(source.name), NNModuleVariable):
            return False
    return type(source) is LocalSource


def _symbolic_int(tx: Any, value: int, source: Source) -> VariableTracker:
    """An int argument the shape policy makes symbolic (it changed between calls): a graph input whose guards
    come from the ShapeEnv, instead of an EQUALS guard on its value (0 and 1 included, as torch.compile)."""
    if tx.fake_mode.shape_env is None:
        raise RetraceSymbolic(f"{source.name} is a symbolic int")
    sym = compat.symbolic_int(tx.fake_mode, value, source.name)
    if not compat.is_symbolic(sym):
        _guard(tx, source, "EQUALS", value)
        return ConstantVariable(value, source)
    _guard(tx, source, "TYPE", int)
    node = tx.graph.placeholder(source.name, sym)
    oid = tx.new_id()
    tx.state = tx.state.replace(inputs=tx.state.inputs.append((source, oid)))
    tx.input_nodes[oid] = node
    tx.entry_fakes.append((source, sym, None))
    return SymNodeVariable(sym, node)


def _symbolic_float(tx: Any, value: float, source: Source) -> VariableTracker:
    """A float the shape policy makes symbolic (it changed between calls), as torch.compile passes one: a float64
    0-dim tensor graph input (``CallSource(source, compat.float_tensor)``) read back by ``.item()`` as a SymFloat, whose guards come
    from the ShapeEnv (``L['lr'] > 0.5`` where a branch read it) instead of an EQUALS guard on its value. A
    backend (AOTAutograd's tensorify pass) turns its uses into tensor ops, or asks for it static again."""
    if tx.fake_mode.shape_env is None:
        raise RetraceSymbolic(f"{source.name} is a symbolic float")
    tensor, fake, sym = compat.symbolic_float(tx.fake_mode, value, source.name)
    _guard(tx, source, "TYPE", float)
    node = tx.graph.placeholder(source.name, fake)
    oid = tx.new_id()
    tx.state = tx.state.replace(inputs=tx.state.inputs.append((CallSource(source, compat.float_tensor), oid)))
    tx.input_nodes[oid] = node
    tx.input_values[oid] = tensor
    tx.entry_fakes.append((source, sym, None))
    return SymNodeVariable(sym, tx.graph.call_method("item", (node,), {}, sym))


def _fake_input(tx: Any, value: torch.Tensor, source: Source, stand_in: torch.Tensor | None = None) -> Any:
    """The fake of graph input ``value``, after installing its TENSOR guard.

    Static shapes unless the trace's shape policy (``tx.shapes``, see
    :mod:`stillframe.runtime.shapes`) makes some of its dimensions dynamic: then
    they are symbolic sizes of the trace's ShapeEnv, and the TENSOR guard
    leaves them (and the strides that depend on them) to the ShapeEnv's guards.
    A trace without a ShapeEnv that meets such a tensor is traced again with one.
    ``stand_in``: the tensor fakeified in ``value``'s place (:func:`_fakeified`); the guard reads ``value``.
    """
    dynamic = tx.shapes.dims(source, value) if tx.shapes is not None else ()
    if tx.fake_mode.shape_env is None:
        if any(dynamic):
            raise RetraceSymbolic(f"{source.name} has dynamic dimensions {[i for i, d in enumerate(dynamic) if d]}")
        _guard(tx, source, "TENSOR", tensor_signature(value))
        return compat.fake_static(tx.fake_mode, value if stand_in is None else stand_in)
    fakeified = value if stand_in is None else stand_in
    base_dynamic = None
    if fakeified._base is not None and tx.shapes is not None:  # a view's base: the policy decides for it too
        base_dynamic = tx.shapes.dims(AttrSource(source, "_base"), fakeified._base)
    fake = compat.fake_symbolic(tx.fake_mode, fakeified, dynamic or (False,) * value.dim(), source.name,
                                tx.shapes.ranges(value) if tx.shapes is not None else None, base_dynamic)
    strided = value.layout == torch.strided
    symbolic_sizes = tuple(compat.is_symbolic(n) for n in fake.shape)
    symbolic_strides = tuple(compat.is_symbolic(n) for n in fake.stride()) if strided else ()
    _guard(tx, source, "TENSOR", tensor_signature(value, symbolic_sizes, symbolic_strides))
    # each new symbol is a graph input of its own, as torch.compile passes it: a size's, or a stride's (a view
    # fakeified apart from its base has a stride symbol of its own, which AOTAutograd needs to remake the view
    # from a base it shares with another input: fuzz 39:66)
    for method, values in (("size", fake.shape), ("stride", fake.stride() if strided else ())):
        for i, value in enumerate(values):
            symbol = compat.symbol_of(value)
            known = tx.symbol_nodes.get(symbol)
            if symbol is not None and (known is None or getattr(known, "_erased", False)):
                size_source = SizeSource(source, i, method)
                node = tx.graph.placeholder(size_source.name, value)
                oid = tx.new_id()
                tx.state = tx.state.replace(inputs=tx.state.inputs.append((size_source, oid)))
                tx.input_nodes[oid] = node
                tx.symbol_nodes[symbol] = node
    return fake


def load_local(tx, name, keep_scalars=False):
    """The value of local ``name``, wrapping a lazily bound argument on first read.

    With ``keep_scalars`` a Python scalar stays lazy (unguarded) until an
    instruction uses its value (see ``Tracer.step``): a loop counter that is
    only printed or stored does not specialize the trace.
    """
    frame = tx.frame
    value = frame.locals.get(name)
    if of_type(value, LazyArgument):
        if keep_scalars and is_lazy_scalar(value.value):
            return value
        value = wrap(tx, value.value, value.source)
        frame = tx.frame
        tx.set_frame(frame.with_locals(frame.locals.set(name, value)))
    return value
