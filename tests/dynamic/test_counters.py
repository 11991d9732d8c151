"""Python ints that change between calls or loop iterations (issue 12): a step counter, a loop counter live
across a graph break. Each becomes a symbolic graph input after one automatic-dynamic recompile, 0 and 1
included, as torch.compile's unspecialized ints; the counts are checked against torch.compile's in the same
process, and every value against eager's."""

import pytest
import torch

import stillframe
from stillframe.check.scalar_programs import (calls_helper_in_a_loop, counter_across_a_break, dict_counter, driver,
                                              loop_with_a_break, object_counter, outer, quiet, step,
                                              torch_compile_counts, while_with_a_break)

PROGRAMS = {
    "int argument, break inside": (step, "range8"),
    "loop calls a function with a break": (calls_helper_in_a_loop, "once"),
    "counter incremented across a break": (counter_across_a_break, "range8"),
    "object attribute counter": (object_counter, "state"),
    "dict item counter": (dict_counter, "dict"),
    "break in a called function": (outer, "range8"),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_graphs_and_recompiles_at_most_torch_compiles(name):
    fn, kind = PROGRAMS[name]
    drive = driver(kind)
    eager = quiet(lambda: drive(fn))
    torch_out, torch_graphs, torch_recompiles = torch_compile_counts(fn, drive)
    ours = quiet(lambda: drive(stillframe.compile(fn, backend="eager")))
    assert repr(ours) == repr(eager) == repr(torch_out)
    assert stillframe.counters["graphs"] <= torch_graphs, (stillframe.counters, torch_graphs)
    assert stillframe.counters["recompiles"] <= torch_recompiles, (stillframe.counters, torch_recompiles)
    assert stillframe.counters["fallbacks"] == 0


@pytest.mark.parametrize("fn", [loop_with_a_break, while_with_a_break])
def test_a_loop_counter_across_a_break_is_symbolic_after_one_recompile(fn):
    """torch.compile runs such a frame eagerly (a graph break in a loop skips the frame); stillframe captures the
    loop body with the counter symbolic (a ``for`` loop's item from the body's first plan on, a ``while`` loop's
    counter from its second): as many traces for 40 iterations as for 8."""
    traces = []
    for n in (8, 40):
        stillframe.reset()
        compiled = stillframe.compile(fn, backend="eager")
        out = quiet(lambda: compiled(torch.ones(3), n))
        assert torch.equal(out, quiet(lambda: fn(torch.ones(3), n)))
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
