"""Divergences found by running CPython's own tests of weak references, numbers and the standard library compiled
(``python -m stillframe.check.cpython_tests`` on test_weakref, test_weakset, test_statistics, test_fractions,
test_functools, test_abc and test_copy; issue 11), each reduced to a small function and checked against eager."""

import abc
import copy
import gc
import weakref

import _py_abc
import pytest
import torch

from stillframe.check.parity import assert_parity


def _register_through_subclass(metaclass, x):
    class A(metaclass=metaclass):
        pass

    class B(A):
        pass

    B.register(str)  # B is dead from here on: eager's frame still holds it
    gc.collect()
    return x + 1, isinstance("", A), len(A.__subclasses__())


@pytest.mark.parametrize("metaclass", [abc.ABCMeta, _py_abc.ABCMeta], ids=["abc", "py_abc"])
def test_dead_local_class_stays_a_subclass_across_a_break(metaclass):
    # test_abc test_registration_builtins: a graph break's rebuilt frame dropped the dead local B, the next
    # collection took B out of A.__subclasses__(), and isinstance("", A) (str registered on B) turned False
    assert_parity(_register_through_subclass, lambda: (metaclass, torch.randn(2)))


def _ident_after_break(t):
    id(t)  # a graph break: id() of a traced value runs for real
    return t


def _tuple_made_in_the_trace(x):
    t = (1, 2)
    return x + 1, _ident_after_break(t) is t


def _tuple_passed_in(x, t):
    return x + 1, _ident_after_break(t) is t


def test_tuple_made_in_the_trace_keeps_its_identity_across_a_break():
    # test_copy test_deepcopy_dont_memo_immutable: the frames rebuilt at a break each made their own copy of a tuple
    # the caller and the callee both held
    assert_parity(_tuple_made_in_the_trace, lambda: (torch.randn(2),))


def test_tuple_passed_in_keeps_its_identity_across_a_break():
    # the rebuilt frames held a new tuple (not the caller's), and the resumed segment wrapped the caller's local and
    # the callee's argument as two tuples
    assert_parity(_tuple_passed_in, lambda: (torch.randn(2), (1, 2)))


def _deepcopy_with_memo(x):
    memo = {}
    y = copy.deepcopy([(1, 2)], memo)
    return x + 1, y, len(memo)


def test_deepcopy_does_not_memo_a_tuple_of_atoms():
    # test_copy test_deepcopy_dont_memo_immutable: len(memo) was 3 (eager 2): _deepcopy_tuple's `y is x` failed
    # across the id() break, so the tuple was copied and memoized
    assert_parity(_deepcopy_with_memo, lambda: (torch.randn(2),))


def _slice_copy(x):
    s = slice(1, 10, 2)
    return x + 1, copy.copy(s) is s


def test_copy_of_a_slice_is_the_slice():
    # test_copy test_copy_atomic: `copy.copy(s) is s` broke the graph and compared two slices rebuilt apart
    assert_parity(_slice_copy, lambda: (torch.randn(2),))


def _reflexive_dict_copy(x):
    d = {}
    d["foo"] = d
    y = copy.deepcopy(d)
    try:
        y < d  # noqa: B015 (a graph break: it raises TypeError for real)
    except TypeError:
        pass
    return x + 1, y["foo"] is y, y is d, len(y)


def test_deepcopy_of_a_dict_that_holds_itself_holds_itself_after_a_break():
    # test_copy test_deepcopy_reflexive_dict: the resumed segment wrapped y["foo"] as an opaque object, not as y
    assert_parity(_reflexive_dict_copy, lambda: (torch.randn(2),))


def _holds_itself(x, d):
    return x + 1, d["self"] is d


def test_a_dict_passed_in_that_holds_itself_is_itself_inside():
    def make():
        d = {"a": 1}
        d["self"] = d
        return torch.randn(2), d

    assert_parity(_holds_itself, make)


class _Plain:
    def method(self):
        return 1


def _through_a_proxy(x, o):
    p = weakref.proxy(o)
    o.foo = 1
    a = p.foo
    o.foo = 2
    b = p.foo  # the pending write o.foo = 2 is the referent's: the live read missed it
    p.bar = 3
    c = o.bar
    del p.bar
    return x + 1, a, b, c, hasattr(o, "bar")


def test_a_weakref_proxy_reads_and_writes_its_referent():
    # test_weakref test_basic_proxy / test_callable_proxy ("proxy does not reflect attribute modification")
    assert_parity(_through_a_proxy, lambda: (torch.randn(2), _Plain()))


def _bound_method_through_a_ref(x, obj):
    m = obj.method
    ref = weakref.ref(m)  # a graph break
    m2 = ref()
    return x + 1, m is m2, m2 is not None


def test_a_bound_method_keeps_its_identity_across_a_break():
    # test_weakref test_basic_ref (check_basic_ref(create_bound_method)): the frame rebuilt at a break held a new
    # bound method, not the one the weak reference was made to
    assert_parity(_bound_method_through_a_ref, lambda: (torch.randn(2), _Plain()))


def _dead_proxy_in_a_local(x):
    o = _Plain()
    proxy = weakref.proxy(o)  # a graph break
    o = _Plain()  # the first referent dies here; proxy, still a local, is dead
    ref = weakref.ref(o)  # a graph break: the frame rebuilt there holds the dead proxy
    return x + 1, ref() is o, weakref.getweakrefcount(o)


def test_a_dead_weakref_proxy_in_a_frame_is_no_internal_error():
    # test_weakref test_ref_reuse / test_proxy_ref: isinstance() of the dead proxy in the resumed segment's setup
    # (shapes, the rebuild of a lazy local) raised ReferenceError, stillframe's own, at the user
    assert_parity(_dead_proxy_in_a_local, lambda: (torch.randn(2),))


def _read_a_dead_proxy(x):
    o = _Plain()
    p = weakref.proxy(o)
    del o
    gc.collect()
    try:
        p.foo
    except ReferenceError as e:
        return x + 1, str(e)
    return x, None


def test_reading_a_dead_weakref_proxy_raises_eagers_reference_error():
    # wrapping the dead proxy (isinstance in builder._wrap) raised ReferenceError: the segment fell back with a warning
    assert_parity(_read_a_dead_proxy, lambda: (torch.randn(2),))


def _abstract_pair():
    class A(metaclass=abc.ABCMeta):
        @abc.abstractmethod
        def foo(self):
            pass

    class B(A):
        def foo(self):
            return 1

    return A, B


def _delete_implementation(x, B):
    del B.foo
    found = getattr(B, "foo", None)
    abc.update_abstractmethods(B)
    try:
        B()
    except TypeError as e:
        return x + 1, getattr(found, "__isabstractmethod__", False), str(e)
    return x, None


def test_a_class_attribute_deleted_in_the_trace_reveals_its_bases():
    # test_abc test_update_del_implementation / test_update_layered_implementation: after the traced `del B.foo`
    # the read of B.foo found nothing (the metaclass has none) where eager finds A.foo, the abstract one
    assert_parity(_delete_implementation, lambda: (torch.randn(2), _abstract_pair()[1]))
