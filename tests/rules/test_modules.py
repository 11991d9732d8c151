"""nn.Module capture: hooks on submodules, ``self.training``, buffers, containers, the standard layers
(forward and backward, train and eval), and whole Python-heavy models captured into ONE graph.

The checker deep-copies each module, so the eager and compiled sides own
identical parameters; it compares outputs, parameter gradients, buffers
(BatchNorm running stats included) and plain attributes after every call.
Dropout in train mode is random: the checker seeds torch identically before
each side's call, so eager and the captured graph draw the same mask.
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stillframe
from stillframe.check import assert_parity

from python_heavy_model import HeavyConfig, HeavyModel


def rand(*shape, grad=False):
    return torch.randn(*shape, requires_grad=grad)


def tokens(*shape, vocab=20):
    return torch.randint(0, vocab, shape)


def counting_backend():
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return graphs, counting


def check(module, make_args, *, compiles=1, calls=3, backend_calls=None, **kwargs):
    """Parity over ``calls`` calls on a deep copy, then exactly ``compiles`` graph entries, handed to the backend
    ``backend_calls`` times (``compiles`` unless given: a graph with no op is not handed to it)."""
    graphs, counting = counting_backend()
    compiled = stillframe.compile(copy.deepcopy(module), backend=counting)
    report = assert_parity(module, make_args, compiled=compiled, calls=calls, **kwargs)
    entries = compiled.cache_entries()
    assert [e.eager for e in entries] == [False] * len(entries), [e.reason for e in entries]
    assert stillframe.counters["graph_breaks"] == 0, "a graph break: the program was not captured whole"
    assert len(entries) == compiles, f"{len(entries)} cache entries, expected {compiles}"
    assert len(graphs) == (compiles if backend_calls is None else backend_calls)
    return report, compiled


def assert_one_graph(compiled):
    (entry,) = compiled.cache_entries()
    assert entry.eager is False, entry.reason
    assert isinstance(entry.graph_module, torch.fx.GraphModule)
    return entry


# ---------------------------------------------------------------- standard layers, forward and backward


def mask_bool(n):
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


class Wrap(nn.Module):
    """Applies one layer inside a user forward, with a little Python around it."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, *args, **kwargs):
        out = self.layer(*args, **kwargs)
        if isinstance(out, tuple):
            out = tuple(o for o in out if o is not None)
        return out


class MHA(nn.Module):
    def __init__(self, need_weights=True, masked=False):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True, dropout=0.1)
        self.need_weights = need_weights
        self.masked = masked

    def forward(self, x):
        mask = mask_bool(x.shape[1]) if self.masked else None
        out, weights = self.attn(x, x, x, attn_mask=mask, need_weights=self.need_weights)
        return out if weights is None else (out, weights)


def xfail(value, reason):
    return pytest.param(value, marks=pytest.mark.xfail(strict=True, reason=reason))


def as_params(table):
    """pytest params from a name -> value table whose values may be ``xfail(...)`` params."""
    out = []
    for name, value in table.items():
        if isinstance(value, type(pytest.param(None))):
            out.append(pytest.param(*value.values, marks=value.marks, id=name))
        else:
            out.append(pytest.param(value, id=name))
    return out


def layer_cases():
    seq = lambda: (rand(2, 5, 16, grad=True),)  # noqa: E731
    return {
        "linear": (lambda: nn.Linear(6, 4), lambda: (rand(3, 6, grad=True),)),
        "linear-no-bias-3d": (lambda: nn.Linear(6, 4, bias=False), lambda: (rand(2, 3, 6, grad=True),)),
        "conv1d": (lambda: nn.Conv1d(3, 4, 3, padding=1), lambda: (rand(2, 3, 8, grad=True),)),
        "conv2d-stride": (lambda: nn.Conv2d(3, 4, 3, stride=2), lambda: (rand(2, 3, 9, 9, grad=True),)),
        "conv2d-groups-dilation": (lambda: nn.Conv2d(4, 4, 3, groups=2, dilation=2, padding=2),
                                   lambda: (rand(1, 4, 7, 7, grad=True),)),
        "layernorm": (lambda: nn.LayerNorm(6), lambda: (rand(3, 6, grad=True),)),
        "layernorm-no-affine": (lambda: nn.LayerNorm([2, 6], elementwise_affine=False),
                                lambda: (rand(3, 2, 6, grad=True),)),
        "batchnorm1d-train": (lambda: nn.BatchNorm1d(4), lambda: (rand(5, 4, grad=True),)),
        "batchnorm2d-train": (lambda: nn.BatchNorm2d(3), lambda: (rand(2, 3, 4, 4, grad=True),)),
        "batchnorm2d-eval": (lambda: nn.BatchNorm2d(3).eval(), lambda: (rand(2, 3, 4, 4, grad=True),)),
        "batchnorm-momentum-none": xfail(
            (lambda: nn.BatchNorm1d(4, momentum=None), lambda: (rand(5, 4, grad=True),)),
            "BatchNorm(momentum=None) computes 1.0 / float(num_batches_tracked): a data-dependent read that "
            "breaks the graph ('data_dependent: float() of a tensor reads its value')"),
        "groupnorm": (lambda: nn.GroupNorm(2, 4), lambda: (rand(2, 4, 5, grad=True),)),
        "embedding": (lambda: nn.Embedding(20, 6), lambda: (tokens(2, 5),)),
        "embedding-padding-idx": (lambda: nn.Embedding(20, 6, padding_idx=0), lambda: (tokens(2, 5),)),
        "dropout-train": (lambda: nn.Dropout(0.5), lambda: (rand(4, 8, grad=True),)),
        "dropout-eval": (lambda: nn.Dropout(0.5).eval(), lambda: (rand(4, 8, grad=True),)),
        "gelu-silu-softmax": (lambda: nn.Sequential(nn.GELU(), nn.SiLU(), nn.Softmax(-1)),
                              lambda: (rand(3, 5, grad=True),)),
        "pooling-flatten": (lambda: nn.Sequential(nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten()),
                            lambda: (rand(2, 3, 6, 6, grad=True),)),
        "mha-train": (lambda: MHA(), seq),
        "mha-eval": (lambda: MHA().eval(), seq),
        "mha-masked-no-weights": (lambda: MHA(need_weights=False, masked=True), seq),
        "transformer-layer-eval": (lambda: nn.TransformerEncoderLayer(16, 4, 32, batch_first=True).eval(), seq),
        "transformer-layer-train": (lambda: nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), seq),
        "transformer-layer-norm-first": (
            lambda: nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, norm_first=True, activation="gelu"), seq),
    }


LAYERS = layer_cases()


@pytest.mark.parametrize("case", as_params(LAYERS))
def test_standard_layer(case):
    make_layer, make_args = case
    args = make_args()
    identity = make_layer()(*args) is args[0]  # (eval-mode dropout returns its input itself: no op to compile)
    check(Wrap(make_layer()), make_args, backend_calls=0 if identity else None)


def test_batchnorm_running_stats_match_eager_after_each_call():
    eager = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    compiled = stillframe.compile(copy.deepcopy(eager), backend="eager")
    for _ in range(3):
        x = torch.randn(6, 4)
        eager(x)
        compiled(x.clone())
        bn_e, bn_c = eager[1], compiled.original_module[1]
        torch.testing.assert_close(bn_c.running_mean, bn_e.running_mean)
        torch.testing.assert_close(bn_c.running_var, bn_e.running_var)
        assert bn_c.num_batches_tracked.item() == bn_e.num_batches_tracked.item()
    assert bn_c.num_batches_tracked.item() == 3
    assert len(compiled.cache_entries()) == 1


def test_dropout_train_mode_is_random_but_well_formed():
    model = nn.Dropout(0.5)
    compiled = stillframe.compile(copy.deepcopy(model), backend="eager")
    outs = [compiled(torch.ones(1000)) for _ in range(2)]
    for out in outs:
        zeros = (out == 0).float().mean().item()
        assert 0.4 < zeros < 0.6
        assert set(out.unique().tolist()) <= {0.0, 2.0}
    assert not torch.equal(outs[0], outs[1])
    compiled.eval()
    assert torch.equal(compiled(torch.ones(1000)), torch.ones(1000))
    assert len(compiled.cache_entries()) == 2


# ---------------------------------------------------------------- self.training: eval() then train() recompiles


class TrainEval(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.3)
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        h = self.bn(self.drop(self.lin(x)))
        if self.training:
            h = h + 1
        return h


@pytest.mark.parametrize("cls", [TrainEval, lambda: nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)],
                         ids=["dropout-batchnorm", "transformer-layer"])
def test_eval_then_train_recompiles_and_both_match_eager(cls):
    graphs, counting = counting_backend()
    eager = cls()
    compiled = stillframe.compile(copy.deepcopy(eager), backend=counting)
    dim = 8 if isinstance(eager, TrainEval) else 16
    make = (lambda: (rand(4, dim, grad=True),)) if dim == 8 else (lambda: (rand(2, 3, dim, grad=True),))
    for mode, expected in [(True, 1), (False, 2), (True, 2), (False, 2)]:
        eager.train(mode)
        compiled.train(mode)
        assert compiled.original_module.training is mode
        assert_parity(eager, make, compiled=compiled, calls=2)
        assert len(graphs) == expected, mode


def test_submodule_training_flag_alone_is_guarded():
    graphs, counting = counting_backend()
    eager = TrainEval()
    compiled = stillframe.compile(copy.deepcopy(eager), backend=counting)
    assert_parity(eager, lambda: (rand(4, 8),), compiled=compiled)
    eager.drop.eval()
    compiled.original_module.drop.eval()
    assert_parity(eager, lambda: (rand(4, 8),), compiled=compiled, calls=2)
    assert len(graphs) == 2


# ---------------------------------------------------------------- buffers and containers


class Buffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("mean", torch.zeros(4))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.register_buffer("scratch", torch.ones(4), persistent=False)
        self.register_buffer("maybe", None)

    def forward(self, x):
        out = self.lin(x) - self.mean + self.scratch
        if self.maybe is not None:
            out = out * self.maybe
        with torch.no_grad():
            self.mean.mul_(0.9).add_(x.mean(0) * 0.1)
            self.count += 1
        return out, self.count.clone()


class Containers(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList([nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(2)])
        self.branches = nn.ModuleDict({"left": nn.Linear(4, 4), "right": nn.ModuleList([nn.Linear(4, 4)])})

    def forward(self, x):
        for stage in self.stages:
            x = stage(x)
        x = self.branches["left"](x) + self.branches["right"][0](x)
        return x, len(self.stages), len(self.branches)


class IterParameterList(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.ParameterList([nn.Parameter(torch.randn(4)) for _ in range(2)])

    def forward(self, x):
        for p in self.table:
            x = x + p
        return x


class IndexParameterDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.extras = nn.ParameterDict({"gain": nn.Parameter(torch.ones(4))})

    def forward(self, x):
        return x * self.extras["gain"]


class ContainsModuleDict(Containers):
    def forward(self, x):
        return x * 2, "left" in self.branches, "stages" in self._modules


class PlainAttributes(nn.Module):
    """Submodules and tensors kept in plain Python containers on self."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.fns = [torch.relu, torch.tanh]
        self.table = {"scale": 2.0, "shift": torch.ones(4)}

    def forward(self, x):
        for fn in self.fns:
            x = fn(self.lin(x))
        return x * self.table["scale"] + self.table["shift"]


@pytest.mark.parametrize("cls", [
    Buffers, Containers, PlainAttributes, IterParameterList, IndexParameterDict, ContainsModuleDict,
], ids=lambda c: c.__name__)
def test_buffers_and_containers(cls):
    check(cls(), lambda: (rand(3, 4, grad=True),))


# ---------------------------------------------------------------- forward hooks on submodules


class HookTarget(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def double_input(module, args):
    return (args[0] * 2,)


def add_one(module, args, out):
    return out + 1


def kw_pre_hook(module, args, kwargs):
    return (args[0] - 1,), kwargs


HOOKS = {
    "pre-hook-on-submodule": lambda m: m.a.register_forward_pre_hook(double_input),
    "post-hook-on-submodule": lambda m: m.b.register_forward_hook(add_one),
    "both-on-different-submodules": lambda m: (m.a.register_forward_hook(add_one),
                                               m.b.register_forward_pre_hook(double_input)),
    "two-post-hooks-in-order": lambda m: (m.a.register_forward_hook(add_one),
                                          m.a.register_forward_hook(lambda mod, a, o: o * 3)),
    "pre-hook-with-kwargs": lambda m: m.b.register_forward_pre_hook(kw_pre_hook, with_kwargs=True),
    "hook-with-kwargs": lambda m: m.b.register_forward_hook(lambda mod, a, kw, o: o * 2, with_kwargs=True),
    "hook-returning-none": lambda m: m.a.register_forward_hook(lambda mod, a, o: None),
    "hook-on-top-module": lambda m: m.register_forward_hook(add_one),
}


@pytest.mark.parametrize("register", as_params(HOOKS))
def test_forward_hooks(register):
    eager = HookTarget()
    register(eager)
    # a hook of the compiled module itself is compiled on its own, as torch.compile's wrapper does: a second graph
    check(eager, lambda: (rand(3, 4, grad=True),), backend_calls=2 if register is HOOKS["hook-on-top-module"] else None)


def test_hook_side_effect_on_a_closure_list_is_replayed():
    def run(compile_it):
        torch.manual_seed(0)
        model = HookTarget()
        seen = []
        model.a.register_forward_hook(lambda mod, args, out: seen.append(out.detach().sum()))
        fn = stillframe.compile(model, backend="eager") if compile_it else model
        outs = [fn(torch.ones(2, 4) * i) for i in range(3)]
        return outs, seen, fn

    eager_outs, eager_seen, _ = run(False)
    outs, seen, compiled = run(True)
    torch.testing.assert_close(outs, eager_outs)
    assert len(seen) == len(eager_seen) == 3
    torch.testing.assert_close(seen, eager_seen)


def test_adding_and_removing_a_hook_recompiles_then_hits_the_cache():
    graphs, counting = counting_backend()
    eager = HookTarget()
    compiled = stillframe.compile(copy.deepcopy(eager), backend=counting)
    make = lambda: (rand(3, 4),)  # noqa: E731
    assert_parity(eager, make, compiled=compiled)
    handles = [m.a.register_forward_hook(add_one) for m in (eager, compiled.original_module)]
    assert_parity(eager, make, compiled=compiled, calls=2)
    assert len(graphs) == 2
    for h in handles:
        h.remove()
    assert_parity(eager, make, compiled=compiled, calls=2)
    assert len(graphs) == 2


# ---------------------------------------------------------------- module attributes and state


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.mode = "sum"
        self.alpha = 0.5

    def forward(self, x):
        y = self.lin(x)
        if self.mode == "sum":
            return y.sum(-1) * self.alpha
        return y.mean(-1) * self.alpha


@pytest.mark.parametrize("attr, value", [("mode", "mean"), ("alpha", 2.0)])
def test_plain_module_attribute_change_recompiles(attr, value):
    graphs, counting = counting_backend()
    eager = Counter()
    compiled = stillframe.compile(copy.deepcopy(eager), backend=counting)
    assert_parity(eager, lambda: (rand(2, 4),), compiled=compiled, calls=2)
    for m in (eager, compiled.original_module):
        setattr(m, attr, value)
    assert_parity(eager, lambda: (rand(2, 4),), compiled=compiled, calls=2)
    assert len(graphs) == 2


def test_swapping_a_submodule_recompiles():
    graphs, counting = counting_backend()
    eager = HookTarget()
    compiled = stillframe.compile(copy.deepcopy(eager), backend=counting)
    assert_parity(eager, lambda: (rand(2, 4),), compiled=compiled)
    eager.b = nn.Linear(4, 2)
    compiled.original_module.b = copy.deepcopy(eager.b)
    assert_parity(eager, lambda: (rand(2, 4),), compiled=compiled, calls=2)
    assert len(graphs) == 2


# ---------------------------------------------------------------- whole models in one graph


def test_python_heavy_model_is_one_graph_with_parity_forward_and_backward():
    model = HeavyModel()
    report, compiled = check(model, lambda i: (tokens(2, 6, vocab=32), torch.randn(2)), calls=3)
    entry = assert_one_graph(compiled)
    assert entry.graph_module.graph.find_nodes(op="placeholder")
    # caches written to self and to the helper object match eager's
    twin = compiled.original_module
    torch.testing.assert_close(twin.cache, model.cache)
    assert list(twin.stats.last) == list(model.stats.last) == ["cls", "reg"]
    torch.testing.assert_close(twin.stats.last, model.stats.last)
    assert model.tokens_seen.item() == twin.tokens_seen.item() == 3 * 12
    outputs, loss, aux = report.compiled_result
    assert aux["n_kept"] == 1 and aux["names"] == ["cls:3", "reg:1"]


def test_python_heavy_model_without_targets_and_with_a_config_variant():
    cfg = HeavyConfig(act="leaky", causal=False, layers=2, keep_every=1, tasks=("a", "b", "c"), outputs=(2, 2, 1))
    model = HeavyModel(cfg)
    report, compiled = check(model, lambda: (tokens(3, 5, vocab=32),))
    assert_one_graph(compiled)
    assert report.compiled_result[2]["n_kept"] == 2


def test_python_heavy_model_aot_eager_backend():
    model = HeavyModel()
    compiled = stillframe.compile(copy.deepcopy(model), backend="aot_eager")
    assert_parity(model, lambda: (tokens(2, 6, vocab=32), torch.randn(2)), compiled=compiled, calls=2,
                  rtol=1e-4, atol=1e-5)
    assert_one_graph(compiled)


def test_python_heavy_model_with_dropout_eval_then_train():
    graphs, counting = counting_backend()
    model = HeavyModel(HeavyConfig(dropout=0.2, layers=2))
    compiled = stillframe.compile(copy.deepcopy(model), backend=counting)
    for mode, expected in [(False, 1), (True, 2), (False, 2)]:
        model.train(mode)
        compiled.train(mode)
        assert_parity(model, lambda: (tokens(2, 6, vocab=32), torch.randn(2)), compiled=compiled, calls=2)
        assert len(graphs) == expected
    # the forward reads no training flag of its own, but its dropout submodules do: each mode is one graph
    assert stillframe.counters["graph_breaks"] == 0
    assert all(not e.eager for e in compiled.cache_entries())


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "causal-mask"])
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_transformer_encoder_layer_is_one_graph(training, masked):
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True).train(training)

    def make():
        x = rand(2, 5, 16, grad=True)
        return ((x,), {"src_mask": mask_bool(5)}) if masked else (x,)

    _, compiled = check(layer, make, calls=3)
    assert_one_graph(compiled)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_transformer_encoder_layer_with_padding_mask(training):
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True).train(training)

    def make():
        pad = torch.zeros(2, 5, dtype=torch.bool)
        pad[1, 3:] = True
        return (rand(2, 5, 16, grad=True),), {"src_key_padding_mask": pad}

    _, compiled = check(layer, make, calls=2)
    assert_one_graph(compiled)


def test_transformer_encoder_layer_eval_under_no_grad():
    """Inference: eval + no_grad is where eager takes the fused fast path."""
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True).eval()
    compiled = stillframe.compile(copy.deepcopy(layer), backend="eager")
    with torch.no_grad():
        assert_parity(layer, lambda: (rand(2, 5, 16),), compiled=compiled, calls=2, rtol=1e-4, atol=1e-5)
    assert_one_graph(compiled)


def test_transformer_encoder_layer_aot_eager_train_with_mask():
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    compiled = stillframe.compile(copy.deepcopy(layer), backend="aot_eager")
    assert_parity(layer, lambda: ((rand(2, 5, 16, grad=True),), {"src_mask": mask_bool(5)}),
                  compiled=compiled, calls=2, rtol=1e-4, atol=1e-5)
    assert_one_graph(compiled)


def test_functional_layers_on_parameters_of_self():
    class Functional(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(4, 4))
            self.norm_w = nn.Parameter(torch.ones(4))

        def forward(self, x):
            h = F.linear(x, self.weight)
            h = F.layer_norm(h, (4,), self.norm_w)
            h = F.dropout(h, 0.2, self.training)
            return F.softmax(h, -1)

    check(Functional(), lambda: (rand(3, 4, grad=True),))


class CallsSuper(nn.Module):
    """A layer whose ``__call__`` adds to the keywords and calls ``super().__call__`` (directly, or through a
    ``functools.partial`` as transformers' GradientCheckpointingLayer does), with a forward hook."""

    def __init__(self, through_partial):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.through_partial = through_partial
        self.register_forward_hook(lambda mod, args, out: out * 2)

    def __call__(self, *args, **kwargs):
        kwargs["scale"] = 3.0
        if self.through_partial:
            return functools.partial(super().__call__, **kwargs)(*args)
        return super().__call__(*args, **kwargs)

    def forward(self, x, scale=1.0):
        return self.lin(x) * scale


class Stack(nn.Module):
    def __init__(self, through_partial):
        super().__init__()
        self.layers = nn.ModuleList([CallsSuper(through_partial) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).relu()
        return x


@pytest.mark.parametrize("through_partial", [False, True], ids=["direct", "partial"])
def test_super_call_of_a_module_subclass_is_one_graph(through_partial):
    """``super().__call__`` inlined ``nn.Module._call_impl`` (a break at each hook-dict test, 4 graphs and 5
    recompiles for transformers 5.17's GPT-2); it runs as Module.__call__ does, hooks included."""
    torch.manual_seed(0)
    check(Stack(through_partial), lambda: (torch.randn(2, 4, requires_grad=True),))
