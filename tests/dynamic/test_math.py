"""``math`` functions, ``abs``, ``round``, ``pow`` and ``min`` / ``max`` of symbolic floats and ints (issue 12):
traced on the SymFloat / SymInt as torch.compile traces them (``torch._sym_sqrt``, ``torch.sym_max``,
``SymFloat.__round__`` ...), not specialized on the value. Every value is compared with eager's and with
torch.compile's in the same test, and the graph count with torch.compile's; where eager raises (``math.sqrt``
of a negative float, ``math.cos`` of an infinity, a division by zero), the compiled function raises the same
error, on every backend."""

import contextlib
import io
import math

import pytest
import torch
from torch._dynamo.utils import counters as torch_counters

import stillframe

FLOATS = [0.1, 0.2, 0.3, 0.7, 1.3]
INTS = [5, 6, 7, 9, 12]


def sqrt_(x, r):
    return x * math.sqrt(r)


def cos_(x, r):
    return x * math.cos(r) + math.sin(r) * math.tan(r)


def trig_(x, r):
    return x * (math.asin(r / 2) + math.acos(r / 2) + math.atan(r) + math.tanh(r) + math.sinh(r) + math.cosh(r)
                + math.log2(r))


def floor_ceil(x, r):
    return x * math.floor(r * 10) + math.ceil(r * 10) - math.trunc(r * 10)


def abs_(x, r):
    return x * abs(r - 0.25)


def round_(x, r):
    return x * round(r * 10) + round(r, 2)


def min_max(x, r):
    return x * min(r, 0.25) + max(0.25, r, 0.5)


def pow_(x, r):
    return x * pow(r, 2.5) + r ** 0.5


def exp_log(x, r):  # no symbolic form in torch: specialized, as torch.compile specializes them
    return x * math.exp(r) + math.log(r) + math.pow(r, 2)


def returned(x, r):
    return x * math.sqrt(r), math.sqrt(r), math.floor(r * 10), round(r, 1), max(r, 0.5), abs(-r)


def int_functions(x, n):
    return x * math.sqrt(n), min(n, 8), max(n, 3), abs(n - 10), math.floor(n / 3), round(n / 4), pow(n, 2)


def round_digits(x, n):  # SymInt.__round__ ignores its digits: negative ones, and symbolic ones, specialize
    return x * round(n * 37, -1), round(n * 37, 2), round(n / 7, 2), round(0.123456, n)


CASES = {
    "sqrt": (sqrt_, FLOATS),
    "sin cos tan": (cos_, FLOATS),
    "asin acos atan tanh sinh cosh log2": (trig_, FLOATS),
    "floor ceil trunc": (floor_ceil, FLOATS),
    "abs": (abs_, FLOATS),
    "round": (round_, FLOATS),
    "min max": (min_max, FLOATS),
    "pow": (pow_, FLOATS),
    "exp log math.pow": (exp_log, FLOATS),
    "returned": (returned, FLOATS),
    "of an int": (int_functions, INTS),
}
PARITY_ONLY = {"round digits": (round_digits, INTS)}  # eager's values; graph counts are torch.compile's affair


def _run(compile_fn, fn, backend, values):
    compiled = compile_fn(fn, backend=backend)
    return [(compiled(torch.linspace(-1, 1, 4), v), fn(torch.linspace(-1, 1, 4), v)) for v in values]


def _torch_compile(fn, backend, values):
    torch._dynamo.reset()
    torch_counters.clear()
    try:
        return _run(torch.compile, fn, backend, values), torch_counters["stats"]["unique_graphs"]
    finally:
        torch._dynamo.reset()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(CASES))
def test_math_of_a_symbolic_number_is_traced_as_torch_compile_traces_it(name, backend):
    fn, values = CASES[name]
    theirs, torch_graphs = _torch_compile(fn, backend, values)
    ours = _run(stillframe.compile, fn, backend, values)
    for (got, want), (their, _) in zip(ours, theirs):
        assert repr(got) == repr(want), (got, want)  # exactly eager's: values and Python types
        assert repr(their) == repr(want)
    assert stillframe.counters["graphs"] == torch_graphs, (stillframe.counters, torch_graphs)
    assert stillframe.counters["fallbacks"] == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(PARITY_ONLY))
def test_math_of_a_symbolic_number_equals_eager(name, backend):
    fn, values = PARITY_ONLY[name]
    for got, want in _run(stillframe.compile, fn, backend, values):
        assert repr(got) == repr(want), (got, want)
    assert stillframe.counters["fallbacks"] == 0 and stillframe.counters["graph_breaks"] == 0


def test_the_functions_are_in_the_graph_not_specialized():
    compiled = stillframe.compile(returned, backend="eager")
    for v in FLOATS:
        assert repr(compiled(torch.ones(2), v)) == repr(returned(torch.ones(2), v))
    entries = compiled.cache_entries()
    assert len(entries) == 2
    code = entries[1].graph_module.code
    for call in ("torch._sym_sqrt(item)", "math_floor(", "round(", "torch.sym_max(item, 0.5)", "abs("):
        assert call in code, code


def test_min_max_of_an_int_and_a_float_keeps_the_winners_type():
    """``max(r, 0)`` is the int 0 where ``r`` is negative (torch.sym_max would make it 0.0, and an int tensor
    times 0.0 is a float tensor): the comparison is guarded instead, so the dtype is eager's on every call."""
    def fn(x, r):
        return x * max(r, 0), min(3, r)

    compiled = stillframe.compile(fn, backend="eager")
    for r in (0.5, 1.5, -2.0, 3.5, -1.0, 2.5):
        x = torch.arange(4)
        got, want = compiled(x, r), fn(x, r)
        assert repr(got) == repr(want) and got[0].dtype == want[0].dtype


DOMAIN_CASES = {
    # fn, values: the last ones leave the domain of the function (eager raises there)
    "sqrt of a negative": (sqrt_, [0.5, 0.25, 1.0, -0.5, 4.0]),
    "log2 of 0": (lambda x, r: x * math.log2(r), [0.5, 1.5, 0.0, -1.0, 2.0]),
    "acos past 1": (lambda x, r: x * math.acos(r), [0.5, 0.25, 2.0, -1.0]),
    "cosh overflow": (lambda x, r: x * math.cosh(r), [0.5, 0.25, 800.0, 2.0]),
    "cos of an infinity": (lambda x, r: x * math.cos(r), [0.5, 0.25, math.inf, 1.0]),
    "floor of an infinity": (lambda x, r: x * math.floor(r), [0.5, 1.5, math.inf, -math.inf, 2.5]),
    "round of an infinity": (lambda x, r: x * round(r), [0.5, 1.5, math.inf, 3.7]),
    "division by zero": (lambda x, r: x * (1.0 / r), [0.5, 0.25, 0.0, 2.0]),
    "int division by zero": (lambda x, n: x * (10 // n) + 7 % n, [2, 3, 0, 4]),
    "0.0 to a negative power": (lambda x, r: x * r ** -1.0, [0.5, 0.25, 0.0, 2.0]),
    "a negative base": (lambda x, r: x * (r ** 2) + r ** 0.5, [0.5, 1.5, -2.0, 3.0]),
}


def _outcome(fn, *args):
    try:
        return repr(fn(*args))
    except Exception as e:  # the user's error, compared by type and message
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(DOMAIN_CASES))
def test_outside_the_domain_eager_raises_and_so_does_the_plan(name, backend):
    """A backend computes a symbolic float with tensor ops (a NaN or an infinity where Python raises): the plan
    is guarded inside the function's domain, and the value outside it is traced by value and raises as eager."""
    fn, values = DOMAIN_CASES[name]
    compiled = stillframe.compile(fn, backend=backend)
    for v in values:
        with contextlib.redirect_stderr(io.StringIO()):
            assert _outcome(compiled, torch.ones(2), v) == _outcome(fn, torch.ones(2), v), v
    assert stillframe.counters["fallbacks"] == 0


def test_an_infinity_guard_reads_as_a_sentence_in_explain():
    report = stillframe.explain(lambda x, r: x * math.cos(r), dynamic=True)(torch.ones(2), 0.5)
    assert "L['r'] is finite" in str(report)
