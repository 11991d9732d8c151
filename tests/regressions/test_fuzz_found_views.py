"""Divergences the differential fuzzer found on views that are live across a graph break (fuzz seed 26).

A view (``t = y[:, 1]``) that a resumed segment receives as a graph input is fakeified with its base. Under a
ShapeEnv, torch fakeifies a view's base with every dimension symbolic unless told otherwise; the guards the
ShapeEnv then made on those sizes named a tensor (``L['t']._base``) that was no graph input, so the plan
could not be guarded and the segment ran instruction by instruction with a warning (``dynamic_shape: the
shape guards cannot be expressed over the graph inputs``). The base now follows the shape policy, as
TorchDynamo gives a view's base its own symbolic context, and a symbolic base is a guarded input.
"""

from __future__ import annotations

import torch

import stillframe
from stillframe.check.parity import assert_parity

from .test_fuzz_found import assert_like_eager, program


def test_fuzz_view_live_across_a_data_dependent_break_is_guarded():
    # fuzz 26:517 and 26:690: a column view written in place in a loop whose trip count is read from data
    assert_like_eager(program('''
def f(x, y, w, k):
    t2 = y[:, 1]
    count6 = int((y > 0).sum())
    for _ in range(min(count6, 3)):
        t2[1:] += w[1:]
    if k > 1:
        pass
    return t2
''', w_rg=False, ks=(2, 1, 1)))


def _column_update(y, w, n):
    t = y[:, 1]
    count = int((y > 0).sum())  # a graph break: the view is live across it
    for _ in range(min(count, n)):
        t[1:] += w[1:]
    return t


def test_a_view_and_its_base_with_changing_sizes_across_a_break():
    """The trip count changes every call (a symbolic int after one recompile), then the sizes of ``y``: the
    view's base is a dynamic input of its own, and every call matches eager, ``y``'s mutation included."""
    sizes = [(3, 0), (3, 1), (3, 2), (5, 3), (7, 1), (4, 2)]

    def make_args(i):
        n, count = sizes[i]
        g = torch.Generator().manual_seed(n + count)
        return torch.randn(n, n, generator=g), torch.randn(n, generator=g), count

    compiled = stillframe.compile(_column_update, backend="eager")
    assert_parity(_column_update, make_args, compiled=compiled, calls=6, grad=False)
    assert stillframe.counters["fallbacks"] == 0
