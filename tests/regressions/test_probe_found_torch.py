"""Regressions found by hand-written parity probes of torch APIs (session 28). Each is compared with eager on
both backends."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.modules import module as nn_module

import stillframe
from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


def _linear_args(i=0):
    torch.manual_seed(i)
    return (nn.Linear(3, 2), torch.randn(4, 3, requires_grad=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_forward_hook_registered_inside(backend):
    # register_module_forward_hook was traced through (a pending write to torch's global dict the trace's
    # module call never read): the hook never ran
    def fn(m, x):
        handle = nn_module.register_module_forward_hook(lambda mod, args, out: out + 100)
        y = m(x)
        handle.remove()
        return y.sum()

    assert_parity(fn, _linear_args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["forward", "forward_pre", "full_backward"])
def test_global_module_hooks_registered_outside(backend, kind):
    # the trace of a module call ignored global hooks registered before the call (their guard said none)
    seen = []
    hooks = {"forward": lambda: nn_module.register_module_forward_hook(lambda mod, args, out: out * 3),
             "forward_pre": lambda: nn_module.register_module_forward_pre_hook(lambda mod, args: (args[0] * 0,)),
             "full_backward": lambda: nn_module.register_module_full_backward_hook(
                 lambda mod, gin, gout: seen.append(type(mod).__name__))}

    def fn(m, x):
        y = m(x).sum()
        y.backward(retain_graph=True)
        return y

    handle = hooks[kind]()
    try:
        assert_parity(fn, _linear_args, backend=backend, calls=3)
        if kind == "full_backward":  # (both sides' backward hooks ran: 3 calls each, plus the checker's own)
            assert seen.count("Linear") >= 6
    finally:
        handle.remove()


def test_global_hook_removed_after_compiling_is_not_kept():
    # a plan traced while a global hook was registered does not keep calling it once it is removed
    m, x = _linear_args()
    compiled = stillframe.compile(lambda m, x: m(x).sum(), backend="eager")
    handle = nn_module.register_module_forward_hook(lambda mod, args, out: out + 100)
    try:
        with_hook = compiled(m, x)
    finally:
        handle.remove()
    torch.testing.assert_close(with_hook, m(x).sum() + 100 * 8)  # (4 x 2 outputs, each + 100)
    torch.testing.assert_close(compiled(m, x), m(x).sum())


def _tensor_args(i=0):
    return (torch.randn(6) + i,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_with_bounds(backend):
    # captured whole, t.random_(0, 7) reached AOTAutograd as aten.random_.from, a Python keyword in its generated
    # code: BackendCompilerFailed (SyntaxError) reached the user
    def fn(x):
        t = torch.empty(6)
        u = torch.empty(6)
        return t.random_(0, 7) + x, u.random_(10) * 2, x.clone().random_()

    assert_parity(fn, _tensor_args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_resize_of_an_intermediate_that_grows(backend):
    # AOTAutograd's functionalization refused to grow a tensor it had made a view (BackendCompilerFailed)
    def fn(y):
        z = y.clone()
        z.resize_(2, 2)
        z.resize_(3, 5)
        return z.shape, z[:1, :2] * 2

    assert_parity(fn, lambda i=0: (torch.randn(4, 3) + i,), backend=backend, calls=3)


def _foreach_write_into_a_saved_tensor(a):
    h = a * 2
    s = h.sin()
    torch._foreach_mul_([h], 2.0)
    return s


def _foreach_result_aliases_its_list(a, b):
    r = torch._foreach_mul_([a, b], 2.0)
    r[0].add_(1)
    return r[0] is a, a * 1, b * 1, len(r)


@pytest.mark.parametrize("fn, make", [
    (_foreach_write_into_a_saved_tensor, lambda i=0: (torch.randn(3, requires_grad=True),)),
    (_foreach_result_aliases_its_list, lambda i=0: (torch.randn(3) + i, torch.randn(3))),
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_foreach_writes_are_writes(backend, fn, make):
    # torch._foreach_mul_ writes its list (its name starts with "_", so no name rule caught it, and the fake
    # kernel moves no version): the trace took it for a pure op returning new tensors. A write into a tensor sin
    # saved went unchecked on aot_eager (eager raises "modified by an inplace operation" at the backward), and
    # r[0] was not a. What a torch builtin writes now comes from its ATen schema (tensors/ops.schema_writes)
    assert_parity(fn, make, backend=backend, calls=2)


class _ScaledStep(nn.Module):
    """A mixed-precision training step with a GradScaler: unscale_, clip, step, update."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.opt = torch.optim.SGD(self.fc.parameters(), lr=0.1, momentum=0.9)
        self.scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 4, growth_interval=2)

    def forward(self, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.mse_loss(self.fc(x).float(), y)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.opt)
        nn.utils.clip_grad_norm_(self.fc.parameters(), 1.0)
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad()
        return loss.detach(), self.scaler.get_scale(), self.fc.weight * 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_scaler_step(backend):
    # torch._amp_update_scale_ writes its growth tracker too (its schema says so): the trace did not know, the
    # write surfaced as an internal error, and the rest of the step ran instruction by instruction with a warning
    assert_parity(_ScaledStep(), lambda i=0: (torch.randn(4, 3), torch.randn(4, 2) + i), backend=backend, calls=4)


def _new_of_a_size(x):
    return x.new(x.shape).zero_() + x


def _exponential_sample(rate):
    return torch.distributions.Exponential(rate).sample()


@pytest.mark.parametrize("fn, make", [
    (_new_of_a_size, lambda i=0: (torch.randn(2, 3) + i,)),
    (_exponential_sample, lambda i=0: (torch.ones(4) + i,)),
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_new_of_a_size(backend, fn, make):
    # x.new(x.shape) reached the graph's code as x.new((2, 3)): a tuple is data to the legacy constructor, so it
    # made the tensor [2., 3.]; Exponential.sample() (rate.new(shape).exponential_()) drew one number for all
    assert_parity(fn, make, backend=backend, calls=2)


def _quantize_round_trip(x):
    return torch.quantize_per_tensor(x, 0.1, 10, torch.quint8).dequantize()


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantize_then_dequantize(backend):
    # the fake of a quantized tensor is float32, on which .dequantize() is a no-op: the graph returned the
    # quantized tensor. Quantizing runs for real now (the quantized tensor then has no fake: the rest of the call
    # runs for real, with a warning)
    assert_parity(_quantize_round_trip, lambda i=0: (torch.randn(4) + i,), backend=backend, calls=2,
                  expect_fallback=True)


_AFFINE = torch.distributions.transforms.AffineTransform(1.0, 2.0)


def _distribution_transforms(x):
    tanh_normal = torch.distributions.TransformedDistribution(torch.distributions.Normal(x, 1.0),
                                                              [torch.distributions.transforms.TanhTransform()])
    return _AFFINE(x), torch.distributions.transforms.ExpTransform()(x), tanh_normal.log_prob(torch.zeros_like(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_distribution_transforms_are_called_as_python(backend):
    # a transform object (a callable of torch's) was taken for a graph op: looking it up in a table raised
    # "unhashable type: 'AffineTransform'", an internal error, and the function ran eagerly with a warning
    assert_parity(_distribution_transforms, lambda i=0: (torch.randn(3) + i,), backend=backend, calls=2)
