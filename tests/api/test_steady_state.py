"""Steady state: after warm-up, a call whose inputs have the same shapes and kinds never traces again, whatever
graph breaks it goes through (issue 15). Each program runs eagerly and compiled on identical inputs (Python's
``random`` seeded alike on both sides); after two warm-up calls, further calls must add no trace.
"""

from __future__ import annotations

import copy
import random

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity
from stillframe.check.steady_programs import (CUSTOM_OPTIMIZERS, PROGRAMS, Jitter, clock, deque_append_pop,
                                             optimizer_model, ordered_dict_move_to_end, record_function)

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


def _breaks_after_warm_up(compiled, fn, x) -> int:
    """The graph breaks of one call of ``compiled`` after two warm-up calls; its result is checked against eager's
    ``fn(x)``."""
    for _ in range(2):
        compiled(x)
    before = stillframe.counters["graph_breaks"]
    torch.testing.assert_close(compiled(x), fn(x))
    return stillframe.counters["graph_breaks"] - before


@pytest.mark.parametrize("fn, breaks", [(ordered_dict_move_to_end, 1), (deque_append_pop, 2)],
                         ids=["ordered_dict_move_to_end", "deque_append_pop"])
def test_a_c_method_of_a_live_object_breaks_once_per_call(fn, breaks):
    compiled = stillframe.compile(fn, backend="eager")
    assert _breaks_after_warm_up(compiled, fn, torch.randn(4)) == breaks  # at the call; reading the method was another


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


# ---------------------------------------------------- torch.optim's profile_hook_step wrapper, profiler off / on

def _optimizer_pair(cls):
    torch.manual_seed(0)
    model = optimizer_model()
    twin = copy.deepcopy(model)
    return model, cls(model.parameters()), twin, cls(twin.parameters())


def _backward(model, i):
    torch.manual_seed(100 + i)
    model.zero_grad()
    model(torch.randn(3, 4)).sum().backward()


@pytest.mark.parametrize("cls", CUSTOM_OPTIMIZERS, ids=[c.__name__ for c in CUSTOM_OPTIMIZERS])
def test_an_optimizer_step_traces_record_function_as_a_no_op_while_no_profiler_is_active(cls):
    """``opt.step`` goes through torch.optim's ``profile_hook_step`` wrapper: its ``record_function`` block and
    ``_optimizer_step_code()`` are no-ops with no profiler active (guarded on it), so they break no graph, and
    neither does its loop over the empty hook OrderedDicts (``rules/live_dicts.py``): no break per step is left
    (17 before either, 10 with the profiler only)."""
    model, opt, twin, twin_opt = _optimizer_pair(cls)
    step = stillframe.compile(twin_opt.step, backend="eager")
    for i in range(4):
        _backward(model, i)
        _backward(twin, i)
        before = stillframe.counters["graph_breaks"]
        opt.step()
        step()
        if i >= 2:
            assert stillframe.counters["graph_breaks"] - before == 0
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(q, p, rtol=0, atol=0)
        for p, q in zip(model.parameters(), twin.parameters()):
            for key, value in opt.state[p].items():
                torch.testing.assert_close(torch.as_tensor(twin_opt.state[q][key]), torch.as_tensor(value),
                                           rtol=0, atol=0)
    assert stillframe.counters["fallbacks"] == 0


def _profiled_names(fn):
    with torch.profiler.profile() as prof:
        fn()
    return sorted(e.name for e in prof.events() if e.name.startswith(("Optimizer.", "block")))


@pytest.mark.parametrize("cls", CUSTOM_OPTIMIZERS, ids=[c.__name__ for c in CUSTOM_OPTIMIZERS])
def test_an_optimizer_step_under_an_active_profiler_records_its_events_as_eager(cls):
    model, opt, twin, twin_opt = _optimizer_pair(cls)
    step = stillframe.compile(twin_opt.step, backend="eager")
    for i in range(2):  # warm up with no profiler: the no-op plans
        _backward(model, i)
        _backward(twin, i)
        opt.step()
        step()
    _backward(model, 2)
    _backward(twin, 2)
    expected = _profiled_names(opt.step)
    assert expected == [f"Optimizer.step#{cls.__name__}.step"]
    assert _profiled_names(step) == expected
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(q, p, rtol=0, atol=0)
    _backward(model, 3)
    _backward(twin, 3)
    opt.step()
    step()  # the profiler off again: the first plans hit
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(q, p, rtol=0, atol=0)


def test_a_record_function_block_breaks_no_graph_and_records_under_a_profiler():
    compiled = stillframe.compile(record_function, backend="eager")
    x = torch.randn(4)
    assert _breaks_after_warm_up(compiled, record_function, x) == 0
    assert _profiled_names(lambda: compiled(x)) == _profiled_names(lambda: record_function(x)) == ["block"]


def _record_function_bound(x):
    with torch.autograd.profiler.record_function("block") as r:
        y = x + 1
    return y * 2, type(r).__name__, r.name


def _record_function_kept(x):
    r = torch.autograd.profiler.record_function("block")
    with r:
        y = x + 1
    return y * 2, r.name


@pytest.mark.parametrize("fn", [_record_function_bound, _record_function_kept], ids=["bound", "kept"])
def test_a_record_function_the_user_keeps_is_eager_s_object(fn):
    # with no profiler, the manager was traced as contextlib.nullcontext(): `as r` bound None, and r.name raised
    # AttributeError ('nullcontext' object has no attribute 'name') where eager reads "block"
    assert_parity(fn, lambda i=0: (torch.randn(4) + i,), backend="eager", calls=3)
    assert _profiled_names(lambda: stillframe.compile(fn, backend="eager")(torch.randn(4))) == ["block"]
