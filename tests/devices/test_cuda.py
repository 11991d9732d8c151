"""Parity on a CUDA device (skipped where torch sees no GPU; run them on a machine with one).

The CPU suite checks the frontend's logic; these check what only a GPU shows: outputs and gradients on the
device they belong to, a plan guarded on its inputs' device (a CPU plan never runs on CUDA inputs), CUDA
random numbers and reseeding after a draw, a training step with an optimizer, autocast to float16, and
inductor's GPU kernels (Triton), each against eager PyTorch.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stillframe
from stillframe.check import assert_parity

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

BACKENDS = ["eager", "aot_eager", "inductor"]


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).cuda()


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_forward_and_backward(backend):
    assert_parity(mlp(), lambda: (torch.randn(4, 16, device="cuda", requires_grad=True),), backend=backend,
                  calls=2, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_views_and_sliced_assignment(backend):
    def f(m, v, rows, cols):
        m = m.clone()
        m[:, rows, cols] = v  # the seed article's sliced assignment: requires_grad must follow eager
        m.squeeze_(0)
        return m.t_() * 2

    def args():
        return (torch.randn(1, 5, 5, device="cuda"), torch.randn(3, device="cuda", requires_grad=True),
                torch.tensor([0, 1, 2], device="cuda"), torch.tensor([2, 3, 4], device="cuda"))

    assert_parity(f, args, backend=backend, calls=2)


def test_a_cpu_plan_is_not_used_for_cuda_inputs():
    def f(x):
        return x.sin() + 1

    compiled = stillframe.compile(f, backend="eager")
    cpu = compiled(torch.ones(3))
    gpu = compiled(torch.ones(3, device="cuda"))
    assert cpu.device.type == "cpu" and gpu.device.type == "cuda"
    torch.testing.assert_close(gpu.cpu(), cpu)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])  # inductor draws from its own generator, as under
def test_random_draws_and_reseeding_match_eager(backend):     # torch.compile (unless fallback_random is set)
    def f(x):
        a = torch.rand_like(x)
        torch.manual_seed(7)
        return x + a + torch.rand_like(x)

    compiled = stillframe.compile(f, backend=backend)
    for _ in range(2):
        torch.manual_seed(0)
        expected = f(torch.zeros(8, device="cuda"))
        torch.manual_seed(0)
        got = compiled(torch.zeros(8, device="cuda"))
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_training_step_matches_eager(backend):
    def run(step_fn, model, opt):
        torch.manual_seed(1)
        losses = []
        for _ in range(5):
            x, y = torch.randn(4, 16, device="cuda"), torch.randn(4, 8, device="cuda")
            losses.append(step_fn(model, opt, x, y))
        return losses, [p.detach().clone() for p in model.parameters()]

    def step(model, opt, x, y):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    eager_model, compiled_model = mlp(), mlp()
    eager = run(step, eager_model, torch.optim.AdamW(eager_model.parameters(), lr=1e-2))
    got = run(stillframe.compile(step, backend=backend), compiled_model,
              torch.optim.AdamW(compiled_model.parameters(), lr=1e-2))
    for a, b in zip(got[0] + got[1], eager[0] + eager[1]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_float16(backend):
    model = mlp()

    def f(x):
        with torch.autocast("cuda", dtype=torch.float16):
            return model(x)

    assert_parity(f, lambda: (torch.randn(4, 16, device="cuda"),), backend=backend, grad=False, rtol=1e-2,
                  atol=1e-2)


def test_mixed_devices_raise_as_eager():
    def f(x, y):
        return x + y

    assert_parity(f, lambda: (torch.randn(3, 3, device="cuda"), torch.randn(3, 3)), backend="eager")
