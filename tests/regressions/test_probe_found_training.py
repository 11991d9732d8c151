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


def _grad_retained_then_the_output_returned(w):
    t = w * 2
    g, = torch.autograd.grad(t.sum(), [w], retain_graph=True)  # (fuzz 53:62: AOTAutograd found w unused)
    return t, g


@pytest.mark.parametrize("fn, make", [
    (_grad_retained_then_the_output_returned, lambda i=0: (torch.full((3,), 1.0 + i, requires_grad=True),)),
    (_grad_then_loss, lambda i=0: (torch.randn(3, requires_grad=True), torch.randn(3) + i)),
    (_manual_sgd_step, lambda i=0: (torch.randn(3, 2, requires_grad=True), torch.randn(4, 3) + i)),
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_autograd_grad_then_the_loss_it_freed_is_used(backend, fn, make):
    # autograd.grad (no retain_graph) in the graph, and the loss returned or read after it: AOTAutograd failed to
    # differentiate the loss through the history the call freed, and BackendCompilerFailed reached the user. Those
    # calls now run for real (torch.compile breaks at every autograd.grad)
    assert_parity(fn, make, backend=backend, calls=3)


def _sigmoid_then_write_across_breaks(x):
    h = x * 2
    print("a", file=_SINK)
    h.sigmoid_()
    print("b", file=_SINK)
    h.mul_(2)
    h.sum().backward()
    return h


class _Block(torch.nn.Module):
    """BatchNorm with ``momentum=None`` (its ``1 / num_batches_tracked`` breaks the graph), then in-place
    LeakyReLU and Dropout: eager's backward raises, since the dropout writes what the LeakyReLU saved."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 6)
        self.bn = torch.nn.BatchNorm1d(6, momentum=None)
        self.act = torch.nn.LeakyReLU(0.1, inplace=True)
        self.drop = torch.nn.Dropout(0.3, inplace=True)

    def forward(self, x):
        out = self.drop(self.act(self.bn(self.fc(x))))
        out.sum().backward()
        return out


_SINK = __import__("io").StringIO()


@pytest.mark.parametrize("fn, make", [
    (_sigmoid_then_write_across_breaks, lambda i=0: (torch.randn(3, requires_grad=True) + 0 * i,)),
    (_Block(), lambda i=0: (torch.randn(5, 4) + i,)),
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_write_into_an_input_that_an_in_place_op_saved_after_writing(backend, fn, make):
    # sigmoid_ / leaky_relu_ on a graph input that requires grad save their result; AOTAutograd saved its own
    # new value apart from the input, so the later write (h.mul_, the in-place Dropout) was never checked, and the
    # backward ran where eager's raises "modified by an inplace operation". Such a write now runs for real
    assert_parity(fn, make, backend=backend, calls=2)


def _retains_grad_after_a_write(x):
    h = x * 2
    h.retain_grad()
    h.add_(1)
    return h.retains_grad, h


def _retained_grad_after_a_write(x):
    h = x * 2
    h.retain_grad()
    h.add_(1)
    h.sum().backward()
    return h.grad


def _hook_then_write(x):
    seen = []
    h = x * 2
    h.register_hook(lambda g: seen.append(g * 1))
    h.mul_(3)
    h.sum().backward()
    return seen


@pytest.mark.parametrize("fn", [_retains_grad_after_a_write, _retained_grad_after_a_write, _hook_then_write])
@pytest.mark.parametrize("backend", BACKENDS)
def test_retain_grad_and_hooks_survive_a_write(backend, fn):
    # retains_grad was read off the fake (False); on aot_eager a write into an input that retains its grad or has
    # a hook moved them onto AOTAutograd's copy_ after the graph, which the backward of the graph's own h.sum()
    # never passes: h.grad stayed None. Such a write now runs for real
    assert_parity(fn, lambda i=0: (torch.randn(3, requires_grad=True),), backend=backend, calls=2)


def _saved_then_written_through_a_mask(x, w, mask):
    t1 = w @ x
    t5 = t1.amax(-1)
    t1[mask] = w[:2] * 2
    return t5, t1


@pytest.mark.parametrize("backend", BACKENDS)
def test_write_that_runs_for_real_into_a_tensor_the_graph_saved(backend):
    # amax saves t1; the masked write of a value that requires grad runs for real on aot_eager (its gradient
    # needs nonzero()), after the graph, where AOTAutograd's saved copy of t1 never saw it: the backward ran where
    # eager's raises "modified by an inplace operation". The saving call now runs for real first (the write into
    # a tensor saved in an earlier graph is still unchecked: fuzz 45:68, torch.compile too)
    assert_parity(_saved_then_written_through_a_mask, lambda i=0: (
        torch.randn(4, 4, requires_grad=True), torch.randn(4, requires_grad=True),
        torch.tensor([True, False, True, False])), backend=backend, calls=2)


class _ClosureStep(torch.nn.Module):
    """A training step passing a closure to ``opt.step``: the optimizer calls it under ``enable_grad``."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.opt = torch.optim.SGD(self.fc.parameters(), lr=0.1, momentum=0.9)

    def forward(self, x, y):
        def closure():
            self.opt.zero_grad()
            loss = torch.nn.functional.mse_loss(self.fc(x), y)
            loss.backward()
            return loss

        return self.opt.step(closure).detach(), self.fc.weight * 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_optimizer_step_with_a_closure_inside_a_compiled_step(backend):
    # the opt.step(closure) a real step calls is routed to a compiled opt.step, which refuses a closure and runs
    # the step for real: right, but it warned of an eager fallback, where it is one more graph break (silent under
    # torch.compile). Only stillframe.compile(opt.step) itself warns now
    assert_parity(_ClosureStep(), lambda i=0: (torch.randn(4, 3), torch.randn(4, 2) + i), backend=backend, calls=3)


class _NesterovStep(torch.nn.Module):
    """An SGD nesterov step whose lr the caller sets each call (a hand-written schedule)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))
        self.opt = torch.optim.SGD([self.w], lr=0.1, momentum=0.9, nesterov=True)

    def forward(self, x, lr):
        self.opt.param_groups[0]["lr"] = lr
        self.opt.zero_grad()
        (self.w * x).sum().backward()
        self.opt.step()
        return self.w.grad.clone(), self.w * 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_sgd_nesterov_with_a_changing_lr_leaves_the_grads(backend):
    # once lr changed, the captured update takes it as a tensor and uses torch's foreach path, whose nesterov step
    # adds momentum * buf into the grads themselves: p.grad read after opt.step() was grad + 0.9 * buf, where
    # eager's single-tensor path leaves it as the backward made it (found by a probe). The grads are copied there
    lrs = [0.1, 0.1, 0.05, 0.02]
    assert_parity(_NesterovStep(), lambda i: (torch.tensor([1.0, 2.0, 3.0]), lrs[i]), backend=backend, calls=4)


def _state_equal(eager_state, compiled_state, exact, where):
    """The per-parameter optimizer state of the two sides agree: same keys in the same order, same values."""
    assert list(eager_state) == list(compiled_state), where
    for key, value in eager_state.items():
        got = compiled_state[key]
        assert type(got) is type(value), f"{where}: {key!r}"
        if isinstance(value, torch.Tensor):
            _tensor_equal(value, got, exact, f"{where}: {key!r}")
        elif isinstance(value, dict):
            _state_equal(value, got, exact, f"{where}: {key!r}")
        else:
            assert got == value, f"{where}: {key!r}"


def _tensor_equal(expected, got, exact, where):
    assert (expected is None) == (got is None), where
    if expected is not None:
        kw = dict(rtol=0, atol=0) if exact else {}
        torch.testing.assert_close(got, expected, msg=lambda m: f"{where}: {m}", **kw)


def _train_custom(optimizer, backend, steps=20, breaks_in_step=False):
    """20 steps of a custom optimizer, eager and with ``stillframe.compile(opt.step)``, compared after each step:
    parameters, grads and per-parameter state (created lazily by the first step); then ``opt.state_dict()``.
    Unless ``breaks_in_step``, no graph break is in the optimizer's own ``step`` (only in torch.optim's wrapper
    around it: its profiler context and hooks)."""
    import inspect
    import warnings

    import stillframe
    from stillframe.check.steady_programs import optimizer_model

    torch.manual_seed(0)
    eager_model = optimizer_model()
    compiled_model = optimizer_model()
    compiled_model.load_state_dict(eager_model.state_dict())
    eager_opt, compiled_opt = optimizer(eager_model.parameters()), optimizer(compiled_model.parameters())
    step = stillframe.compile(compiled_opt.step, backend=backend)
    exact = backend == "eager"
    traces = None
    with warnings.catch_warnings():
        warnings.simplefilter("error", stillframe.StillframeWarning)  # no eager fallback, no cache limit
        for i in range(steps):
            x, y = torch.randn(16, 4), torch.randn(16, 2)
            for model, opt, call in ((eager_model, eager_opt, eager_opt.step), (compiled_model, compiled_opt, step)):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                call()
            if i == 2:
                traces = stillframe.counters["traces"]
            for n, (pe, pc) in enumerate(zip(eager_model.parameters(), compiled_model.parameters())):
                _tensor_equal(pe, pc, exact, f"step {i}: parameter {n}")
                _tensor_equal(pe.grad, pc.grad, exact, f"step {i}: grad {n}")
                assert (pe in eager_opt.state) == (pc in compiled_opt.state), f"step {i}: state of {n}"
                _state_equal(eager_opt.state[pe], compiled_opt.state[pc], exact, f"step {i}: state of {n}")
            assert len(eager_opt.state) == len(compiled_opt.state)
    assert stillframe.counters["traces"] == traces  # a steady state after three steps: no trace again
    _state_equal(eager_opt.state_dict(), compiled_opt.state_dict(), exact, "state_dict")
    if not breaks_in_step:
        here = inspect.getsourcefile(optimizer)
        breaks = [br.format() for br in stillframe.explain(step).report().breaks
                  if br.location is not None and br.location.filename == here]
        assert breaks == []


@pytest.mark.parametrize("optimizer", ["MomentumSGD", "AdamIntStep", "AdamTensorStep"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_custom_optimizer_steps_as_eager_and_settles(backend, optimizer):
    # self.state[p] of a custom optimizer (a defaultdict keyed by the parameters) broke the graph at every lookup,
    # each parameter got plans of its own after it, and a 4-parameter model hit the cache limit, then ran on
    # instruction by instruction. The lookup is now traced (rules/live_dicts.py): the state's value read through
    # a guarded KeyedItemSource, the first step's defaultdict insertion replayed after the graph
    from stillframe.check import steady_programs

    _train_custom(getattr(steady_programs, optimizer), backend)


class _ContainsStateSGD(torch.optim.Optimizer):
    """Makes its state with ``p not in self.state`` and a store, and counts the entries with ``len`` after."""

    def __init__(self, params):
        super().__init__(params, dict(lr=0.1))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p not in self.state:
                    self.state[p] = {"buf": p.grad.clone(), "seen": 0}
                state = self.state[p]
                state["seen"] += 1
                state["buf"].mul_(0.5).add_(p.grad)
                p.add_(state["buf"], alpha=-group["lr"])
        self.entries = len(self.state)  # the live dict after the trace's writes: runs for real


class _LenBeforeStoreSGD(torch.optim.Optimizer):
    """Reads ``len(self.state)`` between lazy insertions (each read must see the insertions before it)."""

    def __init__(self, params):
        super().__init__(params, dict(lr=0.1))

    @torch.no_grad()
    def step(self):
        sizes = []
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                sizes.append(len(self.state))
                if "step" not in state:
                    state["step"] = 0
                state["step"] += len(sizes)
                p.add_(p.grad, alpha=-group["lr"])
        self.sizes = sizes


@pytest.mark.parametrize("optimizer", [_ContainsStateSGD, _LenBeforeStoreSGD])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_custom_optimizer_state_read_as_a_whole_after_a_write(backend, optimizer):
    # `p in self.state`, self.state[p] = {...}, and len(self.state) after the trace inserted into it: the length
    # is not folded from the live dict (which the insertions reach only after the graph): it runs for real
    import stillframe

    _train_custom(optimizer, backend, steps=4, breaks_in_step=True)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = optimizer(model.parameters())
    step = stillframe.compile(opt.step, backend=backend)
    model(torch.randn(2, 3)).sum().backward()
    step()
    expected = {"entries": 2} if optimizer is _ContainsStateSGD else {"sizes": [1, 2]}
    assert {k: getattr(opt, k) for k in expected} == expected


class _CustomOptimizerTrainingStep(torch.nn.Module):
    """A whole training step (zero_grad, backward, step) with a custom optimizer, compiled as one module."""

    def __init__(self, optimizer):
        super().__init__()
        from stillframe.check.steady_programs import optimizer_model

        self.net = optimizer_model()
        self.opt = optimizer(self.net.parameters())

    def forward(self, x, y):
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        loss.backward()
        self.opt.step()
        return loss.detach()


@pytest.mark.parametrize("optimizer", ["MomentumSGD", "AdamIntStep", "AdamTensorStep"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_training_step_with_a_custom_optimizer(backend, optimizer):
    # the custom optimizer's self.state[p] inside a compiled training step (its opt.step() is inlined, the state
    # made lazily on the first call): parameters after each call are eager's
    from stillframe.check import steady_programs

    torch.manual_seed(0)
    assert_parity(_CustomOptimizerTrainingStep(getattr(steady_programs, optimizer)),
                  lambda i: (torch.randn(8, 4), torch.randn(8, 2) + i), backend=backend, calls=4)


def _branch_on_a_tensor_keyed_dict(state, x):
    return x + 1 if state else x - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_truth_of_a_live_dict_keyed_by_tensors_is_guarded(backend):
    # bool() of a live dict the trace keeps opaque (its keys are tensors, as an optimizer's state) was folded from
    # the live dict with no guard: a call with an empty dict ran the plan of a non-empty one. Its length is guarded
    w = torch.nn.Parameter(torch.ones(2))
    assert_parity(_branch_on_a_tensor_keyed_dict, lambda i: ({w: 1} if i != 1 else {}, torch.zeros(2)),
                  backend=backend, calls=3)
