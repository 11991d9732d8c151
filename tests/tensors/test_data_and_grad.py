"""``.data`` and ``.grad`` of tensors that enter the trace from outside (issue 16: both broke the graph).

``.grad`` and ``.data`` are read from the live tensor through their own source and guarded like any input: a
gradient that appears, disappears or changes shape between calls recompiles. Writing through ``.data`` (or to
the tensor it was read from) while the graph also reads the other runs that write for real, as does ``.data``
of a tensor written earlier in the trace.
"""

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity
from py_cases import counting_backend


def with_grad(*shape, grad=True):
    p = torch.randn(*shape, requires_grad=True)
    if grad:
        p.grad = torch.randn(*shape)
    return p


def read_data(x, p):
    d = p.data
    return d * x, d.requires_grad, d.is_leaf, p.data.shape


def grad_or_nothing(x, p):
    return x * 3 if p.grad is None else x + p.grad * 2


def clip_by_total_norm(x, p, q):
    total = 0.0
    for t in (p, q):
        if t.grad is not None:
            total = total + t.grad.norm() ** 2
    return x * total ** 0.5


def zero_grads_in_place(x, p, q):
    for t in (p, q):
        if t.grad is not None:
            t.grad.mul_(0.5)
    return x + 1


def write_through_data(x, p):
    p.data.add_(1)
    return x * p


def data_after_a_write(x, p):
    x.add_(1)
    return x.data * p


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn, make_args, fullgraph", [
    (read_data, lambda: (torch.randn(3), with_grad(3)), True),
    (grad_or_nothing, lambda: (torch.randn(3), with_grad(3)), True),
    (grad_or_nothing, lambda: (torch.randn(3), with_grad(3, grad=False)), True),
    (clip_by_total_norm, lambda: (torch.randn(3), with_grad(3), with_grad(2, grad=False)), True),
    (zero_grads_in_place, lambda: (torch.randn(3), with_grad(3), with_grad(2)), True),
    (write_through_data, lambda: (torch.randn(3), with_grad(3)), False),
    (data_after_a_write, lambda: (torch.randn(3), torch.randn(3, requires_grad=True)), False),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) and not isinstance(v, bool) else None)
def test_parity(fn, make_args, fullgraph, backend):
    assert_parity(fn, make_args, backend=backend, fullgraph=fullgraph, calls=2)


def test_a_gradient_that_appears_or_changes_shape_recompiles():
    graphs, counting = counting_backend()
    compiled = stillframe.compile(grad_or_nothing, backend=counting)
    p = torch.randn(3, requires_grad=True)
    for grad, expected_graphs in [(None, 1), (torch.ones(3), 2), (torch.full((3,), 2.0), 2), (None, 2)]:
        p.grad = grad
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x, p), grad_or_nothing(x, p))
        assert len(graphs) == expected_graphs
