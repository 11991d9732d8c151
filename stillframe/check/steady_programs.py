"""Small programs that go through a graph break on every call, for the steady-state test and benchmark.

Each takes one float32 tensor ``x`` of any shape and returns a tensor of the same shape. After warm-up a
compiled call of any of them must not trace again (issue 15): the breaks are on Python-only calls
(``OrderedDict.move_to_end``, ``deque`` operations, logging, ``print``), a profiler context manager, or a float
that a real call returns (``random.random()``, ``time.time()``), which is data, never guarded by value.
Used by ``tests/api/test_steady_state.py`` and ``bench/steady_state.py``.

:data:`CUSTOM_OPTIMIZERS` are ``torch.optim.Optimizer`` subclasses written as users write them, whose ``step``
creates its per-parameter state lazily (``state = self.state[p]; if len(state) == 0: ...``): a compiled
``opt.step`` must not trace again after warm-up either (``rules/live_dicts.py``). Used by
``tests/regressions/test_probe_found_training.py`` and ``bench/steady_state.py``.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
import logging
import random
import time

import torch
from torch import nn

HOOKS = collections.OrderedDict(a=1, b=2)
QUEUE: collections.deque = collections.deque()
LOG = logging.getLogger("stillframe.check.steady")


def ordered_dict_move_to_end(x):
    y = x + 1
    HOOKS.move_to_end("b")  # (already last: the same order on every call)
    return y * 2


def deque_append_pop(x):
    y = x + 1
    QUEUE.append(y.shape[0])
    QUEUE.pop()
    return y * 2


def record_function(x):
    with torch.autograd.profiler.record_function("block"):
        y = x + 1
    return y * 2


def logging_call(x):
    y = x + 1
    LOG.debug("shape %s", tuple(y.shape))
    return y * 2


def print_call(x):
    y = x + 1
    print("", end="")
    return y * 2


def random_scale(x):
    return x * random.random()


def random_used_twice(x):
    r = random.uniform(0.5, 1.5)
    y = x * r
    z = y + r
    if r > 2:  # never true: a Python branch on the float
        z = z * 0
    return z - r


def random_seeded_inside(x):
    """Reseeds Python's RNG and draws from it (``random.seed`` calls ``super().seed``: traced through, that held a
    ``super()`` object across the break at its C call and the frame ran eagerly)."""
    random.seed(7)
    order = [1, 2, 3]
    random.shuffle(order)
    return x * random.randint(1, 5) + order[0]


def clock(x):
    """Reads the wall clock: two runs of it never agree on values, only on traces."""
    return x * (time.time() % 1.0)


class Jitter(nn.Module):
    """A module whose forward scales by ``random.uniform`` (input ``(N, 4)``, output ``(N, 4)``)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * random.uniform(0.9, 1.1)


#: The programs whose values are reproducible (Python's ``random`` seeded alike on both sides).
PROGRAMS = [ordered_dict_move_to_end, deque_append_pop, record_function, logging_call, print_call, random_scale,
            random_used_twice, random_seeded_inside]


class MomentumSGD(torch.optim.Optimizer):
    """SGD with momentum, its buffer made on the first step (a custom optimizer, not torch's ``SGD``)."""

    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.mul_(group["momentum"]).add_(p.grad)
                p.add_(buf, alpha=-group["lr"])


class AdamIntStep(torch.optim.Optimizer):
    """Adam whose step count is a Python int in ``state["step"]`` (the bias corrections are Python floats)."""

    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** state["step"]
                bias_correction2 = 1 - beta2 ** state["step"]
                denom = (exp_avg_sq / bias_correction2).sqrt().add_(group["eps"])
                p.addcdiv_(exp_avg, denom, value=-group["lr"] / bias_correction1)


class AdamTensorStep(torch.optim.Optimizer):
    """Adam whose step count is a 0-dim tensor in ``state["step"]`` (the bias corrections are tensor math)."""

    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** state["step"]
                bias_correction2 = 1 - beta2 ** state["step"]
                denom = (exp_avg_sq / bias_correction2).sqrt().add_(group["eps"])
                p.sub_(exp_avg / bias_correction1 / denom * group["lr"])


#: Custom optimizers whose compiled ``opt.step`` must reach a steady state (see the module docstring).
CUSTOM_OPTIMIZERS = [MomentumSGD, AdamIntStep, AdamTensorStep]


def optimizer_model() -> nn.Module:
    """The small model the custom optimizers train (4 parameters; input ``(N, 4)``, output ``(N, 2)``)."""
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
