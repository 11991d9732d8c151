"""Python semantics the trace answered wrongly, found and fixed by the lead in session 38 (issue 11): tuple
identity."""

import torch

from stillframe.check.parity import assert_parity

_G = (1, 2)
_EMPTY = tuple()


def _returns_itself(x, t):
    # CPython returns an exact tuple itself for a slice covering it, tuple(t), t + () and () + t, and t * 1
    u = t[:]
    return x + 1, u is t, t[0:9] is t, t[::1] is t, tuple(t) is t, t + () is t, () + t is t, t * 1 is t, \
        t[1:] is t, t[::-1] is t, t * 2 is t, t[0:0], t[0:0] is _EMPTY, t[5:1]


def _made_in_the_trace(x, t):
    a = (x, 1)
    b = a
    c = (x, 1)
    before = (a is b, a is c, tuple([1]) is tuple([1]), a[:] is a)
    print("break")  # the rebuild makes one object of a and b, two of a and c
    return x * 2, before, a is b, a is c, b[:] is a


def _from_outside_across_a_break(x, t):
    a = t
    u = _G
    print("break")
    return x * 2, a is t, t[:] is a, u is _G, t is _G, a is _G


def test_a_tuple_is_itself_where_cpython_returns_it():
    # was False for each: t[:] made a new TupleVariable, and `is` compared tuples by value with their sources
    assert_parity(_returns_itself, lambda: (torch.randn(2), (1, 2, 3)))


def test_tuples_made_in_the_trace_keep_their_identity_across_a_break():
    # tuple([1]) is tuple([1]) and a is c were True (equal by value); after the break a is b was False: the
    # rebuild made a tuple per slot, and wrapping the live locals again made a VT per source
    assert_parity(_made_in_the_trace, lambda: (torch.randn(2), (1, 2)), calls=2)


def test_a_tuple_from_outside_is_the_callers_object_across_a_break():
    assert_parity(_from_outside_across_a_break, lambda: (torch.randn(2), _G), calls=2)
    assert_parity(_from_outside_across_a_break, lambda: (torch.randn(2), (1, 2)), calls=2)
