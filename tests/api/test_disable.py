"""torch.compile's disable API on stillframe: ``torch.compiler.disable`` and ``torch._dynamo.disable`` (as
decorator and as call wrapper, ``recursive=`` either way) and ``stillframe.disable``.

A disabled function runs for real at a graph break: it sees ``torch.compiler.is_compiling() == False``, its
body is in no graph, and a global it bumps is not guarded (no recompile per call). Each test runs the same
program eagerly, under stillframe and under torch.compile, and compares.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo
from torch import nn

import stillframe
from stillframe.check import assert_parity

SEEN: list = []  # what is_compiling() answered inside the disabled functions, call by call
BUMPS = 0


def _record():
    SEEN.append(torch.compiler.is_compiling())


@torch.compiler.disable
def bumping(x):
    global BUMPS
    BUMPS += 1
    _record()
    return x + BUMPS


def _times_three(x):
    _record()
    return x * 3


wrapped_dynamo = torch._dynamo.disable(_times_three)
wrapped_nonrecursive = torch.compiler.disable(_times_three, recursive=False)
wrapped_reason = torch._dynamo.disable(_times_three, reason="kept eager")


@stillframe.disable
def marked_by_stillframe(x):
    _record()
    return x - 1


def program(x):
    y = x.sin()
    y = bumping(y)
    y = wrapped_dynamo(y)
    y = wrapped_nonrecursive(y)
    y = wrapped_reason(y)
    y = marked_by_stillframe(y)
    return y.cos()


class _Counting:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm


def _run(compiled, calls=3):
    global BUMPS
    SEEN.clear()
    BUMPS = 0
    torch.manual_seed(0)
    outs = [compiled(torch.randn(4)) for _ in range(calls)]
    return outs, list(SEEN)


def _graph_targets(graphs):
    return [str(n.target) for gm in graphs for n in gm.graph.nodes if n.op in ("call_function", "call_method")]


def test_disabled_bodies_run_for_real_as_under_torch_compile():
    eager_out, eager_seen = _run(program)
    backend = _Counting()
    ours_out, ours_seen = _run(stillframe.compile(program, backend=backend))
    torch._dynamo.reset()
    tc_backend = _Counting()
    tc_out, tc_seen = _run(torch.compile(program, backend=tc_backend))
    torch._dynamo.reset()
    for e, o, t in zip(eager_out, ours_out, tc_out):
        torch.testing.assert_close(o, e)
        torch.testing.assert_close(t, e)
    assert eager_seen == [False] * 15
    # every disabled body ran for real, every call; recursive=False (third) skips only the function's own frame
    # and compiles the _record it calls, on both (runtime/shallow.py here)
    assert [seen for i, seen in enumerate(ours_seen) if i % 5 != 2] == [False] * 12
    assert [seen for i, seen in enumerate(ours_seen) if i % 5 == 2] == [True] * 3
    # torch.compile too for torch's disables, and it knows nothing of stillframe.disable (fifth)
    assert [seen for i, seen in enumerate(tc_seen) if i % 5 in (0, 1, 3)] == [False] * 9
    assert [seen for i, seen in enumerate(tc_seen) if i % 5 in (2, 4)] == [True] * 6
    # only the code around them is in graphs: sin before, cos after (no add or mul from the bodies)
    assert sorted(_graph_targets(backend.graphs)) == ["cos", "sin"]
    # torch.compile traces stillframe.disable's body (x - 1) into the graph with cos
    assert set(_graph_targets(tc_backend.graphs)) == {"sin", "cos", "<built-in function sub>"}


def test_a_global_bumped_by_a_disabled_function_is_not_guarded():
    compiled = stillframe.compile(program, backend="eager")
    _run(compiled, calls=2)
    traces = stillframe.counters["traces"]
    _run(compiled, calls=4)
    assert stillframe.counters["traces"] == traces  # BUMPS changes every call: no recompile
    assert stillframe.counters["recompiles"] == 0
    breaks = [e.graph_break for entries in compiled.all_cache_entries().values() for e in entries if e.graph_break]
    assert [b.kind for b in breaks] == ["disabled"] * 5
    assert "bumping is marked never to be compiled" in breaks[0].explanation


class Doubler(nn.Module):
    def forward(self, x):
        _record()
        return x * 2


@torch.compiler.disable
class DisabledDoubler(Doubler):
    pass


class Net(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.inner = inner

    def forward(self, x):
        return self.inner(self.lin(x)).relu()


@pytest.mark.parametrize("make_inner", [DisabledDoubler, lambda: torch.compiler.disable(Doubler())],
                         ids=["class_decorated", "instance_wrapped"])
def test_disabled_submodules_run_for_real(make_inner):
    net = Net(make_inner())
    SEEN.clear()
    report = assert_parity(net, lambda: (torch.randn(3, 4, requires_grad=True),), calls=2)
    assert SEEN == [False] * 4  # two eager calls, two compiled ones: none traced
    breaks = [e.graph_break for entries in report.compiled._compiled_forward.all_cache_entries().values()
              for e in entries if e.graph_break]
    assert [b.kind for b in breaks] == ["disabled"]


def plain(x):
    _record()
    return x + 1


def test_compiling_a_disabled_function_compiles_it_as_torch_compile_does():
    # torch.compile looks through disable's wrapper (torch's innermost_fn) and compiles the function itself
    _, ours_seen = _run(stillframe.compile(torch.compiler.disable(plain), backend="eager"), calls=1)
    _, tc_seen = _run(torch.compile(torch.compiler.disable(plain), backend="eager"), calls=1)
    torch._dynamo.reset()
    assert ours_seen == tc_seen == [True]


def test_disabling_a_compiled_function_runs_it_eagerly_as_torch_compile_does():
    _, ours_seen = _run(torch.compiler.disable(stillframe.compile(plain, backend="eager")), calls=2)
    _, tc_seen = _run(torch.compiler.disable(torch.compile(plain, backend="eager")), calls=2)
    torch._dynamo.reset()
    assert ours_seen == tc_seen == [False, False]
    assert stillframe.counters["traces"] == 0


def test_disabled_function_never_warns_or_falls_back():
    with warnings.catch_warnings():
        warnings.simplefilter("error", stillframe.StillframeWarning)
        compiled = stillframe.compile(program, backend="eager", fullgraph=False)
        _run(compiled, calls=2)
    assert stillframe.counters["fallbacks"] == 0
