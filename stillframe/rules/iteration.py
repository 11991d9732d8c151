"""The builtins that make or consume iterables: ``range``, ``zip``, ``enumerate``, ``reversed``, ``map``,
``filter``, ``sorted``, ``all``, ``any``; registered in the builtin table (:data:`builtin_calls.BUILTIN_RULES`).

The iterators they make are heap objects (:meth:`Tracer.new_iterator`) recording which builtin made them, so
they leave the function as that type. ``all``/``any`` over a generator step it only as far as eager does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..variables.base import (ConstantVariable, GeneratorVariable, RangeVariable, TensorVariable, TupleVariable,
                              VariableTracker)
from . import calls
from .builtin_calls import BUILTIN_RULES, fold
from .generators import step as step_generator
from .known import const_value, sequence_items
from .truthiness import truthiness

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


def _range(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return RangeVariable(range(*[const_value(tx, a) for a in args]))


def _zip(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    seqs = [sequence_items(tx, a) for a in args]
    return tx.new_iterator(tuple(TupleVariable(t) for t in zip(*seqs)), "zip")


def _enumerate(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    start = const_value(tx, args[1]) if len(args) > 1 else const_value(tx, kwargs.get("start", ConstantVariable(0)))
    return tx.new_iterator(tuple(TupleVariable((ConstantVariable(i + start), v))
                                  for i, v in enumerate(sequence_items(tx, args[0]))), "enumerate")


def _reversed(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return tx.new_iterator(tuple(reversed(sequence_items(tx, args[0]))))


def _all_any(fn: Any) -> Callable:
    def rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
        if isinstance(args[0], GeneratorVariable):  # short-circuits: the generator runs exactly as far as eager's
            stop = fn is any
            while True:
                yielded, value = step_generator(tx, args[0])
                if not yielded:
                    return ConstantVariable(not stop)
                if truthiness(tx, value) is stop:
                    return ConstantVariable(stop)
        return ConstantVariable(fn(truthiness(tx, v) for v in sequence_items(tx, args[0])))

    return rule


def _sort_keys(tx: Tracer, items: tuple, key: VariableTracker | None) -> list:
    """The Python sort key of each item: the item itself, or ``key(item)`` traced (both must be constants)."""
    if key is None or (isinstance(key, ConstantVariable) and key.value is None):
        return [const_value(tx, v) for v in items]
    return [const_value(tx, calls.call_sync(tx, key, [v], {})) for v in items]


def _sorted(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    items = tuple(sequence_items(tx, args[0]))
    keys = _sort_keys(tx, items, kwargs.get("key"))
    reverse = bool(const_value(tx, kwargs.get("reverse", ConstantVariable(False))))
    order = sorted(range(len(items)), key=lambda i: keys[i], reverse=reverse)
    return tx.new_list(tuple(items[i] for i in order))


def _map(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    fn, seqs = args[0], [sequence_items(tx, a) for a in args[1:]]
    return tx.new_iterator(tuple(calls.call_sync(tx, fn, list(items), {}) for items in zip(*seqs)), "map")


def _filter(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    fn, items = args[0], sequence_items(tx, args[1])
    kept = []
    for item in items:
        if isinstance(fn, ConstantVariable) and fn.value is None:
            keep = truthiness(tx, item)
        else:
            keep = truthiness(tx, calls.call_sync(tx, fn, [item], {}))
        if keep:
            kept.append(item)
    return tx.new_iterator(tuple(kept), "filter")


def _minmax(fn: Any) -> Callable:
    def rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
        if len(args) == 1:
            args = list(sequence_items(tx, args[0]))
        if "key" in kwargs:
            keys = _sort_keys(tx, tuple(args), kwargs["key"])
            if not args:
                return kwargs["default"] if "default" in kwargs else fold(tx, fn, [TupleVariable(())], {})
            best = fn(range(len(args)), key=lambda i: keys[i])
            return args[best]
        if any(isinstance(a, TensorVariable) for a in args):
            tx.unsupported("data_dependent", f"{fn.__name__}() over tensors compares their values")
        return fold(tx, fn, args, kwargs)

    return rule


BUILTIN_RULES.update({
    min: _minmax(min),
    max: _minmax(max),
    all: _all_any(all),
    any: _all_any(any),
    sorted: _sorted,
    map: _map,
    filter: _filter,
    range: _range,
    zip: _zip,
    enumerate: _enumerate,
    reversed: _reversed,
})
