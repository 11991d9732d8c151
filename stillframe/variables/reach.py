"""Which live objects the trace still holds a reference to: a walk of the trace state from its roots.

A live object whose collection runs code (a generator's ``finally`` / ``__exit__``, a ``__del__``) is collected by
eager the moment its last reference goes: a ``del``, a rebinding, a loop left by ``break``, a temporary popped.
The trace holds such objects (read from a resumed frame's live values) as ``PythonObjectVariable`` values; where
an instruction leaves none of its references in the state, eager would collect it right there, so that
instruction runs for real (``Tracer.watch_finalizers``).

The walk is conservative in one direction only: it follows every field of every VariableTracker and heap entry,
and a field that holds heap ids (``oid``, ``over`` ...) leads to that entry. A reference it cannot see makes an
object look dropped, which costs a graph break, never a finalizer run out of order.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import dataclasses
import types
from typing import Any

import immutables

import torch

from ..tensors.meta import TensorEntry
from .base import (NULL, ConstantVariable, DictEntry, DictVariable, LazyArgument, ListEntry, ListVariable,
                   PythonObjectVariable, RangeVariable, SetEntry, SetVariable, SliceVariable, SymNodeVariable, TensorKey,
                   TensorVariable, TupleVariable, VariableTracker)

#: Fields of VariableTrackers and heap entries that hold heap ids (ints).
_HEAP_ID_FIELDS = frozenset({"oid", "over", "storage", "generator", "ref", "attrs", "closure", "cells"})
#: Fields that hold real objects or metadata, never a VariableTracker: not walked (a frame's globals, a live list).
_OPAQUE_FIELDS = frozenset({"value", "values", "globals", "live", "code", "source", "node", "fake", "meta", "template",
                            "fn_source", "items_source", "positions", "traceback"})
_FIELDS: dict[type, tuple] = {}


def _fields(obj: Any) -> tuple:
    cls = type(obj)
    names = _FIELDS.get(cls)
    if names is None:
        if dataclasses.is_dataclass(cls):
            names = tuple(f.name for f in dataclasses.fields(cls))
        else:  # a NamedTuple (Frame)
            names = tuple(getattr(cls, "_fields", ()))
        names = tuple(name for name in names if name not in _OPAQUE_FIELDS)
        _FIELDS[cls] = names
    return names


def held(state: Any, result: Any, targets: frozenset) -> frozenset:
    """The ids among ``targets`` (``id()`` of live objects) that ``state`` (a ``TraceState``) still references:
    from its frames (stacks, locals, cells, suspended generators), the exception being handled, the value the
    root frame returned (``result``), the recorded side effects and every heap entry of an outside object (a
    list, dict or attribute written there holds what was written)."""
    roots = [*state.frames, state.handling, result, state.side_effects]
    roots.extend(entry for entry in state.heap.values() if type(entry) is not TensorEntry and
                 (getattr(entry, "source", None) is not None or getattr(entry, "live", None) is not None))
    return _walk(roots, state.heap, targets)


def reaches(value: Any, heap: Any, targets: frozenset) -> bool:
    """Whether the VariableTracker ``value`` references one of ``targets`` (``id()`` of live objects)."""
    return bool(targets) and bool(_walk([value], heap, targets))


def _walk(roots: list, heap: Any, targets: frozenset) -> frozenset:
    found: set = set()
    seen: set = set()  # id() of the records walked
    seen_ids: set = set()  # heap ids walked
    stack = [(root, False) for root in roots]
    while stack and len(found) < len(targets):
        x, heap_ids = stack.pop()
        if x is None or isinstance(x, (str, bool, float, type)):
            continue
        if type(x) is int:
            if heap_ids and x not in seen_ids:
                seen_ids.add(x)
                entry = heap.get(x)
                if entry is not None:
                    stack.append((entry, False))
            continue
        if isinstance(x, (tuple, list, frozenset)) and not hasattr(type(x), "_fields"):
            stack.extend((item, heap_ids) for item in x)
            continue
        if isinstance(x, (dict, immutables.Map)):
            stack.extend((item, heap_ids) for item in x.values())
            continue
        if isinstance(x, types.CellType):
            try:
                contents = x.cell_contents
            except ValueError:
                continue
            if id(contents) in targets:
                found.add(id(contents))
            continue
        if isinstance(x, (LazyArgument, PythonObjectVariable)) and id(x.value) in targets:
            found.add(id(x.value))
            continue
        if isinstance(x, VariableTracker) or dataclasses.is_dataclass(x) or hasattr(type(x), "_fields"):
            if id(x) in seen:
                continue
            seen.add(id(x))
            for name in _fields(x):
                stack.append((getattr(x, name, None), name in _HEAP_ID_FIELDS))
    return frozenset(found)


#: Values whose collection no one can see: they run no code when collected, take no weak reference, and hold
#: nothing that does (a plain tensor's weak references are torch's own, guards.has_finalizer).
_UNSEEN_TYPES = frozenset({int, float, bool, complex, str, bytes, type(None), type(Ellipsis), type(NotImplemented),
                           range, slice, torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Tensor,
                           torch.nn.Parameter})


def collection_unseen(value: Any, heap: Any) -> bool:
    """Whether dropping the VariableTracker ``value`` before eager would (a dead local left out of a frame rebuilt
    at a graph break) can be seen by no one: it is made only of tensors, symbolic numbers and immutable constants,
    directly or through tuples, slices and the lists, dicts and sets of the trace that hold only those.

    Anything else may be the last reference to an object whose collection is seen, now or after the next real
    step (which may take a weak reference to it, or give it to an object with ``__del__``): eager's frame holds
    every local until it returns, is rebound or deleted (CPython's fast locals), so such a local is kept. Errs
    towards *seen*: a value it does not know is kept."""
    stack, seen = [value], set()
    while stack:
        x = stack.pop()
        kind = type(x)
        if kind in (TensorVariable, SymNodeVariable, RangeVariable) or x is NULL or kind is TensorKey:
            continue
        if kind is ConstantVariable or kind is LazyArgument:
            x = x.value
            kind = type(x)
        if kind in _UNSEEN_TYPES:
            continue
        if kind in (tuple, frozenset):
            stack.extend(x)
        elif kind is TupleVariable:
            stack.extend(x.items)
        elif kind is SliceVariable:
            stack.extend((x.start, x.stop, x.step))
        elif kind in (ListVariable, DictVariable, SetVariable):
            if x.oid in seen:
                continue
            seen.add(x.oid)
            entry = heap.get(x.oid)
            if type(entry) is ListEntry and entry.items is not None and entry.live is None:
                stack.extend(entry.items)
            elif type(entry) is DictEntry and entry.live is None:
                stack.extend(item for pair in entry.items for item in pair)
            elif type(entry) is SetEntry:
                stack.extend(entry.values)
            else:
                return False
        else:
            return False
    return True
