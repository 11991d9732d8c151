"""Regressions found by hand-written parity probes of training code on AOTAutograd backends (session 30). Each is
compared with eager on both backends."""

from __future__ import annotations

import pytest
import torch

from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


def _grad_then_loss(x, y):
    l = (x * y).sum()
    g, = torch.autograd.grad(l, [x])
    return l, g


def _manual_sgd_step(w, x):
    loss = ((x @ w) ** 2).mean()
    grads = torch.autograd.grad(loss, [w])
    with torch.no_grad():
        w.add_(grads[0], alpha=-0.1)
    return loss.item()


@pytest.mark.parametrize("fn, make", [
    (_grad_then_loss, lambda i=0: (torch.randn(3, requires_grad=True), torch.randn(3) + i)),
    (_manual_sgd_step, lambda i=0: (torch.randn(3, 2, requires_grad=True), torch.randn(4, 3) + i)),
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_autograd_grad_then_the_loss_it_freed_is_used(backend, fn, make):
    # autograd.grad (no retain_graph) in the graph, and the loss returned or read after it: AOTAutograd failed to
    # differentiate the loss through the history the call freed, and BackendCompilerFailed reached the user. Those
    # calls now run for real (torch.compile breaks at every autograd.grad)
    assert_parity(fn, make, backend=backend, calls=3)
