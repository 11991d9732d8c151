"""``opt.zero_grad()`` and ``model.zero_grad()`` inside a compiled training step are traced (issue 15, issue 11
item 3), as torch.compile traces them: ``p.grad = None`` on a parameter is a side effect replayed on the live
tensor after the graph (``rules/tensor_attrs.py``), ``Optimizer.zero_grad``'s body is traced in place of torch's
``_disable_dynamo`` wrapper (``rules/optimizers.py``), and ``set_to_none=False`` zeroes the grads in the graph.

Each training test runs 20 steps eagerly and compiled on identical models and batches (the harness of
``tests/runtime/test_training_step.py``) and compares, after every step, the step's result, every parameter, its
``.grad`` (``None`` included) and the optimizer's state; it also checks the graph breaks each call takes after
warm-up (one per ``backward`` and one at ``opt.step()``: ``zero_grad`` runs for real no more) and that no call
traces again after warm-up. Before, ``opt.zero_grad()`` was one more break per call, and ``model.zero_grad()``
two per parameter (at ``p.grad = None`` and at the next item of its loop).
"""

from __future__ import annotations

import io
import warnings

import pytest
import torch
import torch.nn.functional as F

import stillframe
from stillframe.check.parity import assert_parity
from stillframe.errors import StillframeWarning
from runtime.test_training_step import STEPS, TOL, Side, assert_same_state, batch

BACKENDS = ["eager", "aot_eager"]
WARM_UP = 2  # the first call finds no grads and no optimizer state; the second finds both


def zero_grad_step(where: str, set_to_none: bool = True, on_model: bool = False, micro_batches: int = 1):
    """A training step with ``zero_grad`` before the backward or after ``opt.step()``, on the optimizer or on the
    model; with two ``micro_batches``, two backwards (unrolled: no loop breaks) whose gradients add up."""
    def make(side: Side):
        model, opt = side.model, side.opt
        zero = model.zero_grad if on_model else opt.zero_grad

        def step(x, y):
            if where == "before":
                zero(set_to_none=set_to_none)
            if micro_batches == 1:
                total = F.mse_loss(model(x), y)
                total.backward()
            else:
                first = F.mse_loss(model(x[:8]), y[:8]) / 2
                first.backward()
                second = F.mse_loss(model(x[8:]), y[8:]) / 2
                second.backward()
                total = first + second
            opt.step()
            if where == "after":
                zero(set_to_none=set_to_none)
            return total.detach()

        return step

    return make


def train_counting(make_step, backend: str, optimizer: str) -> tuple[list[int], list[int]]:
    """``STEPS`` steps eagerly and compiled, compared after each; the graph breaks and traces of each call."""
    eager, comp = Side(make_step, optimizer, False), Side(make_step, optimizer, False)
    compiled = stillframe.compile(comp.step, backend=backend)
    breaks, traces = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("error", StillframeWarning)  # no fallback to eager, no internal error
        for i in range(STEPS):
            x, y = batch(i)
            expected = eager.step(x, y)
            before = stillframe.counters["graph_breaks"], stillframe.counters["traces"]
            got = compiled(x, y)
            breaks.append(stillframe.counters["graph_breaks"] - before[0])
            traces.append(stillframe.counters["traces"] - before[1])
            torch.testing.assert_close(got, expected, **TOL, msg=lambda m: f"step {i}: {m}")
            assert_same_state(eager, comp, TOL, f"after step {i}")
    assert not torch.equal(comp.model[0].weight, Side(make_step, optimizer, False).model[0].weight)  # it trained
    return breaks, traces


def assert_trains_as_eager(make_step, backend: str, optimizer: str, breaks_per_call: int) -> None:
    breaks, traces = train_counting(make_step, backend, optimizer)
    assert traces[WARM_UP:] == [0] * (STEPS - WARM_UP), f"traces per call: {traces}"
    assert breaks[WARM_UP:] == [breaks_per_call] * (STEPS - WARM_UP), f"graph breaks per call: {breaks}"


ALL_OPTIMIZERS = ["sgd_momentum", "adam", "adamw_foreach", "adamw_single_tensor"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("set_to_none", [True, False], ids=["to_none", "to_zeros"])
@pytest.mark.parametrize("where", ["after", "before"])
@pytest.mark.parametrize("optimizer", ALL_OPTIMIZERS)
def test_opt_zero_grad_is_traced(optimizer, where, set_to_none, backend):
    # breaks: the backward and opt.step() (3 before: zero_grad ran for real)
    assert_trains_as_eager(zero_grad_step(where, set_to_none), backend, optimizer, breaks_per_call=2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adamw_foreach"])
def test_gradient_accumulation_over_two_micro_batches(optimizer, backend):
    # two backwards and opt.step() (4 before)
    assert_trains_as_eager(zero_grad_step("after", micro_batches=2), backend, optimizer, breaks_per_call=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["after", "before"])
@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adam"])
def test_model_zero_grad_is_traced(optimizer, where, backend):
    # 10 breaks per call before: p.grad = None and the next item of the loop, for each of the 4 parameters
    assert_trains_as_eager(zero_grad_step(where, on_model=True), backend, optimizer, breaks_per_call=2)


# ------------------------------------------------------------------------ graphs and breaks, as torch.compile
@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adam", "adamw_foreach"])
def test_the_step_makes_as_many_graphs_and_breaks_as_torch_compile(optimizer):
    """``torch._dynamo.explain`` of this step: 3 graphs, 2 graph breaks for SGD, Adam and AdamW (the backward,
    and the optimizer step); stillframe made 4 and 3 (``Optimizer.zero_grad`` ran for real)."""
    side = Side(zero_grad_step("after"), optimizer, False)
    explained = stillframe.explain(side.step, backend="eager")
    for i in range(WARM_UP + 1):
        report = explained(*batch(i))
    assert (report.graph_count, report.break_count) == (3, 2), report.format(code=False, guards=False)
    assert not any("zero_grad" in br.explanation for br in report.breaks)


# ------------------------------------------------------------------------ p.grad = None written by the user
def _leaf(i: int = 0) -> torch.Tensor:
    w = torch.randn(3, requires_grad=True)
    w.grad = torch.full((3,), 1.0 + i)
    return w


def _none_then_read(w):
    w.grad = None
    return w * 2, w.grad is None, w.grad


def _read_write_in_place_then_none(w):
    g = w.grad
    w.grad.mul_(3)  # the grad is a graph input written in place; the tensor keeps the write after it is unset
    view = g[:2]
    w.grad = None
    view.add_(1)
    return g * 2, view, w.grad


def _through_setattr_and_another_name(w):
    held = [w]
    setattr(held[0], "grad", None)
    return w.grad, w + 1


_SINK = io.StringIO()


def _none_then_a_real_step(w):
    w.grad = None
    print(w.grad, file=_SINK)  # a break: the write is replayed before the print runs
    (w * w).sum().backward()
    return w.grad * 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, breaks", [(_none_then_read, 0), (_read_write_in_place_then_none, 0),
                                        (_through_setattr_and_another_name, 0), (_none_then_a_real_step, 2)],
                         ids=["read_after", "in_place_and_view", "setattr", "real_steps_after"])
def test_a_grad_set_to_none_is_replayed_and_read_as_none(fn, breaks, backend):
    # each .grad = None broke the graph before (one break more)
    assert_parity(fn, lambda i=0: (_leaf(i),), backend=backend, calls=3)
    compiled = stillframe.compile(fn, backend=backend)
    for i in range(WARM_UP):
        compiled(_leaf(i))
    before = stillframe.counters["graph_breaks"], stillframe.counters["traces"]
    compiled(_leaf(WARM_UP))
    assert (stillframe.counters["graph_breaks"] - before[0], stillframe.counters["traces"] - before[1]) == (breaks, 0)
