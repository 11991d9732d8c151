"""Named regression tests: each reproduces one upstream torch.compile bug (or a seed of this project) and is a
parity test against eager PyTorch (``stillframe.check.assert_parity``).

Every test is named after its issue and runs with ``backend="eager"`` and ``backend="aot_eager"``: the first
checks the frontend alone, the second also what a functionalizing backend (AOTAutograd) is handed. A test that
fails because of a stillframe bug stays here as the specification, marked ``xfail(strict=True)`` with a
one-line diagnosis, only for the backend(s) on which it fails.

Sources: ``/work/shared/seeds/000_*`` (pytorch#93610 and PR #100128: ``t_`` / ``squeeze_`` mutate the fake
tensors VariableTrackers hold, so checkpoints and guards see post-mutation metadata) and ``001_*`` (pytorch#169179:
``requires_grad`` lost after ``matrix[:, rows, cols] = vec``), and the pytorch issues named in each test.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import stillframe
from stillframe import compat
from stillframe.check import assert_parity

BACKENDS = ["eager", "aot_eager"]



def xfail_on(backend: str, failing: dict[str, str]):
    """``pytest.param(backend)`` marked strict-xfail with the reason for that backend, if it has one."""
    if backend in failing:
        return pytest.param(backend, marks=pytest.mark.xfail(strict=True, reason=failing[backend]))
    return backend


def backends(**failing: str):
    """The ``backend`` parametrization, strict-xfailing those named in ``failing`` (``aot_eager=...``)."""
    return pytest.mark.parametrize("backend", [xfail_on(b, failing) for b in BACKENDS])


def counting_backend(name: str):
    """A backend that records each graph it is handed and compiles it with the backend named ``name``."""
    real = compat.resolve_backend(name, None, None, None)
    graphs: list[torch.fx.GraphModule] = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return real(gm, example_inputs)

    return graphs, counting


def compiled_entries(compiled) -> list:
    """The cache entries that run a compiled graph (not an eager fallback)."""
    return [entry for entry in compiled.cache_entries() if not entry.eager]


# ---------------------------------------------------------------- seed 001 / pytorch#169179: sliced assignment


def _pytorch_skew_symmetric(vec, block_size):
    batch_size = vec.shape[0]
    matrix = torch.zeros(batch_size, block_size, block_size, device=vec.device, dtype=vec.dtype)
    rows, cols = torch.triu_indices(block_size, block_size, 1)
    matrix[:, rows, cols] = vec
    if torch.is_grad_enabled():
        assert vec.requires_grad  # ok
        assert matrix.requires_grad  # fails with compile, ok in eager mode
    matrix = matrix - matrix.transpose(-2, -1)
    return matrix


def _skew_args(block_size=5):
    return torch.randn(2, block_size * (block_size - 1) // 2, requires_grad=True), block_size


@backends()
def test_seed_001_skew_symmetric_requires_grad_after_sliced_assignment(backend):
    """seeds/001 "Torch.compile Bug: Requires_grad Propagation With Slicing".

    Eager: ``matrix = torch.zeros(...)`` does not require grad; after ``matrix[:, rows, cols] = vec`` with ``vec``
    requiring grad it does (its grad_fn is ``IndexPutBackward``), so the ``assert`` inside passes, the result
    requires grad, and ``vec.grad`` is the antisymmetric scatter of ones.
    """
    report = assert_parity(_pytorch_skew_symmetric, _skew_args, backend=backend, calls=2)
    assert report.compiled_result.requires_grad
    assert len(compiled_entries(report.compiled)) == 1


@backends()
def test_seed_001_skew_symmetric_called_under_no_grad(backend):
    """seeds/001, called from inside ``torch.no_grad()``: eager skips the asserts; nothing requires grad."""
    with torch.no_grad():
        report = assert_parity(_pytorch_skew_symmetric, _skew_args, backend=backend, calls=2)
    assert not report.compiled_result.requires_grad


class SkewSymmetric(nn.Module):
    """pytorch#169179's layout: the triangle indices live on the module, the method is called from forward."""

    def __init__(self, block_size=5):
        super().__init__()
        self.block_size = block_size
        self.rows, self.cols = torch.triu_indices(block_size, block_size, 1)

    def _pytorch_skew_symmetric(self, vec, block_size):
        batch_size = vec.shape[0]
        matrix = torch.zeros(batch_size, block_size, block_size, device=vec.device, dtype=vec.dtype)

        matrix[:, self.rows, self.cols] = vec

        if torch.is_grad_enabled():
            assert vec.requires_grad  # ok
            assert matrix.requires_grad  # fails with compile, ok in eager mode  <---------

        matrix = matrix - matrix.transpose(-2, -1)
        return matrix

    def forward(self, vec):
        return self._pytorch_skew_symmetric(vec, self.block_size)


@backends()
def test_pytorch_169179_requires_grad_after_sliced_assignment(backend):
    """pytorch#169179 "torch.compile: Sliced assign doesn't reliably propagate requires_grad".

    Eager: ``matrix[:, self.rows, self.cols] = vec`` makes the zero-initialized ``matrix`` require grad, so the
    ``assert matrix.requires_grad`` in the method passes and gradients reach ``vec``.
    """
    report = assert_parity(SkewSymmetric(), lambda: (torch.randn(3, 10, requires_grad=True),), backend=backend,
                           calls=2)
    assert report.compiled_result.requires_grad


@backends()
def test_pytorch_169179_index_put_workaround(backend):
    """pytorch#169179's workaround, ``matrix.index_put((batch_idx, rows, cols), vec)``, must agree with eager too."""

    def skew_index_put(vec, block_size):
        batch_size = vec.shape[0]
        matrix = torch.zeros(batch_size, block_size, block_size, device=vec.device, dtype=vec.dtype)
        rows, cols = torch.triu_indices(block_size, block_size, 1)
        batch_idx = torch.arange(batch_size, device=vec.device)[:, None]
        matrix = matrix.index_put((batch_idx, rows, cols), vec)
        return matrix - matrix.transpose(-2, -1), matrix.requires_grad

    assert_parity(skew_index_put, _skew_args, backend=backend)


# ---------------------------------------------------------------- seed 000 / pytorch#93610: t_ and squeeze_ on inputs


class MySimpleModel(nn.Module):
    def forward(self, x, y):
        x.t_()
        y.t_()
        return (x + y,)


class MySqueezeModel(nn.Module):
    def forward(self, x, y):
        x.squeeze_()
        y.squeeze_()
        return (x + y,)


SEED_000_CASES = {
    "t_-3x3": (MySimpleModel, (3, 3)),
    "t_-2x3": (MySimpleModel, (2, 3)),
    "squeeze_-1x3": (MySqueezeModel, (1, 3)),
}


@pytest.mark.parametrize("case", list(SEED_000_CASES))
@backends()
def test_seed_000_inplace_metadata_ops_on_inputs_compile_once(backend, case):
    """seeds/000, pytorch#93610 "We probably are allowing mutations to happen on fake tensor in VariableTracker".

    The repro of PR #100128: ``forward(x, y): x.t_(); y.t_(); return (x + y,)``. Dynamo built its guards from
    the fake tensor *after* ``t_`` had flipped its strides, so ``x.stride()[0] == 3`` never held again and every
    call recompiled. Eager: the caller's ``x`` and ``y`` end transposed (stride ``(1, 3)`` for 3x3), the result
    is ``x.T + y.T``. Three calls with fresh contiguous inputs must compile exactly one graph.
    """
    model_cls, shape = SEED_000_CASES[case]
    graphs, counting = counting_backend(backend)
    compiled = stillframe.compile(model_cls(), backend=counting)
    assert_parity(model_cls(), lambda: (torch.randn(*shape), torch.randn(*shape)), compiled=compiled, calls=3)
    assert len(graphs) == 1
    assert len(compiled.cache_entries()) == 1
    assert stillframe.counters["traces"] == 1

    eager_x, eager_y = torch.randn(*shape), torch.randn(*shape)
    x, y = eager_x.clone(), eager_y.clone()
    model_cls()(eager_x, eager_y)
    compiled(x, y)
    for eager_t, t in ((eager_x, x), (eager_y, y)):
        assert (t.shape, t.stride(), t.storage_offset()) == (eager_t.shape, eager_t.stride(),
                                                             eager_t.storage_offset())
    assert len(graphs) == 1


# ---------------------------------------------------------------- pytorch#170487 and #123713: requires_grad_() inside


def model_grad(model, x):
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        grad = torch.autograd.grad(model(x).sum(), x, create_graph=False)[0]
    return grad


@pytest.mark.parametrize("grad_mode", ["grad", "outer-no-grad"])
@backends()
def test_pytorch_170487_requires_grad_then_autograd_grad(backend, grad_mode):
    """pytorch#170487 "Support `.requires_grad_(True)` in `torch.compile`" (the snippet from its thread).

    Eager: ``x.detach().requires_grad_(True)`` makes a fresh leaf, ``torch.autograd.grad`` of ``model(x).sum()``
    with respect to it is ``model.weight.sum(0)`` broadcast over the batch; the same under an outer no_grad.
    """
    model = nn.Linear(3, 2)
    with torch.set_grad_enabled(grad_mode == "grad"):
        report = assert_parity(model_grad, lambda: (model, torch.randn(4, 3)), backend=backend, calls=2)
    assert len(compiled_entries(report.compiled)) == 1


@backends()
def test_pytorch_170487_requires_grad_on_detached_intermediate(backend):
    """pytorch#170487 without ``autograd.grad``: ``x.detach().requires_grad_(True)`` is a new leaf requiring grad.

    Eager: the returned leaf requires grad, has no grad_fn, and backward through ``(x * x).sum()`` fills its
    ``.grad`` with ``2 * x``; the caller's input gets no gradient through it.
    """

    def f(inp):
        x = (inp * 2).detach().requires_grad_(True)
        y = (x * x).sum()
        return y, x, x.requires_grad, x.is_leaf

    report = assert_parity(f, lambda: (torch.randn(4, 3, requires_grad=True),), backend=backend)
    eager_leaf, compiled_leaf = report.eager_result[1], report.compiled_result[1]
    assert compiled_leaf.grad is not None
    torch.testing.assert_close(compiled_leaf.grad, eager_leaf.grad)


class SimpleNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(SimpleNN, self).__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.activation = nn.ReLU()
        self.fc2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        x = self.fc1(x)
        x = self.activation(x)
        x = self.fc2(x)
        return x


def task(model_1, model_2, input, target_output):
    # Forward pass
    with torch.no_grad():
        intermediate_output = model_1(input)
    intermediate_output.requires_grad_()
    requires_grad = intermediate_output.requires_grad  # the issue prints this: False compiled, True eager
    output = model_2(intermediate_output)
    loss_fn = nn.MSELoss()
    loss = loss_fn(output, target_output)
    return loss, requires_grad


class Task(nn.Module):
    """Holds pytorch#123713's two models so that the checker compares their parameters' gradients."""

    def __init__(self):
        super().__init__()
        self.model_1 = SimpleNN(1, 32, 1)
        self.model_2 = SimpleNN(1, 32, 1)

    def forward(self, input, target_output):
        return task(self.model_1, self.model_2, input, target_output)


def _task_args():
    return torch.rand(16, 1), torch.rand(16, 1)


@backends()
def test_pytorch_123713_requires_grad_inside_compiled_function(backend):
    """pytorch#123713 ".requires_grad_(True) doesn't work with torch.compile".

    Eager: ``model_1``'s output, computed under ``no_grad``, does not require grad; ``requires_grad_()`` turns it
    into a leaf that does, so the loss requires grad, ``model_2``'s parameters get ``.grad`` after backward and
    ``model_1``'s stay ``None``.
    """
    report = assert_parity(Task(), _task_args, backend=backend, calls=2)
    assert report.compiled_result[1] is True


@backends()
def test_pytorch_123713_as_a_function_of_the_models(backend):
    """pytorch#123713 as written: ``task(model_1, model_2, input, target)`` compiled, the models passed in.

    The checker does not look into module arguments, so the gradients of ``model_2`` (set) and ``model_1``
    (``None``) are compared here after the checker's backward.
    """
    models = []

    def make():
        torch.manual_seed(1)
        model_1, model_2 = SimpleNN(1, 32, 1), SimpleNN(1, 32, 1)
        models.append((model_1, model_2))
        return (model_1, model_2, *_task_args())

    report = assert_parity(task, make, backend=backend)
    assert report.compiled_result[1] is True
    (eager_1, eager_2), (compiled_1, compiled_2) = models
    for e, c in zip([*eager_1.parameters(), *eager_2.parameters()],
                    [*compiled_1.parameters(), *compiled_2.parameters()]):
        assert (e.grad is None) == (c.grad is None)
        if e.grad is not None:
            torch.testing.assert_close(c.grad, e.grad)
    assert all(p.grad is not None for p in compiled_2.parameters())


def task_prebuilt_loss(model_1, model_2, input, target_output, loss_fn):
    """pytorch#123713's ``task`` with the loss module built by the caller (isolates ``requires_grad_()``)."""
    with torch.no_grad():
        intermediate_output = model_1(input)
    intermediate_output.requires_grad_()
    requires_grad = intermediate_output.requires_grad
    output = model_2(intermediate_output)
    loss = loss_fn(output, target_output)
    return loss, requires_grad, intermediate_output


class TaskPrebuiltLoss(Task):
    def __init__(self):
        super().__init__()
        self.loss_fn = nn.MSELoss()

    def forward(self, input, target_output):
        return task_prebuilt_loss(self.model_1, self.model_2, input, target_output, self.loss_fn)


@backends()
def test_pytorch_123713_requires_grad_on_output_computed_under_no_grad(backend):
    """pytorch#123713 with ``nn.MSELoss()`` built outside: the ``no_grad`` block and ``requires_grad_()`` alone.

    Eager: the intermediate is a leaf requiring grad (no grad_fn); ``model_2``'s parameters and the
    intermediate get gradients after backward, ``model_1``'s parameters stay ``None``.
    """
    report = assert_parity(TaskPrebuiltLoss(), _task_args, backend=backend, calls=2)
    assert report.compiled_result[1] is True


# ---------------------------------------------------------------- pytorch#128035: mutated input requiring grad


def f_128035(a):
    tmp = a.detach()
    a.mul_(2)
    return a, tmp


def _with_leaf(a, leaf):
    """pytorch#128035's ``f``; ``leaf`` (unused) is passed only so that the checker compares ``leaf.grad``."""
    return f_128035(a)


def _make_128035():
    inp = torch.ones(3, requires_grad=True)
    graph_inp = inp.mul(2)
    return graph_inp, inp


@backends()
def test_pytorch_128035_gradients_after_mutating_input_requiring_grad(backend):
    """pytorch#128035 "torch.compile fails to preserve gradients when an input requiring grad is mutated".

    Eager: ``graph_inp = inp.mul(2)`` is mutated by ``a.mul_(2)``; ``outs[0].sum().backward()`` gives
    ``inp.grad == [4, 4, 4]`` (the issue saw ``[0, 0, 0]`` compiled with aot_eager). ``tmp = a.detach()`` shares
    storage with ``a`` and so sees the doubled values; it does not require grad.
    """
    report = assert_parity(_with_leaf, _make_128035, backend=backend)
    assert not report.compiled_result[1].requires_grad


@backends()
def test_pytorch_128035_caller_sees_new_grad_fn(backend):
    """pytorch#128035: after the call the caller's ``graph_inp`` has a grad_fn through which ``inp`` gets 4s.

    (Which node it is -- eager's ``MulBackward0`` or a write-back ``CopyBackwards`` -- is not observable in
    values; what matters is that gradients flow to ``inp`` through the mutation.)
    """
    eager_inp, eager_graph_inp = _make_128035()[::-1]
    inp, graph_inp = _make_128035()[::-1]
    f_128035(eager_graph_inp)
    stillframe.compile(f_128035, backend=backend)(graph_inp)
    assert graph_inp.grad_fn is not None and not graph_inp.is_leaf
    graph_inp.sum().backward()
    eager_graph_inp.sum().backward()
    torch.testing.assert_close(inp.grad, eager_inp.grad)
    torch.testing.assert_close(inp.grad, torch.full((3,), 4.0))


# ---------------------------------------------------------------- pytorch#99455: tensor created inside the region


def foo():
    x = torch.randn(5, 5, requires_grad=True)
    y = x + 2
    return x, y


@backends()
def test_pytorch_99455_grad_of_tensor_created_inside_compiled_region(backend):
    """pytorch#99455 "Not Preserving Grad For Tensor Created Inside torch.compile".

    Eager: ``x = torch.randn(5, 5, requires_grad=True)`` is a leaf requiring grad, ``y = x + 2`` requires grad
    (``AddBackward0``); backward of ``x.sum() + y.sum()`` gives ``x.grad == 2``.
    """
    report = assert_parity(foo, lambda: (), backend=backend)
    eager_x, compiled_x = report.eager_result[0], report.compiled_result[0]
    assert compiled_x.requires_grad and compiled_x.is_leaf
    assert compiled_x.grad is not None
    torch.testing.assert_close(compiled_x.grad, eager_x.grad)


# ---------------------------------------------------------------- pytorch#139789: input mutation, then aliasing


def f_139789(x, y):
    x.mul_(2)
    return x + y


def _separate():
    return torch.ones(4), torch.ones(4)


def _aliased():
    base = torch.ones(8)
    return base[:4], base[2:6]


ALIASING_ORDERS = {
    "separate-then-aliased": [_separate, _aliased, _separate, _aliased],
    "aliased-then-separate": [_aliased, _separate, _aliased, _separate],
}


@pytest.mark.parametrize("order", list(ALIASING_ORDERS))
@backends()
def test_pytorch_139789_input_mutation_then_aliased_inputs(backend, order):
    """pytorch#139789 "compiling "input mutation" followed by "input mutation + aliasing" does not properly
    recompile".

    Eager: with ``x = base[:4]`` and ``y = base[2:6]`` (overlapping views), ``x.mul_(2)`` also doubles
    ``y[:2]``, so ``x + y == [3, 3, 4, 4]`` and the base becomes ``[2, 2, 2, 2, 1, 1, 1, 1]``; with separate
    tensors ``x + y == [3, 3, 3, 3]``. The same compiled function must match eager in every order.
    """
    makers = ALIASING_ORDERS[order]
    assert_parity(f_139789, lambda i: makers[i](), backend=backend, calls=len(makers))


@backends()
def test_pytorch_139789_aliased_base_is_mutated_like_eager(backend):
    """pytorch#139789: the common base of the aliased inputs ends as in eager after a cached non-aliased call."""
    compiled = stillframe.compile(f_139789, backend=backend)
    compiled(*_separate())
    base, eager_base = torch.ones(8), torch.ones(8)
    out = compiled(base[:4], base[2:6])
    eager_out = f_139789(eager_base[:4], eager_base[2:6])
    torch.testing.assert_close(out, eager_out)
    torch.testing.assert_close(base, eager_base)


# ---------------------------------------------------------------- pytorch#139476: requires_grad of params toggled


def adjust_model(model):
    to_freeze = model.num_iter % 2 == 0
    if to_freeze:
        for param in model.layer2.parameters():
            param.requires_grad = False
    else:
        for param in model.layer2.parameters():
            param.requires_grad = True


class MyModule(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(MyModule, self).__init__()

        self.layer1 = nn.Linear(hidden_size, hidden_size)
        self.layer2 = nn.Linear(hidden_size, hidden_size)

        self.num_iter = 0

    def forward(self, x):
        x = self.layer2(x + self.layer1.bias)

        self.num_iter += 1
        return x


class FrozenLayerModule(nn.Module):
    """pytorch#139476's module without the iteration counter (so that compiles can be counted exactly)."""

    def __init__(self, hidden_size):
        super().__init__()
        self.layer1 = nn.Linear(hidden_size, hidden_size)
        self.layer2 = nn.Linear(hidden_size, hidden_size)

    def forward(self, x):
        return self.layer2(x + self.layer1.bias)


def _set_layer2_requires_grad(model, value):
    for param in model.layer2.parameters():
        param.requires_grad = value


@backends()
def test_pytorch_139476_param_requires_grad_toggled_between_calls(backend):
    """pytorch#139476 "dynamo re-uses incorrect compiled frame when changing requires-gradness of model params".

    Eager: before each call ``adjust_model`` freezes ``layer2`` on even iterations and unfreezes it on odd ones;
    after backward, ``layer1.bias`` always has a gradient and ``layer2.weight`` / ``layer2.bias`` have one exactly
    on the odd iterations (``None`` when frozen). ``num_iter`` is incremented by ``forward``.
    """
    eager = MyModule(8, 8, 1)
    target = copy.deepcopy(eager)
    compiled = stillframe.compile(target, backend=backend)
    for step in range(4):
        adjust_model(eager)
        adjust_model(target)
        for model in (eager, target):
            for param in model.parameters():
                param.grad = None
        assert_parity(eager, lambda: (torch.randn(4, 8),), compiled=compiled, seed=step)
        assert (target.layer2.weight.grad is None) == (step % 2 == 0), f"step {step}"
        assert target.layer1.bias.grad is not None
        assert target.num_iter == eager.num_iter == step + 1


@backends()
def test_pytorch_139476_requires_grad_change_recompiles_exactly_once(backend):
    """pytorch#139476, counted: freezing ``layer2`` compiles a second graph; toggling back and forth reuses both."""
    eager = FrozenLayerModule(8)
    target = copy.deepcopy(eager)
    graphs, counting = counting_backend(backend)
    compiled = stillframe.compile(target, backend=counting)
    for step, (frozen, expected_graphs) in enumerate([(False, 1), (True, 2), (False, 2), (True, 2)]):
        for model in (eager, target):
            _set_layer2_requires_grad(model, not frozen)
            for param in model.parameters():
                param.grad = None
        assert_parity(eager, lambda: (torch.randn(4, 8),), compiled=compiled, seed=step)
        assert len(graphs) == expected_graphs, f"step {step}: {len(graphs)} graphs compiled"
        assert (target.layer2.weight.grad is None) == frozen
    assert len(compiled.cache_entries()) == 2


# ---------------------------------------------------------------- found by the property tests (test_mutation_properties)


def expand_then_write_under_no_grad(x):
    with torch.no_grad():
        x.expand(2, 4).mul_(2)
    return x


def test_grad_mode_restored_when_the_graph_raises_inside_no_grad():
    """The graph raises between its grad-off and grad-on nodes (fake tensors do not predict the overlap error).

    Eager backend only: AOTAutograd's functionalization does not raise the overlap error at all, under
    ``torch.compile`` as under stillframe (a backend limitation).
    """
    assert_parity(expand_then_write_under_no_grad, lambda: (torch.randn(4),), backend="eager")
    assert torch.is_grad_enabled()


def mutate_then_requires_grad(a):
    a.mul_(2)
    a.requires_grad_()
    return a


def mutate_then_detach(a):
    a.mul_(2)
    a.detach_()
    return a


@backends()
@pytest.mark.parametrize("fn, make", [
    (mutate_then_requires_grad, lambda: (torch.randn(4, 4),)),
    (mutate_then_detach, lambda: (torch.randn(4, 4, requires_grad=True) * 1,)),
], ids=["requires_grad_", "detach_"])
def test_autograd_metadata_change_after_a_mutation_of_an_argument(backend, fn, make):
    """``requires_grad_()`` / ``detach_()`` that a graph cannot carry run for real at a graph break."""
    assert_parity(fn, make, backend=backend)


def write_into_transposed_view(a, b):
    b[:, 1] = 3.0
    return b.transpose(0, 1), a.shape


@backends()
def test_argument_read_only_for_its_shape_is_not_a_graph_input(backend):
    """``a`` aliases ``b`` but the graph never reads it: handing it to AOTAutograd gave wrong strides."""
    def make():
        a = torch.randn(4, 4)
        return a, a.t()

    assert_parity(write_into_transposed_view, make, backend=backend)


def _passes_through(func):
    import functools

    @functools.wraps(func)  # sets __wrapped__: inspect.signature would report func's parameters, not ours
    def wrapper(self, *args, **kwargs):
        kwargs.pop("return_dict", None)
        return func(self, *args, **kwargs)

    return wrapper


class _WrappedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @_passes_through
    def forward(self, x, scale=1.0):
        y = self.lin(x) * scale
        print("between graphs")  # a break inside the wrapped function: the wrapper's frame is rebuilt
        return y.relu()


@pytest.mark.parametrize("call", ["positional", "keyword", "extra_keyword"])
def test_decorated_forward_binds_the_wrappers_own_arguments(call, capsys):
    """Regression (transformers' can_return_tuple): arguments were bound by the signature of __wrapped__, so
    the wrapper's `*args, **kwargs` were missing when its frame was rebuilt at a break (UnboundLocalError)."""
    make = {"positional": lambda: ((torch.randn(2, 4), 2.0), {}),
            "keyword": lambda: ((), {"x": torch.randn(2, 4), "scale": 2.0}),
            "extra_keyword": lambda: ((torch.randn(2, 4),), {"return_dict": False})}[call]
    assert_parity(_WrappedForward(), make, calls=2)


def test_is_compiling_answers_as_under_torch_compile():
    """Libraries branch on torch.compiler.is_compiling() to take compile-friendly paths: inside a trace it is
    True, as under torch.compile (not eager's False); a step run for real between graphs gets False."""

    def f(x):
        return x + (1 if torch.compiler.is_compiling() else 2)

    x = torch.zeros(2)
    theirs = torch.compile(f, backend="eager")(x)
    ours = stillframe.compile(f, backend="eager", fullgraph=True)(x)
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(ours, torch.ones(2))
