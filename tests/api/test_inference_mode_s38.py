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
from py_cases import counting_backend

ENTER = torch.autograd.grad_mode._enter_inference_mode
EXIT = torch.autograd.grad_mode._exit_inference_mode



def _switches(gm) -> list[str]:
    """The inference-mode switches of a graph, in order."""
    return [{ENTER: "enter", EXIT: "exit"}[n.target] for n in gm.graph.nodes
            if n.op == "call_function" and n.target in (ENTER, EXIT)]


def _torch_compile_graphs(fn, *args) -> list:
    torch._dynamo.reset()
    graphs, backend = counting_backend()
    torch.compile(fn, backend=backend)(*args)
    torch._dynamo.reset()
    return graphs


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


# --- one graph, as under torch.compile ------------------------------------------------------------------------------

def block(x):
    with torch.inference_mode():
        y = x * 2
        z = y + 1
    return z * 3, y, x * 4


def test_block_is_one_graph_with_torch_compiles_switches():
    x = leaf()[0]
    report = _explain(block, x)
    torch_graphs = _torch_compile_graphs(block, x)
    assert (report.graph_count, report.break_count) == (len(torch_graphs), 0) == (1, 0)
    assert _switches(report.graphs[0].graph_module) == _switches(torch_graphs[0]) == ["enter", "exit"]


def test_block_values_and_inference_flags():
    assert_parity(block, leaf, backend="eager", calls=2)
    _same_flags(block, leaf)
    assert _counts(block, leaf) == (1, 0)


def returns_inside(x):
    with torch.inference_mode():
        return x * 2


def test_return_inside_the_block():
    assert_parity(returns_inside, leaf, backend="eager", calls=2)
    _same_flags(returns_inside, leaf)
    assert _explain(returns_inside, leaf()[0]).graph_count == len(_torch_compile_graphs(returns_inside, *leaf())) == 1


@torch.inference_mode()
def decorated(x):
    return x * 2 + 1


def test_decorator_form():
    assert_parity(decorated, leaf, backend="eager", calls=2)
    _same_flags(decorated, leaf)
    report = _explain(decorated, leaf()[0])
    assert (report.graph_count, report.break_count) == (len(_torch_compile_graphs(decorated, *leaf())), 0) == (1, 0)


def reads_modes(x):
    with torch.inference_mode():
        inside = (torch.is_inference_mode_enabled(), torch.is_grad_enabled())
        y = x * 2
    return y, inside, (torch.is_inference_mode_enabled(), torch.is_grad_enabled())


def test_modes_read_inside_the_block():
    """torch.compile breaks the graph at ``torch.is_inference_mode_enabled()``; the traced mode answers it here."""
    assert_parity(reads_modes, leaf, backend="eager", calls=2)
    report = _explain(reads_modes, leaf()[0])
    assert (report.graph_count, report.break_count) == (1, 0)


def branches_on_is_inference(x):
    with torch.inference_mode():
        y = x * 2
        y.add_(1)  # a new version of an inference tensor is one too
        inside = y.is_inference()
    z = x * 3
    if y.is_inference() and not z.is_inference():
        return y + 1, inside, x.is_inference()
    return y - 1, inside, x.is_inference()


def test_is_inference_read_in_the_trace():
    """``t.is_inference()`` is answered by the fake tensor (made under the traced mode), in one graph."""
    assert_parity(branches_on_is_inference, leaf, backend="eager", calls=2)
    assert _counts(branches_on_is_inference, leaf) == (1, 0)
    compiled = stillframe.compile(branches_on_is_inference, backend="eager")
    for _ in range(2):
        x = torch.randn(3)
        with torch.inference_mode():  # called in inference mode: z is one too (another plan, guarded)
            got, want = compiled(x), branches_on_is_inference(x)
        assert got[1:] == want[1:] == (True, False)
        torch.testing.assert_close(got[0], want[0])


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


# --- nested with grad-mode blocks ---------------------------------------------------------------------------------

def off_inside(x):
    with torch.inference_mode():
        with torch.inference_mode(False):
            y = x * 2
        z = x * 3
    return y, z


def enable_grad_inside(x):
    with torch.inference_mode():
        with torch.enable_grad():
            y = x * 2
        z = y.sin()
    return y, z, x.cos()


def inside_no_grad(x):
    with torch.no_grad():
        with torch.inference_mode():
            y = x * 2
        z = x * 2
    return y, z, x.exp()


def set_grad_inside(x):
    with torch.inference_mode():
        torch.set_grad_enabled(True)  # left by the block's exit, which restores the modes before it
        y = x * 2
    return y, x * 3


@pytest.mark.parametrize("fn", [off_inside, enable_grad_inside, inside_no_grad, set_grad_inside])
def test_nested_grad_modes(fn):
    assert_parity(fn, leaf, backend="eager", calls=2)
    _same_flags(fn, leaf)
    report = _explain(fn, leaf()[0])
    assert (report.graph_count, report.break_count) == (len(_torch_compile_graphs(fn, *leaf())), 0) == (1, 0)


def off_block(x):
    with torch.inference_mode(False):
        y = x * 2
    return y, x + 1


def test_called_inside_inference_mode():
    """Called under ``torch.inference_mode()``, a ``torch.inference_mode(False)`` block makes normal tensors."""
    compiled = stillframe.compile(off_block, backend="eager")
    for _ in range(2):
        x = torch.randn(3)
        with torch.inference_mode():
            got, want = compiled(x), off_block(x)
        assert _flags(got) == _flags(want) == [(False, False, True), (True, False, True)]
        torch.testing.assert_close(got, want)
    with torch.inference_mode():
        assert _counts(off_block, plain) == (1, 0)


# --- version counters and eager's later errors -------------------------------------------------------------------

def writes_input(x):
    with torch.inference_mode():
        x.add_(1)
        y = x.view(3)
        y.mul_(2)
        z = x * 2
    return x, y, z


def test_version_counters():
    assert_parity(writes_input, plain, backend="eager", calls=2)
    compiled = stillframe.compile(writes_input, backend="eager")
    for _ in range(2):
        x, x_eager = torch.randn(3), torch.randn(3)
        got, want = compiled(x), writes_input(x_eager)
        assert x._version == x_eager._version == 2
        assert got[1]._version == want[1]._version
        assert _flags(got) == _flags(want)
        with pytest.raises(RuntimeError, match="Inference tensors do not track version counter"):
            got[2]._version
    assert _counts(writes_input, plain) == (1, 0)


def saved_for_backward(x):
    with torch.inference_mode():
        y = x * 2
    return x * y


def written_outside(x):
    with torch.inference_mode():
        y = x * 2
    y.add_(1)
    return y


def written_inside_then_outside(x):
    with torch.inference_mode():
        y = x * 2
        y.add_(1)
    y.mul_(2)
    return y


@pytest.mark.parametrize("fn, make_args", [(saved_for_backward, leaf), (written_outside, plain),
                                           (written_inside_then_outside, plain)])
def test_eagers_errors_later(fn, make_args):
    """An inference tensor saved for backward, or written in place outside inference mode: eager's error. A fake
    tensor made in the block (and a new version of it) is an inference tensor, so the trace sees the op fail: the
    graph ends there and the op runs for real, raising eager's error."""
    report = assert_parity(fn, make_args, backend="eager", calls=2)
    assert isinstance(report.compiled_result, RuntimeError)
    assert (torch.is_inference_mode_enabled(), torch.is_grad_enabled()) == (False, True)
    assert _counts(fn, make_args) == (1, 1)


def indexes(x, i):
    with torch.inference_mode():
        y = x.index_select(0, i) * 2
    return y


def test_a_graph_raising_inside_the_block_leaves_it():
    """The graph raises inside the block (an index out of range): inference mode is off again at once, while
    the exception is still held, as after eager's ``with``."""
    compiled = stillframe.compile(indexes, backend="eager")
    compiled(torch.randn(3), torch.tensor(1))
    for _ in range(2):
        try:
            compiled(torch.randn(3), torch.tensor(5))
        except IndexError:
            assert (torch.is_inference_mode_enabled(), torch.is_grad_enabled()) == (False, True)
        else:
            raise AssertionError("no IndexError")


# --- a graph break inside the block -----------------------------------------------------------------------------

SEEN = []


@stillframe.disable
@torch._dynamo.disable
def probe():
    SEEN.append((torch.is_inference_mode_enabled(), torch.is_grad_enabled()))


def breaks_inside(x):
    with torch.inference_mode():
        y = x * 2
        probe()
        z = y + 1
    return z * 3, y, x * 4


def test_break_inside_the_block():
    """The graph closes the block at the break; the plan re-enters it for real before the real step."""
    assert_parity(breaks_inside, leaf, backend="eager", calls=2)
    _same_flags(breaks_inside, leaf, calls=3)
    SEEN.clear()
    stillframe.compile(breaks_inside, backend="eager")(*leaf())
    breaks_inside(*leaf())
    assert SEEN == [(True, False), (True, False)]  # the real step runs in inference mode, as in eager


def test_break_inside_the_block_graph_counts():
    """torch.compile: 2 graphs, 1 break (its resume function re-enters the block in the second graph). stillframe:
    the exit of a block re-entered for real after the break is a real step: 3 graphs, 2 breaks."""
    x = leaf()[0]
    torch_graphs = _torch_compile_graphs(breaks_inside, x)
    assert [_switches(gm) for gm in torch_graphs] == [["enter", "exit"], ["enter", "exit"]]
    report = _explain(breaks_inside, x)
    assert (report.graph_count, report.break_count) == (3, 2)
    assert [_switches(g.graph_module) for g in report.graphs] == [["enter", "exit"], [], []]


# --- AOTAutograd backends ------------------------------------------------------------------------------------------

def view_inside(x):
    with torch.inference_mode():
        y = x.view(3) * 2
        w = x.view(3)
    return y, w


@pytest.mark.parametrize("fn, make_args, counts", [(block, leaf, (3, 2)), (view_inside, plain, (3, 2)),
                                                   (breaks_inside, leaf, (4, 3)), (off_inside, leaf, (5, 3))])
def test_aot_eager_keeps_eagers_inference_tensors(fn, make_args, counts):
    """torch.compile's aot_eager returns normal tensors where eager's are inference tensors (and fails to compile
    ``view_inside``): stillframe enters the block for real there, and its body is a graph run in the mode (before:
    a break at ``torch.inference_mode()``, one inside its ``__enter__`` and one at ``__exit__``)."""
    assert_parity(fn, make_args, backend="aot_eager", calls=2)
    _same_flags(fn, make_args, backend="aot_eager")
    assert _counts(fn, make_args, backend="aot_eager") == counts


def test_aot_eager_graph_counts():
    """torch.compile's aot_eager: 1 graph (with eager's is_inference() lost); stillframe: the body between two
    breaks, entering and leaving for real."""
    x = leaf()[0]
    report = _explain(block, x, backend="aot_eager")
    assert (report.graph_count, report.break_count) == (3, 2)
    torch._dynamo.reset()
    assert _flags(torch.compile(block, backend="aot_eager")(x))[1] == (False, False, True)  # eager: (True, ...)
    torch._dynamo.reset()
