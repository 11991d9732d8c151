"""Exceptions raised in traced code carry CPython's chaining: ``__context__``, ``__cause__``,
``__suppress_context__`` (issue 11: they were all unset in the trace, on every call)."""

import torch

from stillframe.check.parity import assert_parity


def _chain(error):
    return repr(error.__cause__), repr(error.__context__), error.__suppress_context__


def raise_from_inside_except(x):
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise ValueError("outer") from inner
    except ValueError as outer:
        return x + 1, _chain(outer)


def raise_inside_except(x):
    try:
        try:
            raise KeyError("inner")
        except KeyError:
            raise ValueError("outer")
    except ValueError as outer:
        return x + 1, _chain(outer)


def raise_from_none(x):
    try:
        try:
            raise KeyError("inner")
        except KeyError:
            raise ValueError("outer") from None
    except ValueError as outer:
        return x + 1, _chain(outer)


def test_raise_from_sets_cause_and_suppresses_context():
    assert_parity(raise_from_inside_except, lambda: (torch.ones(2),), calls=2)


def test_raise_inside_except_sets_context():
    assert_parity(raise_inside_except, lambda: (torch.ones(2),), calls=2)


def test_raise_from_none_suppresses_context():
    assert_parity(raise_from_none, lambda: (torch.ones(2),), calls=2)
