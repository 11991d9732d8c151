"""A view made while its base did not require grad, whose base then took history through another alias
(``v = y.t(); y[0] = w``), has no grad_fn until something asks for it; until then eager treats it as a leaf that
requires grad, and refuses in-place ops on it ("a leaf Variable that requires grad is being used in an in-place
operation."). Asking (``is_leaf``, ``grad_fn``, a differentiable op on the view, a view of it) makes the grad_fn
and ends that state; ``requires_grad``, shapes and non-differentiable ops do not (``compat.is_stale_view``).

stillframe never asks itself (its metadata reads, guards and fakeification would otherwise end the state, as
they did in fuzz 22:131), reproduces the state in fake tensors and in the views a plan rebuilds, and guards it
on graph inputs. Every test is a parity test against eager, on ``eager`` and ``aot_eager``.
"""

from __future__ import annotations

import pytest
import torch

import stillframe
from stillframe.check import assert_parity


def _rand(*shape, grad=False):
    return torch.randn(*shape, requires_grad=grad)


def base_takes_history_directly(y, w):
    v = y.t()
    y.add_(w)
    v.relu_()
    return y


def base_takes_history_through_another_view(y, w):
    v = y.t()
    y[0] = w
    v.mul_(2)
    return y


def view_of_a_view_written(y, w):
    v = y.t()
    vv = v[0]
    v[1:] = w
    vv.relu_()
    return y


def differentiable_op_makes_the_grad_fn(y, w):
    v = y.t()
    y[0] = w
    u = v * 1
    v.relu_()
    return y, u


def is_leaf_makes_the_grad_fn(y, w):
    v = y.t()
    y[0] = w
    leaf = v.is_leaf
    v.relu_()
    return y, leaf


def requires_grad_does_not(y, w):
    v = y.t()
    y[0] = w
    flag = v.requires_grad
    v.relu_()
    return y, flag


def comparison_does_not(y, w):
    v = y.t()
    y[0] = w
    mask = v > 0
    v.relu_()
    return y, mask


def is_leaf_asked_before_the_base_took_history(y, w):
    v = y.t()
    leaf = v.is_leaf
    y[0] = w
    v.relu_()
    return y, leaf


def under_no_grad_it_is_allowed(y, w):
    v = y.t()
    y[0] = w
    with torch.no_grad():
        v.relu_()
    return y


def across_a_graph_break(y, w):
    v = y.t()
    y[0] = w
    print("break")
    v.relu_()
    return y


def returned(y, w):
    v = y.t()
    y[0] = w
    return v


CASES = {
    "base-directly": base_takes_history_directly,
    "another-view": base_takes_history_through_another_view,
    "view-of-view": view_of_a_view_written,
    "differentiable-op": differentiable_op_makes_the_grad_fn,
    "is_leaf": is_leaf_makes_the_grad_fn,
    "requires_grad": requires_grad_does_not,
    "comparison": comparison_does_not,
    "is_leaf-before": is_leaf_asked_before_the_base_took_history,
    "no_grad": under_no_grad_it_is_allowed,
    "graph-break": across_a_graph_break,
    "returned": returned,
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(CASES))
def test_stale_view_in_the_trace(name, backend, capsys):
    assert_parity(CASES[name], lambda: (_rand(2, 2), _rand(2, grad=True)), backend=backend, calls=2)


def _stale_input():
    y = _rand(2, 2)
    v = y.t()
    y[0] = _rand(2, grad=True)
    return (v,)


def _fresh_input():
    (v,) = _stale_input()
    v.is_leaf  # makes its grad_fn
    return (v,)


def inplace_on_an_input_view(v):
    t = v * 2
    v.relu_()
    return t


def inplace_on_an_input_view_first(v):
    v.relu_()
    return v * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [inplace_on_an_input_view, inplace_on_an_input_view_first])
@pytest.mark.parametrize("make", [_stale_input, _fresh_input], ids=["stale", "fresh"])
def test_view_passed_in(fn, make, backend):
    """A stale view passed in (the guard, fakeification and the metadata read leave it stale)."""
    assert_parity(fn, make, backend=backend, calls=2)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_plan_for_a_fresh_view_does_not_serve_a_stale_one(backend):
    """The plan traced for a view with a grad_fn captures ``relu_``; a stale view passed next fails its guard."""
    compiled = stillframe.compile(inplace_on_an_input_view_first, backend=backend)
    assert_parity(inplace_on_an_input_view_first, _fresh_input, compiled=compiled)
    assert_parity(inplace_on_an_input_view_first, _stale_input, compiled=compiled)
