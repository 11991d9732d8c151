"""Divergences from eager the differential fuzzer found in session 37 (seeds 66-68), minimized by hand, each a
parity test against eager."""

from __future__ import annotations

import pytest
import torch

from stillframe.check.parity import assert_parity


def _index_write_into_detached_input(x, y, w):
    t = x.detach()
    t[0] = w
    return t


def _add_into_detached_input(x, y, w):
    t = x.detach()
    t.add_(w)
    return t


def _index_write_into_detached_input_then_read(x, y, w):
    t = x.detach()
    t[0] = w
    return t * 1


def _write_into_view_of_detached_input(x, y, w):
    t = x.detach()[0]
    t.mul_(w)
    return t


def _index_write_into_detached_input_needing_no_grad(x, y, w):
    t = y.detach()
    t[0] = w
    return t


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_index_write_into_detached_input, _add_into_detached_input,
                                _index_write_into_detached_input_then_read, _write_into_view_of_detached_input,
                                _index_write_into_detached_input_needing_no_grad], ids=lambda f: f.__name__)
def test_write_with_history_into_a_detach_of_an_input(fn, backend):
    # fuzz 68:203: t = x.detach(), then t[0] = w with w requiring grad. Eager gives t the write's history
    # (CopySlices) and leaves x a leaf. On aot_eager, AOTAutograd took detach for an alias of x: the result came back
    # remade from x after the graph, without history (requires_grad False, is_leaf True), and where the graph read
    # t after the write the gradient reached x, which detach() cuts in eager (torch.compile does both the same)
    assert_parity(fn, lambda i=0: (torch.randn(3, 3, requires_grad=True), torch.randn(3, 3),
                                   torch.randn(3, requires_grad=True)), backend=backend, calls=2)
