"""Context managers and exception-related control flow captured whole: grad modes, autocast,
nullcontext, user context managers, try/except/else/finally, assert, and ``raise`` under a Python
condition (the compiled call raises eager's exception, type and message, without an eager fallback).

Each case runs eagerly and compiled for three calls; ``make_args(i)`` gets the
call index, and where it varies a Python value the trace reads the expected
number of compiles says so.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stillframe
from stillframe.check import assert_parity

from py_cases import check, counting_backend, one, params, rand, case_registry

CASES, case = case_registry(with_kwargs=True)


BF16 = dict(rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- grad modes


@case(one(3))
def no_grad_block(x):
    y = x * 2
    with torch.no_grad():
        z = y * 3
        inside = torch.is_grad_enabled()
    return y + 1, z, inside, torch.is_grad_enabled()


@case(one(3))
def enable_grad_nested_in_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
        c = x * 4
    return a, b, c


@case(lambda i: (rand(3), i % 2 == 0), compiles=2)
def set_grad_enabled_from_argument(x, flag):
    with torch.set_grad_enabled(flag):
        y = x.exp()
    return y, y.requires_grad


@case(one(3))
def no_grad_as_decorator_of_a_helper(x):
    return frozen_helper(x) + x


@torch.no_grad()
def frozen_helper(t):
    return t * 10


@case(one(3))
def no_grad_parameter_update_like_an_optimizer_step(x):
    w = x * 1
    loss = (w * w).sum()
    with torch.no_grad():
        w2 = w - 0.1 * w.detach()
    return loss, w2


@case(lambda: (torch.randn(3, requires_grad=True), torch.zeros(3)))
def no_grad_in_place_on_a_non_grad_input(x, acc):
    with torch.no_grad():
        acc.add_(x * 2)
    return x * acc


@case(one(3))
def grad_mode_restored_after_return_inside_with(x):
    def helper(t):
        with torch.no_grad():
            return t * 2

    return helper(x), x * 3


@case(lambda i: (rand(3), [True, False, True][i]), compiles=2)
def set_grad_enabled_nested(x, flag):
    with torch.no_grad():
        with torch.set_grad_enabled(flag):
            y = x * 2
    return y


# ---------------------------------------------------------------- autocast


@case(lambda: (rand(4, 8), rand(8, 3)), **BF16)
def autocast_matmul(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        c = a @ b
        d = torch.relu(c)
    return c, d, c.dtype, (c.float() + 1)


@case(lambda: (rand(4, 8), rand(5, 8)), **BF16)
def autocast_linear_and_nested_disable(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = F.linear(x, w)
        with torch.autocast("cpu", enabled=False):
            z = y.float() @ w
    return y, z


@case(lambda i: (rand(4, 8), rand(8, 8), i % 2 == 0), compiles=2, **BF16)
def autocast_enabled_from_argument(x, w, on):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=on):
        y = x @ w
    return y.float().sum(-1), y.dtype


@case(lambda: (rand(4, 8),), **BF16)
def autocast_inside_no_grad(x):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x.t()
    return y, x * 2


@torch.autocast("cpu", dtype=torch.bfloat16)
def bf16_matmul(a, b):
    return a @ b


@torch.autocast("cpu", enabled=False)
def full_precision(a, b):
    return a @ b


@case(lambda: (rand(4, 8), rand(8, 3)), **BF16)
def autocast_as_a_decorator(a, b):
    # the decorator enters one torch.autocast object made at import on every call
    c = bf16_matmul(a, b)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        d = full_precision(a, b)
    return c, c.dtype, d, d.dtype


# ---------------------------------------------------------------- nullcontext and user context managers


class Tracking:
    """A context manager written in Python: counts entries and exits, returns a scale from __enter__."""

    def __init__(self, scale, log=True):
        self.scale = scale
        self.depth = 0
        self.log = [] if log else None

    def __enter__(self):
        self.depth += 1
        if self.log is not None:
            self.log.append("enter")
        return self.scale

    def __exit__(self, exc_type, exc, tb):
        self.depth -= 1
        if self.log is not None:
            self.log.append("exit")
        return False


class Scaled:
    """A context manager whose __enter__ returns self, created inside the trace."""

    def __init__(self, factor):
        self.factor = factor
        self.used = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.used = True


@contextlib.contextmanager
def scaled_by(k):
    yield k * 2


@case(one(3))
def nullcontext_plain_and_with_value(x):
    with contextlib.nullcontext():
        y = x * 2
    with contextlib.nullcontext(5) as k:
        y = y * k
    return y


@case(lambda i: (rand(3), i % 2 == 0), compiles=2)
def nullcontext_or_no_grad_by_flag(x, frozen):
    ctx = torch.no_grad() if frozen else contextlib.nullcontext()
    with ctx:
        y = x * 3
    return y


@case(lambda: (rand(3), Tracking(2.0)))
def user_context_manager_passed_in(x, tracker):
    with tracker as scale:
        y = x * scale
        inner = tracker.depth
    return y, inner, tracker.depth


@case(one(3))
def user_context_manager_created_inside(x):
    with Scaled(3.0) as s:
        y = x * s.factor
    return y, s.used


@case(one(3))
def nested_user_context_managers(x):
    t = Tracking(2.0)
    with t as a:
        with t as b:
            y = x * a * b
            depth = t.depth
    return y, depth, t.log


@case(one(3))
def generator_context_manager(x):
    with scaled_by(1.5) as k:
        y = x * k
    return y


_EVENTS = []


@contextlib.contextmanager
def recorded(name):
    _EVENTS.append(("enter", name))
    try:
        yield len(_EVENTS)
    finally:
        _EVENTS.append(("exit", name))


@case(one(3))
def generator_context_managers_nested_with_try_finally(x):
    _EVENTS.clear()
    with recorded("outer") as a:
        with recorded("inner") as b:
            y = x * a + b
    return y, list(_EVENTS)


@case(one(3), breaks=None, graphs=2, compiles=1)
def generator_context_manager_around_a_graph_break(x):
    _EVENTS.clear()
    with recorded("outer") as a:
        y = x * a
        print("inside")  # the generator is suspended here: traced again with it run for real
        y = y + 1
    return y, list(_EVENTS)


def _counter(n):
    for i in range(n):
        yield i * 10
    return "done"


@case(one(3))
def next_steps_a_generator_and_its_return_value_reaches_stop_iteration(x):
    gen = _counter(2)
    a = next(gen)
    b = next(gen)
    try:
        next(gen)
    except StopIteration as stop:
        c = stop.value
    return x * (a + b), c, next(gen, "default")


@case(one(3))
def generator_partly_stepped_then_drained_by_a_loop(x):
    gen = _counter(4)
    first = next(gen)
    rest = [v for v in gen]
    return x + first, rest, list(gen)


@case(one(3))
def with_inside_a_loop(x):
    t = Tracking(1.0)
    for i in range(3):
        with t:
            x = x + i
    return x, t.log


# ---------------------------------------------------------------- try / except / finally, assert, raise


@case(one(3))
def try_finally_without_raise(x):
    log = []
    try:
        y = x * 2
        log.append("body")
    finally:
        log.append("finally")
    return y, log


@case(one(3))
def try_except_else_without_raise(x):
    try:
        y = x + 1
    except ValueError:
        y = x - 1
    else:
        y = y * 2
    return y


@case(lambda i: (rand(3), [{}, {"k": 2.0}, {}][i]), compiles=2)
def except_catches_a_python_error(x, d):
    try:
        v = d["k"]
    except KeyError:
        v = 3.0
    return x * v


class _Indexed:
    """A sequence known only by ``__getitem__``: iterating it ends with an IndexError caught by the iterator."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return i + 1


def _iterate_by_index(seq):  # collections.abc.Sequence.__iter__'s shape
    i = 0
    try:
        while True:
            v = seq[i]
            yield v
            i += 1
    except IndexError:
        return


@case(one(3), graphs=1)
def except_ends_an_iteration_inside_a_generator(x):
    return x * sum(_iterate_by_index(_Indexed(3)))


@case(one(3), graphs=1)
def except_catches_in_a_callee_and_reraises_to_the_caller(x):
    def inner(t):
        try:
            raise ValueError("inner", 2)
        except ValueError:
            t = t + 1
            raise

    try:
        inner(x)
    except ValueError as e:
        return x * len(e.args)


@case(one(3), graphs=1)
def except_tuple_match_and_else_and_finally(x):
    out = x
    try:
        {}["missing"]
    except (IndexError, KeyError) as e:
        out = out + len(str(e))
    else:
        out = out * 100
    finally:
        out = out * 2
    return out


@case(one(3), graphs=1)
def unmatched_except_reaches_the_outer_handler(x):
    try:
        try:
            [][1]
        except KeyError:
            return x * 0
    except IndexError:
        return x + 5


@case(one(3), breaks=None, graphs=None)
def except_catches_a_tensor_op_error_as_eager_does(x):
    """A shape error from a tensor op: fake tensors might fail where real ones do not, so the op runs for real
    (a graph break) and the real RuntimeError reaches the user's handler."""
    try:
        y = x @ torch.ones(4, 2)
    except RuntimeError as e:
        y = x * 2 + ("mat" in str(e) or "shape" in str(e) or "size" in str(e))
    return y


class _LoggingLookup:
    def __init__(self, log):
        self.log = log

    def __getitem__(self, key):
        self.log.append(key)  # done before the raise: eager keeps it
        raise KeyError(key)


@case(one(3), graphs=1)
def effects_before_a_raise_stay_done(x):
    log = []

    def work(t):
        log.append(1)
        u = t * 3
        raise RuntimeError(u.shape)

    try:
        work(x)
    except RuntimeError:
        pass
    try:
        _LoggingLookup(log)["k"]  # raised inside a dunder the subscript calls
    except KeyError:
        pass
    return x + len(log)


@case(one(3))
def try_in_a_helper_with_finally_returning(x):
    def helper(t):
        try:
            return t * 2
        finally:
            pass

    return helper(x) + 1


@case(one(3, 4))
def assert_that_passes(x):
    assert x.shape[0] == 3, "first dim"
    assert x.dim() == 2
    assert isinstance(x, torch.Tensor) and x.dtype is torch.float32, f"got {x.dtype}"
    return x.sum(0)


@case(lambda i: (rand(3), [False, True, False][i]), compiles=2, breaks=None)
def raise_under_python_condition(x, flag):
    y = x * 2
    if flag:
        raise ValueError("x")
    return y


@case(lambda i: (rand(2 + i % 2),), compiles=2, breaks=None, graphs=1)
def raise_on_shape_with_formatted_message(x):
    if x.shape[0] != 2:
        raise ValueError(f"expected 2 rows, got {x.shape[0]}")
    return x + 1


@case(lambda i: (rand(3), ["relu", "swish", "relu"][i]), compiles=2, breaks=None, graphs=1)
def raise_for_unknown_option(x, act):
    table = {"relu": torch.relu, "tanh": torch.tanh}
    if act not in table:
        raise KeyError(f"unknown activation {act!r}")
    return table[act](x)


@case(lambda i: (rand(3 + i % 2),), compiles=2, breaks=None, graphs=1)
def assert_that_fails_raises_assertion_error(x):
    assert x.shape[0] == 3, "need three"
    return x * 2


@case(lambda i: (rand(3), [1, 0, 1][i]), compiles=2, breaks=None, graphs=1)
def raise_inside_try_finally_runs_finally(x, bad):
    log = []
    try:
        if bad == 0:
            raise RuntimeError("bad value")
        y = x * bad
    finally:
        log.append(1)
    return y, log


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("name", params(CASES))
def test_context_and_exceptions(name):
    fn, make_args, compiles, kwargs, _ = CASES[name]
    check(fn, make_args, compiles=compiles, **kwargs)


def test_autocast_aot_eager():
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.relu(x @ w).sum(-1)

    assert_parity(f, lambda: (rand(4, 8), rand(8, 4)), backend="aot_eager", calls=2, **BF16)


def test_compiled_function_called_under_no_grad_and_autocast_recompiles():
    graphs, counting = counting_backend()

    def f(x, w):
        return x @ w

    compiled = stillframe.compile(f, backend=counting)
    make = lambda: (rand(3, 4), rand(4, 2))  # noqa: E731
    assert_parity(f, make, compiled=compiled)
    with torch.no_grad():
        assert_parity(f, make, compiled=compiled, calls=2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert_parity(f, make, compiled=compiled, calls=2, **BF16)
    assert_parity(f, make, compiled=compiled)
    assert len(graphs) == 3


def test_module_forward_under_user_context_manager_and_no_grad():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.tracker = Tracking(0.5, log=False)
            self.frozen = nn.Linear(4, 4)

        def forward(self, x):
            with self.tracker as s:
                h = self.lin(x) * s
            with torch.no_grad():
                target = self.frozen(x)
            return F.mse_loss(h, target), self.tracker.depth

    report, compiled = check(Net(), lambda: (rand(2, 4, grad=False),))
    assert compiled.original_module.tracker.depth == 0
    assert report.compiled_result[1] == 0


def test_raise_matches_eager_exception_object():
    def f(x, n):
        if n > 2:
            raise ValueError(f"n={n} too big")
        return x * n

    compiled = stillframe.compile(f, backend="eager")
    assert torch.equal(compiled(torch.ones(2), 2), torch.ones(2) * 2)
    with pytest.raises(ValueError, match="n=5 too big"):
        compiled(torch.ones(2), 5)
    assert torch.equal(compiled(torch.ones(2), 2), torch.ones(2) * 2)
    assert stillframe.counters["fallbacks"] == 0


def inference_mode_block(x, w):
    with torch.inference_mode():
        y = x @ w
        z = y.relu()
    return z, x * 2


def test_inference_mode_block_matches_eager():
    """``torch.inference_mode()`` on the eager backend: entered and left in the graph (on AOTAutograd backends, for
    real: tests/api/test_inference_mode_s38.py)."""
    from stillframe.check import assert_parity

    assert_parity(inference_mode_block, lambda: (rand(3, 3), rand(3, 3)), calls=2)


def test_called_under_inference_mode_is_guarded():
    compiled = stillframe.compile(lambda x: x * 2, backend="eager")
    plain = compiled(torch.randn(3))
    with torch.inference_mode():
        inside = compiled(torch.randn(3))
    assert not plain.is_inference() and inside.is_inference()
    assert len(compiled.cache_entries()) == 2
