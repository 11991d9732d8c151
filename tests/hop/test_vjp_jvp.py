"""torch.func.vjp, jvp and linearize captured as one graph each (issue 13): values, gradients and
requires_grad against eager, graph counts next to torch.compile's, and what crosses a graph break."""

import pytest
import torch
from torch.func import vjp

from stillframe.check.parity import assert_parity

from .linearized_programs import PROGRAMS, TORCH_COMPILE_GRAPHS, linearize_of_tensors_requiring_grad
from .torch_counts import stillframe_counts, torch_compile_counts


def entries(report):
    return [e for es in report.compiled.all_cache_entries().values() for e in es]


def no_grad_args(make):
    return lambda: tuple(a.detach() for a in make())


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", list(PROGRAMS), ids=lambda f: f.__name__)
def test_one_graph_with_eager_values_and_gradients(fn, backend):
    report = assert_parity(fn, PROGRAMS[fn], calls=2, backend=backend)
    assert [e.graph_break for e in entries(report)] == [None]


@pytest.mark.parametrize("fn", list(PROGRAMS), ids=lambda f: f.__name__)
def test_inputs_that_do_not_require_grad(fn):
    report = assert_parity(fn, no_grad_args(PROGRAMS[fn]), calls=2)
    assert [e.graph_break for e in entries(report)] == [None]


@pytest.mark.parametrize("fn", list(PROGRAMS), ids=lambda f: f.__name__)
def test_graph_counts_next_to_torch_compile(fn):
    """torch.compile captures vjp and jvp in one graph, and breaks once on linearize: stillframe captures
    each in one graph, never in more than torch.compile."""
    ours = stillframe_counts(assert_parity(fn, PROGRAMS[fn]))
    theirs = torch_compile_counts(fn, PROGRAMS[fn]())
    assert (ours.graphs, ours.failures) == (1, [])
    assert (theirs.graphs, theirs.raised) == (TORCH_COMPILE_GRAPHS[fn], None), theirs


def vjp_then_break(x):
    out, vjp_fn = vjp(lambda a: a.sin() * 3, x)
    print("between")
    return vjp_fn(torch.ones(3))


def returns_the_vjp_fn(x):
    out, vjp_fn = vjp(lambda a: (a * 2).sin(), x)
    return out, vjp_fn


def mutates_after_vjp(x):
    y = x.clone()
    out, vjp_fn = vjp(lambda a: (a * 2).sin(), y)  # the gradient reads the saved a * 2, not a
    y.add_(1)
    return vjp_fn(torch.ones(3)), y


def mutates_after_vjp_then_breaks(x):
    y = x.clone()
    out, vjp_fn = vjp(lambda a: (a * 2).sin(), y)
    y.add_(1)
    print("between")
    return vjp_fn(torch.ones(3)), y


def test_the_vjp_fn_crosses_a_graph_break(capsys):
    report = assert_parity(vjp_then_break, lambda: (torch.randn(3, requires_grad=True),), calls=2)
    assert [e.graph_break.kind.value for e in entries(report) if e.graph_break] == ["unsupported_builtin"]  # print


@pytest.mark.parametrize("fn", [mutates_after_vjp, mutates_after_vjp_then_breaks], ids=lambda f: f.__name__)
def test_an_in_place_change_after_vjp_does_not_reach_its_vjp_fn(fn, capsys):
    assert_parity(fn, lambda: (torch.randn(3, requires_grad=True),), calls=2)


def test_a_returned_vjp_fn_computes_eagers_gradient():
    import stillframe

    x = torch.randn(3, requires_grad=True)
    out, fn = stillframe.compile(returns_the_vjp_fn)(x)
    eager_out, eager_fn = returns_the_vjp_fn(x)
    torch.testing.assert_close(out, eager_out)
    (g,), (eager_g,) = fn(torch.ones(3)), eager_fn(torch.ones(3))
    torch.testing.assert_close(g, eager_g)
    assert g.requires_grad == eager_g.requires_grad


def saved_input_mutated(x):
    y = x.clone()
    out, vjp_fn = vjp(torch.sin, y)  # sin saves y: eager's vjp_fn raises after y.add_
    y.add_(1)
    return vjp_fn(torch.ones(3))


def saved_input_mutated_not_saved(x):
    y = x.clone()
    out, vjp_fn = vjp(lambda a: a * 2, y)  # nothing saved: eager's vjp_fn runs after y.add_
    y.add_(1)
    return vjp_fn(torch.ones(3)), y


@pytest.mark.parametrize("fn", [saved_input_mutated, saved_input_mutated_not_saved])
def test_a_primal_changed_in_place_after_vjp_behaves_as_in_eager(fn):
    """A write after vjp makes the vjp run for real (its vjp_fn is eager's): it raises eager's 'modified by an
    inplace operation' where the primal was saved, and returns eager's gradient where it was not."""
    assert_parity(fn, lambda: (torch.randn(3, requires_grad=True),))


def draws(x):
    out, vjp_fn = vjp(lambda a: torch.nn.functional.dropout(a, 0.5), x)
    return vjp_fn(torch.ones(3))


def jvp_primals_not_a_tuple(x):
    return torch.func.jvp(torch.sin, x, (torch.ones(3),))


def wrong_cotangent_shape(x):
    out, vjp_fn = vjp(torch.sin, x)
    return vjp_fn(torch.ones(4))


def linearize_needing_grad(x):
    return linearize_of_tensors_requiring_grad(x, torch.randn(3))


@pytest.mark.parametrize("fn", [jvp_primals_not_a_tuple, wrong_cotangent_shape, linearize_needing_grad],
                         ids=lambda f: f.__name__)
def test_what_cannot_be_captured_runs_for_real(fn):
    """torch's own errors (raised by the real call, as in eager), and linearize of tensors that require grad
    (eager's jvp_fn outputs require grad but give the primals none: torch.compile breaks there too)."""
    report = assert_parity(fn, lambda: (torch.randn(3, requires_grad=True),))
    assert "higher_order" in [e.graph_break.kind.value for e in entries(report) if e.graph_break]


def test_a_body_that_draws_random_numbers_runs_for_real():
    import stillframe

    compiled = stillframe.compile(draws)
    (g,) = compiled(torch.randn(3, requires_grad=True))
    assert set(g.unique().tolist()) <= {0.0, 2.0}  # dropout's gradient: the kept elements scaled by 2
    breaks = [e.graph_break.kind.value for es in compiled.all_cache_entries().values() for e in es if e.graph_break]
    assert "higher_order" in breaks
