"""The builtins that make or consume iterables: ``range``, ``zip``, ``enumerate``, ``reversed``, ``map``,
``filter``, ``sorted``, ``all``, ``any``; registered in the builtin table (:data:`builtin_calls.BUILTIN_RULES`).

The iterators they make run no user code ahead of eager. Over sequences the trace already holds and no loop
can change (tuples, ranges, tensors, modules), ``zip``, ``enumerate`` and ``reversed`` pull nothing anybody
could observe, so their items are taken at once: a heap iterator (:meth:`Tracer.new_iterator`) recording which
builtin made it, so it leaves the function as that type (when the trace is retried with real generators, they
are real too, since a heap iterator crossing a graph break is no longer of the builtin's type). ``enumerate``
over a list is a container iterator (:meth:`Tracer.new_container_iterator`), which reads the list at each
``next``. Everything that calls a function per item or pulls from another iterator (``map``, ``filter``, ``zip``
over a generator, the ``itertools`` iterators, ``functools.reduce``), and ``zip``, ``enumerate`` or ``reversed``
over a list, dict or set the loop may change, is traced as its Python equivalent in :mod:`.polyfills`, one item
per ``next``, so every call and every pull happens when eager's would; the generator reports the builtin's
type. ``all``/``any`` over a generator step it only as far as eager does.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
import dataclasses
import functools
import itertools
from typing import TYPE_CHECKING, Any, Callable

from ..variables.base import (ConstantVariable, DictVariable, GeneratorVariable, LazyArgument, ListVariable,
                              NNModuleVariable, RangeVariable, SetVariable, TensorVariable, TupleVariable,
                              UserFunctionVariable, VariableTracker)
from ..variables.objects import ObjectVariable
from . import arity, calls, polyfills
from .objects import sort_keys
from .builtin_calls import BUILTIN_RULES, call_dunder, fold, iterator_type, watched_iterator
from .generators import step as step_generator
from .known import const_value, sequence_items
from .truthiness import truthiness

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


def _range(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """``range(...)`` of constants (a symbolic size specialized); its errors (``range(2.5)``, a step of 0) are
    Python's own."""
    values = [const_value(tx, a) for a in args]
    try:
        return RangeVariable(range(*values, **{k: const_value(tx, v) for k, v in kwargs.items()}))
    except (TypeError, ValueError) as e:
        tx.user_error(e)


#: Iterables whose items the trace holds: iterating them runs no code anybody could observe.
_HELD = (ListVariable, TupleVariable, DictVariable, SetVariable, RangeVariable, ConstantVariable, TensorVariable,
         NNModuleVariable, LazyArgument)


def lazily(made_by: type, polyfill: Callable, constructor: Any = None) -> Callable:
    """The rule for a builtin iterator ``made_by`` (made by calling ``constructor``, by default ``made_by``
    itself): a generator running ``polyfill`` (traced, one item per ``next``) that reports ``made_by`` as its
    type, after the call's arguments are checked as CPython checks them (:func:`arity.check_construction`). Where
    generators must be real (the trace is retried after a graph break found one suspended), the builtin runs for
    real instead."""
    constructor = made_by if constructor is None else constructor

    def rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
        if not tx.lazy_generators:
            tx.unsupported("suspended_generator", f"{made_by.__name__}() runs for real: a graph break happened "
                           "while an iterator it made was suspended")
        arity.check_construction(tx, constructor, args, kwargs)  # count(1, 2, 3), islice(it, -1) raise at once
        made = calls.call_sync(tx, UserFunctionVariable(polyfill), args, kwargs)
        return dataclasses.replace(made, made_by=made_by) if isinstance(made, GeneratorVariable) else made

    return rule


def as_python(polyfill: Callable) -> Callable:
    """The rule for a C function that consumes iterables: ``polyfill``, its Python equivalent, traced."""
    return lambda tx, args, kwargs: calls.call_sync(tx, UserFunctionVariable(polyfill), args, kwargs)


_lazy_zip = lazily(zip, polyfills.zip_)
_lazy_enumerate = lazily(enumerate, polyfills.enumerate_)


#: Held iterables that code inside a loop over them can change: iterators over them read them at each ``next``.
_MUTABLE = (ListVariable, DictVariable, SetVariable)

#: A range longer than this is zipped or enumerated lazily (by the polyfill, one item per ``next``): a loop may
#: leave ``enumerate(range(10**9))`` after a few items, and its items are never all made.
_LONG_RANGE = 10_000


def _long_range(var: VariableTracker) -> bool:
    return isinstance(var, RangeVariable) and len(var.value) > _LONG_RANGE


def _zip(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if kwargs or not tx.lazy_generators or not all(isinstance(a, _HELD) for a in args) or \
            any(isinstance(a, _MUTABLE) or _long_range(a) for a in args):  # zip pulls from each one at each next
        return _lazy_zip(tx, args, kwargs)
    arity.check_construction(tx, zip, args, kwargs)
    seqs = [sequence_items(tx, a) for a in args]
    return tx.new_iterator(tuple(TupleVariable(t) for t in zip(*seqs)), "zip")


def _enumerate(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if not args or not tx.lazy_generators or not isinstance(args[0], _HELD) or _long_range(args[0]) or \
            (len(args) > 1 and not isinstance(args[1], ConstantVariable)):
        return _lazy_enumerate(tx, args, kwargs)
    arity.check_construction(tx, enumerate, args, kwargs)
    start = const_value(tx, args[1]) if len(args) > 1 else const_value(tx, kwargs.get("start", ConstantVariable(0)))
    if isinstance(args[0], ListVariable) and type(start) is int:  # enumerate(iter(lst)): sees the list as it is
        return tx.new_container_iterator(args[0], "list", "enumerate", start)
    if isinstance(args[0], _MUTABLE):  # enumerate(iter(d)): raises at the next after d changed size
        return _lazy_enumerate(tx, args, kwargs)
    return tx.new_iterator(tuple(TupleVariable((ConstantVariable(i + start), v))
                                  for i, v in enumerate(sequence_items(tx, args[0]))), "enumerate")


#: The type ``reversed(lst)`` returns for a list.
LIST_REVERSEITERATOR = type(reversed([]))
_lazy_reversed_list = lazily(LIST_REVERSEITERATOR, polyfills.reversed_list)


def _reversed(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """``reversed(seq)`` as CPython's ``reversed_new``: the class's own ``__reversed__`` (whatever it returns; one
    set to None refuses), else the sequence protocol (an object of a class without ``__getitem__`` is not
    reversible, whatever its ``__iter__``), else the items in reverse."""
    if isinstance(args[0], ListVariable):  # listreviter reads the list at each next
        return _lazy_reversed_list(tx, args, kwargs)
    watched = watched_iterator(tx, args[0], "reversed")  # a dict's, an OrderedDict's, a deque's
    if watched is not None:
        return watched
    made = call_dunder(tx, args[0], "__reversed__", [])
    if made is not None:
        return made
    if isinstance(args[0], ObjectVariable) and getattr(args[0].cls, "__getitem__", None) is None:
        tx.user_error(TypeError(f"'{args[0].cls.__name__}' object is not reversible"))
    return tx.new_iterator(tuple(reversed(sequence_items(tx, args[0]))), cls=iterator_type(tx, reversed, args[0]))


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


def _sorted(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    items = tuple(sequence_items(tx, args[0]))
    keys = sort_keys(tx, items, kwargs.get("key"))
    reverse = bool(const_value(tx, kwargs.get("reverse", ConstantVariable(False))))
    try:  # (the keys compared as sorted compares them: its TypeError is Python's, for mixed types)
        order = sorted(range(len(items)), key=lambda i: keys[i], reverse=reverse)
    except TypeError as e:
        tx.user_error(e)
    return tx.new_list(tuple(items[i] for i in order))


def _minmax(fn: Any) -> Callable:
    def rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
        if len(args) == 1:  # over an iterable: its items, or ``default`` (else eager's ValueError) when empty
            args, kwargs = list(sequence_items(tx, args[0])), dict(kwargs)
            default = kwargs.pop("default", None)
            if not args:
                return default if default is not None else fold(tx, fn, [TupleVariable(())], kwargs)
        if "key" in kwargs:
            keys = sort_keys(tx, tuple(args), kwargs["key"])
            try:
                best = fn(range(len(args)), key=lambda i: keys[i])
            except TypeError as e:  # keys Python cannot compare: its own error
                tx.user_error(e)
            return args[best]
        if len(args) == 1:  # the one item itself, whatever it is
            return args[0]
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
    map: lazily(map, polyfills.map_),
    filter: lazily(filter, polyfills.filter_),
    range: _range,
    zip: _zip,
    enumerate: _enumerate,
    reversed: _reversed,
    itertools.chain: lazily(itertools.chain, polyfills.chain),
    itertools.chain.from_iterable: lazily(itertools.chain, polyfills.chain_from_iterable,
                                          itertools.chain.from_iterable),
    itertools.islice: lazily(itertools.islice, polyfills.islice),
    itertools.count: lazily(itertools.count, polyfills.count),
    itertools.repeat: lazily(itertools.repeat, polyfills.repeat),
    itertools.cycle: lazily(itertools.cycle, polyfills.cycle),
    itertools.accumulate: lazily(itertools.accumulate, polyfills.accumulate),
    itertools.product: lazily(itertools.product, polyfills.product),
    itertools.combinations: lazily(itertools.combinations, polyfills.combinations),
    itertools.permutations: lazily(itertools.permutations, polyfills.permutations),
    itertools.zip_longest: lazily(itertools.zip_longest, polyfills.zip_longest),
    itertools.pairwise: lazily(itertools.pairwise, polyfills.pairwise),
    itertools.starmap: lazily(itertools.starmap, polyfills.starmap),
    itertools.groupby: lazily(itertools.groupby, polyfills.groupby),
    itertools.takewhile: lazily(itertools.takewhile, polyfills.takewhile),
    itertools.dropwhile: lazily(itertools.dropwhile, polyfills.dropwhile),
    itertools.filterfalse: lazily(itertools.filterfalse, polyfills.filterfalse),
    itertools.compress: lazily(itertools.compress, polyfills.compress),
    functools.reduce: as_python(polyfills.reduce),
    collections._count_elements: as_python(polyfills.count_elements),
})
