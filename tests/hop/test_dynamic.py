"""Higher-order ops under symbolic shapes (issue 13 with issue 12's automatic dynamic): called with three
sizes, the second trace is symbolic, and each op is still captured with eager's values and gradients."""

import pytest
import torch

from stillframe import compat
from stillframe.check.parity import assert_parity

from .autograd_programs import scale
from .func_programs import per_sample_grads, vmap_dot
from .test_checkpoint import with_kwargs_and_structure
from .test_cond import nested, simple
from .test_while_loop import single

SIZES = (3, 5, 7)
CASES = {
    simple: lambda n: (torch.randn(n), torch.randn(n)),
    nested: lambda n: (torch.randn(n, requires_grad=True),),
    with_kwargs_and_structure: lambda n: (torch.randn(n, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)),
    single: lambda n: (torch.randn(n),),
    scale: lambda n: (torch.randn(n, requires_grad=True),),
    vmap_dot: lambda n: (torch.randn(n, 3), torch.randn(n, 3)),
    per_sample_grads: lambda n: (torch.randn(n, 3), torch.randn(3, 2)),
}


def higher_order_nodes(gm):
    return [n for m in gm.modules() if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes
            if n.op == "call_function" and (isinstance(n.target, compat.HigherOrderOperator)
                                            or getattr(n.target, "__name__", "") == "apply_to_graph")]


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_higher_order_ops_with_changing_sizes(fn):
    report = assert_parity(fn, lambda i: CASES[fn](SIZES[i]), calls=len(SIZES))
    entries = [e for es in report.compiled.all_cache_entries().values() for e in es]
    assert len(entries) == 2 and all(e.graph_break is None for e in entries)  # static, then symbolic
    assert all(higher_order_nodes(e.graph_module) for e in entries)


def test_while_loop_with_changing_sizes_through_aot_autograd():
    """The symbolic trace's ShapeEnv is handed to the backend allowing scalar outputs while it compiles (the
    loop's backward reads its trip count): captured, with eager's gradients."""
    report = assert_parity(single, lambda i: (torch.randn(SIZES[i], requires_grad=True),), calls=len(SIZES),
                           backend="aot_eager")
    entries = [e for es in report.compiled.all_cache_entries().values() for e in es]
    assert len(entries) == 2 and all(e.graph_break is None and higher_order_nodes(e.graph_module) for e in entries)
