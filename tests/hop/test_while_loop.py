"""``torch._higher_order_ops.while_loop`` captured as torch's ``while_loop`` op (issue 13): values and
gradients against eager, carried tensors kept apart from the same tensors closed over, and what breaks."""

import pytest
import torch

from stillframe.check.parity import assert_parity
from stillframe.compat import while_loop

from .torch_counts import count_ops, stillframe_counts, torch_compile_counts

HOP = torch.ops.higher_order.while_loop
w = torch.randn(3, requires_grad=True)


def entries(report):
    return [e for es in report.compiled.all_cache_entries().values() for e in es]


def loops(report):
    return [n for e in entries(report) if e.graph_module is not None for n in e.graph_module.graph.nodes
            if n.target is HOP]


def counted(x):
    """x is carried and closed over: the body adds the original x each time, not the carried one."""
    return while_loop(lambda i, a: i < 5, lambda i, a: (i + 1, a * w + x), (torch.tensor(0), x))


def single(x):
    return while_loop(lambda a: a.sum() < 50, lambda a: a + 1, (x,))


def list_carry(x, n):
    return while_loop(lambda i, a: i < n, lambda i, a: [i + 1, (a @ a.t()).tanh()], [torch.zeros((), dtype=torch.long), x])


def zero_iterations(x):
    return while_loop(lambda a: a.sum() > 1e9, lambda a: a * 2, (x + 1,))


CASES = {
    counted: lambda: (torch.randn(3, requires_grad=True),),
    single: lambda: (torch.randn(3, requires_grad=True),),
    list_carry: lambda: (torch.randn(3, 3, requires_grad=True), 3),
    zero_iterations: lambda: (torch.randn(3, requires_grad=True),),
}


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_while_loop_is_one_graph_with_eager_values_and_gradients(fn):
    report = assert_parity(fn, CASES[fn], calls=2)
    assert [e.graph_break for e in entries(report)] == [None] and len(loops(report)) == 1


def no_grad_args(make):
    return lambda: tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in make())


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_while_loop_is_one_graph_under_aot_autograd(fn, grad):
    """AOTAutograd's fake while_loop asks the fake mode for a ShapeEnv: the backend gets one (as under
    torch.compile), and the loop is captured on the first call, with eager's values and gradients."""
    make = CASES[fn] if grad else no_grad_args(CASES[fn])
    report = assert_parity(fn, make, calls=2, backend="aot_eager")
    assert [e.graph_break for e in entries(report)] == [None] and len(loops(report)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_while_loop_is_one_graph_under_inductor(fn):
    report = assert_parity(fn, CASES[fn], calls=2, backend="inductor")
    assert [e.graph_break for e in entries(report)] == [None] and len(loops(report)) == 1


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_graph_counts_next_to_torch_compile(fn):
    """Side by side on aot_eager (torch 2.13): torch.compile captures the loop when no input requires grad;
    with one, the backward's trip count is a scalar output its ShapeEnv refuses (DataDependentOutputException:
    no graph compiles, the loop runs eagerly), and ``counted`` (x carried and closed over) makes the backend
    raise to the caller. stillframe captures every one in one graph (the ShapeEnv handed to the backend
    allows scalar outputs, as torch.compile's does with ``capture_scalar_outputs=True``; aliased operands are
    cloned), and never captures fewer loops than torch.compile."""
    for make in (CASES[fn], no_grad_args(CASES[fn])):
        ours = stillframe_counts(assert_parity(fn, make, backend="aot_eager"), HOP)
        theirs = torch_compile_counts(fn, make(), "aot_eager", HOP)
        assert (ours.graphs, ours.ops, ours.failures) == (1, 1, [])
        assert theirs.ops <= ours.ops


def test_a_backend_that_cannot_compile_the_loop_gets_a_graph_break():
    """A backend that fails on a graph holding the loop: the frame is traced again with the loop running
    for real, instead of the whole frame falling back."""

    def refuses_loops(gm, example_inputs):
        if count_ops(gm, HOP):
            raise NotImplementedError("no while_loop here")
        return gm.forward

    report = assert_parity(single, CASES[single], calls=2, backend=refuses_loops)
    assert not loops(report)
    assert [e.graph_break.kind for e in entries(report) if e.graph_break] == ["higher_order"]


def aliased_carries(x):
    return while_loop(lambda a, b: a.sum() < 20, lambda a, b: (a + b.abs() + 1, b * 0.5), (x[:2], x[1:]))


def same_tensor_carried_twice(x):
    return while_loop(lambda i, a, b: i < 3, lambda i, a, b: (i + 1, a * 2, b + a), (torch.tensor(0), x, x))


def closes_over_a_view_of_the_carry(x):
    v = x[1:]
    return while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + v.sum()), (torch.tensor(0), x))


ALIASED = {
    same_tensor_carried_twice: lambda: (torch.randn(3, requires_grad=True),),
    closes_over_a_view_of_the_carry: lambda: (torch.randn(3, requires_grad=True),),
    aliased_carries: lambda: (torch.randn(3, requires_grad=True),),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [counted, *ALIASED], ids=lambda f: f.__name__)
def test_operands_that_share_memory_are_captured(fn, backend):
    report = assert_parity(fn, ALIASED.get(fn, CASES.get(fn)), calls=2, backend=backend)
    assert [e.graph_break for e in entries(report)] == [None] and len(loops(report)) == 1


def test_carried_and_closed_over_are_different_inputs():
    report = assert_parity(counted, CASES[counted])
    (node,) = loops(report)
    carried, additional = node.args[2], node.args[3]
    # the same graph input, bound to two placeholders of the body: closed over as a clone (AOTAutograd refuses
    # a while_loop whose operands alias)
    assert [a.args[0] for a in additional if a.target is torch.clone] == [carried[1]]


LOG = []


def dtype_changes(x):
    return while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a.double()), (torch.tensor(0), x))


def returns_carry(x):
    return while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a), (torch.tensor(0), x))


def logs(x):
    def body(i, a):
        LOG.append(1)
        return i + 1, a * 2

    return while_loop(lambda i, a: i < 3, body, (torch.tensor(0), x))


def int_carry(x):
    return while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2), (0, x))


@pytest.mark.parametrize("fn", [dtype_changes, returns_carry, logs, int_carry], ids=lambda f: f.__name__)
def test_what_cannot_be_captured_runs_the_loop_for_real(fn):
    LOG.clear()
    report = assert_parity(fn, lambda: (torch.randn(3),))
    assert "higher_order" in [e.graph_break.kind for e in entries(report) if e.graph_break] and not loops(report)
