"""``stillframe.compile(opt.step)`` captures the update of SGD, Adam and AdamW in one graph, as torch.compile
does (``stillframe/runtime/optimizer_step.py``): every test runs an eager optimizer and a compiled one side by
side and compares parameters, grads and optimizer state after every step.

On the ``eager`` backend the update is eager's own code path (``lr`` and the bias corrections are Python floats
the graph reads with ``.item()``), so it matches bit for bit; a backend that retraces the graph (AOTAutograd:
``aot_eager``, ``inductor``) gets torch's capturable variant (bias corrections as tensor arithmetic, as torch.compile
traces them): SGD still matches bit for bit there, Adam and AdamW up to float rounding.
"""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch
from torch import nn

import stillframe
import stillframe.rules.optimizers

OPTIMIZERS = {
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "sgd_nesterov": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2),
    "sgd_plain": lambda params: torch.optim.SGD(params, lr=0.1),
    "adam": lambda params: torch.optim.Adam(params, lr=1e-2),
    "adam_loop_amsgrad": lambda params: torch.optim.Adam(params, lr=1e-2, foreach=False, amsgrad=True,
                                                         weight_decay=0.1),
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-2),
    "adamw_loop": lambda params: torch.optim.AdamW(params, lr=1e-2, foreach=False),
    "adamw_foreach": lambda params: torch.optim.AdamW(params, lr=1e-2, foreach=True),
}
SCHEDULERS = {
    "step": lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5),
    "lambda": lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1 / (1 + i)),  # a new lr every step
    "cosine": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20),
}
EXACT = {"sgd_momentum", "sgd_nesterov", "sgd_plain"}


def exact(name: str, backend: str) -> bool:
    """Whether the compiled step's values are eager's bit for bit: always on the eager backend (eager's own code
    path); SGD's on aot_eager too (its tensor form is eager's code); inductor fuses the update (its rounding
    differs from eager's kernels)."""
    return backend == "eager" or (name in EXACT and backend != "inductor")


class Side:
    """A model, its optimizer and the step function called on it (eager or compiled)."""

    def __init__(self, make_opt, compile_step, unused_param: bool = False, scheduler: str | None = None):
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        params = list(self.model.parameters())
        if unused_param:  # its grad stays None: _init_group skips it, as eager does
            self.unused = nn.Parameter(torch.randn(3))
            params.append(self.unused)
        self.opt = make_opt(params)
        self.sched = SCHEDULERS[scheduler](self.opt) if scheduler else None
        self.step = compile_step(self.opt.step)

    def backward(self, i: int) -> None:
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(i))
        self.model(x).pow(2).mean().backward()


def assert_same(eager: Side, comp: Side, exact: bool, when: str) -> None:
    tol = dict(rtol=0, atol=0) if exact else {}
    for (name, p), q in zip(eager.model.named_parameters(), comp.model.parameters()):
        torch.testing.assert_close(q, p, **tol, msg=lambda m: f"{when}: param {name}: {m}")
        assert (p.grad is None) == (q.grad is None), when
        if p.grad is not None:
            torch.testing.assert_close(q.grad, p.grad, **tol, msg=lambda m: f"{when}: grad {name}: {m}")
    assert len(eager.opt.state) == len(comp.opt.state), when
    for p, q in zip(eager.opt.param_groups[0]["params"], comp.opt.param_groups[0]["params"]):
        assert eager.opt.state[p].keys() == comp.opt.state[q].keys(), when
        for key, value in eager.opt.state[p].items():
            torch.testing.assert_close(comp.opt.state[q][key], value, **tol,
                                       msg=lambda m: f"{when}: state[{key!r}]: {m}")
    assert [g["lr"] for g in eager.opt.param_groups] == [g["lr"] for g in comp.opt.param_groups], when


def run_both(name: str, backend: str, steps: int = 20, exact_values: bool | None = None,
             **kwargs) -> tuple[Side, Side]:
    eager = Side(OPTIMIZERS[name], lambda step: step, **kwargs)
    comp = Side(OPTIMIZERS[name], lambda step: stillframe.compile(step, backend=backend), **kwargs)
    for i in range(steps):
        for side in (eager, comp):
            side.backward(i)
            side.step()
        assert_same(eager, comp, exact(name, backend) if exact_values is None else exact_values, f"after step {i}")
        for side in (eager, comp):
            side.opt.zero_grad(set_to_none=i % 3 != 1)  # mostly None, sometimes zeros
            if side.sched is not None:
                side.sched.step()
    return eager, comp


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_compiled_step_matches_eager_for_20_steps_in_one_graph(name, backend):
    run_both(name, backend)
    # SGD with momentum creates its buffers in the first step: a graph of its own (it outputs them), as
    # torch.compile compiles the first step apart
    first_step = name in ("sgd_momentum", "sgd_nesterov")
    assert stillframe.counters["graphs"] == (2 if first_step else 1)
    assert stillframe.counters["graph_breaks"] == 0
    assert stillframe.counters["traces"] == (2 if first_step else 1)
    assert stillframe.counters["fallbacks"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sgd_momentum", "adamw", "adam_loop_amsgrad"])
def test_compiled_step_matches_eager_with_inductor(name):
    run_both(name, "inductor", steps=6)
    assert stillframe.counters["graphs"] == (2 if name == "sgd_momentum" else 1)  # SGD's first step apart


class NoWarning:
    """No scheduler warning and no StillframeWarning inside the block."""

    def __enter__(self):
        self._catch = warnings.catch_warnings(record=True)
        self.caught = self._catch.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        messages = [str(w.message) for w in self.caught if "lr_scheduler" in str(w.message)
                    or issubclass(w.category, stillframe.StillframeWarning)]
        assert messages == []


SCHEDULED = ["sgd_momentum", "sgd_nesterov", "adam", "adam_loop_amsgrad", "adamw", "adamw_loop", "adamw_foreach"]


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
@pytest.mark.parametrize("name", SCHEDULED)
def test_lr_scheduler_changes_lr_without_recompiling(name, scheduler):
    """A scheduler wraps ``opt.step`` (the compiled function is its wrapper) and changes ``lr`` (every 4 steps, or
    every step): ``lr`` is a graph input, so 20 steps compile at most 2 graphs (SGD with momentum: its first step,
    which creates the buffers, and the rest), every step bit for bit eager's, and ``opt._opt_called`` is set as in
    eager (the scheduler warns otherwise)."""
    with NoWarning():
        eager, comp = run_both(name, "eager", steps=20, scheduler=scheduler)
    assert comp.opt._opt_called is True
    assert len({g["lr"] for g in comp.opt.param_groups}) == 1 and comp.opt.param_groups[0]["lr"] != 0.1
    assert stillframe.counters["graphs"] <= 2
    assert stillframe.counters["graphs"] == (2 if name.startswith("sgd") else 1)
    assert stillframe.counters["fallbacks"] == 0


@pytest.mark.parametrize("name", ["sgd_momentum", "adam", "adamw_foreach"])
def test_lr_scheduler_compiles_no_more_than_torch_compile(name):
    """Side by side with torch.compile on the same steps (a new ``lr`` every step): torch.compile (2.13,
    ``specialize_float=False``) compiles the step with ``lr`` a constant, and once it changed, again with it a
    symbolic float (automatic dynamic); stillframe takes ``lr`` as an input from the first compile."""
    torch._dynamo.reset()
    theirs = []

    def counting(gm, example_inputs):
        theirs.append(gm)
        return gm.forward

    eager, comp = run_both(name, "eager", steps=10, scheduler="cosine")
    torch_side = Side(OPTIMIZERS[name], lambda step: torch.compile(step, backend=counting), scheduler="cosine")
    for i in range(10):
        torch_side.backward(i)
        torch_side.step()
        torch_side.opt.zero_grad(set_to_none=i % 3 != 1)
        torch_side.sched.step()
    ours = stillframe.counters["graphs"]
    assert ours <= 2 and ours <= len(theirs), (ours, len(theirs))
    torch._dynamo.reset()


@pytest.mark.parametrize("name", ["adam", "adamw_foreach"])
def test_lr_scheduler_on_aot_eager_takes_lr_as_an_input(name):
    """AOTAutograd cannot take the eager form's ``.item()`` scalars: the tensor form takes ``lr`` as a float32
    0-dim input (torch's capturable Adam reads a tensor ``lr``), so a new ``lr`` every step is one graph."""
    run_both(name, "aot_eager", steps=10, scheduler="lambda")
    assert stillframe.counters["graphs"] == 1
    assert stillframe.counters["fallbacks"] == 0


@pytest.mark.parametrize("name", ["sgd_momentum", "sgd_plain"])
def test_lr_scheduler_on_aot_eager_with_sgd_takes_lr_as_an_input_once_it_changed(name):
    """SGD's tensor form keys ``lr`` by value (bit for bit eager's: torch's SGD passes ``lr`` as ``alpha=-lr``);
    once it changed, the next graph takes it as a float32 input through torch's foreach path (which multiplies
    the grads by it, as under torch.compile: equal up to float rounding), as torch.compile's automatic dynamic
    makes a float symbolic once it changed: a new ``lr`` every step is at most 2 graphs."""
    run_both(name, "aot_eager", steps=10, scheduler="lambda", exact_values=False)
    assert stillframe.counters["graphs"] == 2  # the first step's lr as a constant (and its buffers), then any lr
    assert stillframe.counters["fallbacks"] == 0


@pytest.mark.parametrize("name", ["sgd_momentum", "adam"])
def test_a_param_whose_grad_is_none_is_skipped(name):
    eager, comp = run_both(name, "aot_eager", steps=5, unused_param=True)
    assert comp.unused not in comp.opt.state or not comp.opt.state[comp.unused]
    torch.testing.assert_close(comp.unused, eager.unused, rtol=0, atol=0)
    assert stillframe.counters["graphs"] == (2 if name == "sgd_momentum" else 1)  # SGD's first step apart


def test_grad_appearing_on_a_param_recompiles():
    eager, comp = run_both("adamw", "eager", steps=3, unused_param=True)
    for side in (eager, comp):
        side.backward(7)
        side.unused.grad = torch.ones(3)
        side.step()
    assert_same(eager, comp, False, "after the extra param got a grad")
    torch.testing.assert_close(comp.unused, eager.unused)
    torch.testing.assert_close(comp.opt.state[comp.unused]["exp_avg"], eager.opt.state[eager.unused]["exp_avg"])
    assert stillframe.counters["graphs"] == 2


def test_closure_runs_for_real():
    sides = [Side(OPTIMIZERS["sgd_momentum"], lambda s: s),
             Side(OPTIMIZERS["sgd_momentum"], lambda s: stillframe.compile(s, backend="eager"))]
    losses = []
    for side in sides:
        def closure(side=side):
            side.opt.zero_grad()
            loss = side.model(torch.ones(2, 8)).sum()
            loss.backward()
            return loss
        if side is sides[1]:
            with pytest.warns(stillframe.StillframeWarning, match="not captured: a closure is passed"):
                losses.append([side.step(closure) for _ in range(3)])
        else:
            losses.append([side.step(closure) for _ in range(3)])
    for a, b in zip(*losses):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    assert_same(sides[0], sides[1], True, "after closures")
    assert stillframe.counters["graphs"] == 0


def test_step_hooks_run_for_real():
    calls = []
    eager = Side(OPTIMIZERS["adam"], lambda s: s)
    comp = Side(OPTIMIZERS["adam"], lambda s: stillframe.compile(s, backend="eager"))
    for side in (eager, comp):
        side.opt.register_step_post_hook(lambda opt, args, kwargs: calls.append(opt))
    with pytest.warns(stillframe.StillframeWarning, match="not captured: step hooks are registered"):
        for side in (eager, comp):
            for i in range(3):
                side.backward(i)
                side.step()
    assert calls == [eager.opt] * 3 + [comp.opt] * 3
    assert_same(eager, comp, True, "after hooked steps")  # the real step: bit for bit
    assert stillframe.counters["graphs"] == 0


def test_a_refused_configuration_runs_for_real():
    make = lambda params: torch.optim.Adam(params, lr=1e-2, fused=True)  # noqa: E731
    eager, comp = Side(make, lambda s: s), Side(make, lambda s: stillframe.compile(s, backend="eager"))
    with pytest.warns(stillframe.StillframeWarning, match="not captured: fused=True"):
        for i in range(3):
            for side in (eager, comp):
                side.backward(i)
                side.step()
    assert_same(eager, comp, True, "fused=True")
    assert stillframe.counters["graphs"] == 0


def test_the_step_runs_with_grad_off_and_leaves_grad_mode():
    eager, comp = run_both("adamw", "aot_eager", steps=2)
    assert torch.is_grad_enabled()
    for p in comp.model.parameters():
        assert p.requires_grad and p.is_leaf and p.grad_fn is None


def test_an_update_that_cannot_be_traced_runs_for_real(monkeypatch):
    """A failure while tracing torch's functional update (here: made to raise) leaves that key running
    opt.step() for real, with one warning, and it is not traced again."""
    rules = stillframe.rules.optimizers.OPTIMIZER_RULES
    original = rules[torch.optim.Adam]

    def broken(*args):
        raise RuntimeError("cannot trace this")

    monkeypatch.setitem(rules, torch.optim.Adam, dataclasses.replace(original, update=broken))
    with pytest.warns(stillframe.StillframeWarning, match="tracing the update failed .RuntimeError: cannot trace"):
        eager, comp = run_both("adam", "eager", steps=4)
    assert stillframe.counters["graphs"] == 0 and stillframe.counters["traces"] == 1


def _training_step(model, opt):
    def step(x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    return step


@pytest.mark.parametrize("name", ["sgd_momentum", "sgd_nesterov", "adamw"])
def test_in_a_compiled_training_step_the_sgd_update_is_its_own_graph(name):
    """After the backward's break, ``opt.step()`` runs a compiled step: SGD's update is one graph (its values
    are eager's bit for bit); Adam's and AdamW's keep running for real there (so the training step's values
    stay exactly eager's)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    eager, comp = Side(OPTIMIZERS[name], lambda s: s), Side(OPTIMIZERS[name], lambda s: s)
    eager_step = _training_step(eager.model, eager.opt)
    comp_step = stillframe.compile(_training_step(comp.model, comp.opt), backend=backend)
    with NoWarning():
        for i in range(8):
            x, y = torch.randn(4, 8), torch.randn(4, 2)
            torch.testing.assert_close(comp_step(x, y), eager_step(x, y), rtol=0, atol=0)
            assert_same(eager, comp, True, f"after step {i}")
    update_graphs = [gm for gm in graphs if any(n.op == "call_method" and n.target in ("add_", "mul_")
                                                for n in gm.graph.nodes)]  # the update, in place on its inputs
    if name.startswith("sgd"):  # the first step (creates the momentum buffers: 2 lists of 4 tensors, lr), the rest
        assert len(update_graphs) == 2
        inputs = [len([n for n in gm.graph.nodes if n.op == "placeholder"]) for gm in update_graphs]
        assert inputs == [2 * 4 + 1, 3 * 4 + 1]
    else:
        assert update_graphs == []


FULLGRAPH_REFUSALS = {
    "fused=True": (lambda params: torch.optim.Adam(params, lr=1e-2, fused=True), None),
    "a closure is passed": (OPTIMIZERS["sgd_momentum"], "closure"),
    "step hooks are registered": (OPTIMIZERS["adamw"], "hook"),
}


@pytest.mark.parametrize("reason", sorted(FULLGRAPH_REFUSALS))
def test_fullgraph_raises_where_the_step_would_run_for_real(reason):
    """With ``fullgraph=True`` a configuration that is not captured raises ``Unsupported`` naming the reason, as
    torch.compile's fullgraph raises where it would break the graph; the parameters are left as they were (only
    torch's lazy state creation, ``_init_group``, ran: the step that follows creates none), and the same step then
    runs eagerly without fullgraph, bit for bit eager's."""
    make, how = FULLGRAPH_REFUSALS[reason]
    eager = Side(make, lambda s: s)
    comp = Side(make, lambda s: stillframe.compile(s, backend="eager", fullgraph=True))
    for side in (eager, comp):
        if how == "hook":
            side.opt.register_step_pre_hook(lambda opt, args, kwargs: None)
        side.backward(0)
    before = [p.detach().clone() for p in comp.model.parameters()]
    args = (lambda: None,) if how == "closure" else ()
    with pytest.raises(stillframe.Unsupported, match=f"step is not captured: {reason}"):
        comp.step(*args)
    for p, q in zip(before, comp.model.parameters()):
        torch.testing.assert_close(q, p, rtol=0, atol=0)
    eager.step(*args)
    with pytest.warns(stillframe.StillframeWarning, match=reason):
        stillframe.compile(comp.opt.step, backend="eager")(*args)
    assert_same(eager, comp, True, "after the real step")


@pytest.mark.parametrize("name", ["sgd_momentum", "adamw", "adamw_foreach"])
def test_fullgraph_captures_every_step(name):
    """A captured configuration never runs for real, the first step (SGD's momentum buffers) included: fullgraph
    raises nothing."""
    eager, comp = Side(OPTIMIZERS[name], lambda s: s), \
        Side(OPTIMIZERS[name], lambda s: stillframe.compile(s, backend="eager", fullgraph=True))
    for i in range(4):
        for side in (eager, comp):
            side.backward(i)
            side.step()
        assert_same(eager, comp, True, f"after step {i}")
    assert stillframe.counters["fallbacks"] == 0


def test_explain_shows_the_optimizer_guards():
    """``explain`` lists what an optimizer entry checks, readable: the optimizer, each hyperparameter by value,
    ``lr`` as an input, and every tensor by list and position."""
    eager, comp = Side(OPTIMIZERS["adamw"], lambda s: s), Side(OPTIMIZERS["adamw"], stillframe.explain)
    for i in range(2):
        for side in (eager, comp):
            side.backward(i)
            report = side.step()
    assert_same(eager, comp, True, "after 2 explained steps")
    text = report.format(code=False)
    assert "1 graph, 0 graph breaks" in text
    for line in ("L['self'] is AdamW optimizer", "param_groups[0]['betas'] == (0.9, 0.999)",
                 "param_groups[0]['weight_decay'] == 0.01",
                 "param_groups[0]['lr'] is a float (any value: a graph input)",
                 "param_groups[0] params_with_grad[0]: Parameter(dtype=torch.float32, device=cpu, shape=(16, 8), "
                 "stride=(8, 1), requires_grad=True)",
                 "param_groups[0] state_steps[3]: Tensor(dtype=torch.float32, device=cpu, shape=(), stride=(), "
                 "requires_grad=False)"):
        assert line in text, line
    entry, = report.graphs
    assert "(none)" not in text


def test_an_unhashable_hyperparameter_runs_for_real():
    """A param group holding a list (an extra key some code adds) is not a plain hyperparameter: the step runs
    for real, bit for bit eager's, with a warning naming why."""
    eager, comp = Side(OPTIMIZERS["adamw"], lambda s: s), \
        Side(OPTIMIZERS["adamw"], lambda s: stillframe.compile(s, backend="eager"))
    for side in (eager, comp):
        side.opt.param_groups[0]["tags"] = ["a", "b"]
    with pytest.warns(stillframe.StillframeWarning, match="a hyperparameter is not a Python number"):
        for i in range(3):
            for side in (eager, comp):
                side.backward(i)
                side.step()
            assert_same(eager, comp, True, f"after step {i}")
    assert stillframe.counters["graphs"] == 0


def test_params_that_come_to_share_storage_run_for_real():
    """Two params made to share storage after a captured step (``.data`` assigned: the same Parameter objects)
    are noticed on the next call: that step runs for real, as eager's."""
    eager, comp = Side(OPTIMIZERS["sgd_plain"], lambda s: s), \
        Side(OPTIMIZERS["sgd_plain"], lambda s: stillframe.compile(s, backend="eager"))
    for i in range(2):
        for side in (eager, comp):
            side.backward(i)
            side.step()
    assert stillframe.counters["graphs"] == 1
    for side in (eager, comp):
        side.model[0].bias.data = torch.zeros(16)
        side.model[2].bias.data = side.model[0].bias.data[:2]  # a view into the first bias's storage
    with pytest.warns(stillframe.StillframeWarning, match="share storage"):
        for side in (eager, comp):
            side.backward(5)
            side.step()
    assert_same(eager, comp, True, "after the step with shared storage")
