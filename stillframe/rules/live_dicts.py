"""Live dicts looked up by a live tensor: ``self.state[p]`` of a ``torch.optim.Optimizer`` subclass.

An optimizer keeps its per-parameter state in ``self.state``, a ``defaultdict(dict)`` keyed by the parameters.
The trace cannot model such a dict whole (its keys are tensors, which a plan names by no constant), so it stays
an opaque live object (``variables/builder.py``); but one lookup by a tensor the trace knows by source is exact:

* ``d[p]`` of a key ``d`` holds: the value at :class:`~stillframe.guards.source.KeyedItemSource`
  ``(d, p)`` (``L['self'].state[L['self'].param_groups[0]['params'][0]]``), guarded by a ``HAS_ITEM`` guard
  that the key is there, and wrapped like any other input (a dict of constant keys is modelled, its tensors are
  graph inputs);
* ``d[p]`` of a key ``d`` lacks: a ``defaultdict``'s ``__missing__`` is traced (``default_factory()`` called in
  the trace, its result inserted), the ``HAS_ITEM`` guard says the key is absent, and the insertion is a side
  effect replayed on the live dict after the graph (``runtime/rebuild.py``, kind ``"live_item"``), in the order
  eager makes it; a plain dict's ``KeyError`` (or a ``defaultdict`` without factory) runs for real;
* ``d[p] = v``: recorded the same way; ``p in d``: the ``HAS_ITEM`` guard (or the trace's own insertion);
* a later lookup of the same key in the same trace sees what the trace wrote (the value's VT is kept in the
  trace state's memo, so it rolls back with a checkpoint).

Anything that reads the dict as a whole (``len(d)``, iteration, ``d.items()``) runs for real as before; after
the trace has written into the dict, ``len(d)``, which is otherwise folded from the live dict with a ``LEN``
guard, breaks the graph too (the pending writes are replayed before the real step). Only exact ``dict`` and
``defaultdict`` instances are handled (a subclass may override ``__getitem__`` or ``__missing__``), and only a
key whose source names the same object on every call (not one a plan makes afresh, such as ``torch.from_numpy``
of an argument or a lifted leaf).

A live mapping's views are traced too, where they are empty: ``od.keys()`` / ``.values()`` / ``.items()`` of a
live ``dict``, ``OrderedDict`` or ``defaultdict`` the trace holds opaque (``torch.optim.Optimizer``'s hook
registries, ``OrderedDict`` s that ``Optimizer.step``'s wrapper iterates on every call) is the view made afresh
from the live mapping on each call (:func:`view_call`: a view is a read, with no effect); iterating one whose
mapping is empty is an empty loop, guarded by a ``LEN`` guard that it is empty (:func:`empty_view`). The trace
cannot write into such a mapping but by :func:`setitem` (any other write breaks the graph), and a view of a
mapping it wrote into is iterated for real, so the mapping is as empty where it is iterated as where the guard
saw it; an iterator over it kept across a graph break is rebuilt as CPython's own over the live
view, standing where eager's stands (it raises as eager's does if the mapping grows after the break). A view of
a mapping that is not empty is iterated for real, as before.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
import gc
from dataclasses import dataclass
from typing import Any

import torch

from ..guards.guard import Guard
from ..guards.source import CallSource, KeyedItemSource, LiftedSource, Source
from ..variables.base import ConstantVariable, LazyArgument, PythonObjectVariable, TensorVariable, VariableTracker
from ..variables.builder import of_type, wrap, wrapped
from ..variables.objects import dict_base
from . import attrs, calls, objects

#: The live mappings whose lookups by a tensor key are traced: their ``__getitem__``, ``__setitem__`` and
#: ``__contains__`` are ``dict``'s (``defaultdict`` adds ``__missing__``).
LIVE_DICT_TYPES = (dict, collections.defaultdict)

#: The live mappings whose ``keys`` / ``values`` / ``items`` are C methods that only make a view (dict's, or
#: ``OrderedDict``'s): calling one is traced (:func:`view_call`).
VIEW_MAPPING_TYPES = (dict, collections.defaultdict, collections.OrderedDict)
VIEW_METHODS = ("keys", "values", "items")
#: The types of those views (``dict_values``, ``odict_values`` ...).
VIEW_TYPES = tuple({type(getattr(cls(), name)()) for cls in VIEW_MAPPING_TYPES for name in VIEW_METHODS})


def _stable(source: Source) -> bool:
    """Whether ``source`` names the same object on every evaluation (not a tensor a plan makes afresh)."""
    while source is not None:
        if isinstance(source, (LiftedSource, CallSource)):
            return False
        source = getattr(source, "base", None)
    return True


def key_of(tx: Any, container: VariableTracker, key: VariableTracker) -> TensorVariable | None:
    """The tensor key of a lookup these rules take (``None``: not one, the caller's own rule applies)."""
    if not isinstance(container, PythonObjectVariable) or container.source is None or \
            type(container.value) not in LIVE_DICT_TYPES:
        return None
    if isinstance(key, LazyArgument) and of_type(key.value, torch.Tensor):
        key = wrap(tx, key.value, key.source)
    if not isinstance(key, TensorVariable):
        return None
    source = tx.tensor(key).source
    if source is None or not _stable(source):
        return None
    return key


def _memo_key(container: PythonObjectVariable, key: TensorVariable) -> tuple:
    return ("live_item", id(container.value), key.tid)


def _written_key(container: Any) -> tuple:
    """The memo key saying the trace wrote into the live dict ``container`` (its VT, or the dict itself)."""
    return ("live_dict_written", id(container.value if isinstance(container, PythonObjectVariable) else container))


def _known(tx: Any, container: PythonObjectVariable, key: TensorVariable) -> VariableTracker | None:
    return tx.state.memo.get(_memo_key(container, key))


def _remember(tx: Any, container: PythonObjectVariable, key: TensorVariable, value: VariableTracker) -> None:
    tx.state = tx.state.replace(memo=tx.state.memo.set(_memo_key(container, key), value))


def _present(tx: Any, container: PythonObjectVariable, key: TensorVariable) -> bool:
    """Whether the live dict holds ``key`` (its entry snapshot), guarded."""
    key_source = tx.tensor(key).source
    real = tx.input_values.get(key.tid)
    if real is None:  # (every tensor with a source is a graph input)
        tx.unsupported("unsupported_subscript", "a tensor key whose live object the trace does not hold")
    present = real in container.value
    tx.add_guard(Guard(container.source, "HAS_ITEM", (key_source, present)))
    return present


def getitem(tx: Any, container: PythonObjectVariable, key: TensorVariable) -> VariableTracker:
    """``d[key]`` (see the module docstring)."""
    known = _known(tx, container, key)
    if known is not None:
        return known
    if _present(tx, container, key):
        real = tx.input_values[key.tid]
        value = wrap(tx, dict.__getitem__(container.value, real),
                     KeyedItemSource(container.source, tx.tensor(key).source))
        _remember(tx, container, key, value)
        return value
    if type(container.value) is not collections.defaultdict:
        tx.unsupported("unsupported_subscript", "a key a live dict lacks (its KeyError runs for real)")
    factory = attrs.getattr_var(tx, container, "default_factory")
    if isinstance(factory, ConstantVariable) and factory.value is None:
        tx.unsupported("unsupported_subscript", "a key a defaultdict without default_factory lacks (its KeyError "
                       "runs for real)")
    value = calls.call_sync(tx, factory, [], {})
    setitem(tx, container, key, value)
    return value


def setitem(tx: Any, container: PythonObjectVariable, key: TensorVariable, value: VariableTracker) -> None:
    """``d[key] = value``: replayed on the live dict after the graph, in the order of the trace's writes."""
    objects.record_side_effect(tx, ("live_item", id(container.value), key.tid), (container, key, value))
    _remember(tx, container, key, value)
    tx.state = tx.state.replace(memo=tx.state.memo.set(_written_key(container), True))
    watch = tx.state.memo.get(("live_view_watch", id(container.value)))
    if watch is not None:  # an iterator over an empty view of it sees the change (empty_view_iterator)
        tx.heap_set(watch, ("written", key.tid))


def contains(tx: Any, container: PythonObjectVariable, key: TensorVariable) -> bool:
    """``key in d``."""
    if _known(tx, container, key) is not None:
        return True
    return _present(tx, container, key)


def written(tx: Any, var: VariableTracker) -> bool:
    """Whether the trace has written into the live dict ``var`` (so its live contents are not its contents)."""
    return isinstance(var, PythonObjectVariable) and tx.state.memo.get(_written_key(var)) is not None


def view_call(tx: Any, method: Any, source: Source | None, args: list, kwargs: dict) -> VariableTracker | None:
    """``d.values()`` (``keys``, ``items``) of a live mapping of :data:`VIEW_MAPPING_TYPES`: the view, made afresh
    from the live mapping on each call (a ``CallSource`` of its own: :class:`MakeView`); ``None`` for any other
    call. ``method`` is the bound
    C method, read from the live mapping through ``source`` (its type, name and owner's type guarded)."""
    owner = getattr(method, "__self__", None)
    name = getattr(method, "__name__", None)
    if source is None or args or kwargs or type(owner) not in VIEW_MAPPING_TYPES or name not in VIEW_METHODS or \
            getattr(type(owner), name) is not getattr(dict_base(type(owner)), name):
        return None
    view = method()
    tx.keepalive.append(view)  # (its id is its identity in the trace: `a is b` of two views)
    return PythonObjectVariable(view, CallSource(source, MakeView(name, tx.new_id())))


@dataclass(frozen=True, slots=True)
class MakeView:
    """The ``fn`` of a view's :class:`~stillframe.guards.source.CallSource`: calls the bound ``keys`` / ``values``
    / ``items`` it is given. ``serial`` tells apart the views of one mapping made by different calls: each call
    makes a new object (``d.values() is d.values()`` is False), so each has a source of its own, and is rebuilt
    after a graph break as a view of its own (one view named twice is rebuilt once)."""

    name: str
    serial: int

    @property
    def __name__(self) -> str:
        return f"{self.name}#{self.serial}"

    def __call__(self, method: Any) -> Any:
        return method()


def empty_view(tx: Any, var: VariableTracker) -> bool:
    """Whether ``var`` is a live view (:data:`VIEW_TYPES`) of an empty mapping, read through a source: guarded so
    (``LEN`` 0 on the view, the length of its mapping). A view of a mapping that is not empty, or of one the trace
    has written into (:func:`setitem`, replayed only after the graph): ``False``, unguarded (it is iterated for
    real, after the writes are replayed)."""
    if not isinstance(var, PythonObjectVariable) or var.source is None or type(var.value) not in VIEW_TYPES or \
            len(var.value) != 0:
        return False
    mapping = _mapping_of(var)
    if tx.state.memo.get(_written_key(mapping)) is not None:
        return False  # the trace wrote into it (self.state[p] of a defaultdict): its live contents are not its own
    if wrapped(tx, mapping) is not None:
        # the trace models the mapping itself (a dict it holds as a DictVariable): writes into the model are
        # replayed only after the graph, so the live view may lag behind it (`keys = d.keys()`, a break, then
        # `d[k] = v; list(keys)` was [] where eager has [k])
        return False
    tx.add_guard(Guard(var.source, "LEN", 0))
    return True


def empty_view_iterator(tx: Any, var: VariableTracker) -> VariableTracker | None:
    """``iter(view)`` of a live view that :func:`empty_view` takes: a watched iterator over no items, rebuilt at a
    graph break as CPython's own over the live view (``runtime/rebuild.py``). What it watches is a heap entry of the
    mapping's own that :func:`setitem` replaces: a ``next`` after the trace wrote into the mapping breaks the graph
    (CPython's dict iterator would raise; an OrderedDict's would not), and so does rebuilding it. ``None``: not such
    a view."""
    if not empty_view(tx, var):
        return None
    key = ("live_view_watch", id(_mapping_of(var)))
    oid = tx.state.memo.get(key)
    if oid is None:
        oid = tx.new_id()
        tx.heap_set(oid, ("unwritten",))
        tx.state = tx.state.replace(memo=tx.state.memo.set(key, oid))
    return tx.new_watched_iterator((), var, oid)


def _mapping_of(view: PythonObjectVariable) -> Any:
    (mapping,) = gc.get_referents(view.value)  # a dict view's one referent is its mapping (dictview_traverse)
    return mapping
