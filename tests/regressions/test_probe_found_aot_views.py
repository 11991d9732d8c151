"""Regressions found by parity probes: writes through views of tensors a graph made, on AOTAutograd backends.

AOTAutograd's functionalization undoes a write through a ``view``-like view (``view``, ``transpose``,
``unsqueeze``...) by a view: the base it returns is remade as a view of the written view, made inside its autograd
Function. Eager's base is no view; an in-place op on it after a graph break raised "Output 0 of CompiledFunction is
a view and is being modified inplace" (torch.compile the same). Such a write runs for real where its base is a
graph output (``tensors/aot_writes.refuse_bases_remade_as_views``). Each case is compared with eager."""

from __future__ import annotations

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


def _brk():
    print(end="")  # a graph break


def _view_then_base(x):
    a = x.clone()
    b = a.view(2, 2)
    b.fill_(7)
    _brk()
    a.neg_()
    return a, b


def _view_deleted(x):
    a = x.clone()
    b = a.view(2, 2)
    b.mul_(3)
    del b
    _brk()
    a.neg_()
    return a


def _slice_of_a_view(x):
    a = x.clone()
    b = a.view(2, 2)
    b[0].fill_(7)
    _brk()
    c = a.reshape(4, 1)
    c[1:].neg_()
    return a, b, c


def _transposed_write_from_input(x):
    a = torch.zeros(4, 1)
    a.t().add_(x.view(1, 4))
    _brk()
    a.mul_(2)
    return a


def _is_view_after_write(x):
    a = x * 2
    a.unsqueeze(0).mul_(3)
    return a._is_view(), a


CASES = {f.__name__.lstrip("_"): f for f in (_view_then_base, _view_deleted, _slice_of_a_view,
                                               _transposed_write_from_input, _is_view_after_write)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_write_through_a_view_of_a_tensor_the_graph_returns(backend, requires_grad, case):
    assert_parity(CASES[case], lambda: (torch.randn(4, requires_grad=requires_grad),), backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_write_through_a_view_stays_in_the_graph_when_its_base_is_not_returned(backend):
    # the base is read, not returned: the write is captured with the rest, one graph
    def fn(x):
        a = x.clone()
        a.view(2, 2).mul_(3)
        a[0].fill_(1)
        return a.sum() * 2

    assert_parity(fn, lambda: (torch.randn(4, requires_grad=True),), backend=backend, calls=2)
    report = stillframe.explain(fn, backend=backend)(torch.randn(4, requires_grad=True))
    assert (report.graph_count, report.break_count) == (1, 0)


def _no_grad_view_returned(x):
    a = x * 2
    with torch.no_grad():
        v = a[1:]
        w = x[:2]
    _brk()
    return v, w, a


def _no_grad_view_written_after_a_break(x):
    a = x * 2
    with torch.no_grad():
        v = a[1:]
    _brk()
    try:
        v.mul_(2)
    except RuntimeError as e:
        return str(e)
    return v


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_no_grad_view_returned, _no_grad_view_written_after_a_break],
                         ids=lambda f: f.__name__.lstrip("_"))
def test_view_made_under_no_grad_of_a_tensor_requiring_grad(backend, fn):
    # AOTAutograd remade such a view outside its Function in grad mode: it had a grad_fn (is_leaf False where
    # eager's is True) and an in-place op on it raised "Output 0 of Slice is a view of a view..." instead of
    # eager's "A view was created in no_grad mode..."
    assert_parity(fn, lambda: (torch.randn(4, requires_grad=True),), backend=backend, calls=3)
