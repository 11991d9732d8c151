"""``with torch.inference_mode():`` inside a compiled function (issue 15, session 38).

On the ``"eager"`` backend the block is one graph, as under torch.compile: the graph records
``_enter_inference_mode`` / ``_exit_inference_mode`` (torch.compile's nodes), fake tensors are propagated under the
mode, so eager's inference tensors, ``requires_grad``, version counters and both later errors (an inference tensor
saved for backward, an in-place write into one outside the block) come out as in eager. A graph break inside the
block closes it at the end of the graph and re-enters it for real, so the real step runs under it.

On AOTAutograd backends entering the block is a graph break (AOTAutograd traces the switch away: torch.compile's
``aot_eager`` results are not inference tensors where eager's are, and a view made in the block fails to compile);
the block's body is a graph called in inference mode.

Each behaviour test compares with eager (``assert_parity`` and the flags it does not compare: ``is_inference()``,
``_version``, the modes seen) and, where the behaviour is torch.compile's, counts graphs side by side with it.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

import stillframe
from stillframe.check.parity import assert_parity

ENTER = torch.autograd.grad_mode._enter_inference_mode
EXIT = torch.autograd.grad_mode._exit_inference_mode


class Graphs:
    """A backend that keeps the graphs it is given and runs each as it is."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm


def _switches(gm) -> list[str]:
    """The inference-mode switches of a graph, in order."""
    return [{ENTER: "enter", EXIT: "exit"}[n.target] for n in gm.graph.nodes
            if n.op == "call_function" and n.target in (ENTER, EXIT)]


def _torch_compile_graphs(fn, *args) -> list:
    torch._dynamo.reset()
    backend = Graphs()
    torch.compile(fn, backend=backend)(*args)
    torch._dynamo.reset()
    return backend.graphs


def _explain(fn, *args, backend="eager"):
    explainer = stillframe.explain(fn, backend=backend)
    explainer(*args)
    return explainer.report()


def _counts(fn, make_args, backend="eager") -> tuple[int, int]:
    """stillframe's (graphs, graph breaks) for one call (one that raises eager's error included)."""
    explainer = stillframe.explain(fn, backend=backend)
    try:
        explainer(*make_args())
    except RuntimeError:
        pass
    report = explainer.report()
    return report.graph_count, report.break_count


def _flags(value):
    """What parity does not compare: which results are inference tensors (and their requires_grad)."""
    if isinstance(value, (tuple, list)):
        return [_flags(v) for v in value]
    if isinstance(value, torch.Tensor):
        return (value.is_inference(), value.requires_grad, value.grad_fn is None)
    return value


def _same_flags(fn, make_args, backend="eager", calls=2):
    compiled = stillframe.compile(fn, backend=backend)
    for _ in range(calls):
        assert _flags(compiled(*make_args())) == _flags(fn(*make_args()))
        assert (torch.is_inference_mode_enabled(), torch.is_grad_enabled()) == (False, True)


def leaf():
    return (torch.randn(3, requires_grad=True),)


def plain():
    return (torch.randn(3),)


# --- tensors written in place ---------------------------------------------------------------------------------------

def written_under_the_callers_mode(x):
    x.add_(1)  # a normal tensor stays one, written in inference mode
    y = x * 2
    y.mul_(2)  # an inference tensor stays one
    return x.is_inference(), y.is_inference()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_is_inference_of_tensors_written_under_the_callers_inference_mode(backend):
    """A tensor written in place has a new fake, made as an inference tensor exactly where the tensor is one."""
    compiled = stillframe.compile(written_under_the_callers_mode, backend=backend)
    for _ in range(2):
        x, x_eager = torch.randn(3), torch.randn(3)
        with torch.inference_mode():
            assert compiled(x) == written_under_the_callers_mode(x_eager) == (False, True)
    x = torch.randn(3)
    with torch.inference_mode():
        assert _counts(written_under_the_callers_mode, lambda: (x,), backend=backend) == (1, 0)
