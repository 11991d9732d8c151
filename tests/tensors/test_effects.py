"""The effect policy of torch calls (``stillframe/tensors/effects.py``): default deny.

A call whose fake result holds no tensor is folded into a constant only when
``PURE_QUERIES`` lists it (a metadata query the trace guards); anything else
breaks the graph and runs for real, so its effect happens and its answer is
the real tensor's, never a fake tensor's.
"""

from __future__ import annotations

import functools

import pytest
import torch

import stillframe
from stillframe.check import assert_parity
from stillframe.tensors.effects import EFFECTS, PURE_QUERIES, TORCH_DENY, is_pure_query, known_effect, never_traced

BACKENDS = ["eager", "aot_eager"]


def breaks(fn, *args) -> list:
    """The graph breaks of one compiled call (kind, explanation), in order."""
    compiled = stillframe.compile(fn, backend="eager")
    compiled(*args)
    found = []
    for entries in compiled.all_cache_entries().values():
        for entry in entries:
            if entry.graph_break is not None:
                found.append((entry.graph_break.kind, entry.graph_break.explanation))
    return found


# ---------------------------------------------------------------------------------------- the table
def test_every_method_key_is_a_tensor_method_and_every_function_key_callable():
    for table in (PURE_QUERIES, EFFECTS):
        for key in table:
            if isinstance(key, str):
                assert callable(getattr(torch.Tensor, key, None)), key
            else:
                assert callable(key), key
    assert all(callable(f) for f in TORCH_DENY)


def test_methods_and_functions_are_looked_up_by_kind():
    assert is_pure_query("call_method", "size") and not is_pure_query("call_function", "size")
    assert is_pure_query("call_function", torch.numel) and not is_pure_query("call_method", torch.numel)
    assert known_effect("call_method", "backward") and known_effect("call_function", torch.autograd.backward)
    assert not is_pure_query("call_method", "backward") and not is_pure_query("call_method", "data_ptr")
    assert not is_pure_query("call_function", {})  # unhashable targets are never pure


# Each pure query, called on a tensor in a compiled function: folded (no break), and eager's answer.
QUERIES = {
    "size": lambda x: x.size(),
    "size_dim": lambda x: x.size(-1),
    "dim": lambda x: x.dim(),
    "ndimension": lambda x: x.ndimension(),
    "__len__": lambda x: x.__len__(),
    "numel": lambda x: x.numel(),
    "nelement": lambda x: x.nelement(),
    "stride": lambda x: x.stride(),
    "storage_offset": lambda x: x[1:].storage_offset(),
    "is_contiguous": lambda x: (x.is_contiguous(), x.t().is_contiguous()),
    "dim_order": lambda x: x.t().dim_order(),
    "is_same_size": lambda x: x.is_same_size(x.t()),
    "is_floating_point": lambda x: x.is_floating_point(),
    "is_complex": lambda x: x.is_complex(),
    "is_signed": lambda x: x.is_signed(),
    "element_size": lambda x: x.element_size(),
    "get_device": lambda x: x.get_device(),
    "type": lambda x: x.type(),
    "torch.numel": lambda x: torch.numel(x),
    "torch.is_complex": lambda x: torch.is_complex(x),
    "torch.is_same_size": lambda x: torch.is_same_size(x, x),
    "torch.result_type": lambda x: torch.result_type(x, 2.5),
    "torch.promote_types": lambda x: torch.promote_types(x.dtype, torch.float64),
    "torch.can_cast": lambda x: torch.can_cast(x.dtype, torch.int32),
    "torch.broadcast_shapes": lambda x: torch.broadcast_shapes(x.shape, (1, 3)),
    "torch.is_autocast_enabled": lambda x: torch.is_autocast_enabled("cpu"),
    "torch.cuda.is_available": lambda x: torch.cuda.is_available(),
}


@pytest.mark.parametrize("name", list(QUERIES))
def test_pure_query_is_folded_and_matches_eager(name):
    query = QUERIES[name]

    def f(x):
        return x * 2, query(x)

    x = torch.randn(2, 3)
    assert breaks(f, x) == []
    stillframe.reset()
    assert_parity(f, lambda: (torch.randn(2, 3),), backend="eager", calls=2)


# Calls with no rule, whose fake answer differs from the real one: they ran on fakes and were folded.
def is_set_to_itself(x):
    y = x + 1
    return y, y.is_set_to(y)  # eager: True; a fake tensor said False


def view_shares_data_ptr(x):
    y = x * 2
    return y, y.data_ptr() == y[1:].data_ptr()  # eager: False; a fake tensor's data_ptr() is 0


def repr_of_a_tensor(x):
    y = torch.ones(2) * 3
    return x + 1, y.__repr__()  # eager: "tensor([3., 3.])"; a fake tensor said "FakeTensor(..., size=(2,))"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [is_set_to_itself, view_shares_data_ptr, repr_of_a_tensor],
                         ids=lambda f: f.__name__)
def test_call_with_no_rule_runs_for_real(fn, backend):
    assert_parity(fn, lambda: (torch.randn(4),), backend=backend, calls=2)
    stillframe.reset()
    kinds = [kind for kind, _ in breaks(fn, torch.randn(4))]
    assert kinds and set(kinds) == {"effectful_call"}


def restores_rng_state(x):
    state = torch.get_rng_state()
    a = torch.rand(3)
    torch.set_rng_state(state)
    b = torch.rand(3)
    return x + a, x + b  # eager: equal (b repeats a's draw)


@pytest.mark.parametrize("backend", BACKENDS)
def test_saving_and_restoring_the_rng_state(backend):
    """``set_rng_state`` returned None on a fake tensor and was dropped: ``b`` was a fresh draw."""
    compiled = stillframe.compile(restores_rng_state, backend=backend)
    for _ in range(2):
        a, b = compiled(torch.zeros(3))
        torch.testing.assert_close(a, b)
    torch.manual_seed(3)
    expected = restores_rng_state(torch.zeros(3))
    torch.manual_seed(3)
    got = compiled(torch.zeros(3))
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_inside_the_function_fills_grad(backend):
    """``(x * w).sum().backward()`` returned None on fakes and was dropped: ``w.grad`` stayed None."""
    def f(x, w):
        loss = (x * w).sum()
        loss.backward()
        return loss.detach()

    x = torch.randn(3)
    w_eager = torch.randn(3, requires_grad=True)
    w_comp = w_eager.detach().clone().requires_grad_()
    compiled = stillframe.compile(f, backend=backend)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, w_comp), f(x, w_eager))
        torch.testing.assert_close(w_comp.grad, w_eager.grad)  # accumulated three times on both sides
    torch.testing.assert_close(w_comp.grad, 3 * x)


@pytest.mark.parametrize("method", ["backward", "retain_grad"])
def test_autograd_methods_break_before_running_on_fakes(method):
    def f(x):
        y = x * 2
        if method == "retain_grad":
            y.retain_grad()
            return y
        y.sum().backward()
        return y

    found = breaks(f, torch.randn(3, requires_grad=True))
    assert found and found[0][0] == "effectful_call"
    assert f"Tensor.{method}()" in found[0][1]



def torch_query_helpers(x):
    from torch.nn.modules.utils import _pair, _triple

    return (x + 1, torch.overrides.is_tensor_like(x), torch.nn._reduction.get_enum("mean"),
            torch.nn.init._calculate_correct_fan(x, "fan_in"), _pair(3), _triple(2),
            torch.distributed.is_available(), torch.is_floating_point(input=x), torch.is_tensor(x))


def test_torch_query_helpers_fold_in_one_graph():
    # issue 16: each was a graph break ("no rule says it only reads tensor metadata"); is_floating_point(input=)
    # raised an internal IndexError
    assert_parity(torch_query_helpers, lambda: (torch.randn(3, 4),), calls=2, fullgraph=True)


def is_tensor_by_keyword(x):
    return torch.is_tensor(obj=x)


def test_a_torch_query_called_wrongly_raises_pythons_error():
    assert_parity(is_tensor_by_keyword, lambda: (torch.randn(3),), calls=2)


def reseeds_after_a_draw(x):
    a = torch.rand_like(x)
    torch.manual_seed(3)
    return x + a + torch.rand_like(x)


def reseeds_every_device_after_a_draw(x):
    a = torch.rand_like(x)
    torch.random.manual_seed(5)
    torch.cuda.manual_seed_all(5)  # a no-op without CUDA, but process-wide state: never run on fakes
    return x + a + torch.rand_like(x)


@pytest.mark.parametrize("dynamo_imported", [False, True], ids=["plain", "dynamo_imported"])
@pytest.mark.parametrize("fn", [reseeds_after_a_draw, reseeds_every_device_after_a_draw], ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", BACKENDS)
def test_reseeding_after_a_draw_matches_eager_on_the_first_call(fn, backend, dynamo_imported, monkeypatch):
    """``torch.manual_seed`` ran on the real generator at trace time, before the graph's first draw: the first
    call drew from seed 3. Importing ``torch._dynamo`` replaces ``torch.manual_seed`` with a wrapper that the
    deny table did not hold; the wrapper stands in for it here either way."""
    if dynamo_imported:
        monkeypatch.setattr(torch, "manual_seed", functools.wraps(torch.manual_seed)(
            lambda seed, _inner=torch.manual_seed: _inner(seed)))
    compiled = stillframe.compile(fn, backend=backend)
    for _ in range(3):
        torch.manual_seed(0)
        expected = fn(torch.zeros(4))
        after_eager = torch.rand(2)
        torch.manual_seed(0)
        got = compiled(torch.zeros(4))
        after_compiled = torch.rand(2)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        torch.testing.assert_close(after_compiled, after_eager, rtol=0, atol=0)
    stillframe.reset()
    kinds = [kind for kind, _ in breaks(fn, torch.zeros(4))]
    assert "effectful_call" in kinds


def test_torch_state_setters_are_never_traced():
    """Every ``torch.set_*`` function and every function of the RNG and device modules breaks before running on
    fakes (a fake run of their Python is a real run); pure queries such as ``torch.cuda.is_available`` do not."""
    setters = [getattr(torch, name) for name in dir(torch)
               if name.startswith(("set_", "manual_seed", "seed")) and callable(getattr(torch, name))]
    assert len(setters) > 10
    for fn in setters + [torch.random.fork_rng, torch.cuda.manual_seed_all, torch.backends.cudnn.flags,
                         torch._C._set_deterministic_algorithms, torch.utils.swap_tensors, torch.jit.script,
                         torch.nn.utils.vector_to_parameters, torch.library.define, torch.nn.utils.weight_norm]:
        assert never_traced(fn) is not None, fn
    wrapped = functools.wraps(torch.manual_seed)(lambda seed: None)
    assert never_traced(wrapped) is not None
    for fn in (torch.add, torch.nn.functional.relu, torch.cuda.is_available, torch.is_grad_enabled):
        assert never_traced(fn) is None, fn


@pytest.mark.parametrize("backend", BACKENDS)
def test_vector_to_parameters_inside_the_function(backend):
    """``vector_to_parameters`` rebinds each parameter's ``.data``: it runs for real, and the module call after
    it reads the new values."""
    def make():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 2)

    def f(lin, x, vec):
        torch.nn.utils.vector_to_parameters(vec * 2, lin.parameters())
        return lin(x)

    eager_lin, compiled_lin = make(), make()
    compiled = stillframe.compile(f, backend=backend)
    for i in range(2):
        x, vec = torch.randn(4, 3), torch.randn(8) + i
        torch.testing.assert_close(compiled(compiled_lin, x, vec), f(eager_lin, x, vec))
        for a, b in zip(compiled_lin.parameters(), eager_lin.parameters()):
            torch.testing.assert_close(a, b)


# ---------------------------------------------------------------- ops that raise on index values
OUT: list = []


def _index_plain(x, idx):
    return x[idx] * 2


def _index_in_try(x, idx):
    y = x * 2
    try:
        z = y[idx]
    except IndexError as e:
        OUT.append(str(e))
        z = y
    return z + 1


def _index_in_try_around_finally(x, idx):
    try:
        try:
            z = x[idx]
        finally:
            OUT.append("finally")
    except IndexError as e:
        OUT.append(str(e))
        z = x
    return z + 1


def _index_after_side_effect(x, idx):
    OUT.append(1)
    return torch.gather(x, 0, idx)


def _index_in_with(x, idx):
    with torch.no_grad():
        return x[idx] + 1


@pytest.mark.parametrize("fn", [_index_plain, _index_in_with, _index_after_side_effect])
def test_indexing_with_a_tensor_stays_in_the_graph_where_no_try_would_see_its_error(fn):
    assert breaks(fn, torch.randn(4), torch.tensor([0, 3])) == []


def _outcome(fn, x, idx):
    OUT.clear()
    try:
        result = fn(x, idx)
    except Exception as e:  # compared with eager's below
        result = (type(e), str(e))
    return result, list(OUT)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_index_in_try, _index_in_try_around_finally, _index_after_side_effect])
def test_indexing_with_a_tensor_runs_for_real_where_its_error_would_be_seen(fn, backend):
    """Inside a try (also one around a ``finally``, which re-raises to it) an index out of range must raise
    where eager raises it: the op runs for real (tensors/effects.py, RAISES_ON_VALUES). After a side effect
    and with no try around it, the op stays in the graph: the graph has no effect of its own, so when it
    raises the call runs again for real (``CacheEntry.rerun_on_raise``), and the append comes before eager's
    error (torch.compile loses it)."""
    compiled = stillframe.compile(fn, backend=backend)
    for idx in ([0, 3], [0, 9], [1, 2]):
        x = torch.randn(4)
        (expected, expected_out), (got, got_out) = _outcome(fn, x, torch.tensor(idx)), \
            _outcome(compiled, x, torch.tensor(idx))
        assert got_out == expected_out, idx
        if isinstance(expected, torch.Tensor):
            torch.testing.assert_close(got, expected, rtol=0, atol=0)
        else:
            assert got == expected, idx
    expected_breaks = [] if fn is _index_after_side_effect else ["data_dependent"]
    assert [kind for kind, _ in breaks(fn, torch.randn(4), torch.tensor([0, 3]))] == expected_breaks


def _assert_calls_like_eager(fn, compiled, indices, observe) -> None:
    """Call ``fn`` and ``compiled`` on ``torch.arange(4.0)`` and each index list; the result or exception, ``OUT``
    and ``observe(x)`` (after the call) must be eager's."""
    for idx in indices:
        seen = []
        for f in (fn, compiled):
            OUT.clear()
            BOX.calls = 0
            x = torch.arange(4.0)
            try:
                result = f(x, torch.tensor(idx))
            except Exception as e:  # compared with eager's below
                result = (type(e), str(e))
            seen.append((result, list(OUT), observe(x)))
        (expected, *expected_rest), (got, *got_rest) = seen
        assert got_rest == expected_rest, idx
        if isinstance(expected, torch.Tensor):
            torch.testing.assert_close(got, expected, rtol=0, atol=0)
        else:
            assert got == expected, idx


class _Box:
    pass


BOX = _Box()


def _gather_in_helper(y, idx):
    BOX.calls = getattr(BOX, "calls", 0) + 1
    return torch.gather(y, 0, idx) * 2


def _effects_then_index_after_a_break(x, idx):
    y = x.sin()
    print("before", file=_SINK)  # a graph break: the rest is a resumed plan
    OUT.append(len(OUT))
    z = _gather_in_helper(y, idx)
    OUT.append("after")
    return z + y


_SINK = __import__("io").StringIO()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_that_raises_after_side_effects_runs_its_code_again_for_real(backend):
    """A resumed plan's graph raises (an index out of range in a helper) after an append and an attribute write
    it replays after the graph: the graph has no effect of its own, so the code from
    the break on runs for real instead, and every effect before the error is eager's; calls that do not raise
    keep using the plan (no recompile, no eager fallback)."""
    compiled = stillframe.compile(_effects_then_index_after_a_break, backend=backend)
    _assert_calls_like_eager(_effects_then_index_after_a_break, compiled, ([0, 3], [0, 9], [1, 2], [7, 0], [2, 2]),
                             lambda x: (BOX.calls, x.shape))
    entries = compiled.all_cache_entries()
    assert sum(len(v) for v in entries.values()) == 2  # the plan before the break and the one after
    assert all(e.rerun_on_raise for v in entries.values() for e in v if e.compiled is not None)


def _write_then_index(x, idx):
    OUT.append(1)
    x.add_(1)
    return torch.gather(x, 0, idx)


def _draw_then_index(x, idx):
    OUT.append(1)
    return torch.gather(x + torch.rand(4), 0, idx)


def _reshape_then_index(x, idx):
    OUT.append(1)
    x.unsqueeze_(0)
    return torch.gather(x, 1, idx[None])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reshaped_input_is_put_back_before_the_code_runs_again(backend):
    """``x.unsqueeze_(0)`` is a graph op on the eager backend: when the graph then raises, the input's shape,
    strides and version counter are put back before the call runs again for real, so the real ``unsqueeze_``
    happens once, as in eager (fuzz 27:2407's shape, with no data written)."""
    compiled = stillframe.compile(_reshape_then_index, backend=backend)
    _assert_calls_like_eager(_reshape_then_index, compiled, ([0, 1], [0, 9], [3, 2]),
                             lambda x: (x.shape, x.stride(), x._version))
    (entry,) = [e for v in compiled.all_cache_entries().values() for e in v]
    assert entry.rerun_on_raise and entry.reshaped_inputs == (0,)


def _write_through_index_then_raise(x, idx):
    OUT.append(1)
    x.mul_(2)
    x[idx] = 5.0  # eager's index_put_ writes x[0] before it finds 9 out of range
    OUT.append(2)
    return x + 1


@pytest.mark.parametrize("fn", [_write_then_index, _write_through_index_then_raise])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_input_written_before_a_raise_is_put_back_before_the_code_runs_again(backend, fn):
    """A graph that writes an input's data and may raise on values (an index) copies the input's storage before
    each call: when it raises, the data and version counter are put back and the call runs again for real, so
    eager's append comes before eager's error and each write is made once (fuzz 26:8164, 27:2407, 27:3580)."""
    compiled = stillframe.compile(fn, backend=backend)
    # AOTAutograd writes a mutated input back with copy_, which moves its version counter once more than eager
    _assert_calls_like_eager(fn, compiled, ([0, 1], [0, 9], [3, 2], [9, 0]),
                             lambda x: (x.tolist(), x._version if backend == "eager" else None))
    (entry,) = [e for v in compiled.all_cache_entries().values() for e in v]
    assert entry.rerun_on_raise and entry.written_inputs == (0,)


def test_an_input_too_large_to_copy_is_not_written_twice(monkeypatch):
    """Above ``config.rerun_snapshot_bytes`` the written input is not copied: a graph that raises then raises
    eager's error without running again (the append the plan replays after the graph is lost, as under
    torch.compile), and the input holds eager's data, written once."""
    monkeypatch.setattr(stillframe.config, "rerun_snapshot_bytes", 8)
    compiled = stillframe.compile(_write_then_index, backend="eager")
    for f in (_write_then_index, compiled):
        x = torch.arange(4.0)
        with pytest.raises(RuntimeError, match="out of bounds|out of range"):
            f(x, torch.tensor([0, 9]))
        assert x.tolist() == [1.0, 2.0, 3.0, 4.0] and x._version == 1


def _draw_without_an_index(x, idx):
    OUT.append(1)
    return x + torch.rand(4)


def _write_then_no_index(x, idx):
    OUT.append(1)
    x.add_(1)
    return x * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_draws_before_a_raise_are_put_back_before_the_code_runs_again(backend):
    """A graph that draws random numbers and may raise on values saves the generator's state before each call:
    when it raises, the state is put back and the call runs again for real, so eager's numbers are drawn once
    (fuzz 27:3580: ``torch.rand_like`` before a write through an index out of range)."""
    compiled = stillframe.compile(_draw_then_index, backend=backend)
    for idx in ([0, 1], [0, 9], [3, 2]):
        seen = []
        for f in (_draw_then_index, compiled):
            OUT.clear()
            torch.manual_seed(7)
            try:
                result = f(torch.arange(4.0), torch.tensor(idx)).tolist()
            except RuntimeError as e:
                result = str(e)
            seen.append((result, list(OUT), torch.rand(2).tolist()))
        assert seen[1] == seen[0], idx
    (entry,) = [e for v in compiled.all_cache_entries().values() for e in v]
    assert entry.rerun_on_raise and entry.draws_random


@pytest.mark.parametrize("fn", [_write_then_no_index, _draw_without_an_index])
def test_a_graph_with_an_effect_of_its_own_is_never_run_again(fn):
    """A graph that writes an input or draws random numbers, but reads no value that can make it raise, pays no
    copy of the input or of the generator's state: its plan is not marked ``rerun_on_raise``."""
    compiled = stillframe.compile(fn, backend="eager")
    compiled(torch.randn(4), torch.tensor([0, 1]))
    (entry,) = [e for v in compiled.all_cache_entries().values() for e in v]
    assert entry.compiled is not None and not entry.rerun_on_raise


def _raising_backend(gm, example_inputs):
    def run(*args):
        raise RuntimeError("the backend's kernel failed")
    return run


def _plus_one(x):
    OUT.append(1)
    return x + 1


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_graph_that_raises_where_eager_does_not_gives_eager_result_with_a_warning():
    """A backend whose compiled graph raises where eager does not (a divergence of the backend's): the graph had
    no effect of its own, so the call runs for real and returns eager's result, with a warning that names the
    divergence and the graph's exception, and counts as an eager fallback; under ``fullgraph=True`` that fallback
    is an error."""
    compiled = stillframe.compile(_plus_one, backend=_raising_backend)
    x = torch.randn(3)
    OUT.clear()
    raised = "raised RuntimeError: the backend's kernel failed where the real call did not"
    with pytest.warns(stillframe.StillframeWarning, match=raised):
        result = compiled(x)
    torch.testing.assert_close(result, x + 1, rtol=0, atol=0)
    assert OUT == [1] and stillframe.counters["fallbacks"] >= 1
    strict = stillframe.compile(_plus_one, backend=_raising_backend, fullgraph=True)
    with pytest.raises(stillframe.InternalError, match=raised):
        strict(x)
