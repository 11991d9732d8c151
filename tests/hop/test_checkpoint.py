"""``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)`` captured as torch's
``tag_activation_checkpoint`` op (issue 13): forward and backward parity, recomputation kept (the region's
activations are not saved), and the HF ``gradient_checkpointing_enable()`` path."""

import pytest
import torch
import torch.utils.checkpoint as ck

from stillframe.check.parity import assert_parity

import stillframe

HOP = torch.ops.higher_order.tag_activation_checkpoint


def entries(compiled):
    compiled = compiled.__dict__.get("_compiled_forward", compiled)
    return [e for es in compiled.all_cache_entries().values() for e in es]


def hops(compiled):
    return [n for e in entries(compiled) if e.graph_module is not None for n in e.graph_module.graph.nodes
            if n.target is HOP]


def breaks(compiled):
    return [e.graph_break.kind for e in entries(compiled) if e.graph_break is not None]


def body(a, w, scale=1.0):
    return (a @ w).relu() * scale, [a.sin(), 2]


def with_kwargs_and_structure(x, w):
    y, (z, two) = ck.checkpoint(body, x, w, use_reentrant=False, scale=2.0)
    return y.sum() + z.sum() * two


def make_xw():
    return torch.randn(3, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_checkpoint_is_one_graph_with_eager_gradients(backend):
    report = assert_parity(with_kwargs_and_structure, make_xw, calls=2, backend=backend)
    assert breaks(report.compiled) == [] and len(hops(report.compiled)) == 1


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 4))
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x):
        for _ in range(2):
            x = x + ck.checkpoint(self.inner, self.norm(x), use_reentrant=False)
        return x.pow(2).mean()


def test_a_module_checkpointed_twice_lifts_its_parameters():
    report = assert_parity(Block(), lambda: (torch.randn(2, 4, requires_grad=True),), calls=2)
    assert breaks(report.compiled) == [] and len(hops(report.compiled)) == 2


def region(x):
    return x.sin().cos().exp().sum(-1)


def checkpointed(x):
    return ck.checkpoint(region, x, use_reentrant=False)


def count_saved(fn, x):
    """How many tensors autograd saves outside checkpointed regions while running ``fn(x)``."""
    count = [0]

    def pack(t):
        count[0] += 1
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(x)
    out.sum().backward()
    return count[0]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_recomputation_is_kept(backend):
    """Under saved-tensor hooks (how ``count_saved`` counts) a compiled call runs for real, so it saves exactly
    what eager's checkpoint saves: no activations (they are recomputed in backward), unlike the same code
    inlined. torch.compile saves as many from torch 2.13 (torch 2.11's ``tag_activation_checkpoint`` run as it is,
    backend="eager", does not checkpoint; there only AOT autograd's partitioner recomputes)."""
    compiled = stillframe.compile(checkpointed, backend=backend)
    x = torch.randn(3, 5, requires_grad=True)
    compiled(x)  # traced first, with no hooks active: one higher-order op in the graph
    saved = count_saved(compiled, x)
    assert saved == count_saved(checkpointed, x) < count_saved(region, x)
    if torch.__version__ >= "2.13":
        torch._dynamo.reset()
        assert saved == count_saved(torch.compile(checkpointed, backend=backend), x)
    assert len(hops(compiled)) == 1


LOG = []


def effectful(a):
    LOG.append(a.shape)
    return a * 2


def reentrant(x):
    return ck.checkpoint(torch.sin, x.detach(), use_reentrant=True) * 2  # no input requires grad


def reentrant_with_grad(x, w):
    return ck.checkpoint(lambda a: (a @ w).tanh(), x, use_reentrant=True).sum()


def test_reentrant_checkpoint_with_an_input_requiring_grad_is_captured():
    report = assert_parity(reentrant_with_grad, make_xw, calls=2)
    assert breaks(report.compiled) == [] and len(hops(report.compiled)) == 1


def side_effect(x):
    return ck.checkpoint(effectful, x, use_reentrant=False) + 1


def dropout_region(x):
    return ck.checkpoint(lambda a: torch.nn.functional.dropout(a.sin(), 0.5, True), x, use_reentrant=False)


def returns_input(x):
    return ck.checkpoint(lambda a: a, x, use_reentrant=False) * 2


@pytest.mark.parametrize("fn", [reentrant, side_effect, dropout_region, returns_input], ids=lambda f: f.__name__)
def test_what_cannot_be_captured_runs_checkpoint_for_real(fn):
    LOG.clear()
    report = assert_parity(fn, lambda: (torch.randn(4, requires_grad=True),), calls=2)
    assert "higher_order" in breaks(report.compiled) and hops(report.compiled) == []


def test_hugging_face_gradient_checkpointing():
    pytest.importorskip("transformers")
    from stillframe.check.models import build, example_inputs

    eager = build("llama", seed=0, train=True)
    model = build("llama", seed=0, train=True)
    for m in (eager, model):
        m.gradient_checkpointing_enable()  # transformers 5: use_reentrant=False by default
    kwargs = example_inputs("llama", labels=True)
    compiled = stillframe.compile(model, backend="eager")
    for _ in range(2):
        expected, got = eager(**kwargs).loss, compiled(**kwargs).loss
        expected.backward()
        got.backward()
        torch.testing.assert_close(got, expected)
        for (name, p), q in zip(eager.named_parameters(), model.parameters()):
            torch.testing.assert_close(q.grad, p.grad, msg=name)
    assert len(hops(compiled)) == eager.config.num_hidden_layers
