"""Divergences the differential fuzzer found on views that are live across a graph break (fuzz seed 26).

A view (``t = y[:, 1]``) that a resumed segment receives as a graph input is fakeified with its base. Under a
ShapeEnv, torch fakeifies a view's base with every dimension symbolic unless told otherwise; the guards the
ShapeEnv then made on those sizes named a tensor (``L['t']._base``) that was no graph input, so the plan
could not be guarded and the segment ran instruction by instruction with a warning (``dynamic_shape: the
shape guards cannot be expressed over the graph inputs``). The base now follows the shape policy, as
TorchDynamo gives a view's base its own symbolic context, and a symbolic base is a guarded input.

On aot_eager (fuzz 54:146), a graph that writes one of two inputs sharing memory (``w`` and ``t1 = w.unsqueeze(0)``
made before a break) and returns a view it made of ``t1`` raised AOTAutograd's internal assertion; the op making
that view now runs for real (``tensors/aot_writes.refuse_output_views_of_aliased_written_inputs``).
"""

from __future__ import annotations

import pytest
import torch

import stillframe
from stillframe.check.fuzz import compiler_for
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


def test_fuzz_view_of_a_view_input_returned_after_its_base_is_written_on_aot_eager():
    # fuzz 54:146 (aot_eager): t1, a view of w, crosses the breaks; the last graph writes w and returns a view of
    # t1. AOTAutograd takes w and t1 through one synthetic base and replayed the output's view (recorded from t1)
    # on w: its assertion "incorrect out shape after application of ViewMeta sequence" reached the user. The op
    # making the output now runs for real (its result enters the rest of the graph as an input)
    assert_like_eager(program('''
def f(x, y, w, k):
    t1 = w.unsqueeze(0)
    for i5 in range(k):
        t6 = x * i5
        lst7 = [t6, t6, t6 * 1.5]
        for j9, (u10, v11) in enumerate(zip(lst7, lst7[1:])):
            torch._dynamo.graph_break()
    w.neg_()
    t12 = t1.narrow(0, 0, 1)
    return t12
''', w_rg=False, ks=(1, 1, 1)), compiler_for("stillframe", "aot_eager"))


@pytest.mark.parametrize("body", [
    "w.neg_()\n    return t1.narrow(0, 0, 1)",
    "r = t1.narrow(0, 0, 1)\n    w.neg_()\n    return r",
    "w.neg_()\n    return t1.narrow(0, 0, 1).t()",
    "w.neg_()\n    return t1[0], t2[0]",
    "t2.neg_()\n    a = w * 1\n    return t1.narrow(0, 0, 1), a",
    "w.neg_()\n    r = t1.narrow(0, 0, 1)\n    torch._dynamo.graph_break()\n    return r * 2, r",
])
def test_output_view_of_aliased_inputs_one_written_on_aot_eager(body):
    """The same with the write before or after the view, into the base or into another view of it, a chain of
    views, and the view live across a later break: values, ``w``'s mutation and the view's base are eager's."""
    namespace = {"torch": torch}
    exec("def f(w):\n    t1 = w.unsqueeze(0)\n    t2 = w.unsqueeze(1)\n    torch._dynamo.graph_break()\n    "
         + body + "\n", namespace)
    fn = namespace["f"]

    def make_args(i):
        return (torch.randn(2, generator=torch.Generator().manual_seed(i)),)

    assert_parity(fn, make_args, backend="aot_eager", calls=3, grad=False)


@pytest.mark.parametrize("block", ["torch._dynamo.graph_break()", "y = x * 3\n        torch._dynamo.graph_break()"],
                         ids=["break", "op-then-break"])
def test_fuzz_view_of_an_input_before_a_break_inside_no_grad_keeps_its_grad_fn_on_aot_eager(block):
    # fuzz 58:112, cut down by hand: the graph ends inside the no_grad block (its switch is the graph's last op);
    # AOTAutograd remade the output view x.diagonal() after the graph, in the grad mode the graph left (off), so it
    # came back with no grad_fn and x.grad stayed None (passes.end_in_call_mode)
    namespace = {"torch": torch}
    exec("def f(x, w):\n    t3 = w * 2\n    t4 = x.diagonal()\n    with torch.no_grad():\n        " + block
         + "\n    return t4.narrow(0, 0, 1), t3\n", namespace)

    def make_args(i):
        g = torch.Generator().manual_seed(i)
        return (torch.randn(2, 2, generator=g, requires_grad=True), torch.randn(2, generator=g, requires_grad=True))

    assert_parity(namespace["f"], make_args, backend="aot_eager", calls=3)
