"""``stillframe.compile(opt.step)``: torch.optim keeps its state in Python objects, and stillframe runs every
call into it for real (``tensors/effects.py``), so a compiled ``opt.step`` runs eagerly from its first call,
with one StillframeWarning, no graph and no trace after the first (it used to trace 6 segments per step at
0 graphs, at twice eager's time per step). torch.compile captures the update in one graph; stillframe does
not yet.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stillframe

OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=1e-2),
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-2),
}


def _train(make_opt, compile_step, steps=5):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = make_opt(model.parameters())
    step = compile_step(opt.step)
    x = torch.randn(4, 8)
    for _ in range(steps):
        model(x).pow(2).mean().backward()
        step()
        opt.zero_grad()
    return model, opt


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_compiled_optimizer_step_matches_eager_and_never_traces_again(name):
    eager_model, eager_opt = _train(OPTIMIZERS[name], lambda step: step)
    with pytest.warns(stillframe.StillframeWarning, match="keeps its state in Python objects") as caught:
        model, opt = _train(OPTIMIZERS[name], lambda step: stillframe.compile(step, backend="eager"))
    assert len([w for w in caught if issubclass(w.category, stillframe.StillframeWarning)]) == 1
    for p, q in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q)
    for state, eager_state in zip(opt.state.values(), eager_opt.state.values()):
        for key in state:
            torch.testing.assert_close(state[key], eager_state[key])
    assert stillframe.counters["traces"] == 1
    assert stillframe.counters["graphs"] == 0 and stillframe.counters["graph_breaks"] == 0
