"""Divergences found by running CPython's own tests compiled (``python -m stillframe.check.cpython_tests``), fixed by
the lead in session 37: ``match`` statements and identity of empty tuples."""

import collections
import collections.abc

import pytest
import torch

from stillframe.check.parity import assert_parity


class _MapSeq(dict, collections.abc.Sequence):  # a mapping by its base (dict), a Sequence by registration order
    pass


class _SeqMap(collections.UserList, collections.abc.Mapping):  # a sequence by UserList, first in its bases
    pass


def _kind(subject, x):
    y = x + 1  # a tensor op, so there is a graph; the match runs as a real step after it
    match subject:
        case [*_]:
            kind = "seq"
        case {**rest}:
            kind = "map"
        case _:
            kind = "other"
    match subject:
        case {**rest}:
            first = "map"
        case [*_]:
            first = "seq"
        case _:
            first = "other"
    return kind, first, y


@pytest.mark.parametrize("subject", [_MapSeq(), _SeqMap(), [1], {1: 2}, "ab"], ids=type)
def test_match_reads_the_types_sequence_and_mapping_flags_as_cpython(subject):
    # was: isinstance of the ABCs, so a dict subclass also registered as a Sequence matched `case [*_]` ('seq' for
    # 'map'), a silent wrong branch (test_patma TestInheritance)
    assert_parity(_kind, lambda: (subject, torch.randn(2)))


class _Point:
    __match_args__ = ["x", "y"]  # not a tuple: matching it positionally is a TypeError

    def __init__(self):
        self.x, self.y = 1, 2


def _positional(p, x):
    match p:
        case _Point(a, b):
            return a + b + x
    return x


def _duplicate_key(d, k, x):
    match d:
        case {k.a: v, k.b: w}:
            return x + v + w
    return x


@pytest.mark.parametrize("fn, make_args", [
    (_positional, lambda: (_Point(), torch.randn(2))),
    (_duplicate_key, lambda: ({"a": 1, "b": 2}, type("K", (), {"a": "a", "b": "a"}), torch.randn(2))),
], ids=["match_args_not_a_tuple", "duplicate_key"])
def test_match_raises_cpythons_errors(fn, make_args):
    # was: no TypeError for a list __match_args__, no ValueError for a key given twice (test_patma TestTypeErrors,
    # TestValueErrors); the class and key patterns now run as a real `match` of the same shape
    assert_parity(fn, make_args)


def _empty_tuple(x):
    t = ()
    y = x + 1
    match t:
        case tuple(z):
            pass
    return z is t, y


def test_empty_tuples_are_one_object():
    # was False: two empty tuples known to the trace were told apart by their sources (test_patma test_patma_150)
    assert_parity(_empty_tuple, lambda: (torch.randn(2),))


class _Keys:
    def keys(self):
        return ["a", "b"]

    def __getitem__(self, key):
        return key * 2


def _unpacked(m, x):
    return {**m, "c": 1}, x + 1


@pytest.mark.parametrize("m", [_MapSeq(a=1), _Keys(), 3], ids=["dict_subclass", "keys_and_getitem", "not_a_mapping"])
def test_dict_display_unpacking_an_object_the_trace_keeps_opaque(m):
    # was: an internal AttributeError ('PythonObjectVariable' object has no attribute 'oid') in the trace, so the
    # frame ran instruction by instruction with a warning; `{**m}` of an object that is no DictVariable runs for real
    assert_parity(_unpacked, lambda: (m, torch.randn(2)))


_G = 3


def _namespaces(x):
    a = 2
    r = eval("a + _G")  # the caller's locals and globals
    exec("global _H; _H = a * 10")
    ns = {}
    exec("y: int = 1", ns)  # evaluated: this module has no `from __future__ import annotations`
    return x + r, _H, ns["__annotations__"], eval("a", None, {"a": 5}), compile("z: int", "<s>", "exec").co_flags


def test_eval_and_exec_see_the_callers_namespaces_and_future_flags():
    # was: eval("a + _G") raised NameError (it read stillframe's namespaces), and exec'd annotations were strings
    # (the code inherited the `from __future__ import annotations` of stillframe's own modules; test_grammar
    # test_var_annot_simple_exec, test_opcodes test_use_existing_annotations)
    assert_parity(_namespaces, lambda: (torch.randn(2),))


_FUTURE_SOURCE = '''
from __future__ import annotations
def annotated(x):
    ns = {}
    exec("y: int = 1", ns)
    return x + 1, ns["__annotations__"]
'''


def test_exec_inherits_the_users_future_flags():
    ns = {"__name__": "future_module"}
    exec(compile(_FUTURE_SOURCE, "<future_module>", "exec", dont_inherit=True), ns)
    assert ns["annotated"](torch.ones(1))[1] == {"y": "int"}
    assert_parity(ns["annotated"], lambda: (torch.randn(2),))


class _Prop:
    @property
    def x(self):
        return self.__x  # AttributeError until set

    @x.setter
    def x(self, value):
        self.__x = value


def _has_property(a, x):
    before = hasattr(a, "x")
    a.x = 1
    return x + 1, before, hasattr(a, "x"), getattr(a, "x", None)


def test_hasattr_runs_a_property_of_an_outside_object():
    # was True: hasattr looked the name up on the class statically and never ran the getter, which raises
    # AttributeError (test_descr test_properties, test_properties_plus, test_metaclass)
    assert_parity(_has_property, lambda: (_Prop(), torch.randn(2)))


class _Base:
    pass


class _Derived(_Base):
    pass


class _Plain:
    pass


def _c_attributes(x, obj):
    caught = []
    try:
        del _Derived.__bases__
    except TypeError as e:
        caught.append(str(e))
    try:
        obj.__dict__ = None
    except TypeError as e:
        caught.append(str(e))
    try:
        _Derived.__qualname__ = 3
    except TypeError as e:
        caught.append(str(e))
    return x + 1, caught, _Derived.__bases__, _Derived.__qualname__


def test_a_c_attribute_that_refuses_its_value_raises_where_the_user_catches_it():
    # was: the write was deferred to a replay after the graph, whose TypeError reached the user outside their
    # `try` (an internal error: test_descr test_mutable_bases, test_qualname, test_set_dict)
    assert_parity(_c_attributes, lambda: (torch.randn(2), _Plain()))


class _InitReturns:
    def __init__(self, value):
        self.value = value
        return value


def _construct(x, value):
    try:
        made = _InitReturns(value)
    except TypeError as e:
        return x + 1, str(e)
    return x + 2, made.value


@pytest.mark.parametrize("value", [None, 10])
def test_init_returning_a_value_is_a_type_error(value):
    # was: the value was ignored and the object made (test_descr test_init)
    assert_parity(_construct, lambda: (torch.randn(2), value))


def _operator_module(x):
    import operator
    a = [4, 3, 2, 1]
    operator.delitem(a, 1)
    b = [0, 1, 2]
    operator.setitem(b, 0, 2)
    c = [1]
    d = operator.iadd(c, [2])  # extends c itself
    return (x + 1, a, b, c, d is c, operator.is_(a, a), operator.is_not(a, b), operator.contains(a, 4),
            operator.add([1], [2]), operator.indexOf(b, 2), operator.lt(1, 2))


def test_operator_functions_are_the_bytecodes_statements():
    # was: every operator function of constant arguments was folded on copies of them, so operator.setitem and
    # operator.delitem were silently dropped, operator.iadd did not extend the list, and operator.is_(a, a) was False
    # (test_operator test_delitem, test_setitem)
    assert_parity(_operator_module, lambda: (torch.randn(2),))


_LOG = []


class _LoggingInt(int):
    def __lt__(self, other):
        _LOG.append("lt")
        return NotImplemented

    def __add__(self, other):
        _LOG.append("add")
        return 7


def _scalar_subclass(x, item):
    _LOG.clear()
    return x + 1, item < 0, item + 1, list(_LOG)


def test_a_scalar_subclass_with_dunders_is_no_constant():
    # was: an int subclass input was a constant, so `item < 0` and `item + 1` ran its Python dunders at trace time
    # (their appends to _LOG were lost behind the traced clear, and a cached plan would not run them at all):
    # test_heapq test_comparison_operator_modifiying_heap_two_heaps
    assert_parity(_scalar_subclass, lambda: (torch.randn(2), _LoggingInt(1)), calls=2)


class _DictWithFill(dict):
    def fill(self, src):
        super().update(src)  # dict.update with a Counter: the trace breaks here, inside the method
        return len(self)


def _super_update_across_a_break(x, src):
    u = _DictWithFill()
    n = u.fill(src)
    c = collections.Counter()
    c.update(src)  # Counter.update -> super().update(iterable), the same path
    return x + 1, n, dict(u), dict(c)


def test_super_method_of_a_dict_subclass_held_across_a_break_is_bound_to_the_instance():
    # was: {} and {}: the bound super().update held on the stack at the break was rebuilt over a copy of the
    # instance's dict part, so the real update filled the copy (test_collections TestCounter test_copying)
    assert_parity(_super_update_across_a_break, lambda: (torch.randn(2), collections.Counter("aab")))


class _PointWithDict(collections.namedtuple("_PointBase", ["x", "y"])):
    pass  # no __slots__ = (): its instances have a __dict__


def _named_tuple_state_from_outside(x, a):
    a.w = 5  # runs for real: the trace does not model the instance dict
    return x + 1, a.__dict__, vars(a)


def _named_tuple_state_made_inside(x):
    a = _PointWithDict(3, 4)
    a.w = 5
    return x + 1, a.__dict__, a.x


@pytest.mark.parametrize("fn, make_args", [
    (_named_tuple_state_from_outside, lambda: (torch.randn(2), _PointWithDict(3, 4))),
    (_named_tuple_state_made_inside, lambda: (torch.randn(2),)),
], ids=["from_outside", "made_inside"])
def test_a_named_tuple_subclass_keeps_its_instance_dict(fn, make_args):
    # was: a.__dict__ read the class's mappingproxy, and the real step wrote `w` on a new tuple made for the break
    # (the input's identity and the one made in the trace were both lost): test_collections
    # test_namedtuple_subclass_issue_24931
    assert_parity(fn, make_args)


def _self_referential(x, d):
    return x + d["k"], d["self"]["self"] is d, len(d["self"])


def test_a_dict_that_holds_itself_is_wrapped_once():
    # was: an internal RecursionError (the frame ran eagerly with a warning): wrapping the dict wrapped its items,
    # itself among them, without end. On 3.13 inspect.signature(list.index) evaluates `sys.maxsize` in the builtins'
    # dict, which puts __builtins__ into that dict: every later trace that wrapped a function's __globals__ failed
    d = {"k": 1}
    d["self"] = d
    assert_parity(_self_referential, lambda: (torch.randn(2), d))
