"""Threads, and the global state a compile must leave as it found it.

stillframe traces under torch.compile's own compile lock: two threads calling one compiled function each get
eager's answers, whatever shapes they pass, and afterwards ``torch.compile`` still works (an FX trace of a
backend raced by another thread used to leave torch.fx's global tracing flag set, and every later
``torch.compile`` call raised). A fault of ours is retried, never cached as an eager entry for every call.
"""

from __future__ import annotations

import threading
import warnings

import pytest
import torch

import stillframe
import stillframe.compat as compat
import stillframe.runtime.compiler as runtime_compiler


def branchy(x, n):
    y = x * 2
    for i in range(n):
        y = y + i
    if y.sum() > 0:  # a data-dependent branch: a graph break, the code after it traced on its own
        y = y - 1
    return y.relu()


def _global_state():
    return (compat.fx_tracing_flag(), torch.is_grad_enabled(), torch.get_default_dtype(),
            torch.is_autocast_enabled("cpu"))


def test_four_threads_share_one_compiled_function():
    stillframe.config.cache_size_limit = 64  # every shape gets a plan: the threads trace while others run plans
    # aot_eager FX-traces: the flag race; static shapes, so that each shape has its own plan to count
    compiled = stillframe.compile(branchy, backend="aot_eager", dynamic=False)
    before = _global_state()
    failures, barrier = [], threading.Barrier(4)

    def worker(k):
        try:
            barrier.wait()
            for i in range(12):
                x = torch.randn(k + i % 4 + 1)
                n = i % 3
                torch.testing.assert_close(compiled(x, n), branchy(x, n))
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            failures.append(e)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert failures == []
    assert [str(w.message) for w in caught if issubclass(w.category, stillframe.StillframeWarning)] == []
    assert stillframe.counters["fallbacks"] == 0
    assert _global_state() == before
    # every input shape seen by any thread has exactly one plan (no thread traced what another had traced)
    assert len(compiled.cache_entries()) == len({(k + i % 4 + 1, i % 3) for k in range(4) for i in range(12)})
    torch._dynamo.reset()
    assert torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2)).tolist() == [2.0, 2.0]


def _state_breaking_backend(gm, example_inputs):
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    compat.set_fx_tracing_flag(True)
    raise RuntimeError("backend gave up half way")


def test_a_failing_compile_leaves_global_state_as_it_found_it():
    before = _global_state()
    compiled = stillframe.compile(lambda x: x.sin() + 1, backend=_state_breaking_backend)
    try:
        compiled(torch.ones(3))
    except Exception:  # noqa: BLE001  (whether a backend failure raises is tested in test_errors.py)
        pass
    assert _global_state() == before
    torch._dynamo.reset()
    assert torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2)).tolist() == [2.0, 2.0]


def test_a_one_off_internal_error_is_retried_not_cached_as_eager(monkeypatch):
    real, failed = runtime_compiler.StateCodegen, []

    def flaky(tracer):
        if not failed:
            failed.append(True)
            raise AssertionError("a fault of ours, once")
        return real(tracer)

    monkeypatch.setattr(runtime_compiler, "StateCodegen", flaky)
    compiled = stillframe.compile(lambda x: x.cos() * 2, backend="eager")
    x = torch.randn(3)
    with pytest.warns(stillframe.StillframeWarning, match="internal error"):
        torch.testing.assert_close(compiled(x), x.cos() * 2)  # ran eagerly
    torch.testing.assert_close(compiled(x), x.cos() * 2)
    assert [e.eager for e in compiled.cache_entries()] == [False]  # the second call traced and cached a graph
    assert stillframe.counters["graphs"] == 1


def test_a_repeated_internal_error_is_cached_under_the_guards_of_its_path(monkeypatch):
    def broken(tracer):
        raise AssertionError("a fault of ours, every time")

    monkeypatch.setattr(runtime_compiler, "StateCodegen", broken)
    compiled = stillframe.compile(lambda x: x.cos() * 2, backend="eager")
    with pytest.warns(stillframe.StillframeWarning, match="internal error"):
        for _ in range(3):
            x = torch.randn(3)
            torch.testing.assert_close(compiled(x), x.cos() * 2)
    entries = compiled.cache_entries()
    assert [e.eager for e in entries] == [True]  # cached after the second fault: the third call did not trace
    assert stillframe.counters["traces"] == 2
    assert not entries[0].check({"x": torch.randn(5)}, compiled._func.__globals__, compiled._func)  # for this path only: another shape traces
