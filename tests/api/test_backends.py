"""Backends, compile options, decorator forms, disable, eager fallback and user exceptions.

The same small function and module run through ``"eager"``, ``"aot_eager"``
and ``"inductor"`` (CPU inductor compiles C++: a few seconds with a warm
cache). Fallback warnings and ``Unsupported`` errors must name this file and
the offending line, computed with ``inspect``.
"""

from __future__ import annotations

import inspect
import os

import pytest
import torch
from torch import nn

import stillframe
from stillframe.check import assert_parity

FILE = os.path.basename(__file__)
BACKENDS = ["eager", "aot_eager", "inductor"]
TOLERANCE = {"eager": {}, "aot_eager": {}, "inductor": {"rtol": 1e-4, "atol": 1e-5}}


def small_fn(x, y):
    return torch.relu(x @ y + 1).sum(dim=0)


def make_small():
    return torch.randn(3, 4, requires_grad=True), torch.randn(4, 5)


class SmallModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(torch.relu(self.linear(x)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_small_function(backend):
    assert_parity(small_fn, make_small, backend=backend, calls=2, **TOLERANCE[backend])


@pytest.mark.parametrize("backend", BACKENDS)
def test_small_module(backend):
    assert_parity(SmallModule(), lambda: (torch.randn(3, 4, requires_grad=True),), backend=backend, calls=2,
                  **TOLERANCE[backend])


@pytest.mark.parametrize("returns", ["forward", "module"])
def test_callable_backend_receives_graph_module_and_real_example_inputs(returns):
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return gm.forward if returns == "forward" else gm

    compiled = stillframe.compile(small_fn, backend=backend)
    assert_parity(small_fn, make_small, compiled=compiled)
    (gm, example_inputs), = seen
    assert isinstance(gm, torch.fx.GraphModule)
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    assert len(placeholders) == len(example_inputs) == 2
    assert all(type(t) is torch.Tensor for t in example_inputs), [type(t) for t in example_inputs]
    torch.manual_seed(0)
    x, y = make_small()
    assert sorted(tuple(t.shape) for t in example_inputs) == sorted([tuple(x.shape), tuple(y.shape)])
    for t in example_inputs:
        assert any(t.dtype == a.dtype and t.shape == a.shape and torch.equal(t.detach(), a.detach())
                   for a in (x, y))
    assert isinstance(gm(*example_inputs), tuple)


@pytest.mark.parametrize("compile_kwargs", [{"mode": "default"}, {"options": {"epilogue_fusion": False}}],
                         ids=["mode", "options"])
def test_inductor_accepts_mode_and_options(compile_kwargs):
    assert_parity(small_fn, make_small, backend="inductor", compile_kwargs=compile_kwargs,
                  **TOLERANCE["inductor"])


def _outcome(thunk):
    try:
        return thunk(), None
    except Exception as exc:  # we are recording what torch.compile does, whatever it is
        return None, exc


def test_unknown_backend_raises_like_torch_compile():
    _, torch_error = _outcome(lambda: torch.compile(small_fn, backend="nope"))
    assert torch_error is not None, "torch.compile raises eagerly for an unknown backend name"
    _, error = _outcome(lambda: stillframe.compile(small_fn, backend="nope"))
    assert isinstance(error, type(torch_error)), f"expected {type(torch_error)}, got {error!r}"
    assert "nope" in str(error)


def test_unknown_backend_in_decorator_form_raises_when_torch_does():
    torch_decorator, torch_error = _outcome(lambda: torch.compile(backend="nope"))
    decorator, error = _outcome(lambda: stillframe.compile(backend="nope"))
    assert (error is None) == (torch_error is None), (torch_error, error)
    if torch_error is None:
        _, torch_error = _outcome(lambda: torch_decorator(small_fn))
        _, error = _outcome(lambda: decorator(small_fn))
    assert torch_error is not None
    assert isinstance(error, type(torch_error)), f"expected {type(torch_error)}, got {error!r}"


def test_disable_runs_eagerly_without_compiling():
    calls = []

    def counting(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    compiled = stillframe.compile(small_fn, backend=counting, disable=True)
    assert_parity(small_fn, make_small, compiled=compiled, calls=2)
    model = SmallModule()
    compiled_model = stillframe.compile(model, backend=counting, disable=True)
    assert_parity(model, lambda: (torch.randn(3, 4),), compiled=compiled_model)
    assert calls == []
    assert stillframe.counters["traces"] == 0


def test_bare_decorator():
    @stillframe.compile
    def f(x):
        return torch.sin(x) * 2

    assert isinstance(f, stillframe.CompiledFunction)
    assert f.__name__ == "f"
    assert_parity(f.__wrapped__, lambda: (torch.randn(4, requires_grad=True),), compiled=f, **TOLERANCE["inductor"])


def test_decorator_with_arguments():
    @stillframe.compile(backend="eager")
    def f(x):
        """Doubles the cosine."""
        return torch.cos(x) * 2

    assert isinstance(f, stillframe.CompiledFunction)
    assert f.__name__ == "f" and f.__doc__ == "Doubles the cosine."
    assert_parity(f.__wrapped__, lambda: (torch.randn(4, requires_grad=True),), compiled=f, calls=2)
    assert stillframe.counters["traces"] == 1


# ---------------------------------------------------------------- eager fallback for what milestone 1 cannot capture


def unsupported_print(x):
    y = x * 2
    print("shape", y.shape)  # unsupported
    return y + 1


def unsupported_item_branch(x):
    total = x.sum()
    if total.item() > 0:  # unsupported
        return x * 2
    return x - 1


def unsupported_tolist(x):
    values = x.tolist()  # unsupported
    return x * len(values)


UNSUPPORTED = [unsupported_print, unsupported_item_branch, unsupported_tolist]


def unsupported_match(x):
    try:
        raise ExceptionGroup("group", [ValueError(1)])
    except* ValueError:  # unsupported
        pass
    return x * 2


def line_of(fn, marker="# unsupported"):
    """The line number of the line of ``fn`` marked with ``marker``."""
    lines, start = inspect.getsourcelines(fn)
    (offset,) = [i for i, line in enumerate(lines) if marker in line]
    return start + offset


@pytest.mark.parametrize("fn", UNSUPPORTED, ids=lambda fn: fn.__name__)
def test_unsupported_step_graph_breaks_without_warning(fn):
    """print / item / tolist: the graph ends there, the step runs for real, tracing resumes (no fallback)."""
    report = assert_parity(fn, lambda: (torch.randn(3, requires_grad=True),), calls=2)
    assert report.warnings == []
    entries = report.compiled.cache_entries()
    assert len(entries) == 1 and entries[0].graph_break is not None
    assert f"{FILE}:{line_of(fn)}" in entries[0].graph_break.format()


def test_untraceable_construct_falls_back_to_eager_with_one_warning():
    """A construct with no handler and no real step (``except*``) runs the whole call eagerly."""
    report = assert_parity(unsupported_match, lambda: (torch.randn(3, requires_grad=True),), calls=2,
                           expect_fallback=True)
    assert len(report.warnings) == 1, [str(w.message) for w in report.warnings]
    message = str(report.warnings[0].message)
    assert f"{FILE}:{line_of(unsupported_match)}" in message, message


@pytest.mark.parametrize("fn", UNSUPPORTED + [unsupported_match], ids=lambda fn: fn.__name__)
def test_unsupported_with_fullgraph_raises(fn):
    compiled = stillframe.compile(fn, backend="eager", fullgraph=True)
    with pytest.raises(stillframe.Unsupported) as info:
        compiled(torch.randn(3))
    assert f"{FILE}:{line_of(fn)}" in str(info.value), str(info.value)


# ---------------------------------------------------------------- the user's own exceptions


def bad_matmul(x, y):
    return torch.relu(x) @ y


@pytest.mark.parametrize("fullgraph", [False, True], ids=["graph-breaks-allowed", "fullgraph"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_user_shape_error_is_eagers_exception(backend, fullgraph):
    report = assert_parity(bad_matmul, lambda: (torch.randn(3, 4), torch.randn(5, 6)), backend=backend,
                           fullgraph=fullgraph)
    assert type(report.compiled_result) is type(report.eager_result)

