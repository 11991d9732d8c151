"""Regressions found by running CPython's own container tests (``test.test_list``, ``test.test_dict`` ... through
:mod:`stillframe.check.cpython_tests`) compiled: each construct of a failing test reduced to a plain function and
compared with eager (values, and the exception's type and message)."""

from __future__ import annotations

import builtins
import collections
import copy
import pickle
import warnings
import weakref

import pytest
import torch

import stillframe
from stillframe.errors import StillframeWarning
from stillframe.rules import arity


def _outcomes(*calls):
    """What each call returns, or the type and message of what it raises."""
    out = []
    for call in calls:
        try:
            out.append(("ok", call()))
        except Exception as e:
            out.append((type(e).__name__, str(e)))
    return out


def _same(fn, *args):
    """The compiled ``fn`` returns eager's value, traced (a fallback to eager after an internal error fails)."""
    expected = fn(*args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = stillframe.compile(fn, backend="eager")(*args)
    assert got == expected
    assert not [w for w in caught if issubclass(w.category, StillframeWarning)], [str(w.message) for w in caught]


# ------------------------------------------------------------------ arity and keywords of builtin methods


def test_builtin_arity_and_keywords_raise_eagers_type_error():
    # test_list test_clear/test_copy/test_reverse/test_keyword_args/test_pop, test_dict test_get/test_clear/
    # test_invalid_keyword_arguments: the rules read only the arguments they use; CPython checks the count first
    def fn():
        return _outcomes(
            lambda: [].pop(1, 2), lambda: [1].copy(1), lambda: {}.get(), lambda: {}.clear(None),
            lambda: [1].reverse(1), lambda: [1].append(x=1), lambda: {}.pop(), lambda: set().add(1, 2),
            lambda: collections.deque().rotate(1, 2), lambda: [1].index(), lambda: (1,).index(1, x=2),
            lambda: collections.OrderedDict().popitem(1, 2), lambda: {}.update({}, {}), lambda: {}.keys(1),
            lambda: {"a": 1}.get("a", 2, 3), lambda: [1].clear(1), lambda: {}.copy(1), lambda: [2, 1].sort(1),
            lambda: {}.setdefault(), lambda: [1].count(), lambda: {1: 2}.items(), lambda: [].pop())

    _same(fn)


# ------------------------------------------------------------------ list.index / tuple.index bounds


def test_list_and_tuple_index_honour_start_and_stop():
    # test_list test_index "2 != 3": u.index(0, 3) searched from 0
    def fn():
        u = [-2, -1, 0, 0, 1, 2]
        t = tuple(u)
        return _outcomes(
            lambda: u.index(0, 3), lambda: u.index(0, 3, 4), lambda: u.index(2, 0, -10), lambda: u.index(-2, -10),
            lambda: t.index(0, 3), lambda: t.index(0, 4, 100), lambda: u.index(0, None), lambda: t.index(0, 1.5),
            lambda: u.index(0, -3), lambda: u.index(0, 10))

    _same(fn)


@pytest.mark.parametrize("cls, name", sorted(arity.ARITY, key=lambda k: (k[0].__name__, k[1])))
def test_arity_table_matches_cpython(cls, name):
    # the table stands in for the signatures CPython does not publish: one argument too few or too many (and a
    # keyword where none is taken) raises TypeError on the real method; the bounds themselves pass its arity check
    low, high, keywords = arity.ARITY[(cls, name)]
    if cls is builtins:
        call = getattr(builtins, name)
    else:
        call = getattr(cls() if cls is not torch.Size else torch.Size([]), name)
    for count in ([low - 1] if low else []) + ([high + 1] if high != float("inf") else []):
        with pytest.raises(TypeError, match="argument"):
            call(*[[]] * count)
    if not keywords:
        with pytest.raises(TypeError, match="keyword"):
            call(*[[]] * low, unknown=1)


# ------------------------------------------------------------------ dict views


class _Dict(dict):
    pass


def test_view_of_a_dict_subclass_made_in_the_trace_sees_the_instance_after_a_break():
    # test_dict test_views_mapping: d.keys().mapping (a graph break) was the mapping of a copy of the instance's
    # dict part rebuilt apart from it, so d["foo"] = "bar" after it did not show: mappingproxy({})
    def fn():
        out = []
        for cls in (dict, _Dict):
            d = cls()
            m1 = d.keys().mapping
            m2 = d.values().mapping
            m3 = d.items().mapping
            d["foo"] = "bar"
            out.append((repr(m1), repr(m2), repr(m3), m1 == d, list(m3.items())))
        return out

    _same(fn)


# ------------------------------------------------------------------ keywords of builtin calls


def test_builtin_types_refuse_keywords_and_extra_arguments_as_eager():
    # test_list test_keyword_args: list(sequence=[]) made a list, eager raises 'list() takes no keyword arguments'
    def fn():
        return _outcomes(lambda: list(sequence=[]), lambda: tuple(x=1), lambda: set(x=1), lambda: frozenset(x=1),
                         lambda: list([], []), lambda: set([], []), lambda: bool(x=1), lambda: len([], []),
                         lambda: isinstance(1), lambda: list((1, 2)), lambda: dict(a=1))

    _same(fn)


def _keywords(**kw):
    return kw


class _Custom(dict):
    pass


@pytest.mark.parametrize("mapping", [{1: 2}, _Custom({1: 2}), {"a": 1, 2: 3}])
def test_double_star_with_a_key_that_is_not_a_string_raises(mapping):
    # test_dict test_invalid_keyword_arguments: dict(**{1: 2}) and {}.update(**{1: 2}) made {1: 2}; CPython's call
    # raises 'keywords must be strings' (a Python callee: in the trace; a C one: the call runs for real)
    def fn(m):
        return _outcomes(lambda: _keywords(**m), lambda: dict(**m), lambda: {}.update(**m))

    _same(fn, mapping)


# ------------------------------------------------------------------ iterators: their type, pickled and copied


def test_type_of_an_iterator_made_in_the_trace_is_eagers():
    # test_list test_iterator_pickle compares type(it) with type(itorig): every iterator made in the trace was a
    # tuple_iterator (iter(list), iter(dict), its views, a set, a deque, an OrderedDict, enumerate, reversed ...)
    def fn():
        items, d, s = [1, 2], {"a": 1}, {1}
        q, od = collections.deque([1]), collections.OrderedDict(a=1)
        made = [iter(items), iter(d), iter(d.keys()), iter(d.values()), iter(d.items()), iter(s), iter((1,)),
                iter(range(3)), enumerate(items), zip(items, items), reversed(d), iter(q), reversed(q), iter(od),
                iter(od.items()), reversed((1, 2)), reversed(range(2)), iter("ab"), iter("é")]
        return [type(it).__name__ for it in made]

    _same(fn)


def _opaque():
    print(end="")  # a graph break


def test_type_of_an_iterator_over_a_list_after_a_graph_break_is_list_iterator():
    def fn():
        items, out = [1, 2, 3], []
        it = iter(items)
        for _ in it:
            out.append(type(it).__name__)
            _opaque()
        d = {"a": 1, "b": 2}
        it = iter(d.items())
        for _ in it:
            out.append(type(it).__name__)
            _opaque()
        return out

    _same(fn)


def test_iterator_pickled_and_copied_across_a_graph_break_is_eagers():
    # test_list test_iterator_pickle, test_dict test_*iterator_pickling: at a break the iterator is rebuilt as
    # stillframe's stand-in, which reached pickle ('a class that defines __slots__ without defining __getstate__
    # cannot be pickled') and copy.copy (it has no __setstate__)
    def fn():
        orig, out = [4, 5, 6, 7], []
        for proto in range(2):
            itorig = iter(orig)
            it, a = pickle.loads(pickle.dumps((itorig, orig), proto))
            a[:] = [10, 11, 12, 13, 14]
            out.append((type(it).__name__, list(it)))
            next(itorig)
            it, a = pickle.loads(pickle.dumps((itorig, orig), proto))
            out.append((type(it).__name__, list(it), list(copy.copy(itorig)), list(copy.deepcopy(itorig))))
            for _ in range(4):  # exhausted: eager pickles an empty list_iterator
                next(itorig, None)
            it, a = pickle.loads(pickle.dumps((itorig, orig), proto))
            out.append((type(it).__name__, list(it), type(itorig).__name__))
        d = {"a": 1, "b": 2, "c": 3}
        for view in ("keys", "values", "items"):
            it = iter(getattr(d, view)())
            next(it)
            _opaque()
            out.append((list(pickle.loads(pickle.dumps(it))), list(copy.copy(it)), list(it)))
        return out

    _same(fn)


def test_reversed_tuple_pickled_across_a_graph_break_is_reversed():
    # test_tuple test_reversed_pickle: the stand-in for reversed(tuple) pickled as a tuple_iterator
    def fn():
        out = []
        for data in ((1, 2, 3), "abc"):
            it = reversed(data)
            next(it)
            _opaque()
            r = pickle.loads(pickle.dumps(it))
            out.append((type(r).__name__, list(r), type(it).__name__, list(it)))
        return out

    _same(fn)


# ------------------------------------------------------------------ sets


def test_frozenset_of_a_frozenset_is_that_frozenset():
    # test_set TestFrozenSet test_constructor_identity: frozenset(s) is s in CPython; the trace made a new one
    def fn(s):
        t = frozenset(s)
        u = frozenset(range(3))
        v = frozenset(u)
        return id(s) == id(t), t is s, u is v, id(u) == id(v), frozenset(frozenset()) is frozenset()

    _same(fn, frozenset(range(6)))


def test_set_methods_called_by_name_change_the_set():
    # test_set TestSet test_init: s.__init__(iterable) ran on a copy of the members and the change was dropped
    # (set() stayed empty); s.__ior__(t) gave a new set, not s
    def fn():
        s = set()
        s.__init__("simsalabim")
        a = sorted(s)
        s.__init__("madagascar")
        b = sorted(s)
        t = {1}
        return a, b, t.__ior__({2}) is t, t.__isub__({1}) is t, sorted(t), t.__iand__({2, 3}) is t, t.__ixor__({4}), \
            _outcomes(lambda: s.__init__(s, 2), lambda: s.__init__(1))

    _same(fn)


def test_ordered_dict_methods_take_their_arguments_by_keyword():
    # test_ordered_dict test_setdefault: od.setdefault('g', default=9) returned None (the rules read arguments by
    # position, the keyword was dropped)
    def fn():
        od = collections.OrderedDict(a=1)
        out = [od.setdefault("g", default=9), od.setdefault(key="h"), od.pop("a", default=5),
               od.pop("zz", default=7), list(od.items())]
        od.move_to_end("g", last=False)
        out.append(list(od))
        out.append(od.popitem(last=False))
        return out

    _same(fn)


# ------------------------------------------------------------------ real steps that read their caller's frame


def test_eval_and_exec_without_namespaces_see_the_users_frame():
    # test_ordered_dict test_repr: eval(repr(od)) raised NameError: name 'OrderedDict' is not defined (OrderedDict a
    # local of the test): at the graph break eval ran with stillframe's own frame as its caller
    def fn(x):
        OrderedDict = collections.OrderedDict  # noqa: N806 (as the CPython test names it)
        od = OrderedDict(a=1)
        y = 5
        out = [eval(repr(od)) == od, eval("x + y"), eval("len")]
        exec("z = x * 2; out.append(z)")
        exec("out.append(y)")
        return out

    _same(fn, 3)


class _OrderedSub(collections.OrderedDict):
    pass


def test_copy_of_an_ordered_dict_or_defaultdict_made_in_the_trace_keeps_its_class():
    # test_ordered_dict test_copying: od.copy() of an OrderedDict made in the trace was a plain dict (the rule of
    # dict.copy served OrderedDict.copy); dict.copy inherited by a dict subclass does give a plain dict
    def fn():
        od = collections.OrderedDict([("c", 1), ("b", 2)])
        dup = od.copy()
        made = [c().copy() for c in (_Dict, _OrderedSub, lambda: collections.defaultdict(list))]
        return type(dup).__name__, list(dup.items()), dup is od, [type(m).__name__ for m in made]

    _same(fn)


class _Link:
    __slots__ = "prev", "next", "key", "__weakref__"


def test_a_weakref_proxy_to_a_local_is_no_internal_error():
    # test_ordered_dict PurePython* test_issue24347: the pure-Python OrderedDict links its nodes by weakref.proxy;
    # the guard asking whether the user watches a local's collection read ref.__callback__ of the proxy, which
    # forwards to the referent: AttributeError, an internal error (the frame fell back with a warning)
    def fn():
        root = _Link()
        p = weakref.proxy(root)
        root.prev = root.next = p
        out = [p.next is p]
        p.key = 3
        out.append(root.key)
        out.append(p.key)
        return out

    _same(fn)
