"""Regressions found by hand-written parity probes of the standard library and the language as model code uses them
(session 31). Each is compared with eager on both backends."""

from __future__ import annotations

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


def _item_inside_no_grad(x):
    with torch.no_grad():
        y = x * 2
        s = y.sum().item()
    return y, s


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_grad_block_left_after_a_break_restores_grad_mode(backend):
    # the plan after the .item() break was traced twice (a retry), and the first try's fetch had switched the
    # process's grad mode to the graph's; the second compared its traced mode with that one and never switched back:
    # the first call left autograd off for the caller. Each try now starts from the global state as found
    assert_parity(_item_inside_no_grad, lambda i=0: (torch.randn(3) + i,), backend=backend, calls=3)
    stillframe.reset()
    torch.set_grad_enabled(True)
    stillframe.compile(_item_inside_no_grad, backend=backend)(torch.randn(3))
    assert torch.is_grad_enabled()
