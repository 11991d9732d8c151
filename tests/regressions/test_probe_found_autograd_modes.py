"""Regressions found by parity probes of what the user hooks into autograd and torch's dispatch (session 32):
module hooks registered after the first call. Each scenario runs eagerly and compiled on both backends; what it
observes (values, gradients, the hooks' logs) must be the same."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stillframe

BACKENDS = ["eager", "aot_eager"]


def _same(eager, compiled, path="observed"):
    """Assert that two observations agree: tensors in value and requires_grad, everything else by ``==``."""
    if isinstance(eager, torch.Tensor):
        assert isinstance(compiled, torch.Tensor), f"{path}: {compiled!r} is not a tensor"
        assert compiled.requires_grad == eager.requires_grad, f"{path}: requires_grad differs"
        torch.testing.assert_close(compiled.detach(), eager.detach(), msg=lambda m: f"{path}: {m}")
    elif isinstance(eager, (list, tuple)):
        assert type(compiled) is type(eager) and len(compiled) == len(eager), f"{path}: {compiled!r} != {eager!r}"
        for i, (e, c) in enumerate(zip(eager, compiled)):
            _same(e, c, f"{path}[{i}]")
    else:
        assert compiled == eager, f"{path}: {compiled!r} != {eager!r}"


def _parity(scenario, backend, **compile_kwargs):
    """Run ``scenario(compile)`` eagerly (``compile`` returns its argument) and compiled; compare what it returns."""
    torch.manual_seed(0)
    eager = scenario(lambda fn: fn)
    torch.manual_seed(0)
    compiled = scenario(lambda fn: stillframe.compile(fn, backend=backend, **compile_kwargs))
    _same(eager, compiled)


# ---------------------------------------------------------------- module hooks registered after the first call
# A module call traced without hooks was guarded to have no forward hooks only: a backward hook (or backward
# pre-hook) registered after the first call never ran, and one that changes the gradient was ignored. Its guard
# now also says the module has no backward hooks; a module with one is called for real.

class _SuperCall(nn.Module):
    """A subclass's ``__call__`` that reaches ``nn.Module.__call__`` through ``super()``."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def __call__(self, x):
        return super().__call__(x) * 2

    def forward(self, x):
        return self.lin(x).relu()


def _register(module, kind, log):
    if kind == "backward":
        return module.register_full_backward_hook(lambda mod, gin, gout: log.append(("backward", gout[0].sum())))
    if kind == "backward_pre":
        return module.register_full_backward_pre_hook(lambda mod, gout: log.append(("pre", gout[0].sum())))
    if kind == "backward_scaling":  # the hook's result replaces the module's input gradient
        return module.register_full_backward_hook(lambda mod, gin, gout: (gin[0] * 3,))
    raise ValueError(kind)


def _module_hook_scenario(kind, style, target):
    def scenario(compile):
        log = []
        m = nn.Sequential(_SuperCall() if target == "super_call" else nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        hooked = m if target == "outer" else m[0]
        if style == "function":
            fn = compile(lambda x: m(x).sum())
        else:  # the compiled module itself
            compiled = compile(m)
            fn = lambda x: compiled(x).sum()  # noqa: E731
        observed = []
        x = torch.randn(2, 4, requires_grad=True)
        for step in range(5):
            if step == 1:
                handle = _register(hooked, kind, log)
            if step == 3:
                handle.remove()
            y = fn(x)
            y.backward()
            observed.append([y, x.grad.clone(), m[-1].weight.grad.clone(), len(log)])
        return observed, log

    return scenario


@pytest.mark.parametrize("target", ["inner", "outer", "super_call"])
@pytest.mark.parametrize("style", ["function", "module"])
@pytest.mark.parametrize("kind", ["backward", "backward_pre", "backward_scaling"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_module_backward_hook_registered_after_the_first_call(backend, kind, style, target):
    _parity(_module_hook_scenario(kind, style, target), backend)
