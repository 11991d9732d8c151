"""Python floats that change between calls (issue 12): torch.compile 2.13 (``specialize_float=False``) traces a
float static first and, once its value changed, passes it as a float64 0-dim tensor graph input read back with
``.item()`` (a SymFloat). stillframe does the same; graphs are counted against torch.compile's in the same
process, and every value must be exactly eager's."""

import contextlib
import io

import pytest
import torch
from torch._dynamo.utils import counters as torch_counters

import stillframe

VALUES = [0.1, 0.2, 0.3, 0.7, 1e-3]
LR = 0.1


def scaled(x, lr):
    return x * lr + lr


def global_lr(x, _lr):
    return x * LR


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.s = 0.5

    def forward(self, x):
        return x * self.s


class Options:
    lr = 0.1


def attribute_lr(x, options):
    return x * options.lr


def branch(x, r):
    if r > 0.5:
        return x * r
    return x - r


def returned(x, r):
    return x * r, r * 2, r


def across_a_break(x, r):
    y = x * r
    print("a graph break")
    return y + r


def size_from_float(x, r):
    return torch.zeros(int(x.shape[0] * r)) + r


def _run(compile_fn, fn, backend, values, setup):
    compiled = compile_fn(fn, backend=backend)
    outs = []
    for v in values:
        args = setup(v)
        with contextlib.redirect_stdout(io.StringIO()):
            outs.append((compiled(*args), fn(*args)))
    return outs


def _identity_setup(v):
    return torch.linspace(-1, 1, 4), v


def _global_setup(v):
    global LR
    LR = v
    return torch.linspace(-1, 1, 4), v


_module = Scale()


def _module_setup(v):
    _module.s = v
    return (torch.linspace(-1, 1, 4),)


def _attribute_setup(v):
    options = Options()
    options.lr = v
    return torch.linspace(-1, 1, 4), options


CASES = {
    "argument": (scaled, _identity_setup, VALUES),
    "global": (global_lr, _global_setup, VALUES),
    "module attribute": (_module, _module_setup, VALUES),
    "object attribute": (attribute_lr, _attribute_setup, VALUES),
    "branch on it": (branch, _identity_setup, VALUES),
    "returned": (returned, _identity_setup, VALUES),
    "across a graph break": (across_a_break, _identity_setup, VALUES),
    "a size from it": (size_from_float, _identity_setup, [1.5, 2.5, 0.5, 1.0]),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(CASES))
def test_floats_follow_torch_compile(name, backend):
    fn, setup, values = CASES[name]
    torch._dynamo.reset()
    torch_counters.clear()
    try:
        theirs = _run(torch.compile, fn, backend, values, setup)
    finally:
        torch._dynamo.reset()
    torch_graphs = torch_counters["stats"]["unique_graphs"]
    ours = _run(stillframe.compile, fn, backend, values, setup)
    for (got, want), (their, _) in zip(ours, theirs):
        assert repr(got) == repr(want) == repr(their)  # exactly eager's (torch.compile's too)
    assert stillframe.counters["graphs"] <= torch_graphs, (stillframe.counters, torch_graphs)
    assert stillframe.counters["fallbacks"] == 0


def test_a_float_that_changed_is_a_float64_tensor_input_read_by_item():
    compiled = stillframe.compile(scaled, backend="eager")
    for v in VALUES:
        assert torch.equal(compiled(torch.ones(3), v), scaled(torch.ones(3), v))
    entries = compiled.cache_entries()
    assert len(entries) == 2  # static on 0.1, then symbolic: as torch.compile
    assert "item = l_lr.item()" in entries[1].graph_module.code
    placeholders = {n.name: n.meta["val"] for n in entries[1].graph_module.graph.nodes if n.op == "placeholder"}
    assert placeholders["l_lr"].dtype == torch.float64 and placeholders["l_lr"].dim() == 0


def test_dynamic_true_makes_floats_symbolic_from_the_first_call():
    compiled = stillframe.compile(scaled, backend="eager", dynamic=True)
    for v in VALUES:
        assert torch.equal(compiled(torch.ones(3), v), scaled(torch.ones(3), v))
    assert len(compiled.cache_entries()) == 1


def test_dynamic_false_specializes_floats():
    compiled = stillframe.compile(scaled, backend="eager", dynamic=False)
    for v in VALUES[:3]:
        assert torch.equal(compiled(torch.ones(3), v), scaled(torch.ones(3), v))
    assert len(compiled.cache_entries()) == 3


def test_nan_is_specialized_and_its_plan_serves_the_next_nan():
    """As torch.compile: the ShapeEnv cannot guard NaN, so a NaN is traced by value (3 graphs, torch.compile's
    count); an infinity runs the symbolic plan."""
    compiled = stillframe.compile(scaled, backend="eager")
    for v in (0.5, 0.25, float("nan"), float("nan"), float("inf"), float("-inf")):
        got, want = compiled(torch.ones(2), v), scaled(torch.ones(2), v)
        assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0))
    codes = [e.graph_module.code for e in compiled.cache_entries()]
    assert len(codes) == 3 and "nan" in codes[2]


def test_a_backend_that_cannot_tensorify_a_float_gets_it_static():
    """A backend whose tensorify pass raises TensorifyScalarRestartAnalysis (naming the float's symbol, as
    AOTAutograd's does) gets the frame again with that float static, as torch.compile restarts its analysis."""
    from torch._dynamo.exc import TensorifyScalarRestartAnalysis
    from torch._dynamo.symbolic_convert import TensorifyState

    seen = []

    def backend(gm, example_inputs):
        floats = [n.meta["val"].item_memo for n in gm.graph.nodes if n.op == "placeholder"
                  and isinstance(n.meta["val"], torch.Tensor) and n.meta["val"].dtype == torch.float64]
        seen.append(len(floats))
        if floats:
            TensorifyState.specialize(str(floats[0].node.expr))
            raise TensorifyScalarRestartAnalysis
        return gm.forward

    compiled = stillframe.compile(scaled, backend=backend)
    for v in VALUES[:3]:
        assert torch.equal(compiled(torch.ones(3), v), scaled(torch.ones(3), v))
    assert seen == [0, 1, 0, 0]  # static, symbolic (refused), then static for each value
    assert stillframe.counters["fallbacks"] == 0
    assert TensorifyState.empty()
