"""Backwards that eager runs and stillframe made raise on ``aot_eager`` (issue 11), found by the differential fuzzer
(``python -m stillframe.check.fuzz --backend aot_eager``) and minimized by hand.

AOTAutograd runs a graph as one autograd node with an edge to every input that requires grad, and the engine
calls the node behind each edge even where the node passes it no gradient; so a backward through one output of
the graph ran a node that eager never reaches (one whose saved tensor was written since, or was freed by an
earlier backward) and raised. Each test is a parity test against eager (:func:`assert_parity`) on ``aot_eager``.
"""

from __future__ import annotations

import torch

from stillframe.check.fuzz import check_program, compiler_for
from stillframe.check.parity import assert_parity
from stillframe.check.program_writer import HEADER
from stillframe.check.programs import load


def _x_and_w():
    return torch.randn(3, 3, requires_grad=True), torch.randn(3, requires_grad=True)


def test_backward_through_a_value_read_before_a_write_skips_a_broken_input_history():
    # fuzz 63:545: t1's history is broken (sigmoid saved t1, then t1 was written); after the break the graph
    # reads t2 (into t6), then writes t1 into t2; a backward through t6 reached t1's SigmoidBackward through
    # the graph's one node and raised "modified by an inplace operation", where eager never reaches t1
    def f(x, w):
        t1 = torch.sigmoid(w)
        t2 = x * 2
        t1[0] += 1
        vars()
        t1.sigmoid_()
        t6 = t2.t() * 1.0
        t2[1:] = t1
        (t6 * t6).sum().backward()
        return t2

    assert_parity(f, _x_and_w, backend="aot_eager")


def test_backward_through_an_input_only_read_by_a_write_skips_the_written_input():
    # fuzz 65:17: the graph writes y's rows into t11 (whose SigmoidBackward saved t11) and returns y.sum();
    # y.sum().backward() reached t11's node through the graph's one node and raised; eager's SumBackward leads
    # to y only
    def f(x, y):
        t11 = torch.sigmoid(y)
        t11[1:] = y[1:]
        loss = y.sum()
        loss.backward()
        return t11

    assert_parity(f, _x_and_w, backend="aot_eager")


def test_second_backward_through_a_write_that_saves_nothing():
    # fuzz 63:570: y.sub_(x, alpha=0.5) alone in a graph (y requires no grad); (y * y).sum().backward() freed
    # the graph's one node, and a backward through y again raised "Trying to backward through the graph a
    # second time", where eager's SubBackward0 saved nothing and runs again
    def f(x, y):
        y.sub_(x, alpha=0.5)
        torch._dynamo.graph_break()
        (y * y).sum().backward()
        return y * 2

    assert_parity(f, lambda: (torch.randn(3, 3, requires_grad=True), torch.randn(3, 3)), backend="aot_eager")


def test_second_backward_through_a_write_on_three_calls_with_a_size_change():
    # fuzz 63:570 as the fuzzer checks it (three calls, the third with other sizes: a symbolic graph), cut down
    source = HEADER % {"n0": 3, "n2": 4, "x_rg": True, "w_rg": True, "ks": (2, 2, 2)} + '''

def f(x, y, w, k):
    y.sub_(x, alpha=0.5)
    torch._dynamo.graph_break()
    (y * y).sum().backward()
    scale2 = k * 0.5
    t3 = y * scale2 + y.shape[0]
    return (w, t3,)
'''
    finding = check_program(load(source), compiler_for("stillframe", "aot_eager"))
    assert finding.kind == "ok", finding.format()


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return t * 2

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * 2 + t * 0


def test_backward_through_a_function_skips_an_input_written_beside_it():
    # fuzz 65:242, cut down: after t4's SinBackward was freed by a backward, a graph applies a Function to t3 and
    # writes w into t4; the backward through the Function's result ran t4's freed node through the graph's one
    # node ("Trying to backward through the graph a second time"); eager's path leads to t3 only. The Function
    # (a higher-order op) and the write now are parts of their own
    def f(x, w):
        t3 = x * 1.0
        t4 = x.sin()
        torch._dynamo.graph_break()
        (t4 * t4).sum().backward()
        t5 = _Twice.apply(t3)
        t4[0] = w
        return t5

    assert_parity(f, _x_and_w, backend="aot_eager")
