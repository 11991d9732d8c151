"""``torch.cond`` captured as torch's ``cond`` higher-order op, both branches speculated from one checkpoint
(issue 13): values and gradients against eager, the graph against torch.compile's, and the errors."""

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity
from stillframe.errors import StillframeError


def entries(report):
    compiled = report.compiled.__dict__.get("_compiled_forward", report.compiled)  # a CompiledModule's function
    return [e for es in compiled.all_cache_entries().values() for e in es]


def cond_nodes(report):
    return [n for e in entries(report) if e.graph_module is not None for n in e.graph_module.graph.nodes
            if n.target is torch.ops.higher_order.cond]


def captured(report, n=1):
    """One graph, no break, ``n`` cond nodes at its top level."""
    assert [e.graph_break for e in entries(report)] == [None], report.format()
    assert len(cond_nodes(report)) == n


def simple(x, y):
    return torch.cond(x.sum() > 0, lambda a, b: a + b, lambda a, b: a - b, (x, y))


@pytest.mark.parametrize("sign", [1, -1])
def test_cond_is_one_graph_with_both_branches(sign):
    report = assert_parity(simple, lambda: (sign * torch.rand(3) + sign, torch.randn(3)), calls=2)
    captured(report)
    gm = entries(report)[0].graph_module
    assert {n.target for n in gm.graph.nodes if n.op == "get_attr"} == {"cond_true_0", "cond_false_0"}


def test_cond_graph_matches_torch_compile():
    """torch.compile captures the same op: its graph also holds exactly one cond node and no break."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(simple, backend=backend)(torch.randn(3), torch.randn(3))
    theirs = [n for g in graphs for n in g.graph.nodes if n.target is torch.ops.higher_order.cond]
    report = assert_parity(simple, lambda: (torch.randn(3), torch.randn(3)))
    assert len(graphs) == 1 and len(theirs) == len(cond_nodes(report)) == 1


w_global = torch.randn(4, requires_grad=True)


def closure_and_global(x, w):
    def true_fn(a):
        return (a * w + w_global).sin()

    def false_fn(a):
        return a.cos() * w

    return torch.cond(x.mean() > 0, true_fn, false_fn, [x])


@pytest.mark.parametrize("sign", [1, -1])
def test_closed_over_tensors_and_globals_are_lifted_with_gradients(sign):
    report = assert_parity(closure_and_global,
                           lambda: (sign * torch.rand(4, requires_grad=True) + sign,
                                    torch.randn(4, requires_grad=True)), calls=2)
    captured(report)


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(4, 4)
        self.down = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: self.up(t).relu(), lambda t: self.down(t) * 2, (x,))


@pytest.mark.parametrize("sign", [1, -1])
def test_module_parameters_read_in_branches_are_graph_inputs(sign):
    report = assert_parity(Gate(), lambda: (sign * torch.rand(2, 4) + sign,), calls=2)
    captured(report)


def tuple_and_list_outputs(x):
    t = torch.cond(x.sum() > 0, lambda a: (a + 1, a * 2), lambda a: (a - 1, a * 3), (x,))
    lst = torch.cond(x.sum() > 0, lambda a: [a.sin(), (a.cos(),)], lambda a: [a.cos(), (a.sin(),)], (x,))
    return t, lst


def test_tuple_and_list_outputs_keep_their_structure():
    report = assert_parity(tuple_and_list_outputs, lambda: (torch.randn(5, requires_grad=True),), calls=2)
    captured(report, 2)


def int_outputs(x):
    return torch.cond(x.sum() > 0, lambda a: [a.sin(), (a.cos(), 3)], lambda a: [a.cos(), (a.sin(), 3)], (x,))


def test_equal_int_outputs_of_both_branches():
    """(Without gradients: eager's backward through a cond with an int output raises an AssertionError.)"""
    report = assert_parity(int_outputs, lambda: (torch.randn(5),), calls=2)
    captured(report)


def nested(x):
    def outer_true(a):
        return torch.cond(a.max() > 1, lambda b: b * 10, lambda b: b + 10, (a,)) + 1

    return torch.cond(x.sum() > 0, outer_true, lambda a: a.neg(), (x,))


@pytest.mark.parametrize("scale", [3, 0.1, -1])
def test_nested_cond(scale):
    report = assert_parity(nested, lambda: (scale * torch.rand(3, requires_grad=True),), calls=2)
    captured(report)
    true_gm = entries(report)[0].graph_module.cond_true_0
    assert [n for n in true_gm.graph.nodes if n.target is torch.ops.higher_order.cond]


def constant_pred(x, flag: bool):
    return torch.cond(flag, lambda a: a.sin(), lambda a: a.cos(), (x,))


@pytest.mark.parametrize("flag", [True, False])
def test_constant_pred_traces_only_the_taken_branch(flag):
    report = assert_parity(constant_pred, lambda: (torch.randn(3), flag), calls=2)
    assert [e.graph_break for e in entries(report)] == [None]
    assert cond_nodes(report) == []
    targets = {n.target for n in entries(report)[0].graph_module.graph.nodes}
    assert ("sin" if flag else "cos") in targets and ("cos" if flag else "sin") not in targets


def local_inplace(x):
    def true_fn(a):
        b = a * 2
        b.add_(1)
        b.t_()
        return b

    return torch.cond(x.sum() > 0, true_fn, lambda a: a.t() - 1, (x,))


def test_in_place_ops_on_branch_locals_are_captured():
    report = assert_parity(local_inplace, lambda: (torch.randn(2, 2, requires_grad=True),), calls=2)
    captured(report)


def no_grad_cond(x):
    with torch.no_grad():
        return torch.cond(x.sum() > 0, lambda a: a * 2, lambda a: a + 2, (x,))


def test_cond_under_no_grad():
    report = assert_parity(no_grad_cond, lambda: (torch.randn(3, requires_grad=True),))
    captured(report)


# -------------------------------------------------------------------------------- what is not captured
log = []


def appends_to_a_list(x):
    def true_fn(a):
        log.append(1)
        return a + 1

    return torch.cond(x.sum() > 0, true_fn, lambda a: a - 1, (x,))


def mutates_operand(x):
    return torch.cond(x.sum() > 0, lambda a: a.add_(1), lambda a: a - 1, (x,))


def returns_operand(x):
    return torch.cond(x.sum() > 0, lambda a: a, lambda a: a - 1, (x,))


def dtypes_differ(x):
    return torch.cond(x.sum() > 0, lambda a: a.double(), lambda a: a - 1, (x,))


def structures_differ(x):
    return torch.cond(x.sum() > 0, lambda a: (a + 1, a + 2), lambda a: a - 1, (x,))


def ndims_differ(x):  # sizes that differ are captured (an unbacked size): tests/hop/test_cond_shapes.py
    return torch.cond(x.sum() > 0, lambda a: a.sum() + 1, lambda a: a - 1, (x,))


def pred_not_one_element(x):
    return torch.cond(x > 0, lambda a: a + 1, lambda a: a - 1, (x,))


ERRORS = {
    appends_to_a_list: "the true branch mutates the list",
    mutates_operand: "mutates L['x'] in place",
    returns_operand: "returns a tensor that is (or is a view of) one from outside it",
    dtypes_differ: "the output has dtype torch.float64 in the true branch but torch.float32 in the false branch",
    structures_differ: "the true branch returns (Tensor, Tensor) but the false branch returns Tensor",
    ndims_differ: "the output has ndim 0 in the true branch but 1 in the false branch",
    pred_not_one_element: "pred is not a bool or a one-element tensor",
}


@pytest.mark.parametrize("fn", list(ERRORS), ids=lambda f: f.__name__)
def test_what_cannot_be_captured_runs_for_real_as_eager(fn):
    """A graph break: torch.cond runs for real, so values, or eager's own exception, are eager's."""
    log.clear()
    report = assert_parity(fn, lambda: (torch.rand(3) + 1,))
    breaks = [e.graph_break for e in entries(report) if e.graph_break is not None]
    assert len(breaks) == 1 and breaks[0].kind == "higher_order"
    assert ERRORS[fn] in breaks[0].explanation


@pytest.mark.parametrize("fn", list(ERRORS), ids=lambda f: f.__name__)
def test_fullgraph_names_the_difference(fn):
    with pytest.raises(StillframeError, match=ERRORS[fn].replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        stillframe.compile(fn, backend="eager", fullgraph=True)(torch.rand(3) + 1)


def branch_raises(x):
    def true_fn(a):
        raise ValueError("nope")

    return torch.cond(x.sum() > 0, true_fn, lambda a: a - 1, (x,))


def test_an_exception_in_a_branch_is_eagers():
    report = assert_parity(branch_raises, lambda: (torch.rand(3) + 1,))
    assert [e.graph_break.kind for e in entries(report) if e.graph_break] == ["higher_order"]


def cond_then_more(x, y):
    z = x * 2
    out = torch.cond(z.sum() > 0, lambda a, b: (a * b).sum(0), lambda a, b: (a - b).sum(0), (z, y))
    return out + z.mean()


def test_tensors_of_the_trace_before_the_cond_are_operands():
    report = assert_parity(cond_then_more, lambda: (torch.randn(2, 3, requires_grad=True),
                                                    torch.randn(2, 3, requires_grad=True)), calls=3)
    captured(report)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_cond_through_aot_autograd_backends(backend):
    report = assert_parity(closure_and_global, lambda: (torch.randn(4, requires_grad=True),
                                                       torch.randn(4, requires_grad=True)),
                           backend=backend, calls=2)
    captured(report)


class ParamInOneBranch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        def false_fn(a):
            log.append(1)
            return a - 1

        return torch.cond(x.sum() > 0, lambda a: a * self.w, false_fn, (x,))


def test_a_graph_input_first_read_by_an_abandoned_speculation_is_rolled_back():
    """The true branch reads a parameter first (a new graph input); the false branch breaks: rolling back
    the input must also discard the true branch's subgraph that reads it (it raised inside FX)."""
    report = assert_parity(ParamInOneBranch(), lambda: (torch.rand(3) + 1,), calls=2)
    assert [e.graph_break.kind for e in entries(report) if e.graph_break] == ["higher_order"]


SCALE, OFFSET = 2.0, 1.0


def reads_globals(x):
    return torch.cond(x.sum() > 0, lambda a: a * SCALE, lambda a: a - OFFSET, (x,))


def test_guards_of_both_branches_are_unioned():
    """A constant read only by the branch not taken is still guarded: changing it retraces."""
    global SCALE
    compiled = stillframe.compile(reads_globals, backend="eager")
    x = -torch.rand(3) - 1  # the false branch runs; SCALE is read by the true branch only
    torch.testing.assert_close(compiled(x), reads_globals(x))
    try:
        SCALE = 5.0
        torch.testing.assert_close(compiled(x), reads_globals(x))
        torch.testing.assert_close(compiled(-x), reads_globals(-x))
        assert len(compiled.cache_entries()) == 2
    finally:
        SCALE = 2.0


def test_explain_shows_the_branches_code():
    text = str(stillframe.explain(simple)(torch.randn(3), torch.randn(3)))
    assert "# self.cond_true_0:" in text and "add = l_x + l_y" in text
    assert "# self.cond_false_0:" in text and "sub = l_x - l_y" in text


def nested_operands(x, y):
    def true_fn(a, pair):
        b, c = pair
        return a * b + c[0]

    def false_fn(a, pair):
        return a - pair[1][0] * pair[0]

    return torch.cond(x.sum() > 0, true_fn, false_fn, (x, (y, [y * 2])))


@pytest.mark.parametrize("sign", [1, -1])
def test_operands_may_be_nested_tuples_and_lists_of_tensors(sign):
    report = assert_parity(nested_operands, lambda: (sign * torch.rand(3, requires_grad=True) + sign,
                                                     torch.randn(3, requires_grad=True)), calls=2)
    captured(report)
