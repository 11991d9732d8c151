"""A compiled training step trains exactly as eager (issue 11).

``step(x, y)`` does forward, loss, ``loss.backward()``, ``opt.step()`` and
``opt.zero_grad()`` inside the compiled function. Each test builds two
identical small models (seeded), runs 20 steps eagerly on one and compiled on
the other with the same batches, and compares after every step its result,
every parameter, gradient (``None`` included) and the optimizer's state
(``state_dict()``) with ``torch.testing.assert_close``.

The autograd calls (``backward``, ``torch.autograd.backward``,
``retain_grad``, ``register_hook``) have no effect a fake tensor could show:
they break the graph and run for real (``stillframe/tensors/effects.py``).
Before that rule, ``loss.backward()`` was folded into a constant and dropped,
so ``.grad`` stayed ``None`` and the optimizer never changed a parameter.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import stillframe
from stillframe.errors import StillframeWarning

STEPS = 20
BACKENDS = ["eager", "aot_eager"]
# The same aten ops run in the same order on both sides; aot_eager may reassociate a reduction.
TOL = {"rtol": 1e-5, "atol": 1e-6}

OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=True),
    "adamw_single_tensor": lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=False),
}


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


def batch(i: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + i)
    x = torch.randn(16, 4, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin() + 0.1 * torch.randn(16, 1, generator=g)


class Side:
    """One side of the comparison: a model, its optimizer (and scheduler), and the step made from them."""

    def __init__(self, make_step, optimizer: str, scheduler: bool):
        self.model = make_model()
        self.opt = OPTIMIZERS[optimizer](self.model.parameters())
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=5, gamma=0.5) if scheduler else None
        self.log: list = []  # what hooks saw
        self.step = make_step(self)


def train(make_step, backend: str, optimizer: str = "sgd_momentum", scheduler: bool = False,
          steps: int = STEPS, tol: dict = TOL) -> tuple[Side, Side]:
    """Run ``steps`` steps eagerly and compiled; compare every step's result and the final state."""
    eager, comp = Side(make_step, optimizer, scheduler), Side(make_step, optimizer, scheduler)
    compiled = stillframe.compile(comp.step, backend=backend)
    traces_at = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", StillframeWarning)  # no fallback to eager, no internal error
        for i in range(steps):
            x, y = batch(i)
            expected = eager.step(x, y)
            got = compiled(x, y)
            torch.testing.assert_close(got, expected, **tol, msg=lambda m: f"step {i}: {m}")
            assert_same_state(eager, comp, tol, f"after step {i}")
            traces_at[i] = stillframe.counters["traces"]
    # the parameters did move: the comparison is not between two untrained models
    assert not torch.equal(eager.model[0].weight, make_model()[0].weight)
    assert len(comp.log) == len(eager.log)
    for i, (c, e) in enumerate(zip(comp.log, eager.log)):
        torch.testing.assert_close(c, e, **tol, msg=lambda m: f"hook call {i}: {m}")
    # the plans made in the first steps (the optimizer creates its state lazily on the first one) are reused
    assert traces_at[steps - 1] == traces_at[steps // 2], "later steps must reuse the plans of the first ones"
    return eager, comp


def assert_same_state(eager: Side, comp: Side, tol: dict, when: str) -> None:
    """Parameters, gradients (``None`` included), optimizer state and scheduler state agree."""
    e_params, c_params = dict(eager.model.named_parameters()), dict(comp.model.named_parameters())
    for name, p in e_params.items():
        torch.testing.assert_close(c_params[name], p, **tol, msg=lambda m: f"{when}, parameter {name}: {m}")
        assert (c_params[name].grad is None) == (p.grad is None), f"{when}: .grad of {name}"
        if p.grad is not None:
            torch.testing.assert_close(c_params[name].grad, p.grad, **tol,
                                       msg=lambda m: f"{when}, grad of {name}: {m}")
    e_state, c_state = eager.opt.state_dict(), comp.opt.state_dict()
    assert c_state["param_groups"] == e_state["param_groups"], when
    assert c_state["state"].keys() == e_state["state"].keys(), when
    for index, state in e_state["state"].items():
        assert c_state["state"][index].keys() == state.keys(), when
        for key, value in state.items():
            torch.testing.assert_close(c_state["state"][index][key], value, **tol,
                                       msg=lambda m: f"{when}, optimizer state {index}.{key}: {m}")
    if eager.sched is not None:
        assert comp.sched.state_dict() == eager.sched.state_dict(), when


# ------------------------------------------------------------------------------------------- the steps
def plain_step(side: Side):
    model, opt = side.model, side.opt

    def step(x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    return step


def zero_grad_to_zeros_step(side: Side):
    model, opt = side.model, side.opt

    def step(x, y):
        opt.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def accumulation_step(side: Side):
    """Two micro-batches: ``backward`` twice (gradients add up), then one optimizer step."""
    model, opt = side.model, side.opt

    def step(x, y):
        total = 0.0
        for xb, yb in ((x[:8], y[:8]), (x[8:], y[8:])):
            loss = F.mse_loss(model(xb), yb) / 2
            loss.backward()
            total = total + loss.detach()
        opt.step()
        opt.zero_grad()
        return total

    return step


def scheduler_step(side: Side):
    model, opt, sched = side.model, side.opt, side.sched

    def step(x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        return loss.detach()

    return step


def autograd_backward_step(side: Side):
    model, opt = side.model, side.opt

    def step(x, y):
        loss = F.mse_loss(model(x), y)
        torch.autograd.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss.detach()

    return step


def retain_grad_step(side: Side):
    """``h.retain_grad()`` on an intermediate, then its ``.grad`` read after backward."""
    model, opt = side.model, side.opt

    def step(x, y):
        h = model[0](x)
        h.retain_grad()
        loss = F.mse_loss(model[2](model[1](h)), y)
        loss.backward()
        grad_h = h.grad.clone()
        opt.step()
        opt.zero_grad()
        return loss.detach(), grad_h

    return step


def hook_step(side: Side):
    """A gradient hook on an intermediate that records what it sees and scales the gradient."""
    model, opt, log = side.model, side.opt, side.log

    def hook(grad):
        log.append(grad.detach().clone())
        return grad * 0.5

    def step(x, y):
        h = model[0](x)
        h.register_hook(hook)
        loss = F.mse_loss(model[2](model[1](h)), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    return step


def clip_step(listed: bool):
    """``clip_grad_norm_`` between backward and the optimizer step (over a list, or the parameters' iterator)."""
    def make(side: Side):
        model, opt = side.model, side.opt

        def step(x, y):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            params = list(model.parameters()) if listed else model.parameters()
            norm = torch.nn.utils.clip_grad_norm_(params, 0.1)
            opt.step()
            opt.zero_grad()
            return loss.detach(), norm

        return step

    return make


def manual_sgd_step(side: Side):
    """The update written out in the step itself: reads ``.grad`` after ``backward``, writes under no_grad."""
    model = side.model

    def step(x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.05 * p.grad
                p.grad = None
        return loss.detach()

    return step


# ------------------------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_training_step_matches_eager(optimizer, backend):
    train(plain_step, backend, optimizer)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adamw_foreach"])
def test_zero_grad_set_to_zeros(optimizer, backend):
    eager, comp = train(zero_grad_to_zeros_step, backend, optimizer)
    assert all(p.grad is not None for p in comp.model.parameters())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adam"])
def test_gradient_accumulation(optimizer, backend):
    train(accumulation_step, backend, optimizer)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adam"])
def test_lr_scheduler_step(optimizer, backend):
    """StepLR wraps ``opt.step`` in a function of torch.optim: it runs for real, never on fake tensors (which
    wrote a fake ``state["step"]`` into Adam's real state: ``KeyError: 'exp_avg'`` on the next real step)."""
    eager, comp = train(scheduler_step, backend, optimizer, scheduler=True)
    assert comp.opt.param_groups[0]["lr"] == pytest.approx(OPTIMIZERS[optimizer]([torch.zeros(1)]).defaults["lr"]
                                                           * 0.5 ** (STEPS // 5))


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_autograd_backward(backend):
    train(autograd_backward_step, backend, "adam")


@pytest.mark.parametrize("backend", BACKENDS)
def test_retain_grad_then_read_grad(backend):
    train(retain_grad_step, backend, "sgd_momentum")


@pytest.mark.parametrize("backend", BACKENDS)
def test_register_hook_on_intermediate(backend):
    eager, comp = train(hook_step, backend, "sgd_momentum")
    assert len(comp.log) == STEPS


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_removed_before_backward(backend):
    """A hook registered, then removed through its handle before the backward: it never runs, as in eager.
    ``RemovableHandle.remove`` calls the weakref it keeps to the hooks dict, which hashes as that dict: the trace
    raised TypeError and the step ran instruction by instruction, with a warning. Traced through, the handle's
    id (new on every registration) made a new plan per step until the cache limit; ``remove`` now runs for
    real, whole."""
    def make_step(side: Side):
        model, opt, log = side.model, side.opt, side.log

        def step(x, y):
            h = model[0](x)
            kept = h.register_hook(lambda g: log.append(g.detach().clone()))
            dropped = h.register_hook(lambda g: g * 100)
            dropped.remove()
            loss = F.mse_loss(model[2](model[1](h)), y)
            loss.backward()
            kept.remove()
            opt.step()
            opt.zero_grad()
            return loss.detach()

        return step

    eager, comp = train(make_step, backend, "sgd_momentum")
    assert len(comp.log) == STEPS


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_on_parameter_registered_outside(backend):
    """A hook put on a parameter before compiling runs when the compiled step's backward runs."""
    def make_step(side: Side):
        side.model[0].weight.register_hook(lambda g: (side.log.append(g.detach().clone()), g * 3)[1])
        return plain_step(side)

    eager, comp = train(make_step, backend, "sgd_momentum")
    assert len(comp.log) == STEPS


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("listed", [True, False], ids=["list", "iterator"])
def test_clip_grad_norm(listed, backend):
    """Clipping reads the parameters' .grad: on fake tensors it saw none and clipped nothing (aot_eager)."""
    train(clip_step(listed), backend, "adam")


@pytest.mark.parametrize("backend", BACKENDS)
def test_manual_update_reads_grad(backend):
    train(manual_sgd_step, backend)


def test_backward_breaks_the_graph_with_a_clear_reason():
    side = Side(plain_step, "sgd", False)
    compiled = stillframe.compile(side.step, backend="eager")
    compiled(*batch(0))
    first = compiled.cache_entries()[0].graph_break
    assert first.kind == "effectful_call"
    assert "Tensor.backward()" in first.explanation and "loss.backward()" in first.location.source


def test_backward_under_fullgraph_raises():
    side = Side(plain_step, "sgd", False)
    compiled = stillframe.compile(side.step, backend="eager", fullgraph=True)
    with pytest.raises(stillframe.Unsupported, match="backward"):
        compiled(*batch(0))


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adamw_foreach"])
def test_training_step_matches_eager_inductor(optimizer):
    train(plain_step, "inductor", optimizer, tol={"rtol": 1e-4, "atol": 1e-5})
