"""Graph breaks are continuations (DESIGN invariant 6): the graph so far, one real step, then resumed tracing.

Every test compares against eager with the parity checker: results, gradients,
input mutations, and the program's own side effects (a list it appends to on
both sides of the break), for each kind of break and each place a break can
be: functions inlined three deep, loops over every kind of iterable, grad-mode
blocks, ``try`` blocks, module methods under hooks.
"""

from __future__ import annotations

import inspect
import io
import logging
import os
import traceback
import warnings

import numpy as np
import pytest
import torch

import stillframe
from stillframe.check import assert_parity

HERE = os.path.abspath(__file__)


def graph_count(compiled) -> int:
    """Cache entries with a graph, over every code point (the function's own and each resume point)."""
    cf = getattr(compiled, "_compiled_forward", compiled)
    return sum(e.graph_module is not None for entries in cf.all_cache_entries().values() for e in entries)


def entry_count(compiled) -> int:
    cf = getattr(compiled, "_compiled_forward", compiled)
    return sum(len(entries) for entries in cf.all_cache_entries().values())


def break_kinds(compiled) -> list[str]:
    cf = getattr(compiled, "_compiled_forward", compiled)
    return [e.graph_break.kind for entries in cf.all_cache_entries().values() for e in entries
            if e.graph_break is not None]


def grad_input(*shape):
    return lambda: (torch.randn(*shape, requires_grad=True),)


def line_of(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


# --------------------------------------------------------------------------- each kind of break
def k_print(x):
    y = x.sin() * 2
    print("value")
    return y.cos() + x


def k_item(x):
    y = x * 2
    if y.sum().item() > 0:
        return y.exp()
    return y.tanh() - x


def k_tolist(x):
    y = x.cos()
    values = y.tolist()
    return y * len(values) + values[0]


def k_if_tensor(x):
    y = x * 2
    if y.sum():
        return y.sin()
    return -y


def k_bool(x):
    y = x * 2
    flag = bool((y > 0).any())
    return y + flag, flag


def k_numpy(x):
    y = x * 2
    array = y.detach().numpy()  # captured (torch._numpy); the write into it runs for real
    array[0] = 7.0
    return y * 3, torch.from_numpy(np.abs(array) + 1), array.shape


def k_numpy_scalar(x):
    y = x * 2
    array = y.detach().numpy()
    return y * float(np.abs(array).sum())


def k_numpy_scalar_argument(x, s):
    return x * float(s)


def k_warn(x):
    y = x * 2
    warnings.warn("careful")
    return y + 1


class ListHandler:
    """What a plain ``logging.StreamHandler`` writes, read back: a call that reaches only such handlers is
    deferred to after the graph (a handler or filter of the user's own is user code: the call runs in place)."""

    def __init__(self):
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(logging.Formatter("%(message)s\t%(pathname)s\t%(lineno)d\t%(funcName)s"))

    def _rows(self):
        return [line.split("\t") for line in self.stream.getvalue().splitlines()]

    @property
    def messages(self):
        return [row[0] for row in self._rows()]

    @property
    def callers(self):
        return [(row[1], int(row[2]), row[3]) for row in self._rows()]

    def clear(self):
        self.stream.seek(0)
        self.stream.truncate()


_HANDLER = ListHandler()
_LOGGER = logging.getLogger("stillframe.tests.graph_breaks")
_LOGGER.addHandler(_HANDLER.handler)
_LOGGER.setLevel(logging.INFO)
_LOGGER.propagate = False


def k_logging(x):
    y = x * 2
    _LOGGER.info("value %s", tuple(y.shape))
    return y + 1


def k_log_mutable(x):
    seen = [1]
    _LOGGER.info("seen %s", seen)  # a mutable argument: the call cannot be deferred, so it breaks
    seen.append(2)
    return x * len(seen)


def k_raise(x):
    y = x * 2
    if y.sum() > 0:
        raise ValueError("positive sum")
    return y + 1


@pytest.mark.parametrize("fn", [k_print, k_item, k_tolist, k_if_tensor, k_bool, k_numpy, k_warn, k_log_mutable],
                         ids=lambda f: f.__name__)
def test_each_break_kind_matches_eager(fn, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # k_warn's own warning (StillframeWarnings are recorded)
        report = assert_parity(fn, grad_input(4), calls=3)
    assert len(break_kinds(report.compiled)) >= 1, report.format()
    assert graph_count(report.compiled) >= 2, report.format()


@pytest.mark.parametrize("fn,make", [
    (k_numpy_scalar, grad_input(4)),
    (k_numpy_scalar_argument, lambda i: (torch.randn(3, requires_grad=True), np.float32(i + 1))),
], ids=["after_a_break", "argument"])
def test_numpy_scalar_is_not_baked_in(fn, make):
    """Regression: float() of a NumPy scalar was folded into the graph under a TYPE guard only, so the next
    call with another value reused the stale constant."""
    assert_parity(fn, make, calls=3)


def test_print_output_matches_eager(capsys):
    k_print(torch.randn(2))
    eager_out = capsys.readouterr().out
    stillframe.compile(k_print, backend="eager")(torch.randn(2))
    assert capsys.readouterr().out == eager_out == "value\n"


def test_user_exception_under_data_dependent_condition():
    make = lambda i: (torch.full((3,), 1.0 if i % 2 else -1.0, requires_grad=True),)  # noqa: E731
    report = assert_parity(k_raise, make, calls=4)  # raises on calls 1 and 3, with eager's type and message
    assert isinstance(report.compiled_results[1], ValueError)
    assert "user_exception" in break_kinds(report.compiled)


def test_user_exception_traceback_names_the_user_line():
    compiled = stillframe.compile(k_raise, backend="eager")
    with pytest.raises(ValueError, match="positive sum") as info:
        compiled(torch.ones(3))
    frames = [(os.path.abspath(f.filename), f.lineno) for f in traceback.extract_tb(info.value.__traceback__)]
    assert (HERE, line_of(k_raise, 'raise ValueError("positive sum")')) in frames, frames


def test_warning_location_matches_eager():
    with warnings.catch_warnings(record=True) as eager:
        warnings.simplefilter("always")
        k_warn(torch.ones(2))
    with warnings.catch_warnings(record=True) as compiled:
        warnings.simplefilter("always")
        stillframe.compile(k_warn, backend="eager")(torch.ones(2))
    assert [(w.filename, w.lineno) for w in compiled] == [(w.filename, w.lineno) for w in eager]
    assert eager[0].filename == HERE and eager[0].lineno == line_of(k_warn, 'warnings.warn("careful")')


def test_logging_matches_eager():
    _LOGGER.isEnabledFor(logging.INFO)  # fill the logger's level cache (see test_logging_on_a_fresh_logger)
    _HANDLER.clear()
    report = assert_parity(k_logging, grad_input(4))
    assert graph_count(report.compiled) == 1  # deferred to right after the graph, not a break
    assert _HANDLER.messages == ["value (4,)", "value (4,)"]  # eager's record, then the compiled side's


def test_warning_turned_into_an_error_raises_at_the_users_line():
    """warnings.warn is a graph break run for real (never deferred): an "error" filter makes it raise there,
    before the rest of the function runs, as in eager."""
    compiled = stillframe.compile(k_warn, backend="eager")
    for call in (k_warn, compiled, compiled):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="careful") as info:
                call(torch.ones(2))
        frames = [(os.path.abspath(f.filename), f.lineno) for f in traceback.extract_tb(info.value.__traceback__)]
        assert (HERE, line_of(k_warn, 'warnings.warn("careful")')) in frames, frames


def test_mutable_logging_argument_is_logged_as_eager_saw_it():
    _LOGGER.isEnabledFor(logging.INFO)
    _HANDLER.clear()
    assert_parity(k_log_mutable, grad_input(4))
    assert _HANDLER.messages == ["seen [1]", "seen [1]"]


def test_log_record_names_the_user_line():
    _LOGGER.isEnabledFor(logging.INFO)
    _HANDLER.clear()
    k_logging(torch.ones(2))
    stillframe.compile(k_logging, backend="eager")(torch.ones(2))
    eager, compiled = _HANDLER.callers
    assert eager == (__file__, line_of(k_logging, "_LOGGER.info("), "k_logging")
    assert compiled == eager


def test_logging_does_not_recompile_every_call():
    _LOGGER.isEnabledFor(logging.INFO)
    compiled = stillframe.compile(k_logging, backend="eager")
    compiled(torch.ones(2))
    traces = stillframe.counters["traces"]
    compiled(torch.ones(2))
    compiled(torch.ones(2))
    assert stillframe.counters["recompiles"] == 0
    assert stillframe.counters["traces"] == traces


def k_fresh_logger(x, logger):
    y = x * 2
    logger.info("value")
    return y + 1


def test_logging_on_a_fresh_logger():
    compiled = stillframe.compile(k_fresh_logger, backend="eager")
    out = compiled(torch.ones(2), logging.getLogger("stillframe.tests.graph_breaks.fresh"))
    assert torch.equal(out, torch.full((2,), 3.0))


def k_try_catches(x, d):
    y = x * 2
    try:
        v = d["missing"]
    except KeyError:
        v = 1.0
    return y + v


def test_break_raising_inside_try_that_catches_it():
    assert_parity(k_try_catches, lambda: (torch.randn(3, requires_grad=True), {}))


def test_fullgraph_raises_unsupported_at_the_first_break():
    with pytest.raises(stillframe.Unsupported) as info:
        stillframe.compile(k_print, backend="eager", fullgraph=True)(torch.ones(2))
    location = info.value.graph_break.location
    assert (os.path.abspath(location.filename), location.lineno) == (HERE, line_of(k_print, 'print("value")'))
    assert f"{location.filename}:{location.lineno}" in str(info.value)


def k_print_in_deep(x):
    return d_first(x + 1).sum()


def test_fullgraph_names_a_deep_break():
    with pytest.raises(stillframe.Unsupported) as info:
        stillframe.compile(k_print_in_deep, backend="eager", fullgraph=True)(torch.ones(2), )
    assert info.value.graph_break.location.lineno == line_of(d_third, "print(")


# --------------------------------------------------------------------------- breaks in inlined frames
def d_third(x, log):
    log.append("third: before")
    y = x * 3
    print("three calls deep")
    log.append("third: after")
    return y + 1


def d_second(x, log):
    log.append("second: before")
    out = d_third(x * 2, log) - 1
    log.append("second: after")
    return out


def d_first(x, log=None):
    log = [] if log is None else log
    log.append("first: before")
    out = d_second(x.sin(), log).cos()
    log.append("first: after")
    return out


def d_top(x, log):
    return d_first(x, log) * x


def test_break_three_calls_deep_resumes_every_frame(capsys):
    report = assert_parity(d_top, lambda: (torch.randn(3, requires_grad=True), []))
    assert graph_count(report.compiled) == 2, report.format()
    capsys.readouterr()
    eager_log, compiled_log = [], []
    d_top(torch.ones(2), eager_log)
    compiled = stillframe.compile(d_top, backend="eager")
    compiled(torch.ones(2), compiled_log)
    assert compiled_log == eager_log  # nothing lost, nothing run twice
    assert eager_log == ["first: before", "second: before", "third: before", "third: after", "second: after",
                         "first: after"]
    assert capsys.readouterr().out == "three calls deep\n" * 2


def test_break_three_calls_deep_second_call_is_all_cache_hits(capsys):
    compiled = stillframe.compile(d_top, backend="eager")
    compiled(torch.ones(2), [])
    before = (graph_count(compiled), entry_count(compiled), dict(stillframe.counters))
    log = []
    out = compiled(torch.ones(2), log)
    assert (graph_count(compiled), entry_count(compiled)) == before[:2]
    assert stillframe.counters["traces"] == before[2]["traces"]
    assert torch.allclose(out, d_top(torch.ones(2), []))
    assert len(log) == 6


# --------------------------------------------------------------------------- breaks inside loops
def l_range(x, log):
    for i in range(3):
        log.append(("before", i))
        x = x * 2
        print("iteration", i)
        x = x + i
        log.append(("after", i))
    return x


def l_list(x, ws, log):
    for w in ws:
        log.append("before")
        x = x * w
        print("item")
        log.append("after")
    return x


def l_dict(x, d, log):
    for key, value in d.items():
        x = x * value
        print("items", key)
        log.append(key)
    for key in d:
        x = x + d[key]
        print("keys", key)
        log.append(key)
    for value in d.values():
        x = x - value
        print("values")
        log.append("v")
    return x


def l_enumerate_zip(x, ws, bs, log):
    for i, (w, b) in enumerate(zip(ws, bs)):
        x = x * w + b
        print("step", i)
        log.append(i)
    return x


def l_nested(x, ws, log):
    for i in range(2):
        for j, w in enumerate(ws):
            x = x * w + i
            print(i, j)
            log.append((i, j))
    return x


def l_while(x, log):
    i = 0
    while i < 3:
        x = x.sin() + i
        print("while", i)
        log.append(i)
        i += 1
    return x


def l_comprehension(x, ws):
    return torch.stack([w * x + len(str(print("in comprehension"))) for w in ws]).sum(0)


def _tensors(n, grad=False):
    return [torch.randn(4, requires_grad=grad) for _ in range(n)]


@pytest.mark.parametrize("fn,make", [
    (l_range, lambda: (torch.randn(4, requires_grad=True), [])),
    (l_list, lambda: (torch.randn(4, requires_grad=True), _tensors(3, grad=True), [])),
    (l_list, lambda: (torch.randn(4, requires_grad=True), tuple(_tensors(3)), [])),
    (l_dict, lambda: (torch.randn(4, requires_grad=True), {"a": torch.randn(4), "b": torch.randn(4)}, [])),
    (l_enumerate_zip, lambda: (torch.randn(4, requires_grad=True), _tensors(3), tuple(_tensors(3)), [])),
    (l_nested, lambda: (torch.randn(4, requires_grad=True), _tensors(2), [])),
    (l_while, lambda: (torch.randn(4, requires_grad=True), [])),
    (l_comprehension, lambda: (torch.randn(4, requires_grad=True), _tensors(3))),
], ids=["range", "list", "tuple", "dict", "enumerate_zip", "nested", "while", "comprehension"])
def test_break_inside_loop(fn, make, capsys):
    report = assert_parity(fn, make, calls=2)
    assert graph_count(report.compiled) >= 2, report.format()
    # printed output and the program's own log, in order, as in eager
    torch.manual_seed(1)
    eager_args = make()
    torch.manual_seed(1)
    compiled_args = make()
    capsys.readouterr()
    fn(*eager_args)
    eager_out = capsys.readouterr().out
    stillframe.compile(fn, backend="eager")(*compiled_args)
    assert capsys.readouterr().out == eager_out
    if "log" in inspect.signature(fn).parameters:
        assert compiled_args[-1] == eager_args[-1] != []


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))
        self.calls = []

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            self.calls.append(("before", i))
            x = layer(x).relu()
            print("layer", i)
            self.calls.append(("after", i))
        return x


def test_break_inside_loop_over_module_list(capsys):
    report = assert_parity(Stack(), lambda: (torch.randn(2, 4),), calls=2)
    # the first layer up to its print; then each next item is taken for real and every later layer (a
    # different module, so a plan of its own) runs from the top of the body to its print: graphs for the
    # body plans and for the after-print plans that carry tensor ops; the counter i is symbolic in the
    # after-print plan from its second trace on (automatic dynamic), so that plan is traced twice, not per i
    assert graph_count(report.compiled) == 6, report.format()
    module = Stack()
    stillframe.compile(module, backend="eager")(torch.randn(2, 4))
    assert module.calls == [(w, i) for i in range(3) for w in ("before", "after")]


def l_hundred(x):
    for i in range(100):
        x = x + 1
        print(i)
    return x


def test_loop_of_100_with_print_matches_eager_output(capsys):
    expected = l_hundred(torch.zeros(2))
    eager_out = capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stillframe.StillframeWarning)  # the cache-size warning: see below
        compiled = stillframe.compile(l_hundred, backend="eager")
        out = compiled(torch.zeros(2))
        assert capsys.readouterr().out == eager_out
        assert torch.equal(out, expected)
        out = compiled(torch.zeros(2))
    assert capsys.readouterr().out == eager_out
    assert torch.equal(out, expected)


def test_loop_of_100_with_print_does_not_recompile_per_iteration(capsys):
    compiled = stillframe.compile(l_hundred, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error", stillframe.StillframeWarning)  # no cache-size-limit fallback either
        compiled(torch.zeros(2))
        entries = entry_count(compiled)
        assert stillframe.counters["recompiles"] == 0
        compiled(torch.zeros(2))
    # the first graph, the rest of the body after the print, the body from the top, the code after the loop
    assert entry_count(compiled) == entries <= 4
    assert stillframe.counters["recompiles"] == 0


# --------------------------------------------------------------------------- grad mode, try, modules
def g_no_grad(x, log):
    y = x * 2
    with torch.no_grad():
        log.append("enter")
        z = x * 3
        print("inside no_grad")
        w = z + 1
        log.append("inside")
    return y, z, w, y + w


def g_enable_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            print("inside enable_grad")
            c = b + a
        d = c * 2
    return a, b, c, d


def _grad_flags(results):
    return [t.requires_grad for t in results]


@pytest.mark.parametrize("fn,make", [
    (g_no_grad, lambda: (torch.randn(3, requires_grad=True), [])),
    (g_enable_inside_no_grad, lambda: (torch.randn(3, requires_grad=True),)),
], ids=["no_grad", "enable_grad_in_no_grad"])
def test_break_inside_grad_mode_block_keeps_grad_mode(fn, make, capsys):
    torch.manual_seed(0)
    eager = fn(*make())
    torch.manual_seed(0)
    args = make()
    compiled = stillframe.compile(fn, backend="eager")(*args)
    assert _grad_flags(compiled) == _grad_flags(eager)
    assert torch.is_grad_enabled()
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e)


@pytest.mark.parametrize("fn,make", [
    (g_no_grad, lambda: (torch.randn(3, requires_grad=True), [])),
    (g_enable_inside_no_grad, lambda: (torch.randn(3, requires_grad=True),)),
], ids=["no_grad", "enable_grad_in_no_grad"])
def test_break_inside_grad_mode_block_is_captured(fn, make, capsys):
    """Regression: the code resumed inside a no_grad block could not be traced to the return (global_state: the
    function returns with a different grad mode), so the rest of the call ran instruction by instruction."""
    report = assert_parity(fn, make, calls=2)
    assert graph_count(report.compiled) == 2


def t_try(x, log):
    try:
        y = x * 2
        log.append("try: before")
        print("inside try")
        log.append("try: after")
        y = y + 1
    except ValueError:
        log.append("handler")
        y = x
    finally:
        log.append("finally")
    return y.sin()


def test_break_inside_try_that_does_not_raise(capsys):
    report = assert_parity(t_try, lambda: (torch.randn(3, requires_grad=True), []), calls=2)
    assert graph_count(report.compiled) >= 2, report.format()
    eager_log, compiled_log = [], []
    t_try(torch.ones(2), eager_log)
    stillframe.compile(t_try, backend="eager")(torch.ones(2), compiled_log)
    assert compiled_log == eager_log == ["try: before", "try: after", "finally"]


class Hooked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.events = []
        self.register_forward_hook(self._hook)

    def _hook(self, module, args, out):
        self.events.append("hook")
        return out * 2

    def helper(self, x):
        self.events.append("helper: before")
        y = self.lin(x)
        print("in a method")
        self.events.append("helper: after")
        return y.tanh()

    def forward(self, x):
        return self.helper(x) + x


def test_break_in_module_method_with_forward_hook(capsys):
    report = assert_parity(Hooked(), lambda: (torch.randn(2, 4, requires_grad=True),), calls=2)
    assert graph_count(report.compiled) == 2, report.format()
    eager, compiled = Hooked(), Hooked()
    compiled.load_state_dict(eager.state_dict())
    x = torch.randn(2, 4)
    torch.testing.assert_close(stillframe.compile(compiled, backend="eager")(x), eager(x))
    assert compiled.events == eager.events == ["helper: before", "helper: after", "hook"]


# --------------------------------------------------------------------------- side effects
def s_effects(x, log, d, obj):
    log.append(len(log))
    d["before"] = d.get("before", 0) + 1
    obj.count = getattr(obj, "count", 0) + 1
    x.add_(1)
    y = x * 2
    print("break")
    log.append(len(log))
    d["after"] = d.get("after", 0) + 1
    obj.count += 10
    x.mul_(3)
    return y + x


class Obj:
    pass


def test_side_effects_around_a_break_happen_exactly_once(capsys):
    assert_parity(s_effects, lambda: (torch.randn(3), [], {}, Obj()), calls=2)
    compiled = stillframe.compile(s_effects, backend="eager")
    e_state = ([], {}, Obj())
    c_state = ([], {}, Obj())
    xe, xc = torch.ones(2), torch.ones(2)
    for _ in range(3):  # the cache is hit on later calls: still exactly once each
        torch.testing.assert_close(compiled(xc, *c_state), s_effects(xe, *e_state))
    assert c_state[0] == e_state[0] == [0, 1, 2, 3, 4, 5]
    assert c_state[1] == e_state[1] == {"before": 3, "after": 3}
    assert c_state[2].count == e_state[2].count == 33
    assert torch.equal(xc, xe)


@stillframe.disable
def opaque_helper(t, log):
    log.append(float(t.detach().sum()))
    return t * 3


def calls_disabled(x, log):
    y = x + 1
    z = opaque_helper(y, log)
    return z - 1


def test_disabled_function_runs_for_real_at_a_break():
    report = assert_parity(calls_disabled, lambda: (torch.randn(3, requires_grad=True), []), calls=2)
    breaks = [e.graph_break for entries in report.compiled.all_cache_entries().values() for e in entries
              if e.graph_break is not None]
    assert [b.kind for b in breaks] == ["disabled"]
    assert "opaque_helper" in breaks[0].explanation


def uses_match(x, spec):
    y = x * 2
    match spec:
        case {"scale": s}:
            y = y * s
        case [a, b]:
            y = y + a - b
        case str(name):
            y = y + len(name)
    return y


@pytest.mark.parametrize("spec", [{"scale": 3.0}, [1.0, 2.0], "abc", 7], ids=["mapping", "sequence", "class", "none"])
def test_match_statement_runs_for_real_between_graphs(spec):
    """``match`` has no symbolic handler: each MATCH_* step is a graph break that runs for real."""
    assert_parity(uses_match, lambda: (torch.randn(3, requires_grad=True), spec), calls=2)


def autocast_with_break(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        print("inside autocast", y.dtype)
        z = y @ w
    return z.float() + 1, y.dtype, torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_break_inside_autocast_keeps_autocast_on_both_sides(backend, capsys):
    """The block is closed in the first graph, re-entered for real for the step, and left for real after."""
    report = assert_parity(autocast_with_break, lambda: (torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)),
                           backend=backend, calls=2, rtol=2e-2, atol=2e-2)
    assert report.warnings == []
    assert not torch.is_autocast_enabled("cpu")
    assert capsys.readouterr().out.count("inside autocast torch.bfloat16") == 4  # eager and compiled, twice


def l_named_iterator(x, xs):
    it = iter(xs)
    pairs = []
    for a in it:
        b = next(it)  # the loop's iterator, advanced by the body too
        print(a, b)  # a break: the loop's stack slot and the local `it` must stay one iterator
        pairs.append(a * b)
        if a == 3:
            break
    return x * sum(pairs), list(it)


def test_loop_over_a_named_iterator_with_a_break_in_its_body(capsys):
    make = lambda: (torch.randn(2, requires_grad=True), [1, 2, 3, 4, 5, 6, 7, 8])  # noqa: E731
    report = assert_parity(l_named_iterator, make, calls=2)
    assert report.compiled_result[1] == [5, 6, 7, 8]
    out = capsys.readouterr().out
    assert out == "1 2\n3 4\n" * 4  # two eager calls, two compiled ones


def test_a_traced_error_the_real_call_does_not_raise_falls_back_or_fails_under_fullgraph(monkeypatch):
    """If tracing ever thinks the program raises where eager does not (a stillframe divergence, simulated here
    by a rule that raises), the instruction runs for real (a graph break) and the call returns eager's result;
    with fullgraph=True the call runs eagerly and then fails, naming the place (DESIGN invariant 8)."""
    from stillframe.rules import builtin_calls

    def diverging_rule(tx, args, kwargs):
        tx.user_error(ValueError("simulated divergence"))

    monkeypatch.setitem(builtin_calls.BUILTIN_RULES, abs, diverging_rule)

    def f(x):
        return x * abs(-2)

    x = torch.randn(3)
    out = stillframe.compile(f, backend="eager")(x)
    torch.testing.assert_close(out, f(x))
    assert stillframe.counters["graph_breaks"] == 1
    with pytest.raises(stillframe.InternalError, match=r"simulated divergence at .*test_graph_breaks.py:\d+"):
        stillframe.compile(f, backend="eager", fullgraph=True)(x)


def l_drained_after_breaks(x, xs):
    it = iter(xs)
    for a in it:
        print(a)  # the loop's iterator crosses breaks
        if a == 2:
            break
    first = list(it)  # drains it
    print("after")
    return x * len(first), first, list(it)  # empty, as in eager


def test_a_live_loop_iterator_drained_by_list_stays_drained(capsys):
    make = lambda: (torch.randn(2, requires_grad=True), [1, 2, 3, 4])  # noqa: E731
    report = assert_parity(l_drained_after_breaks, make, calls=2)
    assert report.compiled_result[1:] == ([3, 4], [])
