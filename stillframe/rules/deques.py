"""``collections.deque`` made in traced code: construction and methods (issue 16: constructing one broke the graph).

A traced deque is a :class:`DequeVariable`: its items live in the heap as a list's
do (``ListEntry``, any VTs), its ``maxlen`` in the VT. Each method runs on a real
``deque`` of the item VTs, so the order of items, ``maxlen`` trimming, ``rotate``
and Python's errors (``pop from an empty deque``) are the C implementation's own;
methods that compare items (``count``, ``index``, ``remove``, ``in``) compare their
constant values. A deque that leaves the trace is rebuilt as a real deque.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
from typing import TYPE_CHECKING, Any

from ..variables.base import ConstantVariable, DequeVariable, ListEntry, VariableTracker
from . import known

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer

#: Methods that rearrange the items without comparing them: run on a deque of the item VTs.
_STRUCTURAL = frozenset({"append", "appendleft", "pop", "popleft", "extend", "extendleft", "rotate", "clear",
                         "reverse", "insert", "copy", "__copy__"})
#: Methods that compare items by value: run on a deque of their constant values.
_COMPARING = frozenset({"count", "index", "remove"})


def new_deque(tx: Tracer, items: tuple, maxlen: int | None) -> DequeVariable:
    oid = tx.new_id()
    kept = tuple(collections.deque(items, maxlen))  # a maxlen keeps the last items, as deque(iterable, maxlen)
    tx.heap_set(oid, ListEntry(kept))
    return DequeVariable(oid, maxlen)


def make_deque(tx: Tracer, args: list, kwargs: dict) -> DequeVariable:
    """``collections.deque(iterable=(), maxlen=None)``, with Python's errors for bad arguments."""
    names = ("iterable", "maxlen")
    if len(args) > 2 or set(kwargs) - set(names) or any(n in kwargs for n in names[:len(args)]):
        tx.user_error(TypeError("deque() takes at most 2 arguments (iterable, maxlen)"))
    bound = dict(zip(names, args), **kwargs)
    maxlen = known.const_value(tx, bound["maxlen"]) if "maxlen" in bound else None
    try:
        collections.deque((), maxlen)  # a negative or non-integer maxlen: Python's ValueError / TypeError
    except (TypeError, ValueError) as e:
        tx.user_error(e)
    items = tuple(known.sequence_items(tx, bound["iterable"])) if "iterable" in bound else ()
    return new_deque(tx, items, maxlen)


def deque_method(tx: Tracer, obj: DequeVariable, name: str, args: list, kwargs: dict) -> VariableTracker:
    """``d.name(*args)`` on a traced deque."""
    items = tx.list_items(obj)
    if kwargs:
        tx.user_error(TypeError(f"deque.{name}() takes no keyword arguments"))
    if name in _STRUCTURAL:
        real = collections.deque(items, obj.maxlen)
        real_args = [tuple(known.sequence_items(tx, a)) if name in ("extend", "extendleft") else
                     a if name in ("append", "appendleft") or (name == "insert" and i == 1) else
                     known.const_value(tx, a) for i, a in enumerate(args)]
        try:
            result = getattr(real, name)(*real_args)
        except (IndexError, TypeError, ValueError) as e:
            tx.user_error(e)
        if name in ("copy", "__copy__"):
            return new_deque(tx, tuple(result), obj.maxlen)
        tx.set_list_items(obj, tuple(real))
        return result if isinstance(result, VariableTracker) else ConstantVariable(result)
    if name in _COMPARING:
        real = collections.deque((known.const_value(tx, v) for v in items), obj.maxlen)
        try:
            result = getattr(real, name)(*(known.const_value(tx, a) for a in args))
        except (IndexError, TypeError, ValueError) as e:
            tx.user_error(e)
        if name == "remove":
            index = next(i for i, v in enumerate(known.const_value(tx, x) for x in items)
                         if v == known.const_value(tx, args[0]))
            tx.set_list_items(obj, items[:index] + items[index + 1:])
        return ConstantVariable(result)
    tx.unsupported("unsupported_call", f"deque.{name}() in traced code")


def deque_value(tx: Tracer, var: DequeVariable) -> Any:
    return collections.deque((known.const_value(tx, v) for v in tx.list_items(var)), var.maxlen)
