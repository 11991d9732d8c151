"""Diagnostics users can act on (issue 15): explain counts graphs and graph breaks per source site as
``torch._dynamo.explain`` does (the plans behind them are listed too), a recompile names the value the call
passed beside the one the guard expected, and a code point past the cache limit counts as an eager fallback.
"""

from __future__ import annotations

import collections
import functools
import io

import pytest
import torch
import torch._dynamo
from torch import nn

import stillframe
from stillframe import runner
from stillframe.diagnostics.report import report_for


def two_prints(x):
    y = x.sin()
    print("", end="")
    y = y * 2
    print("", end="")
    return y.cos()


def test_graphs_and_breaks_are_counted_per_site_as_torch_does():
    explained = stillframe.explain(two_prints)
    explained(torch.randn(3))
    report = explained(torch.randn(4, 2))  # a second shape: a second plan at each of the three sites
    theirs = torch._dynamo.explain(two_prints)(torch.randn(3))
    torch._dynamo.reset()
    assert (report.graph_count, report.break_count) == (theirs.graph_count, theirs.graph_break_count) == (3, 2)
    assert (report.plan_count, len(report.breaks)) == (6, 4)
    assert "3 graphs, 2 graph breaks (over 6 plans, 4 breaks taken)" in report.format()


def scaled(x, n):
    return x * n


def test_a_recompile_shows_the_value_it_got():
    compiled = stillframe.compile(scaled, backend="eager")
    compiled(torch.ones(2), 3)
    compiled(torch.ones(2), 4)
    compiled(torch.ones(3, 2), 4)
    first, second = (r.guard for r in report_for(compiled).recompiles)
    assert first.startswith("L['n'] == 3") and "; got 4" in first  # then: what becomes symbolic (n, an int)
    assert "shape=(2,)" in second and second.endswith(
        "; got a Tensor(dtype=torch.float32, device=cpu, shape=(3, 2), stride=(2, 1), requires_grad=False, "
        "is_leaf=True)")


def test_a_recompile_on_global_state_shows_the_state_it_got():
    compiled = stillframe.compile(scaled, backend="eager")
    compiled(torch.ones(2), 3)
    with torch.no_grad():
        compiled(torch.ones(2), 3)
    torch.set_default_dtype(torch.float64)
    try:
        compiled(torch.ones(2), 3)
    finally:
        torch.set_default_dtype(torch.float32)
    assert [r.guard for r in report_for(compiled).recompiles] == [  # the newest plan's first failing guard
        "torch.is_grad_enabled() == True; got False",
        "torch.is_grad_enabled() == False; got True"]
    compiled = stillframe.compile(scaled, backend="eager")
    compiled(torch.ones(2), 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        compiled(torch.ones(2), 3)
    assert report_for(compiled).recompiles[-1].guard == \
        "(torch.is_autocast_enabled('cpu'), torch.get_autocast_dtype('cpu')) == (False, torch.bfloat16); got " \
        "(True, torch.bfloat16)"


def test_the_cache_limit_is_an_eager_fallback_in_the_counters_and_the_report():
    stillframe.config.cache_size_limit = 2
    compiled = stillframe.compile(scaled, backend="eager", dynamic=False)  # each n its own plan
    with pytest.warns(stillframe.StillframeWarning, match="cache_size_limit"):
        for n in range(5):
            torch.testing.assert_close(compiled(torch.ones(2), n), torch.ones(2) * n)
    assert stillframe.counters["fallbacks"] == 1  # counted once, not per call
    (fallback,) = report_for(compiled).fallbacks
    assert "hit config.cache_size_limit (2)" in fallback.reason and "runs eagerly" in fallback.reason
    assert "1 eager fallback" in report_for(compiled).format()


def test_warnings_name_the_users_call():
    stillframe.config.cache_size_limit = 1
    compiled = stillframe.compile(scaled, backend="eager")
    compiled(torch.ones(2), 1)
    with pytest.warns(stillframe.StillframeWarning, match="cache_size_limit") as caught:
        compiled(torch.ones(2), 2)  # the line the warning names
    assert caught[0].filename == __file__
    assert caught[0].lineno == test_warnings_name_the_users_call.__code__.co_firstlineno + 5


def library_wrapper(forward):  # as transformers' can_return_tuple / check_model_inputs wrap a model's forward
    @functools.wraps(forward)
    def wrapper(*args, **kwargs):
        return forward(*args, **kwargs)

    return wrapper


class Wrapped(nn.Module):
    @library_wrapper
    def forward(self, x):
        return x + 1


def test_a_model_is_located_at_its_forward_not_at_a_library_wrapper():
    compiled = stillframe.compile(Wrapped(), backend="eager")
    compiled(torch.ones(2))
    forward = Wrapped.forward.__wrapped__
    assert report_for(compiled).name == f"Wrapped.forward ({__file__}:{forward.__code__.co_firstlineno})"


def resumed(x, scale):
    y = x * 2
    print("", end="")
    return y + scale


def test_messages_name_a_resumed_frames_values_as_the_user_and_torch_do():
    explained = stillframe.explain(resumed)
    explained(torch.ones(2), 1.5)
    report = explained(torch.ones(3), 1.5)
    text = report.format()
    assert "L['0:" not in text and "0:s" not in text  # stillframe's internal slot names
    assert any(r.guard.startswith("L['y'] is a Tensor(") for r in report.recompiles), report.recompiles


ORDERED = collections.OrderedDict(scale=2.0)


def _scale(x, scale):
    return x * scale


def spread_ordered_dict(x):
    return _scale(x, **ORDERED)  # ** of a mapping the trace does not model: the call runs for real


def test_a_break_names_the_users_type_not_a_tracer_class():
    report = stillframe.explain(spread_ordered_dict)(torch.ones(2))
    torch.testing.assert_close(report.result, spread_ordered_dict(torch.ones(2)))
    (only,) = report.breaks
    assert only.explanation == "** of a OrderedDict: it runs for real"
    assert "Variable" not in report.format()


def test_the_run_summary_counts_every_trace(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import torch\n"
                      "f = torch.compile(lambda x: x.sin() * 2, backend='eager')\n"
                      "for n in (2, 3, 2, 3):\n"
                      "    f(torch.ones(n))\n")
    out = io.StringIO()
    assert runner.run(str(script), [], out=out) == 0
    assert "1 graph, 0 graph breaks (over 2 plans, 0 breaks taken), 1 recompile, 0 eager fallbacks, 2 traces" \
        in out.getvalue()
