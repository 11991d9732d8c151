"""Guards, recompilation and the cache: each call is a parity test; compiles are counted.

A counting backend records every graph it is handed, so "recompiles exactly
once" is ``len(calls) == 2``. A change that a guard must see (dtype, shape,
requires_grad, strides, a Python int used in the trace, a module flag, a
global, grad mode) compiles a second entry, after which going back and forth
compiles nothing new; results stay equal to eager throughout.
"""

from __future__ import annotations

import copy
import sys

import pytest
import torch
from torch import nn

import stillframe
from stillframe.check import assert_parity

GLOBAL_SCALE = 2.0
GLOBAL_TABLE = torch.linspace(0.0, 1.0, 4)


def counting_backend():
    """A backend that records each graph it receives and runs it as is."""
    calls = []

    def counting(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    return calls, counting


def scale_shift(x):
    return x * 2 + 1


def times_n(x, n):
    return x * n + n


def uses_global(x):
    return x * GLOBAL_SCALE


def uses_global_tensor(x):
    return x + GLOBAL_TABLE


class MaybeBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 4, bias=False)
        self.bias = nn.Parameter(torch.randn(4))
        self.use_bias = True

    def forward(self, x):
        out = self.linear(x)
        if self.use_bias:
            out = out + self.bias
        return out


# ---------------------------------------------------------------- cache hits


def test_unchanged_calls_do_not_recompile():
    calls, counting = counting_backend()

    def f(x, y):
        return torch.relu(x) @ y

    compiled = stillframe.compile(f, backend=counting)
    assert_parity(f, lambda: (torch.randn(3, 4, requires_grad=True), torch.randn(4, 2)), compiled=compiled, calls=3)
    assert len(calls) == 1
    assert len(compiled.cache_entries()) == 1
    assert stillframe.counters["traces"] == 1
    assert stillframe.counters["graphs"] == 1
    assert stillframe.counters["cache_hits"] == 2


def test_unchanged_module_calls_do_not_recompile():
    calls, counting = counting_backend()
    model = MaybeBias()
    compiled = stillframe.compile(copy.deepcopy(model), backend=counting)
    assert_parity(model, lambda: (torch.randn(2, 3),), compiled=compiled, calls=3)
    assert len(calls) == 1


# ---------------------------------------------------------------- each guarded change recompiles exactly once


def _function_case(fn, make_a, make_b, switch_a=None, switch_b=None):
    return fn, fn, make_a, make_b, switch_a, switch_b


def _module_flag_case():
    eager = MaybeBias()
    target = copy.deepcopy(eager)

    def flag(value):
        def switch():
            eager.use_bias = value
            target.use_bias = value

        return switch

    make = lambda: (torch.randn(2, 3),)  # noqa: E731
    return eager, target, make, make, flag(True), flag(False)


def _global_case():
    module = sys.modules[__name__]

    def scale(value):
        def switch():
            module.GLOBAL_SCALE = value

        return switch

    make = lambda: (torch.randn(3),)  # noqa: E731
    return _function_case(uses_global, make, make, scale(2.0), scale(5.0))


def _grad_mode_case():
    make = lambda: (torch.randn(3, requires_grad=True),)  # noqa: E731
    return _function_case(scale_shift, make, make, lambda: torch.set_grad_enabled(True),
                          lambda: torch.set_grad_enabled(False))


RECOMPILE_CASES = {
    "dtype": lambda: _function_case(scale_shift, lambda: (torch.randn(3, 4),),
                                    lambda: (torch.randn(3, 4, dtype=torch.float64),)),
    "shape": lambda: _function_case(scale_shift, lambda: (torch.randn(3, 4),), lambda: (torch.randn(5, 4),)),
    "requires-grad": lambda: _function_case(scale_shift, lambda: (torch.randn(3, 4),),
                                            lambda: (torch.randn(3, 4, requires_grad=True),)),
    "stride": lambda: _function_case(scale_shift, lambda: (torch.randn(3, 4),), lambda: (torch.randn(4, 3).t(),)),
    "python-int": lambda: _function_case(times_n, lambda: (torch.randn(3), 2), lambda: (torch.randn(3), 3)),
    "module-flag": _module_flag_case,
    "global": _global_case,
    "grad-mode": _grad_mode_case,
}


@pytest.mark.parametrize("name", list(RECOMPILE_CASES))
def test_guarded_change_recompiles_exactly_once(name):
    calls, counting = counting_backend()
    eager, target, make_a, make_b, switch_a, switch_b = RECOMPILE_CASES[name]()
    compiled = stillframe.compile(target, backend=counting)
    steps = [(switch_a, make_a, 1), (switch_b, make_b, 2), (switch_a, make_a, 2), (switch_b, make_b, 2)]
    try:
        for index, (switch, make, expected_graphs) in enumerate(steps):
            if switch is not None:
                switch()
            assert_parity(eager, make, compiled=compiled)
            assert len(calls) == expected_graphs, f"step {index}: {len(calls)} graphs compiled"
    finally:
        sys.modules[__name__].GLOBAL_SCALE = 2.0
        torch.set_grad_enabled(True)
    assert stillframe.counters["traces"] == 2


# ---------------------------------------------------------------- changes that must not recompile (values are inputs)


def test_new_global_tensor_value_is_read_not_baked_in():
    calls, counting = counting_backend()
    compiled = stillframe.compile(uses_global_tensor, backend=counting)
    module = sys.modules[__name__]
    original = module.GLOBAL_TABLE
    try:
        assert_parity(uses_global_tensor, lambda: (torch.randn(4),), compiled=compiled)
        module.GLOBAL_TABLE.add_(1.0)  # in place: same object, new values
        assert_parity(uses_global_tensor, lambda: (torch.randn(4),), compiled=compiled)
        module.GLOBAL_TABLE = torch.randn(4)  # a new object with the same metadata
        assert_parity(uses_global_tensor, lambda: (torch.randn(4),), compiled=compiled)
    finally:
        module.GLOBAL_TABLE = original
    assert len(calls) == 1


def test_parameter_update_is_read_not_baked_in():
    calls, counting = counting_backend()
    eager = MaybeBias()
    target = copy.deepcopy(eager)
    compiled = stillframe.compile(target, backend=counting)
    assert_parity(eager, lambda: (torch.randn(2, 3),), compiled=compiled)
    with torch.no_grad():
        for model in (eager, target):
            model.linear.weight.mul_(0.5)
            model.bias.add_(1.0)
            for p in model.parameters():
                p.grad = None
    assert_parity(eager, lambda: (torch.randn(2, 3),), compiled=compiled)
    assert len(calls) == 1


# ---------------------------------------------------------------- the cache size limit


def test_cache_size_limit_falls_back_to_eager_with_one_warning():
    calls, counting = counting_backend()

    def f(x):
        return torch.sin(x) + 1

    compiled = stillframe.compile(f, backend=counting, dynamic=False)
    saved = stillframe.config.cache_size_limit
    stillframe.config.cache_size_limit = 2
    try:
        reports = []
        for index, n in enumerate([2, 3, 4, 5, 6]):
            reports.append(assert_parity(f, lambda: (torch.randn(n),), compiled=compiled,
                                         expect_fallback=index == 2))
        assert len(calls) == 2
        assert len([entry for entry in compiled.cache_entries() if not entry.eager]) == 2
        warnings = [w for report in reports for w in report.warnings]
        assert len(warnings) == 1, [str(w.message) for w in warnings]
        assert issubclass(warnings[0].category, stillframe.StillframeWarning)
        assert "cache" in str(warnings[0].message).lower()
        # shapes that already have an entry still run their compiled graph
        assert_parity(f, lambda: (torch.randn(2),), compiled=compiled)
        assert_parity(f, lambda: (torch.randn(3),), compiled=compiled)
        assert len(calls) == 2
    finally:
        stillframe.config.cache_size_limit = saved


# ---------------------------------------------------------------- entries, guard source, reset


def test_guard_source_names_the_inputs():
    def f(inp_tensor, other):
        return inp_tensor * other

    compiled = stillframe.compile(f, backend="eager")
    assert_parity(f, lambda: (torch.randn(3), torch.randn(3)), compiled=compiled)
    (entry,) = compiled.cache_entries()
    assert isinstance(entry.guard_source, str) and entry.guard_source.strip()
    assert "inp_tensor" in entry.guard_source
    assert isinstance(entry.graph_module, torch.fx.GraphModule)
    assert entry.eager is False


def test_reset_empties_caches_and_counters():
    calls, counting = counting_backend()
    compiled = stillframe.compile(scale_shift, backend=counting)
    assert_parity(scale_shift, lambda: (torch.randn(3),), compiled=compiled)
    assert len(calls) == 1 and stillframe.counters["traces"] == 1
    stillframe.reset()
    assert len(compiled.cache_entries()) == 0
    assert sum(stillframe.counters.values()) == 0
    assert_parity(scale_shift, lambda: (torch.randn(3),), compiled=compiled)
    assert len(calls) == 2
    assert stillframe.counters["traces"] == 1


def test_dict_entries_are_guarded_only_when_read():
    """A dict consulted for one key (os.environ, a settings table) guards that key's presence and value,
    not every other entry: changing an unread value or adding a key reuses the plan, changing the read
    value recompiles, removing the read key raises eager's KeyError."""
    settings = {"scale": 2.0, "unused_a": 1, "unused_b": "x", "flag": b"1"}

    def f(x, d):
        return x * d["scale"]

    compiled = stillframe.compile(f, backend="eager")
    x = torch.randn(3)
    before = stillframe.counters["traces"]
    torch.testing.assert_close(compiled(x, settings), f(x, settings))
    settings["unused_a"], settings["unused_b"], settings["flag"] = 7, "y", b"0"
    torch.testing.assert_close(compiled(x, settings), f(x, settings))
    assert stillframe.counters["traces"] - before == 1
    settings["scale"] = 3.0
    torch.testing.assert_close(compiled(x, settings), f(x, settings))
    assert stillframe.counters["traces"] - before == 2
    settings["new_key"] = 0  # only "scale" is looked up: its presence is guarded, not the whole key set
    torch.testing.assert_close(compiled(x, settings), f(x, settings))
    assert stillframe.counters["traces"] - before == 2
    del settings["scale"]
    with pytest.raises(KeyError, match="scale"):
        compiled(x, settings)


def test_a_key_looked_up_guards_only_that_key():
    """os.environ.get("X") must not guard the whole environment: adding another variable (as inductor does
    at its first compile) reuses the plan; adding the looked-up one recompiles."""
    import os

    name = "STILLFRAME_TEST_GUARD_KEY"
    os.environ.pop(name, None)

    def f(x):
        flag = os.environ.get(name)
        return x + (1 if flag is None else 2), name in os.environ

    compiled = stillframe.compile(f, backend="eager")
    x = torch.randn(2)
    before = stillframe.counters["traces"]
    try:
        assert_parity(f, lambda: (x,), compiled=compiled)
        os.environ[name + "_OTHER"] = "1"
        assert_parity(f, lambda: (x,), compiled=compiled)
        assert stillframe.counters["traces"] - before == 1
        os.environ[name] = "1"
        assert_parity(f, lambda: (x,), compiled=compiled)
        assert stillframe.counters["traces"] - before == 2
    finally:
        os.environ.pop(name, None)
        os.environ.pop(name + "_OTHER", None)


@pytest.mark.parametrize("change", ["offset", "leaf", "view", "view_at_offset_0", "parameter", "inference"])
def test_tensor_metadata_the_cpp_check_does_not_cover_still_recompiles(change):
    """Tensor guards run as one C++ check (type, dispatch keys, dtype, device, requires_grad, sizes, strides)
    plus a check per tensor of what it does not cover: a change in any of those must miss the plan and match
    eager."""
    base = torch.randn(8)
    first = {"offset": lambda: base[0:4], "leaf": lambda: torch.randn(4, requires_grad=True),
             "view": lambda: torch.randn(4), "view_at_offset_0": lambda: torch.randn(4), "parameter": lambda: torch.randn(4, requires_grad=True),
             "inference": lambda: torch.randn(4)}[change]
    second = {"offset": lambda: base[2:6], "leaf": lambda: torch.randn(4, requires_grad=True) * 1,
              "view": lambda: torch.randn(6)[1:5], "view_at_offset_0": lambda: torch.randn(4)[0:4],
              "parameter": lambda: nn.Parameter(torch.randn(4)),
              "inference": lambda: _inference_tensor(4)}[change]

    def f(x):
        return x * 2, x.is_leaf, x.storage_offset(), type(x).__name__

    compiled = stillframe.compile(f, backend="eager")
    before = stillframe.counters["traces"]
    for make in (first, second, first):
        x = make()
        out, ref = compiled(x), f(x)
        torch.testing.assert_close(out[0], ref[0])
        assert out[1:] == ref[1:]
        assert (out[0]._base is not None) == (ref[0]._base is not None)
    assert stillframe.counters["traces"] - before == 2  # the second kind recompiles; the first hits again
    assert stillframe.counters["graph_breaks"] == 0


def _inference_tensor(n):
    with torch.inference_mode():
        return torch.randn(n)


def test_a_sparse_argument_beside_a_dense_one_compiles_once():
    """The storage-sharing guard among arguments passes over a tensor with no storage (a sparse one): it shares
    memory with nothing. (Its storage was read: an internal error, and the function ran eagerly on every call.)"""
    def f(a, b):
        return (a * 2).to_dense(), b + 1

    compiled = stillframe.compile(f, backend="eager")
    before = dict(stillframe.counters)
    for _ in range(3):
        assert_parity(f, lambda: (torch.eye(3).to_sparse(), torch.randn(3)), compiled=compiled)
    assert stillframe.counters["traces"] - before.get("traces", 0) == 1
    assert stillframe.counters["fallbacks"] == before.get("fallbacks", 0)
