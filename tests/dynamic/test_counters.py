"""Python ints that change between calls or loop iterations (issue 12): a step counter, a loop counter live
across a graph break. Each becomes a symbolic graph input after one automatic-dynamic recompile, 0 and 1
included, as torch.compile's unspecialized ints; the counts are checked against torch.compile's in the same
process, and every value against eager's."""

import contextlib
import io
import logging

import pytest
import torch
from torch._dynamo.utils import counters as torch_counters

import stillframe


def step(x, i):
    y = x * i
    print("step", i)
    return y + i


def helper(x, i):
    x = x * i
    print("helper", i)
    return x + i


def calls_helper_in_a_loop(x):
    for i in range(8):
        x = helper(x, i)
    return x


def counter_across_a_break(x, n):
    n = n + 1
    print("log", n)
    return x * n, n


class State:
    def __init__(self):
        self.step = 0


def object_counter(x, state):
    state.step += 1
    print("log", state.step)
    return x * state.step


def dict_counter(x, d):
    d["step"] = d["step"] + 1
    y = x * d["step"]
    print("log", d["step"])
    return y + d["step"]


def inner_break(x, i):
    print("inner", i)
    return x + i


def outer(x, i):
    return inner_break(x * i, i) - i


def _driver(fn, kind):
    """The calls of one program, as a function of the callable that runs ``fn`` (eager or compiled)."""
    if kind == "range":
        return lambda run: [run(torch.ones(3), i) for i in range(8)]
    if kind == "once":
        return lambda run: [run(torch.ones(3))]
    if kind == "object":
        return lambda run: (lambda st: [(run(torch.ones(3), st), st.step) for _ in range(8)])(State())
    if kind == "dict":
        return lambda run: (lambda d: [(run(torch.ones(3), d), dict(d)) for _ in range(8)])({"step": 0})
    raise ValueError(kind)


PROGRAMS = {
    "int argument, break inside": (step, "range"),
    "loop calls a function with a break": (calls_helper_in_a_loop, "once"),
    "counter incremented across a break": (counter_across_a_break, "range"),
    "object attribute counter": (object_counter, "object"),
    "dict item counter": (dict_counter, "dict"),
    "break in a called function": (outer, "range"),
}


def _quiet(run):
    with contextlib.redirect_stdout(io.StringIO()):
        return run()


class _Recompiles(logging.Handler):
    """Counts torch.compile's recompiles (its ``recompiles`` log artifact: one record per recompiled frame)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        self.count += 1


def torch_compile_counts(fn, drive):
    """``(outputs, graphs, recompiles)`` of torch.compile running ``drive`` on ``fn``."""
    torch._dynamo.reset()
    torch_counters.clear()
    handler = _Recompiles()
    logger = logging.getLogger("torch._dynamo.guards.__recompiles")
    torch._logging.set_logs(recompiles=True)
    logger.addHandler(handler)
    try:
        out = _quiet(lambda: drive(torch.compile(fn, backend="eager")))
    finally:
        logger.removeHandler(handler)
        torch._logging.set_logs()
        torch._dynamo.reset()
    return out, torch_counters["stats"]["unique_graphs"], handler.count


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_graphs_and_recompiles_at_most_torch_compiles(name):
    fn, kind = PROGRAMS[name]
    drive = _driver(fn, kind)
    eager = _quiet(lambda: drive(fn))
    torch_out, torch_graphs, torch_recompiles = torch_compile_counts(fn, drive)
    ours = _quiet(lambda: drive(stillframe.compile(fn, backend="eager")))
    assert repr(ours) == repr(eager) == repr(torch_out)
    assert stillframe.counters["graphs"] <= torch_graphs, (stillframe.counters, torch_graphs)
    assert stillframe.counters["recompiles"] <= torch_recompiles, (stillframe.counters, torch_recompiles)
    assert stillframe.counters["fallbacks"] == 0


def loop_with_a_break(x, n):
    for i in range(n):
        x = x * i + 1
        print("step", i)
    return x


def while_with_a_break(x, n):
    i = 0
    while i < n:
        x = x + i
        print("step", i)
        i += 1
    return x


@pytest.mark.parametrize("fn", [loop_with_a_break, while_with_a_break])
def test_a_loop_counter_across_a_break_is_symbolic_after_one_recompile(fn):
    """torch.compile runs such a frame eagerly (a graph break in a loop skips the frame); stillframe captures the
    loop body with the counter symbolic (a ``for`` loop's item from the body's first plan on, a ``while`` loop's
    counter from its second): as many traces for 40 iterations as for 8."""
    traces = []
    for n in (8, 40):
        stillframe.reset()
        compiled = stillframe.compile(fn, backend="eager")
        out = _quiet(lambda: compiled(torch.ones(3), n))
        assert torch.equal(out, _quiet(lambda: fn(torch.ones(3), n)))
        traces.append(stillframe.counters["traces"])
        placeholders = [n.meta["val"] for entries in compiled.all_cache_entries().values() for e in entries
                        for n in e.graph_module.graph.nodes if n.op == "placeholder"]
        assert any(isinstance(v, torch.SymInt) for v in placeholders)
    assert traces[0] == traces[1] <= 4, traces


def test_zero_and_one_are_symbolic_for_ints():
    """As torch.compile's unspecialized ints: after the value changed once, 1 does not get a plan of its own."""
    def f(x, n):
        return x * n

    compiled = stillframe.compile(f, backend="eager")
    for n in (5, 1, 0, 7, 1):
        assert torch.equal(compiled(torch.ones(2), n), f(torch.ones(2), n))
    assert len(compiled.cache_entries()) == 2


class Counted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2

    def forward(self, x):
        return x * self.scale


def test_an_int_attribute_of_a_module_stays_specialized():
    """torch.compile keeps an nn.Module's int attributes static: each value is its own plan."""
    model = Counted()
    compiled = stillframe.compile(model, backend="eager")
    for scale in (2, 3, 4):
        model.scale = scale
        assert torch.equal(compiled(torch.ones(2)), torch.ones(2) * scale)
    assert stillframe.counters["traces"] == 3
