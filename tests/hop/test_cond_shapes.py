"""``torch.cond`` whose branches return different sizes (issue 13), against eager and torch.compile 2.13:
torch.compile captures it, the output's differing size an unbacked symbol of its ShapeEnv; stillframe too (a
static trace is traced again with a ShapeEnv). Through AOTAutograd with gradients neither can (torch.compile
raises BackendCompilerFailed; stillframe runs the cond for real). Different dtypes or numbers of dimensions are an error of
torch.cond itself (TorchRuntimeError, in eager as under torch.compile): the call runs for real and raises it;
under ``fullgraph=True`` the error names the difference, in diff()'s words."""

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity
from stillframe.errors import Unsupported

from .torch_counts import stillframe_counts, torch_compile_counts

COND = torch.ops.higher_order.cond


def prefix_or_all(x):
    return torch.cond(x.sum() > 0, lambda a: a[:2] * 2, lambda a: a * 3, (x,))


def then_used(x, w):
    out = torch.cond(x.sum() > 0, lambda a: (a[1:] * w).sin(), lambda a: a.cos() * w, (x,))
    return out.sum() + w * 2, out.exp()


def two_outputs_one_resized(x):
    a, b = torch.cond(x.sum() > 0, lambda t: (t.repeat(2), t + 1), lambda t: (t * 2, t - 1), (x,))
    return a * 1, b


def sign(n):  # pred true on even calls, false on odd ones: both branches run
    return 1.0 if n % 2 == 0 else -1.0


CASES = {
    prefix_or_all: lambda i: (torch.rand(4, requires_grad=True) * sign(i),),
    then_used: lambda i: (torch.rand(4, requires_grad=True) * sign(i), torch.randn(()).requires_grad_()),
    two_outputs_one_resized: lambda i: (torch.rand(3, requires_grad=True) * sign(i),),
}


def no_grad(make):
    return lambda i: tuple(a.detach() for a in make(i))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_branches_of_different_sizes_are_captured(fn, backend):
    make = CASES[fn] if backend == "eager" else no_grad(CASES[fn])
    report = assert_parity(fn, make, calls=4, backend=backend)
    counts = stillframe_counts(report, COND)
    assert (counts.graphs, counts.ops, counts.failures) == (1, 1, [])  # one (symbolic) trace serves both branches


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_with_gradients_aot_autograd_cannot_compile_it_and_the_cond_runs_for_real(fn):
    """AOTAutograd fails on the backward of a cond whose output size is unbacked (torch 2.13: a reshape to the
    true branch's size); torch.compile raises BackendCompilerFailed to the caller, stillframe breaks there."""
    report = assert_parity(fn, CASES[fn], calls=2, backend="aot_eager")
    assert "higher_order" in stillframe_counts(report, COND).failures
    assert torch_compile_counts(fn, CASES[fn](0), "aot_eager", COND).raised == "BackendCompilerFailed"


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_graph_counts_next_to_torch_compile(fn):
    ours = stillframe_counts(assert_parity(fn, CASES[fn]), COND)
    theirs = torch_compile_counts(fn, CASES[fn](0), "eager", COND)
    assert (ours.graphs, ours.ops) == (theirs.graphs, theirs.ops) == (1, 1) and theirs.raised is None


def test_fullgraph_captures_it():
    x = torch.rand(4)
    torch.testing.assert_close(stillframe.compile(prefix_or_all, fullgraph=True)(x), prefix_or_all(x))


def dtype_differs(x):
    return torch.cond(x.sum() > 0, lambda a: a.double(), lambda a: a * 3, (x,))


def ndim_differs(x):
    return torch.cond(x.sum() > 0, lambda a: a.sum(), lambda a: a * 3, (x,))


@pytest.mark.parametrize("fn", [dtype_differs, ndim_differs], ids=lambda f: f.__name__)
def test_what_torch_cond_refuses_raises_its_own_error(fn):
    """Eager torch.cond and torch.compile raise TorchRuntimeError; so does the compiled call (it runs for real)."""
    report = assert_parity(fn, lambda: (torch.rand(4),))
    assert type(report.eager_result).__name__ == "TorchRuntimeError"
    assert torch_compile_counts(fn, (torch.rand(4),)).raised == "TorchRuntimeError"


@pytest.mark.parametrize("fn, words", [
    (dtype_differs, "the output has dtype torch.float64 in the true branch but torch.float32 in the false branch"),
    (ndim_differs, "the output has ndim 0 in the true branch but 1 in the false branch"),
])
def test_fullgraph_names_the_difference(fn, words):
    with pytest.raises(Unsupported, match=words):
        stillframe.compile(fn, fullgraph=True)(torch.rand(4))


@pytest.mark.slow
def test_inductor():
    report = assert_parity(then_used, no_grad(CASES[then_used]), calls=2, backend="inductor")
    assert stillframe_counts(report, COND).ops == 1
