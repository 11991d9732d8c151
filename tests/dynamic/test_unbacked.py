"""Data-dependent sizes and values (issue 12): with ``capture_scalar_outputs`` ``.item()`` is captured as an
unbacked SymInt / SymFloat, with ``capture_dynamic_output_shape_ops`` ``nonzero``, ``masked_select``,
boolean-mask indexing and ``unique`` are captured with unbacked sizes, as torch.compile captures them; without
them each is a graph break. Graph counts are checked against torch.compile's with the same settings, values
against eager's."""

import math

import pytest
import torch
from torch._dynamo.utils import counters as torch_counters

import stillframe
from stillframe.check.scalar_programs import driver, item_size, stillframe_counts, torch_compile_counts


def item_in_math(x):
    n = x.sum().item()
    return x * n + 1


def item_as_a_size(x):
    n = (x > 0).sum().item()
    return torch.zeros(n) + 1


def branch_on_item(x):
    n = x.sum().item()
    if n > 0:  # Python needs the value: a graph break, with or without the flag
        return x + 1
    return x - 1


def nonzero(x):
    return x.nonzero().float().sum(0) + 1


def mask_index(x):
    return x[x > 0] * 2


def masked_select(x):
    return torch.masked_select(x, x > 0).sum() + x.sum()


def unique(x):
    return torch.unique(x.round())


PROGRAMS = [item_in_math, item_as_a_size, branch_on_item, nonzero, mask_index, masked_select, unique]
SCALAR = {item_in_math, item_as_a_size, branch_on_item}


def _inputs():
    torch.manual_seed(0)
    return [torch.randn(5, 3) for _ in range(3)] + [torch.randn(7, 3)]


def _flags(on: bool, fn) -> dict:
    return {"capture_scalar_outputs": on and fn in SCALAR,
            "capture_dynamic_output_shape_ops": on and fn not in SCALAR}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("on", [False, True], ids=["flag off", "flag on"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_data_dependent_capture_follows_torch_compile(fn, on, backend):
    flags = _flags(on, fn)
    torch._dynamo.reset()
    torch_counters.clear()
    with torch._dynamo.config.patch(**flags):
        compiled = torch.compile(fn, backend=backend)
        theirs = [compiled(x) for x in _inputs()]
    torch._dynamo.reset()
    torch_graphs = torch_counters["stats"]["unique_graphs"]
    for name, value in flags.items():
        setattr(stillframe.config, name, value)
    compiled = stillframe.compile(fn, backend=backend)
    ours = [compiled(x) for x in _inputs()]
    eager = [fn(x) for x in _inputs()]
    assert repr(ours) == repr(eager) == repr(theirs)
    assert stillframe.counters["graphs"] <= torch_graphs, (stillframe.counters, torch_graphs)
    assert stillframe.counters["fallbacks"] == 0
    breaks = [e.graph_break for v in compiled.all_cache_entries().values() for e in v if e.graph_break]
    if on and fn is not branch_on_item:
        assert breaks == []  # captured whole
    else:
        assert breaks and all(b.kind == "data_dependent" for b in breaks)


def test_item_is_an_unbacked_symbol_in_the_graph():
    stillframe.config.capture_scalar_outputs = True
    seen = []

    def backend(gm, example_inputs):
        seen.extend(n.meta["val"] for n in gm.graph.nodes if n.op == "call_method" and n.target == "item")
        return gm.forward

    compiled = stillframe.compile(item_as_a_size, backend=backend)
    for x in _inputs():
        assert torch.equal(compiled(x), item_as_a_size(x))
    assert stillframe.counters["traces"] == 2  # (5, 3) and, for the new shape (7, 3), automatic dynamic
    assert len(seen) == 2 and all(isinstance(v, torch.SymInt) for v in seen)
    assert all(str(v.node.expr).startswith("u") for v in seen)  # unbacked: no guard on its value


def test_nonzero_has_an_unbacked_size_and_gradients_match_eager():
    stillframe.config.capture_dynamic_output_shape_ops = True

    def f(x):
        return (x[x > 0] ** 2).sum()

    compiled = stillframe.compile(f, backend="aot_eager")
    for x in _inputs():
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        got, want = compiled(a), f(b)
        got.backward()
        want.backward()
        assert torch.equal(got, want) and torch.equal(a.grad, b.grad)
    breaks = [e.graph_break for v in compiled.all_cache_entries().values() for e in v if e.graph_break]
    assert breaks == []


def float_item_math(x):
    s = x.abs().sum().item()
    return x * math.sqrt(s) + s, s * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [item_size, float_item_math], ids=lambda f: f.__name__)
def test_a_float_read_by_item_at_a_break_is_a_symbolic_input_as_torch_compile_passes_it(fn, backend):
    """Flag off: ``.item()`` breaks the graph and runs for real; the float it returns enters the resumed graph
    as a symbolic float input (never guarded by its value), so the code after the break compiles no more often
    than torch.compile's resumed frame (which traces a float static first, unless its code shares a name and
    line with another resumed frame that saw a different value there, as in ``item_size``): 5 graphs and 2
    recompiles for ``item_size`` on both; every value eager's."""
    drive = driver("data")
    theirs, torch_graphs, torch_recompiles = torch_compile_counts(fn, drive, backend)
    ours, graphs, recompiles = stillframe_counts(fn, drive, backend)
    assert repr(ours) == repr(drive(fn)) == repr(theirs)
    assert graphs <= torch_graphs and recompiles <= torch_recompiles, (graphs, recompiles, torch_graphs,
                                                                        torch_recompiles)
    assert stillframe.counters["fallbacks"] == 0


def test_a_branch_on_a_float_read_by_item_still_breaks_instead_of_guarding_its_value():
    def fn(x):
        s = x.sum().item()
        y = x * s
        if s > 0:
            return y + 1
        return y - 1

    compiled = stillframe.compile(fn, backend="eager")
    for i in range(6):
        x = torch.randn(4, generator=torch.Generator().manual_seed(i))
        assert torch.equal(compiled(x), fn(x))
    assert stillframe.counters["recompiles"] == 0  # one plan per segment: the branch runs for real
    breaks = [e.graph_break.kind for v in compiled.all_cache_entries().values() for e in v if e.graph_break]
    assert breaks.count("data_dependent") == 2  # at .item(), and at the branch on its value
