"""Regressions found by parity probes of dtypes and random draws: NumPy scalars in tensor constructors, in-place ops
whose result an integer or bool tensor cannot hold, and random draws whose result is unused. Each is compared with
eager on both backends."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stillframe
from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]
DYNAMIC = [None, True]


def _rand_unused(x):
    torch.rand(3)
    return x + torch.rand(x.shape[0])


def _randn_like_unused(x):
    torch.randn_like(x)
    return x * torch.randn(x.shape[0])


def _dropout_unused(x):
    F.dropout(x, 0.5, training=True)
    return x + torch.rand(x.shape[0])


def _randint_unused(x):
    torch.randint(0, 10, (3,))
    return x + torch.randint(0, 10, (x.shape[0],))


def _in_place_draw_unused(x):
    torch.empty(3).uniform_()
    torch.bernoulli(torch.full((2,), 0.5))
    return x * 2


def _draw_only(x):
    torch.rand(x.shape[0])
    return x.sum()


RANDOM = [_rand_unused, _randn_like_unused, _dropout_unused, _randint_unused, _in_place_draw_unused, _draw_only]


@pytest.mark.parametrize("fn", RANDOM)
@pytest.mark.parametrize("dynamic", [None, True, False])
@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_random_draw_is_kept(backend, dynamic, fn):
    # with dynamic=True, AOTAutograd's dead-code pass (torch.fx's, under a TracingContext, which keeps random ops
    # only with inductor's fallback_random) dropped the draw whose result is unused: every later draw, in the graph
    # and after it, gave other numbers than eager's
    assert_parity(fn, lambda i=0: (torch.randn(5) + i,), backend=backend, calls=2, compile_kwargs={"dynamic": dynamic})
    compiled = stillframe.compile(fn, backend=backend, dynamic=dynamic)
    for size in (5, 7):
        x = torch.randn(size)
        torch.manual_seed(1)
        want = fn(x), torch.rand(4)
        torch.manual_seed(1)
        got = compiled(x), torch.rand(4)
        torch.testing.assert_close(got, want, rtol=0, atol=0)  # the generator after the call too


def test_unused_random_draw_in_a_graph_with_a_higher_order_op():
    # a static graph with cond compiles under a TracingContext too (compat.static_backend_context)
    def fn(x):
        torch.rand(3)
        y = torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1, (x,))
        return y + torch.rand(x.shape[0])

    assert_parity(fn, lambda i=0: (torch.randn(5) + i,), backend="aot_eager", calls=2)
