"""Regressions found by parity probes of torch.nn and tensor conversions (probe session B): module registries after
a traced attribute write, ops that return their argument itself, ``inplace=True`` functionals and
``max_norm`` embeddings, module dtype conversion, Python ints too big for an op. Each is compared with eager on
both backends."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


class Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.sub = nn.Linear(2, 2)
        self.register_buffer("b", torch.ones(2))
        self.register_buffer("c", torch.zeros(2))


def _tree():
    torch.manual_seed(0)
    return (Tree(), torch.randn(4, 3))


def bias_set_none(m, x):
    m.lin.bias = None
    return m.lin(x), [n for n, _ in m.named_parameters()], sum(p.sum() for p in m.parameters()), \
        len(list(m.lin.parameters())), list(m.state_dict())


def buffer_set_none(m, x):
    m.b = None
    return [n for n, _ in m.named_buffers()], list(m.buffers()), list(m.state_dict())


def buffer_deleted(m, x):
    del m.b
    return [n for n, _ in m.named_buffers()], list(m.state_dict())


def submodule_set_none(m, x):
    m.sub = None
    return [n for n, _ in m.named_modules()], len(list(m.children())), [n for n, _ in m.named_parameters()]


def submodule_deleted(m, x):
    del m.sub
    return [n for n, _ in m.named_modules()], [n for n, _ in m.named_children()], [n for n, _ in m.named_parameters()]


def submodule_replaced(m, x):
    # (the iterators run for real here; list() takes each live generator whole: a comprehension over one steps it
    # for real, a plan per new submodule per step, which hits the cache size limit)
    m.sub = nn.Linear(2, 3)
    return list(m.named_modules()), len(list(m.children())), list(m.named_parameters())


def parameter_replaced(m, x):
    m.lin.weight = nn.Parameter(torch.zeros(2, 3))
    return [p.sum() for p in m.parameters()]


def parameter_added(m, x):
    m.extra = nn.Parameter(torch.zeros(2))
    return [n for n, _ in m.named_parameters()]


def buffer_replaced(m, x):
    m.b = torch.full((2,), 5.0)
    return [b.sum() for b in m.buffers()]


def plain_attribute_written(m, x):
    m.flag = 3
    return [n for n, _ in m.named_parameters()], m.flag


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [bias_set_none, buffer_set_none, buffer_deleted, submodule_set_none, submodule_deleted,
                                submodule_replaced, parameter_replaced, parameter_added, buffer_replaced,
                                plain_attribute_written], ids=lambda f: f.__name__)
def test_module_iterators_see_attribute_writes_of_the_trace(fn, backend):
    # parameters(), named_modules() ... were unrolled from the live registries, without the pending write
    # (m.bias = None still listed the bias; a new Parameter or submodule was missing)
    assert_parity(fn, _tree, backend=backend, calls=3)


def _vectors():
    return (torch.zeros(3), torch.zeros(2, 3).t(), torch.randn(3, requires_grad=True))


def as_tensor_alias(y, z, w):
    r = torch.as_tensor(y)
    r.add_(1)
    return r is y, y, torch.as_tensor(z) is z, torch.as_tensor(y, dtype=torch.float64) is y


def asarray_alias(y, z, w):
    r = torch.asarray(y)
    r.add_(1)
    return r is y, y, torch.asarray(y, copy=True) is y, torch.asarray(y, dtype=torch.float32) is y


def conversions_alias(y, z, w):
    return (y.to(y.dtype) is y, y.to("cpu") is y, y.type(y.type()) is y, y.float() is y, y.double() is y,
            y.contiguous() is y, z.contiguous() is z, y.to(torch.float32) is y)


def conversions_alias_grad(y, z, w):
    r = w.to(w.dtype)
    s = (w * 2).contiguous()
    (r * 3 + s).sum().backward()
    return r is w, r.is_leaf, s.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [as_tensor_alias, asarray_alias, conversions_alias, conversions_alias_grad],
                         ids=lambda f: f.__name__)
def test_an_op_that_returns_its_argument_returns_the_same_tensor(fn, backend):
    # torch.as_tensor(t), t.to(t.dtype), t.contiguous() ... return t itself in eager; the trace made a new tensor
    assert_parity(fn, _vectors, backend=backend, calls=3)


def _pair():
    torch.manual_seed(0)
    return (torch.randn(4, 3, requires_grad=True), torch.randn(4, 3))


def _inplace_case(name, *args, **kwargs):
    def fn(x, y):
        z = y.clone()
        xx = x * 1
        r = getattr(F, name)(z, *args, **kwargs)
        r2 = getattr(F, name)(xx, *args, **kwargs)
        return r is z, z, r2 is xx, xx, xx.requires_grad
    fn.__name__ = f"{name}{args}{kwargs}"
    return fn


INPLACE_CASES = [
    _inplace_case("dropout", 0.0, True, True), _inplace_case("dropout", 0.5, False, True),
    _inplace_case("dropout", 0.0, inplace=True), _inplace_case("relu", inplace=True), _inplace_case("relu", True),
    _inplace_case("threshold_", 0.1, 2.0), _inplace_case("threshold", 0.1, 2.0, True),
    _inplace_case("hardtanh", inplace=True), _inplace_case("hardtanh", -0.5, 0.5, True),
    _inplace_case("leaky_relu", 0.2, True), _inplace_case("elu", 1.0, True), _inplace_case("elu", inplace=True),
    _inplace_case("alpha_dropout", 0.0, True, True), _inplace_case("feature_alpha_dropout", 0.0, True, True),
    _inplace_case("relu6", inplace=True), _inplace_case("selu", inplace=True), _inplace_case("celu", inplace=True),
    _inplace_case("silu", inplace=True), _inplace_case("hardswish", inplace=True), _inplace_case("mish", True),
    _inplace_case("rrelu", 0.1, 0.3, False, True),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", INPLACE_CASES, ids=lambda f: f.__name__)
def test_inplace_functionals_write_their_input(fn, backend):
    # inplace=True passed by position (nn.Dropout.forward: F.dropout(input, p, training, inplace)) was not seen
    # as a write: "dropout mutated a tensor stillframe did not know it writes", the frame ran eagerly
    assert_parity(fn, _pair, backend=backend, calls=3)


FLAGS = {"inplace": True}


def inplace_flag_from_a_global_dict(x, y):
    z = y.clone()
    F.relu(z, **FLAGS)
    return z


def dropout_modules_inplace(x, y):
    z = y.clone()
    r = nn.Dropout(0.5, inplace=True)(z)
    w = y.clone()
    s = nn.ReLU(inplace=True)(w)
    return r is z, z, s is w, w


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [inplace_flag_from_a_global_dict, dropout_modules_inplace], ids=lambda f: f.__name__)
def test_inplace_modules_and_splatted_flags(fn, backend):
    assert_parity(fn, _pair, backend=backend, calls=3)


def _embedding():
    torch.manual_seed(0)
    return (nn.Embedding(6, 3, max_norm=0.5), torch.tensor([0, 2, 2, 5]))


def embedding_module_max_norm(m, idx):
    before = m.weight.detach().clone()
    e = m(idx)
    e.sum().backward()
    return e, (m.weight - before).abs().sum(), m.weight.norm(dim=1), m.weight.grad


def embedding_max_norm_no_grad(m, idx):
    with torch.no_grad():
        return m(idx), m.weight.norm(dim=1)


def functional_embedding_max_norm(m, idx):
    w = m.weight.detach() * 3
    e = F.embedding(idx, w, None, 0.5, 1.0)
    return e, w


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [embedding_module_max_norm, embedding_max_norm_no_grad, functional_embedding_max_norm],
                         ids=lambda f: f.__name__)
def test_embedding_max_norm_renormalises_the_weight(fn, backend):
    # F.embedding(..., max_norm=...) renormalises the looked-up rows of the weight in place: an unknown write
    assert_parity(fn, _embedding, backend=backend, calls=3)


def module_double(m, x):
    m.double()
    return m(x.double()), m.weight.dtype


def module_to_bfloat16(m, x):
    m.to(torch.bfloat16)
    y = m(x.to(torch.bfloat16))
    m.float()
    return y, m(x), m.weight.dtype


def module_half_then_grad(m, x):
    m.half().float()
    m(x).sum().backward()
    return m.weight.grad, m.bias.dtype


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [module_double, module_to_bfloat16, module_half_then_grad], ids=lambda f: f.__name__)
def test_module_dtype_conversion_inside_runs_for_real(fn, backend):
    # Module._apply was traced: its function went into the graph as a call target ("invalid syntax" in the
    # generated code), and the frame ran eagerly
    def make():
        torch.manual_seed(0)
        return (nn.Linear(3, 2), torch.randn(4, 3))
    assert_parity(fn, make, backend=backend, calls=3)


def scalar_overflow(x, y):
    return torch.tensor([1]) + 2 ** 64


def scalar_overflow_negative(x, y):
    return torch.add(x, -2 ** 70)


def scalar_overflow_caught(x, y):
    try:
        return y * 2 ** 64
    except OverflowError as e:
        return str(e)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [scalar_overflow, scalar_overflow_negative, scalar_overflow_caught],
                         ids=lambda f: f.__name__)
def test_python_int_too_big_for_the_op_raises_eagers_error(fn, backend):
    # torch raises OverflowError unpacking the int; on fakes it escaped as an internal error (a fallback)
    assert_parity(fn, lambda: (torch.tensor([1]), torch.tensor([2])), backend=backend, calls=3)
