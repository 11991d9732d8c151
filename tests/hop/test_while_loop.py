"""``torch._higher_order_ops.while_loop`` captured as torch's ``while_loop`` op (issue 13): values and
gradients against eager, carried tensors kept apart from the same tensors closed over, and what breaks."""

import pytest
import torch

from stillframe.check.parity import assert_parity
from stillframe.compat import while_loop

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


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_a_backend_that_cannot_compile_the_loop_gets_a_graph_break(fn):
    """AOTAutograd's fake while_loop needs a ShapeEnv its own fake mode lacks (torch.compile's has one): the
    frame is traced again with the loop running for real, instead of the whole frame falling back."""
    report = assert_parity(fn, CASES[fn], calls=2, backend="aot_eager")
    assert not loops(report)
    assert [e.graph_break.kind for e in entries(report) if e.graph_break] == ["higher_order"]


def test_carried_and_closed_over_are_different_inputs():
    report = assert_parity(counted, CASES[counted])
    (node,) = loops(report)
    carried, additional = node.args[2], node.args[3]
    assert carried[1] in additional  # the same graph input, bound to two placeholders of the body


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
