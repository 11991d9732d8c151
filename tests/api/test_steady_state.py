"""Steady state: after warm-up, a call whose inputs have the same shapes and kinds never traces again, whatever
graph breaks it goes through (issue 15). Each program runs eagerly and compiled on identical inputs (Python's
``random`` seeded alike on both sides); after two warm-up calls, further calls must add no trace.
"""

from __future__ import annotations

import random

import pytest
import torch

import stillframe
from stillframe.check.steady_programs import PROGRAMS, Jitter, clock, deque_append_pop, ordered_dict_values

def _check(compiled, eager, make_x, calls=6, exact=True):
    for i in range(calls):
        x = make_x()
        random.seed(i)
        expected = eager(x)
        random.seed(i)
        got = compiled(x)
        if exact:
            torch.testing.assert_close(got, expected)
        if i == 1:
            traces = stillframe.counters["traces"]
    return stillframe.counters["traces"] - traces


@pytest.mark.parametrize("fn", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_no_trace_after_warm_up(fn, capsys):
    compiled = stillframe.compile(fn, backend="eager")
    assert _check(compiled, fn, lambda: torch.randn(4)) == 0
    assert stillframe.counters["recompiles"] == 0
    assert stillframe.counters["fallbacks"] == 0


def test_a_clock_reading_is_not_guarded_by_value():
    compiled = stillframe.compile(clock, backend="eager")
    assert _check(compiled, clock, lambda: torch.randn(4), exact=False) == 0  # the clock moves between sides
    assert stillframe.counters["recompiles"] == 0


def test_random_inside_a_module_is_not_guarded_by_value():
    model = Jitter()
    compiled = stillframe.compile(model, backend="eager")
    with torch.no_grad():
        assert _check(compiled, model, lambda: torch.randn(2, 4)) == 0
    assert stillframe.counters["recompiles"] == 0


@pytest.mark.parametrize("fn, breaks", [(ordered_dict_values, 1), (deque_append_pop, 2)],
                         ids=["ordered_dict_values", "deque_append_pop"])
def test_a_c_method_of_a_live_object_breaks_once_per_call(fn, breaks):
    compiled = stillframe.compile(fn, backend="eager")
    x = torch.randn(4)
    for _ in range(2):
        compiled(x)
    before = stillframe.counters["graph_breaks"]
    torch.testing.assert_close(compiled(x), fn(x))
    assert stillframe.counters["graph_breaks"] - before == breaks  # at the call; reading the method was another


def _scale(x):
    return x * 2 + 1


def test_a_steady_state_checks_the_guards_of_the_entry_it_hit_last():
    """With one entry per shape (``dynamic=False``), a run of calls on one shape checks only that entry's guard
    function once it has hit, as torch.compile's cache moves the entry it hit to the front (GPT-2's decode loop
    checked its prompt's entry first on every token); values are eager's on every call."""
    compiled = stillframe.compile(_scale, backend="eager", dynamic=False)
    shapes = [(2,), (3,), (4,)]
    for shape in shapes:
        compiled(torch.randn(shape))
    checked = []
    for i, entry in enumerate(compiled.cache_entries()):
        entry.check = (lambda check, i: lambda *a: checked.append(i) or check(*a))(entry.check, i)
    for shape in [(2,)] * 3 + [(4,)] * 3:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), _scale(x), rtol=0, atol=0)
    # the first (2,) call scans from the start; a (4,) call first tries the (2,) entry it hit last
    assert checked == [0, 0, 0, 0, 1, 2, 2, 2]
