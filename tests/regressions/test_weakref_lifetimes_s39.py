"""Weak-reference lifetimes across graph breaks (issue 11; CPython's test_weakref, test_weakset, test_finalization):
an object dies where eager's would, and the callbacks that see it die run in eager's order. Each case is compared
with eager on both backends."""

from __future__ import annotations

import gc
import operator
import weakref

import pytest
import torch

from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


def _args():
    return (torch.randn(2, 3),)


class _Plain:
    pass


def _fill(klass, key1, value1, key2, value2):
    weakdict = klass()
    weakdict[key1] = value1  # a real step: it takes a weak reference to key1, dead in this frame from here on
    weakdict[key2] = value2
    return len(weakdict)


def weak_key_dict_of_temporaries(x):
    return x + 1, _fill(weakref.WeakKeyDictionary, _Plain(), "value 1", _Plain(), "value 2")


def weak_value_dict_of_temporaries(x):
    return x + 1, _fill(weakref.WeakValueDictionary, "key 1", _Plain(), "key 2", _Plain())


def _take_ref(o):
    return weakref.ref(o)


def ref_of_a_dead_local(x):
    o = _Plain()
    r = _take_ref(o)  # o is never read again: eager's frame still holds it until the return
    return x + 1, r() is not None


def holder_of_an_observed_object(x):
    holder = [_Plain()]
    r = _take_ref(holder[0])  # holder is dead from here on; the list is the object's only reference
    return x + 1, r() is not None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [weak_key_dict_of_temporaries, weak_value_dict_of_temporaries, ref_of_a_dead_local,
                                holder_of_an_observed_object], ids=lambda f: f.__name__)
def test_a_dead_local_lives_to_the_end_of_its_frame_across_a_break(fn, backend):
    # the frame rebuilt at a graph break left out the locals the code after it never reads: the real step took a
    # weak reference to one, and it died there, not at the frame's return (len(weakdict) was 0, eager's 2; silent)
    assert_parity(fn, _args, backend=backend, calls=3)


STR = "value 1"  # not interned: one object, the module's
FLOAT = 1.5
LARGE = 10**6


def global_constants_across_a_break(x):
    s, f, n = STR, FLOAT, LARGE
    id(s)  # a graph break: id() of a traced value runs for real
    return x + 1, s is STR, f is FLOAT, n is LARGE


def code_constant_across_a_break(x):
    s = "value 1"
    id(s)
    return x + 1, operator.is_(s, "value 1")  # the code's own constant, one object


def dict_key_across_a_break(x):
    d = {STR: 1}
    id(d)
    return x + 1, next(iter(d)) is STR


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [global_constants_across_a_break, code_constant_across_a_break, dict_key_across_a_break],
                         ids=lambda f: f.__name__)
def test_a_constant_keeps_its_identity_across_a_break(fn, backend):
    # test_weakref check_setdefault: the frame rebuilt at a break wrote a str, float or large int as a literal, an
    # equal copy of the object eager's frame holds ('value 1' is not 'value 1'; silent)
    assert_parity(fn, _args, backend=backend, calls=3)


class _Object:
    def __init__(self, arg):
        self.arg = arg

    def some_method(self):
        return 4


def _subclass():
    class C(_Object):
        def some_method(self):
            return 6

    return C


def weak_method_dead_with_its_function(x):
    C = _subclass()
    o = C(1)
    r = weakref.WeakMethod(o.some_method)
    del C.some_method
    gc.collect()
    return x + 1, r() is None


def weak_method_callback_when_its_function_dies(x):
    C = _subclass()
    calls = []
    o = C(1)
    r = weakref.WeakMethod(o.some_method, calls.append)
    del C.some_method
    gc.collect()
    first = calls == [r]
    del o
    gc.collect()
    return x + 1, first, calls == [r]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [weak_method_dead_with_its_function, weak_method_callback_when_its_function_dies],
                         ids=lambda f: f.__name__)
def test_a_plan_holds_no_function_of_the_callers(fn, backend):
    # test_weakref test_method_dead, test_callback_when_method_dead: the plan of the break at WeakMethod(...) rebuilt
    # the bound method from the function as a constant, and held it for good: deleted from its class, it never died
    # (r() alive, no callback; silent). (Two calls: each makes a new class, so each traces anew.)
    assert_parity(fn, _args, backend=backend, calls=2)


def class_made_here_dies_at_collection(x):
    log = []

    class C:
        pass

    c = C()
    wr = weakref.ref(C, lambda _: log.append("C went away"))
    c.size = 2  # read across the break at weakref.ref: the resumed trace guards type(c)
    n = c.size
    del c, C
    gc.collect()
    return x + n, list(log), wr() is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_plan_holds_no_class_of_the_callers(backend):
    # test_weakref test_callback_in_cycle_resurrection: the TYPE guard of the plan resumed after weakref.ref(C, ...)
    # held the class C for good: it never died, and the callback never ran (silent)
    assert_parity(class_made_here_dies_at_collection, _args, backend=backend, calls=2)



def bound_method_kept_in_a_local(x):
    items = []
    m = items.append
    wr = weakref.ref(m)  # a graph break: the local and the argument are one object
    return x + 1, wr() is m


def bound_method_of_a_live_list(x, items):
    m = items.append
    wr = weakref.ref(m)
    return x + 1, wr() is m


def tensor_method_kept_in_a_local(x):
    m = (x * 2).add
    wr = weakref.ref(m)
    return m(1), wr() is m


def tensor_method_of_an_argument(x):
    m = x.add
    wr = weakref.ref(m)
    return m(1), wr() is m


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make_args", [
    (bound_method_kept_in_a_local, _args),
    (bound_method_of_a_live_list, lambda: (*_args(), [])),
    (tensor_method_kept_in_a_local, _args),
    (tensor_method_of_an_argument, _args),
], ids=["made_here", "of_a_live_list", "tensor_made_here", "tensor_argument"])
def test_a_bound_method_is_one_object_across_a_break(fn, make_args, backend):
    # test_weakref test_cfunction, reduced: a C bound method (a new object per attribute read) was rebuilt at a break
    # once per slot that held it, so the weak reference was to a copy that died at once ('wr() is m' False; silent)
    assert_parity(fn, make_args, backend=backend, calls=3)


def c_bound_method_dies_at_del(x, items):
    m = items.append
    wr = weakref.ref(m)
    del m  # eager collects the method here: a new object per attribute read
    return x + 1, wr() is None


def python_bound_method_dies_at_del(x):
    o = _Object(1)
    m = o.some_method
    wr = weakref.ref(m)
    n = m()
    del m
    return x + n, wr() is None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make_args", [
    (c_bound_method_dies_at_del, lambda: (*_args(), [])),
    (python_bound_method_dies_at_del, _args),
], ids=["c_method", "python_method"])
def test_a_weakly_referenced_bound_method_dies_where_eager_drops_it(fn, make_args, backend):
    # test_weakref test_cfunction: bound methods were not watched for weak references (taken for functions, which
    # live on in their module), so the trace dropped its last reference at 'del m' without running it for real, and
    # the plan's frame held the method to the end of the call (wr() alive; silent)
    assert_parity(fn, make_args, backend=backend, calls=3)
