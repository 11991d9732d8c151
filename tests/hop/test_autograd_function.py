"""``torch.autograd.Function.apply`` captured as torch's ``autograd_function_apply`` higher-order op (issue 13):
values and gradients against eager for custom forward/backward, ``ctx.save_for_backward``, non-tensor
arguments, two outputs, straight-through estimators, ``mark_non_differentiable``, ``needs_input_grad``,
``once_differentiable`` and zero-argument ``super()``; what cannot be captured runs for real."""

import pytest
import torch

from stillframe import compat
from stillframe.check.parity import assert_parity

from .autograd_programs import BREAKS, LOG, PROGRAMS, AffineModule, clip_grad, scale


def entries(report):
    compiled = report.compiled.__dict__.get("_compiled_forward", report.compiled)
    return [e for es in compiled.all_cache_entries().values() for e in es]


def applies(report):
    return [n for e in entries(report) if e.graph_module is not None for n in e.graph_module.graph.nodes
            if n.target is torch.ops.higher_order.autograd_function_apply]


@pytest.mark.parametrize("fn", list(PROGRAMS), ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_autograd_function_is_one_graph_with_eager_gradients(fn, backend):
    report = assert_parity(fn, PROGRAMS[fn], calls=2, backend=backend)
    assert [e.graph_break for e in entries(report)] == [None], report.format()
    assert bool(applies(report)) == (fn.__name__ != "under_no_grad")  # under no_grad forward is inlined


def test_keyword_arguments_to_apply_as_eager():
    """``ClipGrad.apply(x * 10, bound=0.5)``: torch 2.13 and 2.14 pass ``bound`` on to ``forward`` (one graph);
    torch 2.11's apply takes no keyword arguments, and the compiled call raises eager's TypeError."""
    report = assert_parity(clip_grad, lambda: (torch.randn(5, requires_grad=True),), calls=2)
    breaks = [e.graph_break for e in entries(report)]
    if compat.autograd_function_apply_takes_kwargs():
        assert breaks == [None] and len(applies(report)) == 1, report.format()
    else:
        assert [b.kind.value for b in breaks] == ["user_exception"], report.format()
        with pytest.raises(TypeError, match="keyword"):
            clip_grad(torch.randn(5, requires_grad=True))


def test_module_parameters_and_a_loop():
    report = assert_parity(AffineModule(), lambda: (torch.randn(2, 4, requires_grad=True),), calls=2)
    assert [e.graph_break for e in entries(report)] == [None]
    assert len(applies(report)) == 2


def test_saved_tensors_flow_from_forward_to_backward():
    report = assert_parity(scale, PROGRAMS[scale])
    gm = entries(report)[0].graph_module
    (node,) = applies(report)
    assert node.kwargs["saved_for_backward_idx"] == [0]
    bwd = gm.bwd_body_0
    assert [n.op for n in bwd.graph.nodes][:2] == ["placeholder", "placeholder"]  # grad_0, then the saved x


def test_no_grad_apply_inlines_forward():
    from .autograd_programs import under_no_grad

    report = assert_parity(under_no_grad, PROGRAMS[under_no_grad])
    assert applies(report) == []


@pytest.mark.parametrize("fn", list(BREAKS), ids=lambda f: f.__name__)
def test_what_cannot_be_captured_runs_apply_for_real(fn):
    LOG.clear()
    report = assert_parity(fn, BREAKS[fn], calls=2)
    kinds = [e.graph_break.kind for e in entries(report) if e.graph_break is not None]
    assert "higher_order" in kinds


def torch_compile_graphs(fn, args):
    """How many graphs torch.compile captures for ``fn`` (None: it raises, as it does for zero_arg_super)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        torch.compile(fn, backend=backend)(*args)
    except Exception:  # noqa: BLE001 (torch.compile's own internal errors)
        return None
    return len(graphs)


def test_graph_counts_next_to_torch_compile():
    """stillframe captures each program in one graph; torch.compile in no fewer (or it raises)."""
    counts = {}
    for fn, make in PROGRAMS.items():
        report = assert_parity(fn, make)
        counts[fn.__name__] = (len(entries(report)), torch_compile_graphs(fn, make()))
    assert all(ours == 1 and (theirs is None or theirs >= ours) for ours, theirs in counts.values()), counts
    # torch 2.13's torch.compile raises InternalTorchDynamoError on zero_arg_super (super() in forward)
