"""Divergences found by running CPython's own tests of weak references, numbers and the standard library compiled
(``python -m stillframe.check.cpython_tests`` on test_weakref, test_weakset, test_statistics, test_fractions,
test_functools, test_abc and test_copy; issue 11), each reduced to a small function and checked against eager."""

import abc
import gc

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
