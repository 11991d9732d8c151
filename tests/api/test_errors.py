"""Errors as torch.compile users expect them: a failing backend, a backend returning no callable, a call with
the wrong arguments. Each is compared with what torch.compile (or eager Python) raises for the same program.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo
from torch import nn

import stillframe


def body(x):
    return x.sin() + 1


def failing_backend(gm, example_inputs):
    raise RuntimeError("boom")


def _raised(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001  (the test compares it)
        return e
    raise AssertionError("nothing was raised")


def _first_lines(e, n=2):
    return str(e).splitlines()[:n]


def test_a_failing_backend_raises_torch_compiles_error():
    ours = _raised(lambda: stillframe.compile(body, backend=failing_backend)(torch.ones(2)))
    theirs = _raised(lambda: torch.compile(body, backend=failing_backend)(torch.ones(2)))
    torch._dynamo.reset()
    assert type(ours) is type(theirs) is torch._dynamo.exc.BackendCompilerFailed
    assert isinstance(ours, RuntimeError)
    assert _first_lines(ours) == _first_lines(theirs) == ["backend='failing_backend' raised:", "RuntimeError: boom"]
    assert type(ours.inner_exception) is RuntimeError
    assert ours.backend_name == "failing_backend"
    assert stillframe.counters["fallbacks"] == 0


@pytest.mark.parametrize("returned", [None, 42], ids=["none", "int"])
def test_a_backend_returning_no_callable_is_an_error_at_compile_time(returned):
    def returns(gm, example_inputs):
        return returned

    ours = _raised(lambda: stillframe.compile(body, backend=returns)(torch.ones(2)))
    theirs = _raised(lambda: torch.compile(body, backend=returns)(torch.ones(2)))
    torch._dynamo.reset()
    assert type(ours) is type(theirs) is torch._dynamo.exc.BackendCompilerFailed
    assert _first_lines(ours, 1) == _first_lines(theirs, 1) == ["backend='returns' raised:"]
    assert f"the backend returned {type(returned).__name__} {returned!r}, not the compiled callable" in str(ours)


def with_break(x):
    y = x * 2
    print("", end="")  # a graph break: the code after it is a second graph, compiled on the first call too
    return y.cos()


def test_a_backend_failing_on_the_code_after_a_graph_break_raises_too():
    calls = []

    def second_fails(gm, example_inputs):
        calls.append(gm)
        if len(calls) == 2:
            raise ValueError("second graph")
        return gm

    e = _raised(lambda: stillframe.compile(with_break, backend=second_fails)(torch.ones(2)))
    assert type(e) is torch._dynamo.exc.BackendCompilerFailed
    assert _first_lines(e) == ["backend='second_fails' raised:", "ValueError: second graph"]


def test_suppress_errors_runs_the_code_eagerly_with_one_warning():
    stillframe.config.suppress_errors = True
    compiled = stillframe.compile(body, backend=failing_backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(3)
            torch.testing.assert_close(compiled(x), body(x))
    messages = [str(w.message) for w in caught if issubclass(w.category, stillframe.StillframeWarning)]
    assert len(messages) == 1
    assert "backend='failing_backend' raised" in messages[0] and "suppress_errors" in messages[0]
    assert stillframe.counters["traces"] == 2  # retried once, then cached as eager for that path
    # torch.compile with its suppress_errors also runs the function eagerly
    torch._dynamo.config.suppress_errors = True
    try:
        x = torch.randn(3)
        torch.testing.assert_close(torch.compile(body, backend=failing_backend)(x), body(x))
    finally:
        torch._dynamo.config.suppress_errors = False
        torch._dynamo.reset()


def test_fullgraph_raises_the_backend_error_even_when_suppressed():
    stillframe.config.suppress_errors = True
    e = _raised(lambda: stillframe.compile(body, backend=failing_backend, fullgraph=True)(torch.ones(2)))
    assert type(e) is torch._dynamo.exc.BackendCompilerFailed


def two(x, y, *, scale=1.0):
    return (x + y) * scale


class Net(nn.Module):
    def forward(self, x):
        return x + 1


@pytest.mark.parametrize("args, kwargs", [((torch.ones(1),), {}), ((torch.ones(1),) * 3, {}),
                                          ((torch.ones(1),) * 2, {"bad": 1}), ((), {"x": 1, "y": 2, "z": 3})],
                         ids=["missing", "too_many", "unknown_keyword", "keywords"])
def test_wrong_arguments_raise_pythons_error_naming_the_function(args, kwargs):
    eager = _raised(lambda: two(*args, **kwargs))
    ours = _raised(lambda: stillframe.compile(two, backend="eager")(*args, **kwargs))
    theirs = _raised(lambda: torch.compile(two, backend="eager")(*args, **kwargs))
    torch._dynamo.reset()
    assert type(ours) is type(eager) is type(theirs) is TypeError
    assert str(ours) == str(eager) == str(theirs)


def test_wrong_arguments_to_a_compiled_module_name_its_forward():
    eager = _raised(lambda: Net()(torch.ones(1), torch.ones(1)))
    ours = _raised(lambda: stillframe.compile(Net(), backend="eager")(torch.ones(1), torch.ones(1)))
    assert type(ours) is type(eager) is TypeError
    assert str(ours) == str(eager) == "Net.forward() takes 2 positional arguments but 3 were given"
