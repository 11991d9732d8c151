"""Parity tests of nn.Module capture, and of the ``stillframe.compile(module)`` wrapper.

Each module is deep-copied by the checker: the eager side runs the original,
the compiled side a copy with identical, independent parameters; outputs,
input mutations, buffers, plain attributes and parameter gradients must agree.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stillframe
from stillframe.check import assert_parity


def rand(*shape, grad=False):
    return torch.randn(*shape, requires_grad=grad)


def tokens(*shape, vocab=20):
    return torch.randint(0, vocab, shape)


class Block(nn.Module):
    """Embedding -> Linear -> GELU -> Linear, residual, LayerNorm."""

    def __init__(self, vocab=20, dim=8, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.out = nn.Linear(hidden, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids):
        h = self.embed(ids)
        return self.norm(h + self.out(self.act(self.proj(h))))


def test_block_with_linear_layernorm_embedding_gelu():
    assert_parity(Block(), lambda: (tokens(2, 5),))


def test_block_called_three_times_with_fresh_inputs():
    assert_parity(Block(), lambda: (tokens(2, 5),), calls=3)


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.linear(x))


class Middle(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return self.inner(x) * self.scale


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.middle = Middle()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.middle(x) + x)


def test_nested_submodules_three_levels():
    assert_parity(Outer(), lambda: (rand(3, 4, grad=True),))


class MaybeBias(nn.Module):
    def __init__(self, use_bias):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3))
        self.bias = nn.Parameter(torch.randn(4))
        self.use_bias = use_bias

    def forward(self, x):
        out = x @ self.weight.t()
        if self.use_bias:
            out = out + self.bias
        return out


@pytest.mark.parametrize("use_bias", [True, False])
def test_flag_attribute(use_bias):
    assert_parity(MaybeBias(use_bias), lambda: (rand(2, 3),))


class WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 4))
        self.register_buffer("shift", torch.full((4,), 0.25), persistent=False)

    def forward(self, x):
        return self.linear(x) * self.scale - self.shift


def test_buffers():
    assert_parity(WithBuffers(), lambda: (rand(3, 4, grad=True),))


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("running", torch.zeros(4))

    def forward(self, x):
        self.steps.add_(1)
        self.running.mul_(0.9).add_(x.detach().mean(0), alpha=0.1)
        return x - self.running


def test_buffers_mutated_in_forward_over_several_calls():
    assert_parity(Counting(), lambda: (rand(3, 4, grad=True),), calls=3)


class WithHelpers(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def branch(self, x, layer):
        return torch.tanh(layer(x))

    def combine(self, x):
        return self.branch(x, self.a) + self.branch(x, self.b)

    def forward(self, x):
        return self.combine(x) * 0.5


def test_helper_methods_on_self():
    assert_parity(WithHelpers(), lambda: (rand(2, 4),))


class PlainAttributes(nn.Module):
    """Modules reachable through attributes nn.Module does not register."""

    def __init__(self):
        super().__init__()
        self.pair = [nn.Linear(4, 4), nn.Linear(4, 4)]  # a plain list: not a submodule
        self.__dict__["hidden"] = nn.Linear(4, 2)  # bypasses nn.Module.__setattr__
        self.registered = nn.Linear(4, 4)

    def forward(self, x):
        return self.hidden(self.pair[1](self.pair[0](self.registered(x))))


def test_modules_stored_in_plain_attributes():
    assert_parity(PlainAttributes(), lambda: (rand(2, 4),))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return self.seq(x)


def test_module_list_and_sequential():
    assert_parity(Stack(), lambda: (rand(2, 4),))


class Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(5, 4))
        self.bias = nn.Parameter(torch.randn(5))
        self.eps = 1e-5
        self.dim = -1

    def forward(self, x):
        y = F.linear(x, self.weight, self.bias)
        z = x @ self.weight.t() * 2
        y = F.layer_norm(y + z, (5,), eps=self.eps)
        return F.softmax(y, dim=self.dim) + self.weight.sum() * 0.01


def test_functional_calls_on_self_weight():
    assert_parity(Functional(), lambda: (rand(3, 4, grad=True),))


class ReturnsDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 3)
        self.decoder = nn.Linear(3, 4)

    def forward(self, x, *, target=None):
        code = self.encoder(x)
        recon = self.decoder(code)
        out = {"code": code, "recon": recon}
        if target is not None:
            out["loss"] = F.mse_loss(recon, target)
        return out


@pytest.mark.parametrize("with_target", [False, True])
def test_returning_dicts_and_keyword_arguments(with_target):
    def make():
        x = rand(2, 4)
        return ((x,), {"target": rand(2, 4)}) if with_target else (x,)

    assert_parity(ReturnsDict(), make)


def test_eval_mode_dropout():
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.ReLU(), nn.Linear(8, 2)).eval()
    assert_parity(model, lambda: (rand(3, 4),))


class TrainingBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        if self.training:
            return self.linear(x) * 2
        return self.linear(x)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_branch_on_self_training(training):
    assert_parity(TrainingBranch().train(training), lambda: (rand(2, 4),))


def test_conv_batchnorm_eval():
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU()).eval()
    assert_parity(model, lambda: (rand(2, 3, 6, 6),), rtol=1e-5, atol=1e-5)


def test_batchnorm_train_updates_running_stats():
    assert_parity(nn.BatchNorm1d(4), lambda: (rand(8, 4),), calls=2, rtol=1e-5, atol=1e-5)


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.alias = self.linear  # the same submodule under two names

    def forward(self, x):
        return self.alias(self.linear(x))


def test_shared_submodule():
    assert_parity(Shared(), lambda: (rand(2, 4),))


class ReturnsParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        return x @ self.weight, self.weight


def test_returning_a_parameter_keeps_its_identity():
    report = assert_parity(ReturnsParameter(), lambda: (rand(2, 3),))
    assert isinstance(report.compiled_result[1], nn.Parameter)


class TensorAttribute(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.randn(4)  # a plain tensor attribute, neither parameter nor buffer
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x) + self.table


def test_plain_tensor_attribute():
    assert_parity(TensorAttribute(), lambda: (rand(2, 4),))


class TinyAttention(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        q = q.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2)
        k = k.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2)
        v = v.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        attn = attn.transpose(1, 2).reshape(batch, seq, dim)
        return x + self.out(attn)


def test_tiny_attention_block():
    assert_parity(TinyAttention(), lambda: (rand(2, 5, 8, grad=True),), rtol=1e-5, atol=1e-6)


def test_module_under_no_grad():
    with torch.no_grad():
        assert_parity(Block(), lambda: (tokens(2, 5),))


def test_getattr_on_self_with_constant_name():
    class Picker(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            return getattr(self, "proj")(x)

    assert_parity(Picker(), lambda: (rand(2, 4),))


# ---------------------------------------------------------------- the seed issues (seeds/000)


class MySimpleModel(torch.nn.Module):
    def forward(self, x, y):
        x.t_()
        y.t_()
        return (x + y,)


class SqueezeInPlace(torch.nn.Module):
    def forward(self, x):
        x.squeeze_(0)
        x.unsqueeze_(-1)
        return x * 2


def test_seed_in_place_transpose_over_three_calls():
    report = assert_parity(MySimpleModel(), lambda: (torch.randn(2, 3), torch.randn(2, 3)), calls=3)
    entries = report.compiled.cache_entries()
    assert len(entries) == 1, "guards built from the entry snapshot must pass on the next call"
    assert stillframe.counters["traces"] == 1


def test_seed_in_place_transpose_of_leaves_requiring_grad_raises_like_eager():
    assert_parity(MySimpleModel(), lambda: (rand(2, 3, grad=True), rand(2, 3, grad=True)))


def test_seed_squeeze_in_place_over_two_calls():
    assert_parity(SqueezeInPlace(), lambda: (torch.randn(1, 3),), calls=2)


# ---------------------------------------------------------------- the wrapper


def test_parameter_gradients_match_eager():
    model = Outer()
    report = assert_parity(model, lambda: (rand(3, 4, grad=True),))
    compiled_original = report.compiled.original_module
    assert compiled_original is not model
    for (name, p), (name_c, p_c) in zip(model.named_parameters(), compiled_original.named_parameters()):
        assert name == name_c and p.grad is not None and p_c.grad is not None
        torch.testing.assert_close(p_c.grad, p.grad)


def test_compiled_module_passes_through_to_the_original():
    model = Block()
    model.some_attr = "hello"
    compiled = stillframe.compile(model, backend="eager")
    assert isinstance(compiled, nn.Module)
    assert isinstance(compiled, stillframe.CompiledModule)
    assert compiled.original_module is model and compiled._orig_mod is model
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]
    assert list(compiled.state_dict()) == ["_orig_mod." + k for k in model.state_dict()]  # as torch.compile's
    assert compiled.some_attr == "hello"
    assert compiled.embed is model.embed


def test_dir_of_a_compiled_module_lists_the_originals_attributes_as_torch_compiles_does():
    model = Block()
    model.some_attr = "hello"
    ours, theirs = stillframe.compile(model, backend="eager"), torch.compile(model, backend="eager")
    assert set(dir(model)) <= set(dir(theirs))
    assert set(dir(model)) | {"_orig_mod", "original_module"} <= set(dir(ours))
    assert "some_attr" in dir(ours) and "embed" in dir(ours)


def test_train_and_eval_propagate_to_the_original():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    compiled = stillframe.compile(model, backend="eager")
    compiled.eval()
    assert not model.training and not any(m.training for m in model.modules())
    assert not compiled.training
    compiled.train()
    assert model.training and all(m.training for m in model.modules())
    assert compiled.training


def test_wrapper_switched_to_eval_matches_eager_eval():
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    eager_model = copy.deepcopy(model).eval()
    compiled = stillframe.compile(model, backend="eager")
    compiled.eval()
    assert_parity(eager_model, lambda: (rand(3, 4),), compiled=compiled)
