"""Python functions inlined into one graph: closures, nonlocal, lambdas, calling conventions, partial,
decorators, recursion, super().

Each case runs eagerly and compiled for three calls (``make_args(i)`` gets the
call index; where it varies a Python value the trace depends on, the expected
number of compiles says so). Every compile must be a real graph: no eager
entries and no StillframeWarning.
"""

from __future__ import annotations

import functools
import sys

import pytest
import torch
from torch import nn

import stillframe
from stillframe.check import assert_parity

from py_cases import check, counting_backend, one, params, rand, two, case_registry

CASES, case = case_registry()


# ---------------------------------------------------------------- nested functions and closures


@case(one(3))
def nested_with_defaults(x):
    def inner(t, k=2, shift=0.5):
        return t * k + shift

    return inner(x), inner(x, 3), inner(x, shift=-1.0)


@case(one(3))
def nested_with_keyword_only_defaults(x):
    def inner(t, *, scale=2.0, squash=False):
        out = t * scale
        return torch.tanh(out) if squash else out

    return inner(x), inner(x, squash=True), inner(x, scale=0.1, squash=True)


@case(two(3))
def closure_over_local_tensor(x, y):
    def add_y(t):
        return t + y

    return add_y(x) * add_y(x * 2)


@case(one(3))
def closure_sees_late_binding(x):
    k = 1

    def times_k(t):
        return t * k

    first = times_k(x)
    k = 5
    return first, times_k(x)


@case(one(3))
def nonlocal_counter_in_nested_function(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t * count

    a = bump(x)
    b = bump(a)
    return b, count


@case(two(3))
def nonlocal_tensor_accumulator(x, y):
    acc = x

    def add(t):
        nonlocal acc
        acc = acc + t

    add(y)
    add(y * 2)
    return acc


@case(one(3))
def two_level_closure(x):
    scale = 3.0

    def outer(t):
        shift = 1.0

        def inner(u):
            return u * scale + shift

        return inner(t) - shift

    return outer(x)


@case(one(3))
def nested_function_shared_cell(x):
    state = [0]

    def inc():
        state[0] += 1

    def get():
        return state[0]

    inc()
    inc()
    return x * get(), state


@case(one(3))
def closures_created_in_a_loop(x):
    fns = []
    for k in range(3):
        def f(t, k=k):
            return t * (k + 1)

        fns.append(f)
    return [f(x) for f in fns]


# ---------------------------------------------------------------- lambdas


@case(one(3))
def lambda_local(x):
    double = lambda t: t * 2  # noqa: E731
    return double(x) + double(x + 1)


@case(one(3))
def lambdas_with_captured_loop_variable(x):
    ops = [lambda t, k=k: t + k for k in range(3)]
    return sum(op(x) for op in ops)


@case(lambda: ([rand(3) for _ in range(3)],))
def lambda_in_map_and_filter(xs):
    scaled = list(map(lambda t: t * 2, xs))
    kept = list(filter(lambda i: i != 1, range(len(xs))))
    return [scaled[i] for i in kept]


@case(lambda: ([rand(3) for _ in range(3)], [3, 1, 2]))
def lambda_as_sort_key(xs, ranks):
    order = sorted(range(len(xs)), key=lambda i: ranks[i])
    best = max(range(len(xs)), key=lambda i: -ranks[i])
    return [xs[i] * 2 for i in order], best


GLOBAL_LAMBDA = lambda t: t.sin() * 2  # noqa: E731


@case(one(3))
def global_lambda(x):
    return GLOBAL_LAMBDA(x)


@case(one(3))
def lambda_closure_over_tensor(x):
    bias = x.mean()
    center = lambda t: t - bias  # noqa: E731
    return center(x), center(x * 2)


@case(one(3))
def immediately_called_lambda(x):
    return (lambda a, b=2: a * b)(x), (lambda *a: len(a))(1, 2, 3)


# ---------------------------------------------------------------- *args, **kwargs, keyword-only


def varargs(*ts):
    out = ts[0]
    for t in ts[1:]:
        out = out + t
    return out, len(ts)


def kwonly(t, *, alpha, beta=1.0):
    return t * alpha + beta


def anything(*args, **kwargs):
    out = sum(args)
    for k in sorted(kwargs):
        out = out * kwargs[k]
    return out, sorted(kwargs), "gamma" in kwargs, kwargs.get("missing", 7)


def positional_only(a, b, /, c=1.0):
    return a * b + c


def forward_everything(fn, *args, **kwargs):
    return fn(*args, **kwargs)


@case(two(3))
def call_varargs(x, y):
    return varargs(x, y, x * y), varargs(x)


@case(one(3))
def call_keyword_only(x):
    return kwonly(x, alpha=2.0), kwonly(x, beta=0.0, alpha=3.0)


@case(two(3))
def call_star_star(x, y):
    extra = {"alpha": 2.0, "beta": 3.0}
    return anything(x, y, **extra), anything(x, gamma=0.5)


@case(two(3))
def call_positional_only(x, y):
    return positional_only(x, y), positional_only(x, y, c=2.0)


@case(two(3))
def call_through_a_forwarder(x, y):
    return forward_everything(kwonly, x, alpha=0.5), forward_everything(varargs, *[x, y])


@case(lambda: ((rand(3),), {"alpha": 2.0, "extra": 1.0}))
def compiled_function_with_kwargs(x, *rest, alpha=1.0, **kwargs):
    out = x * alpha
    for v in kwargs.values():
        out = out + v
    return out, len(rest), sorted(kwargs)


@case(lambda i: ((rand(3),) * (1 + i % 2), {}), compiles=2)
def compiled_varargs_length_guarded(*xs):
    return sum(xs) * len(xs)


@case(one(3))
def unpacking_returns(x):
    def parts(t):
        return t, t * 2, t * 3, t * 4

    first, *middle, last = parts(x)
    (a, b), c = (first, last), len(middle)
    return a + b, middle, c


# ---------------------------------------------------------------- functools.partial


def affine(t, scale, shift=0.0):
    return t * scale + shift


PARTIAL_GLOBAL = functools.partial(affine, scale=3.0)
PARTIALS = [functools.partial(affine, scale=2.0), functools.partial(affine, scale=4.0, shift=1.0)]


@case(one(3))
def partial_of_user_function(x):
    p = functools.partial(affine, shift=1.0)
    return p(x, 2.0), p(x, scale=0.5)


@case(two(3))
def partial_of_torch_function(x, y):
    add2 = functools.partial(torch.add, alpha=2)
    return add2(x, y)


@case(one(3))
def partial_from_global(x):
    return PARTIAL_GLOBAL(x), PARTIAL_GLOBAL(x, shift=2.0)


@case(one(3))
def nested_partial(x):
    p = functools.partial(functools.partial(affine, x), 2.0)
    return p(), p(shift=-1.0)


@case(lambda i: (rand(3), PARTIALS[i % 2]), compiles=2)
def partial_passed_in(x, fn):
    return fn(x)


# ---------------------------------------------------------------- decorated functions


def doubled(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 2

    return wrapper


def shifted(amount):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(t):
            return fn(t) + amount

        return wrapper

    return decorate


@doubled
def decorated_sin(t):
    """Doc of decorated_sin."""
    return torch.sin(t)


@shifted(1.5)
@doubled
def stacked(t):
    return t.exp()


@case(one(3))
def call_decorated(x):
    return decorated_sin(x), decorated_sin.__name__, decorated_sin.__doc__


@case(one(3))
def call_stacked_decorators(x):
    return stacked(x)


@case(one(3))
def read_wrapped_of_decorated(x):
    return stacked.__wrapped__(x)


@case(one(3))
def decorator_applied_in_the_trace(x):
    @doubled
    def inner(t):
        """Subtract one."""
        return t - 1

    return inner(x), inner.__name__, inner.__doc__, inner.__wrapped__.__qualname__, inner


# ---------------------------------------------------------------- recursion


def rsum(ts):
    if len(ts) == 1:
        return ts[0]
    return ts[0] + rsum(ts[1:])


def tree_sum(node):
    if isinstance(node, torch.Tensor):
        return node
    return sum(tree_sum(child) for child in node)


def power(t, n):
    return t if n == 1 else t * power(t, n - 1)


def is_even(n, t):
    return t if n == 0 else is_odd(n - 1, t + 1)


def is_odd(n, t):
    return t * 2 if n == 0 else is_even(n - 1, t)


@case(lambda: ([rand(3) for _ in range(5)],))
def recursive_sum_depth_5(xs):
    return rsum(xs)


@case(lambda: ([rand(2), [rand(2), [rand(2), rand(2)]], (rand(2),)],))
def recursive_tree_sum(tree):
    return tree_sum(tree)


@case(lambda i: (rand(3), [3, 4, 3][i]), compiles=2)
def recursion_on_python_int(x, n):
    return power(x, n)


@case(one(3))
def mutual_recursion(x):
    return is_even(4, x), is_even(3, x)


# ---------------------------------------------------------------- super()


class Base:
    def __init__(self, scale):
        self.scale = scale

    def apply(self, t):
        return t * self.scale


class Child(Base):
    def __init__(self, scale, shift):
        super().__init__(scale)
        self.shift = shift

    def apply(self, t):
        return super().apply(t) + self.shift


class GrandChild(Child):
    def apply(self, t):
        return super(GrandChild, self).apply(t).relu()


@case(lambda: (rand(3), Child(2.0, 1.0)))
def super_in_plain_class_method(x, obj):
    return obj.apply(x)


@case(lambda: (rand(3), GrandChild(2.0, -1.0)))
def super_two_levels_explicit_form(x, obj):
    return obj.apply(x)


@case(one(3))
def super_init_in_an_object_made_in_the_trace(x):
    obj = GrandChild(0.5, 0.25)
    return obj.apply(x), obj.scale, obj.shift


class ScaledLinear(nn.Linear):
    def __init__(self):
        super().__init__(4, 3)

    def forward(self, x):
        return super().forward(x) * 2


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class GatedResidual(Residual):
    def forward(self, x):
        return x + torch.sigmoid(super().forward(x))


class DoubleGated(GatedResidual):
    def forward(self, x):
        return super().forward(super().forward(x))


# ---------------------------------------------------------------- higher-order functions and function objects


def apply_twice(fn, t):
    return fn(fn(t))


@case(one(3))
def function_as_argument_to_a_helper(x):
    return apply_twice(torch.sin, x), apply_twice(lambda t: t * 3, x), apply_twice(decorated_sin, x)


@case(lambda i: (rand(3), [torch.sin, torch.cos, torch.sin][i]), compiles=2)
def function_passed_in_is_guarded(x, fn):
    return fn(x) * 2


@case(lambda: (rand(3), Child(2.0, 1.0)))
def bound_method_and_unbound_call(x, obj):
    method = obj.apply
    return method(x), Child.apply(obj, x), Base.apply(obj, x)


@case(one(3))
def function_name_and_qualname(x):
    return x * len(affine.__name__), affine.__qualname__, affine.__module__


@case(one(3))
def function_defaults_attributes(x):
    return x * affine.__defaults__[0], kwonly.__kwdefaults__


@case(one(3))
def nested_function_code_attributes(x):
    def inner(t, k=2):
        return t + k

    code = inner.__code__
    return inner(x) * code.co_argcount, code.co_name, code.co_varnames, inner.__defaults__


def counter_gen(n):
    for i in range(n):
        yield i * 2


@case(one(3))
def user_generator_function(x):
    for v in counter_gen(3):
        x = x + v
    return x, list(counter_gen(2))


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("name", params(CASES))
def test_functions(name):
    fn, make_args, compiles, _ = CASES[name]
    check(fn, make_args, compiles=compiles)


@pytest.mark.parametrize("cls", [ScaledLinear, GatedResidual, DoubleGated], ids=lambda c: c.__name__)
def test_super_in_module_forward(cls):
    check(cls(), lambda: (rand(2, 4),))


def test_aot_eager_backend_with_closures_and_recursion():
    def f(xs, scale):
        def body(t):
            return torch.tanh(t) * scale

        return rsum([body(t) for t in xs])

    assert_parity(f, lambda: ([rand(3) for _ in range(5)], 0.5), backend="aot_eager", calls=2)


# ---------------------------------------------------------------- guards on functions, closures, cells


def make_scaler(scale):
    def scaler(t):
        return t * scale

    return scaler


def test_closure_cell_contents_are_guarded():
    graphs, counting = counting_backend()
    scale = 2.0

    def f(x):
        return x * scale

    compiled = stillframe.compile(f, backend=counting)
    for value, expected in [(2.0, 1), (2.0, 1), (3.0, 2), (2.0, 2), (3.0, 2)]:
        scale = value  # rebinding the cell f reads
        assert_parity(f, lambda: (rand(3),), compiled=compiled)
        assert len(graphs) == expected, value


def test_closure_cell_holding_a_function_is_guarded_by_identity():
    graphs, counting = counting_backend()
    act = torch.relu

    def f(x):
        return act(x) + 1

    compiled = stillframe.compile(f, backend=counting)
    for value, expected in [(torch.relu, 1), (torch.tanh, 2), (torch.relu, 2), (torch.tanh, 2)]:
        act = value
        assert_parity(f, lambda: (rand(3),), compiled=compiled)
        assert len(graphs) == expected


def test_helper_closure_cell_read_through_a_call_is_guarded():
    graphs, counting = counting_backend()
    scaler = make_scaler(2.0)

    def f(x):
        return scaler(x) - 1

    compiled = stillframe.compile(f, backend=counting)
    assert_parity(f, lambda: (rand(3),), compiled=compiled, calls=2)
    scaler.__closure__[0].cell_contents = 7.0  # same function object, new cell contents
    assert_parity(f, lambda: (rand(3),), compiled=compiled, calls=2)
    assert len(graphs) == 2


GLOBAL_FN = torch.sin


def uses_global_function(x):
    return GLOBAL_FN(x) * 2


def test_global_function_rebinding_recompiles():
    graphs, counting = counting_backend()
    module = sys.modules[__name__]
    compiled = stillframe.compile(uses_global_function, backend=counting)
    try:
        for value, expected in [(torch.sin, 1), (torch.cos, 2), (decorated_sin, 3), (torch.sin, 3)]:
            module.GLOBAL_FN = value
            assert_parity(uses_global_function, lambda: (rand(3),), compiled=compiled, calls=2)
            assert len(graphs) == expected
    finally:
        module.GLOBAL_FN = torch.sin


def test_changed_defaults_of_a_called_function_recompile():
    graphs, counting = counting_backend()

    def helper(t, k=2.0):
        return t * k

    def f(x):
        return helper(x)

    compiled = stillframe.compile(f, backend=counting)
    try:
        assert_parity(f, lambda: (rand(3),), compiled=compiled, calls=2)
        helper.__defaults__ = (5.0,)
        assert_parity(f, lambda: (rand(3),), compiled=compiled, calls=2)
    finally:
        helper.__defaults__ = (2.0,)
    assert len(graphs) == 2


def closure_attributes(x):
    y = 3

    def inner(t, *, k=2):
        return t + y * k

    return inner(x), inner.__closure__[0].cell_contents, inner.__globals__["torch"] is torch, inner.__kwdefaults__


def test_attributes_of_a_function_made_in_the_trace_that_are_not_modelled_are_read_for_real():
    """``__closure__``, ``__globals__`` and ``__kwdefaults__`` exist on every function: the trace breaks the graph
    and reads them for real, as eager does; under ``fullgraph=True`` that is ``Unsupported`` naming the attribute,
    as torch.compile's is (the trace raised AttributeError, which fullgraph reported as a stillframe
    InternalError; ``__code__`` did the same)."""
    assert_parity(closure_attributes, lambda: (rand(3),), calls=2)
    with pytest.raises(stillframe.Unsupported, match=r"reading \.__closure__ of a function value"):
        stillframe.compile(closure_attributes, backend="eager", fullgraph=True)(rand(3))


def test_function_made_in_the_trace_is_one_object_wherever_it_goes():
    """A closure returned twice and stored in a list is the same function object in all three places (eager's
    identity), also across a graph break that rebuilds the frame holding it."""

    def f(x):
        def g(t):
            return t + x.shape[0]

        held = [g]
        print("break")  # the frame (g in its locals and in `held`) is rebuilt here
        return x * 2, g, held

    report, _ = check(f, lambda: (rand(3),), breaks=None, graphs=1, compiles=1)
    out = report.compiled_result
    assert out[1] is out[2][0]
    assert out[1](1) == 4


def test_partial_and_bound_method_made_in_the_trace_keep_identity():
    class Scaler:
        def apply(self, t):
            return t * 3

    def f(x, s):
        p = functools.partial(torch.add, x)
        m = s.apply
        return p, p, m, m

    report, _ = check(f, lambda: (rand(3), Scaler()), graphs=0, compiles=1)
    out = report.compiled_result
    assert out[0] is out[1] and out[2] is out[3]


# ---------------------------------------------------------------- compiled callables called from compiled code


def _nested_compiled_cases():
    lin = nn.Linear(4, 4)
    inner = stillframe.compile(lambda x: x.sin() + 1, backend="eager")
    by_torch = torch.compile(lambda x: x.cos() - 1, backend="eager")

    class Helper(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lin

        @stillframe.compile(backend="eager")
        def helper(self, x):
            return self.lin(x) + 1

        def forward(self, x):
            return self.helper(x) * 2

    helper = Helper()
    compiled_lin = stillframe.compile(lin, backend="eager")
    compiled_lin_by_torch = torch.compile(lin, backend="eager")
    return {
        "stillframe_function": lambda x: inner(x) * 2,
        "torch_compile_function": lambda x: by_torch(x) * 2,
        "stillframe_module": lambda x: compiled_lin(x).relu(),
        "torch_compile_module": lambda x: compiled_lin_by_torch(x).relu(),
        "stillframe_method": helper,
    }


@pytest.mark.parametrize("name", list(_nested_compiled_cases()))
def test_a_compiled_callable_called_from_compiled_code_is_inlined(name):
    # Matches torch.compile: the callee's original function is traced into the caller's graph, not the wrapper's
    # dispatch code (which broke the graph; under fullgraph it raised).
    fn = _nested_compiled_cases()[name]
    graphs, counting = counting_backend()
    compiled = stillframe.compile(fn, backend=counting, fullgraph=True)
    assert_parity(fn, lambda: (rand(2, 4),), compiled=compiled, calls=2)
    assert len(graphs) == 1


def test_a_disabled_compiled_function_called_from_compiled_code_runs_for_real():
    calls = []

    def record(x):
        calls.append(1)
        return x + 1

    inner = stillframe.compile(record, backend="eager", disable=True)
    assert_parity(lambda x: inner(x) * 2, lambda: (rand(3),), calls=2)
    assert len(calls) == 4  # twice eagerly, twice compiled: the effect ran once per call on each side
