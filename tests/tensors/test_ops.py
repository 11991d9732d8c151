"""Parity tests of the core opcodes and tensor operations (milestone 1: straight-line model code).

Every test runs a function eagerly and through ``stillframe.compile(...,
backend="eager")`` and compares everything observable (see
``stillframe.check``); none of them hard-codes an expected value. A
``StillframeWarning`` (eager fallback) fails a test: each program here must be
captured whole.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from stillframe.check import assert_parity

SCALE = 3.0
OFFSET = torch.linspace(-1.0, 1.0, 4)
USE_OFFSET = True
MODES = ("relu", "gelu")


def rand(*shape, grad=True, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, requires_grad=grad)


def ints(*shape, low=0, high=16):
    return torch.randint(low, high, shape)


def positive(*shape, grad=True):
    return (torch.rand(*shape) + 0.5).requires_grad_(grad)


# ---------------------------------------------------------------- loads and stores


def test_locals_and_constants():
    def f(x):
        a = x
        b = 2
        c = a * b + 1.5
        tmp = c * 0
        del tmp
        c = c - b
        return c, b, "label", None, (1, 2.5, True)

    assert_parity(f, lambda: (rand(3, 4),))


def test_globals_are_read():
    def f(x):
        out = x * SCALE
        if USE_OFFSET:
            out = out + OFFSET
        return out

    assert_parity(f, lambda: (rand(3, 4),))


def make_closure(scale, bias, activation):
    def f(x):
        return activation(x * scale + bias)

    return f


def test_closure_variables_are_read():
    f = make_closure(0.5, torch.randn(4), torch.tanh)
    assert f.__code__.co_freevars == ("activation", "bias", "scale")
    assert_parity(f, lambda: (rand(3, 4),))


def test_closure_over_a_helper_function():
    def outer():
        shift = 2.0

        def helper(t):
            return t - shift

        def f(x):
            return helper(x) * shift

        return f

    assert_parity(outer(), lambda: (rand(5),))


# ---------------------------------------------------------------- calls


def helper(a, b, scale=1.0, *, shift=0.0):
    return a * scale + b + shift


CALLS = {
    "positional": lambda x, y: helper(x, y),
    "positional-default-override": lambda x, y: helper(x, y, 2.0),
    "keyword": lambda x, y: helper(x, b=y, shift=1.0),
    "all-keyword": lambda x, y: helper(b=y, a=x, scale=0.5),
    "star-args-tuple": lambda x, y: helper(*(x, y)),
    "star-args-list": lambda x, y: helper(*[x, y], shift=2.0),
    "star-star-kwargs": lambda x, y: helper(x, **{"b": y, "shift": 3.0}),
    "star-and-star-star": lambda x, y: helper(*(x,), **{"b": y}),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_call_forms(name):
    assert_parity(CALLS[name], lambda: (rand(3, 4), rand(4)))


def test_compiled_function_with_varargs_and_varkw():
    def f(*xs, **kw):
        return xs[0] * kw["alpha"] + xs[1], len(xs), len(kw)

    assert_parity(f, lambda: ((rand(3), rand(3)), {"alpha": 2.0, "beta": None}))


def level3(x):
    return torch.sin(x) * 2


def level2(x, y):
    return level3(x) + y


def level1(x, y):
    return level2(x, y) * level3(y)


def test_nested_helpers_three_deep():
    def f(x, y):
        return level1(x, y) - 1

    assert_parity(f, lambda: (rand(3, 4), rand(3, 4)))


class Scaler:
    """A plain user class whose methods the traced code calls on an instance passed in."""

    def __init__(self, factor, bias):
        self.factor = factor
        self.bias = bias

    def apply(self, x):
        return x * self.factor + self.bias

    def twice(self, x):
        return self.apply(self.apply(x))


def test_methods_of_user_objects():
    def f(scaler, x):
        return scaler.twice(x), scaler.apply(x) - scaler.bias

    assert_parity(f, lambda: (Scaler(2.0, torch.randn(3)), rand(3)))


def with_defaults(x, y=None, scale=2.0, *, shift=0.0, squash=False):
    out = x * scale + shift
    if y is not None:
        out = out + y
    if squash:
        out = torch.tanh(out)
    return out


@pytest.mark.parametrize(
    "make",
    [
        lambda: (rand(3),),
        lambda: (rand(3), rand(3)),
        lambda: ((rand(3),), {"scale": 0.5, "shift": 1.0}),
        lambda: ((rand(3), rand(3)), {"squash": True}),
    ],
    ids=["defaults", "positional-y", "keywords", "keyword-only-flag"],
)
def test_default_arguments(make):
    assert_parity(with_defaults, make)


def test_required_keyword_only_arguments():
    def f(x, *, alpha, beta=1.0):
        return x * alpha + beta

    assert_parity(f, lambda: ((rand(4),), {"alpha": 3.0}))


def returns_nothing(x):
    x * 2


def test_function_returning_none():
    assert_parity(returns_nothing, lambda: (rand(3),))


def test_helper_returning_none():
    def f(x):
        r = returns_nothing(x)
        if r is None:
            return x + 1
        return x - 1

    assert_parity(f, lambda: (rand(3),))


def test_in_place_on_input_returning_none():
    def f(x):
        x.mul_(2)

    assert_parity(f, lambda: (torch.randn(3, 4),))


# ---------------------------------------------------------------- BINARY_OP


FLOAT_BINOPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "pow": lambda a, b: a ** b,
}
INT_BINOPS = {
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "lshift": lambda a, b: a << b,
    "rshift": lambda a, b: a >> b,
}
NOT_DIFFERENTIABLE = {"floordiv"}


@pytest.mark.parametrize("name", list(FLOAT_BINOPS))
def test_binary_op_float_tensors(name):
    grad = name not in NOT_DIFFERENTIABLE
    assert_parity(FLOAT_BINOPS[name], lambda: (positive(3, 4, grad=grad), positive(4, grad=grad)))


@pytest.mark.parametrize("name", [n for n in FLOAT_BINOPS if n != "pow"])
def test_binary_op_int_tensors(name):
    assert_parity(FLOAT_BINOPS[name], lambda: (ints(3, 4), ints(4, low=1, high=5)))


@pytest.mark.parametrize("name", list(INT_BINOPS))
def test_bitwise_binary_op_int_tensors(name):
    assert_parity(INT_BINOPS[name], lambda: (ints(3, 4), ints(4, high=4)))


@pytest.mark.parametrize("name", ["and", "or", "xor"])
def test_bitwise_binary_op_bool_tensors(name):
    assert_parity(INT_BINOPS[name], lambda: (torch.rand(3, 4) > 0.5, torch.rand(4) > 0.5))


def test_binary_op_matmul():
    assert_parity(lambda a, b: a @ b, lambda: (rand(2, 3, 4), rand(4, 5)))


@pytest.mark.parametrize("scalar", [2, 2.5], ids=["int", "float"])
@pytest.mark.parametrize("side", ["tensor-first", "scalar-first"])
@pytest.mark.parametrize("name", list(FLOAT_BINOPS))
def test_binary_op_tensor_scalar(name, side, scalar):
    op = FLOAT_BINOPS[name]
    # torch has no derivative of remainder(scalar, tensor)
    grad = name not in NOT_DIFFERENTIABLE and not (name == "mod" and side == "scalar-first")
    if side == "tensor-first":
        def f(x):
            return op(x, scalar)
    else:
        def f(x):
            return op(scalar, x)
    assert_parity(f, lambda: (positive(3, 4, grad=grad),))


@pytest.mark.parametrize("side", ["tensor-first", "scalar-first"])
@pytest.mark.parametrize("name", list(INT_BINOPS))
def test_bitwise_binary_op_tensor_scalar(name, side):
    op = INT_BINOPS[name]
    if side == "tensor-first":
        def f(x):
            return op(x, 3)
    else:
        def f(x):
            return op(3, x)
    assert_parity(f, lambda: (ints(3, 4, high=4),))


def iadd(a, b):
    a = a * 1
    a += b
    return a


def isub(a, b):
    a = a * 1
    a -= b
    return a


def imul(a, b):
    a = a * 1
    a *= b
    return a


def itruediv(a, b):
    a = a * 1
    a /= b
    return a


def ifloordiv(a, b):
    a = a * 1
    a //= b
    return a


def imod(a, b):
    a = a * 1
    a %= b
    return a


def ipow(a, b):
    a = a * 1
    a **= b
    return a


def imatmul(a, b):
    a = a * 1
    a @= b
    return a


def iand(a, b):
    a = a * 1
    a &= b
    return a


def ior(a, b):
    a = a * 1
    a |= b
    return a


def ixor(a, b):
    a = a * 1
    a ^= b
    return a


def ilshift(a, b):
    a = a * 1
    a <<= b
    return a


def irshift(a, b):
    a = a * 1
    a >>= b
    return a


INPLACE_FLOAT = [iadd, isub, imul, itruediv, imod, ipow]
INPLACE_INT = [iand, ior, ixor, ilshift, irshift, ifloordiv]


@pytest.mark.parametrize("fn", INPLACE_FLOAT, ids=lambda fn: fn.__name__)
def test_inplace_binary_op_on_local_float(fn):
    assert_parity(fn, lambda: (positive(3, 4), positive(4)))


@pytest.mark.parametrize("fn", INPLACE_INT, ids=lambda fn: fn.__name__)
def test_inplace_binary_op_on_local_int(fn):
    assert_parity(fn, lambda: (ints(3, 4), ints(4, low=1, high=4)))


def test_inplace_matmul_on_local():
    assert_parity(imatmul, lambda: (rand(3, 4), rand(4, 4)))


def test_inplace_binary_op_with_scalar():
    def f(x):
        y = x + 0
        y += 1
        y *= 2.5
        y -= x
        return y

    assert_parity(f, lambda: (rand(3),))


def test_augmented_assignment_mutates_input():
    def f(x, y):
        x += y
        x *= 2
        return x

    assert_parity(f, lambda: (torch.randn(3, 4), rand(4)))


def test_augmented_assignment_on_leaf_requiring_grad_raises_like_eager():
    def f(x, y):
        x += y
        return x

    assert_parity(f, lambda: (rand(3, 4), rand(4)))


# ---------------------------------------------------------------- unary ops and comparisons


def test_unary_ops_on_floats():
    def f(x):
        return -x, +x, abs(x) * 1

    assert_parity(f, lambda: (rand(3, 4),))


@pytest.mark.parametrize("make", [lambda: (ints(3, 4),), lambda: (torch.rand(3, 4) > 0.5,)], ids=["int", "bool"])
def test_invert(make):
    def f(x):
        return ~x, ~(~x)

    assert_parity(f, make)


def test_not_on_constants():
    def f(x):
        use = not False
        skip = not USE_OFFSET
        if use and not skip:
            return x + 1
        return x - 1

    assert_parity(f, lambda: (rand(3),))


COMPARISONS = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


@pytest.mark.parametrize("name", list(COMPARISONS))
def test_tensor_comparisons(name):
    op = COMPARISONS[name]

    def f(x, y):
        return op(x, y), op(x, 1.0), op(y, x.mean())

    assert_parity(f, lambda: (ints(3, 4, high=3).float(), ints(4, high=3).float()))


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)], ids=["dim2", "dim3"])
def test_if_on_dim(shape):
    def f(x):
        if x.dim() == 3:
            return x.sum(0)
        return x * 2

    assert_parity(f, lambda: (rand(*shape),))


@pytest.mark.parametrize("flag", [True, False])
def test_if_on_flag(flag):
    def f(x, flag):
        if flag:
            return torch.relu(x)
        return torch.sigmoid(x)

    assert_parity(f, lambda: (rand(3), flag))


@pytest.mark.parametrize("with_y", [True, False])
def test_if_is_none(with_y):
    def f(x, y=None):
        if y is None:
            y = torch.ones_like(x)
        if y is not None:
            x = x * y
        return x

    assert_parity(f, lambda: (rand(3), rand(3)) if with_y else (rand(3),))


@pytest.mark.parametrize("n", [1, 3])
def test_if_on_int_argument(n):
    def f(x, n):
        if n > 2:
            return x * n
        return x - n

    assert_parity(f, lambda: (rand(3), n))


def test_if_on_shape_and_dtype():
    def f(x):
        if x.shape[-1] == 4 and x.dtype == torch.float32:
            return x.float() * 2
        return x

    assert_parity(f, lambda: (rand(2, 4),))


@pytest.mark.parametrize("same", [True, False])
def test_is_op_on_tensors(same):
    def make():
        x = rand(3)
        return (x, x) if same else (x, rand(3))

    def f(x, y):
        if x is y:
            return x * 2, x is y, x is not y
        return x + y, x is y, x is not y

    assert_parity(f, make)


@pytest.mark.parametrize("mode", ["relu", "gelu", "tanh"])
def test_contains_op_on_constant_tuples(mode):
    def f(x, mode):
        if mode in ("relu", "gelu"):
            x = x * 2
        if mode not in MODES:
            x = torch.tanh(x)
        if mode in {"relu"}:
            x = torch.relu(x)
        return x

    assert_parity(f, lambda: (rand(3), mode))


def test_contains_op_on_dict_argument():
    def f(x, opts):
        if "bias" in opts:
            x = x + opts["bias"]
        return x * opts["scale"], "missing" not in opts

    assert_parity(f, lambda: (rand(3), {"scale": 2.0, "bias": rand(3)}))


# ---------------------------------------------------------------- BINARY_SUBSCR and STORE_SUBSCR


INDEXING = {
    "int": lambda x: x[1],
    "negative-int": lambda x: x[-1],
    "slice": lambda x: x[1:3],
    "step": lambda x: x[::2],
    "negative-slice": lambda x: x[-3:-1],
    "int-tuple": lambda x: x[1, 2],
    "slices-tuple": lambda x: x[:, 1:4, ::2],
    "none": lambda x: x[None],
    "ellipsis": lambda x: x[..., 0],
    "ellipsis-none-slice": lambda x: x[..., None, 1:],
    "mixed": lambda x: x[0, :, None, -1],
    "list": lambda x: x[[0, 2]],
}


@pytest.mark.parametrize("name", list(INDEXING))
def test_tensor_indexing(name):
    assert_parity(INDEXING[name], lambda: (rand(4, 5, 6),))


@pytest.mark.parametrize(
    "fn",
    [lambda x, i: x[i], lambda x, i: x[i, i], lambda x, i: x[:, i], lambda x, i: x[..., i, None]],
    ids=["index", "pair", "second-dim", "ellipsis"],
)
def test_tensor_indexing_with_tensor_indices(fn):
    assert_parity(fn, lambda: (rand(4, 5, 6), torch.tensor([0, 2, 3])))


def test_subscript_of_python_containers_and_shape():
    def f(xs, d, x):
        return xs[0] + d["b"] * xs[-1], x.shape[1:], x.shape[-1], x.size()[0]

    assert_parity(f, lambda: ([rand(3), rand(3)], {"b": rand(3)}, rand(2, 3)))


@pytest.mark.parametrize(
    "index",
    ["row", "column", "tensor-index"],
)
def test_store_subscript_propagates_requires_grad(index):
    def f(v, idx):
        m = torch.zeros(4, 4)
        if index == "row":
            m[0] = v
        elif index == "column":
            m[:, 1] = v
        else:
            m[idx, idx] = v
        return m, m.requires_grad

    assert_parity(f, lambda: (rand(4), torch.tensor([0, 1, 2, 3])))


def test_store_subscript_into_input():
    def f(x, v):
        x[1:3] = v
        return x.sum()

    assert_parity(f, lambda: (torch.randn(4, 3), rand(3)))


def skew(vec, block_size):
    batch_size = vec.shape[0]
    matrix = torch.zeros(batch_size, block_size, block_size, device=vec.device, dtype=vec.dtype)
    rows, cols = torch.triu_indices(block_size, block_size, 1)
    matrix[:, rows, cols] = vec
    matrix = matrix - matrix.transpose(-2, -1)
    return matrix


def skew_with_asserts(vec, block_size):
    """The reproducer of seeds/001: requires_grad must survive the sliced assignment."""
    batch_size = vec.shape[0]
    matrix = torch.zeros(batch_size, block_size, block_size, device=vec.device, dtype=vec.dtype)
    rows, cols = torch.triu_indices(block_size, block_size, 1)
    matrix[:, rows, cols] = vec
    if torch.is_grad_enabled():
        assert vec.requires_grad
        assert matrix.requires_grad
    matrix = matrix - matrix.transpose(-2, -1)
    return matrix


@pytest.mark.parametrize("fn", [skew, skew_with_asserts], ids=["skew", "skew-with-asserts"])
def test_skew_symmetric_forward_and_backward(fn):
    report = assert_parity(fn, lambda: (torch.randn(2, 10, requires_grad=True), 5))
    assert report.compiled_result.requires_grad


def test_skew_symmetric_without_grad():
    with torch.no_grad():
        assert_parity(skew, lambda: (torch.randn(2, 10, requires_grad=True), 5))


# ---------------------------------------------------------------- building and returning containers


CONTAINERS = {
    "nested": lambda x, y: {"out": (x + y, [x * y, {"c": y - x}]), "n": 3},
    "dict-of-tensors": lambda x, y: {"sum": x + y, "prod": x * y},
    "constants-mixed": lambda x, y: (x + 1, 2, "s", None, 3.5, True, (1, "a")),
    "list": lambda x, y: [x + y, x - y],
    "dynamic-dict-key": lambda x, y: {str(y.dim()): x * 2},
    "unpack-into-tuple": lambda x, y: (*(x, y), x + y),
    "unpack-into-list": lambda x, y: [*[x], *(y, 1)],
    "dict-merge": lambda x, y: {**{"a": x + 1}, "b": y * 2},
    "empty": lambda x, y: ((), [], {}),
}


@pytest.mark.parametrize("name", list(CONTAINERS))
def test_build_and_return_containers(name):
    assert_parity(CONTAINERS[name], lambda: (rand(3), rand(3)))


def test_return_same_tensor_twice():
    def f(x):
        y = x * 2
        return y, y, [y]

    report = assert_parity(f, lambda: (rand(3),))
    out = report.compiled_result
    assert out[0] is out[1] is out[2][0]


def test_return_input_unchanged():
    def f(x, y):
        return x, y * 2, x

    report = assert_parity(f, lambda: (rand(3), rand(3)))
    assert report.compiled_result[0] is report.compiled_result[2]


def test_return_only_input():
    assert_parity(lambda x: x, lambda: (rand(3),))


# ---------------------------------------------------------------- UNPACK_SEQUENCE


UNPACKING = {
    "tuple": lambda x: _unpack_tuple(x),
    "shape": lambda x: _unpack_shape(x),
    "chunk": lambda x: _unpack_chunk(x),
    "split": lambda x: _unpack_split(x),
    "unbind": lambda x: _unpack_unbind(x),
    "nested": lambda x: _unpack_nested(x),
}


def _unpack_tuple(x):
    pair = (x, x * 2)
    a, b = pair
    return b - a


def _unpack_shape(x):
    n, c = x.shape
    return x.reshape(c, n) * n, n, c


def _unpack_chunk(x):
    a, b = torch.chunk(x, 2)
    return a * b


def _unpack_split(x):
    a, b = x.split(2, dim=1)
    return a + b, a, b


def _unpack_unbind(x):
    a, b, c, d = x.unbind(0)
    return a * d - b * c


def _unpack_nested(x):
    (a, b), c = (x, x + 1), x * 3
    return a + b + c


@pytest.mark.parametrize("name", list(UNPACKING))
def test_unpack_sequence(name):
    assert_parity(UNPACKING[name], lambda: (rand(4, 4),))


def test_unpack_list_argument():
    def f(xs):
        a, b = xs
        return a @ b

    assert_parity(f, lambda: ([rand(2, 3), rand(3, 2)],))


# ---------------------------------------------------------------- tensor attributes


def test_tensor_attributes():
    def f(x):
        return (x.T * 2, x.mT + 1, x.shape, x.size(), x.size(0), x.size(-1), x.dim(), x.ndim, x.numel(),
                x.dtype, x.device, x.is_floating_point(), x.requires_grad)

    assert_parity(f, lambda: (rand(3, 4),))


def test_tensor_attributes_feed_factories():
    def f(x):
        z = torch.zeros(x.shape[0], x.size(-1), dtype=x.dtype, device=x.device)
        return z + x, x.new_ones(x.shape) * 3

    assert_parity(f, lambda: (rand(3, 4),))


# ---------------------------------------------------------------- torch functions


TORCH_FUNCTIONS = {
    "add": lambda x, y: torch.add(x, y, alpha=2),
    "cat": lambda x, y: torch.cat([x, y], dim=0),
    "cat-tuple-negative-dim": lambda x, y: torch.cat((x, y), -1),
    "stack": lambda x, y: torch.stack([x, y], dim=1),
    "where": lambda x, y: torch.where(x > 0, x, y),
    "where-scalar": lambda x, y: torch.where(x > y, x, 0.0),
    "matmul": lambda x, y: torch.matmul(x, y.T),
    "bmm": lambda x, y: torch.bmm(x[None], y.T[None]),
    "einsum": lambda x, y: torch.einsum("ij,kj->ik", x, y),
    "softmax": lambda x, y: torch.softmax(x, dim=-1),
    "log-softmax": lambda x, y: torch.log_softmax(y, 1),
    "zeros-like": lambda x, y: torch.zeros_like(x),
    "zeros-like-plus": lambda x, y: torch.zeros_like(x) + y,
    "ones-like-dtype": lambda x, y: torch.ones_like(x, dtype=torch.int64),
    "arange": lambda x, y: torch.arange(x.shape[0]) * 2,
    "arange-float": lambda x, y: torch.arange(0, 10, 2, dtype=torch.float32) + y.sum(),
    "ones": lambda x, y: torch.ones(3) + x[0, :3],
    "zeros-dtype": lambda x, y: torch.zeros(2, 3, dtype=torch.int64),
    "full": lambda x, y: torch.full((2, 4), 7.0, dtype=x.dtype) * y[:2],
    "eye": lambda x, y: torch.eye(4) @ y.T,
    "tensor-literal": lambda x, y: x * torch.tensor([1.0, 2.0, 3.0, 4.0]),
    "linspace": lambda x, y: torch.linspace(0, 1, 4) * x,
    "triu-indices": lambda x, y: torch.triu_indices(4, 4, 1),
    "exp-sigmoid-tanh": lambda x, y: torch.exp(x) + torch.sigmoid(y) * torch.tanh(x),
    "clamp": lambda x, y: torch.clamp(x, min=-0.5, max=0.5),
    "max-full": lambda x, y: torch.max(x),
    "argmax": lambda x, y: torch.argmax(x, dim=1),
    "flatten": lambda x, y: torch.flatten(torch.stack([x, y]), 1),
    "sum-dims": lambda x, y: torch.sum(x * y, dim=(0, 1)),
    "outer": lambda x, y: torch.outer(x[0], y[1]),
}


@pytest.mark.parametrize("name", list(TORCH_FUNCTIONS))
def test_torch_functions(name):
    assert_parity(TORCH_FUNCTIONS[name], lambda: (rand(3, 4), rand(3, 4)))


# ---------------------------------------------------------------- torch.nn.functional


def functional_cases():
    def qkv():
        return rand(2, 3, 5, 8), rand(2, 3, 5, 8), rand(2, 3, 5, 8)

    return {
        "relu": (lambda x: F.relu(x), lambda: (rand(3, 4),)),
        "gelu": (lambda x: F.gelu(x), lambda: (rand(3, 4),)),
        "gelu-tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda: (rand(3, 4),)),
        "silu": (lambda x: F.silu(x), lambda: (rand(3, 4),)),
        "softmax": (lambda x: F.softmax(x, dim=-1), lambda: (rand(3, 4),)),
        "log-softmax": (lambda x: F.log_softmax(x, dim=0), lambda: (rand(3, 4),)),
        "layer-norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b, eps=1e-5), lambda: (rand(3, 4), rand(4), rand(4))),
        "layer-norm-no-affine": (lambda x: F.layer_norm(x, x.shape[-1:]), lambda: (rand(3, 4),)),
        "linear": (lambda x, w, b: F.linear(x, w, b), lambda: (rand(3, 4), rand(5, 4), rand(5))),
        "linear-no-bias": (lambda x, w: F.linear(x, w), lambda: (rand(3, 4), rand(5, 4))),
        "dropout-eval": (lambda x: F.dropout(x, p=0.5, training=False), lambda: (rand(3, 4),)),
        "cross-entropy": (lambda logits, t: F.cross_entropy(logits, t), lambda: (rand(6, 5), ints(6, high=5))),
        "cross-entropy-sum": (lambda logits, t: F.cross_entropy(logits, t, reduction="sum", label_smoothing=0.1),
                              lambda: (rand(6, 5), ints(6, high=5))),
        "mse-loss": (lambda a, b: F.mse_loss(a, b), lambda: (rand(3, 4), rand(3, 4))),
        "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), qkv),
        "sdpa-causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), qkv),
        "pad": (lambda x: F.pad(x, (1, 2)), lambda: (rand(3, 4),)),
        "normalize": (lambda x: F.normalize(x, dim=-1), lambda: (rand(3, 4),)),
        "embedding": (lambda i, w: F.embedding(i, w), lambda: (ints(2, 3, high=10), rand(10, 4))),
    }


@pytest.mark.parametrize("name", list(functional_cases()))
def test_nn_functional(name):
    fn, make = functional_cases()[name]
    assert_parity(fn, make)


# ---------------------------------------------------------------- tensor methods


TENSOR_METHODS = {
    "view": lambda x: x.view(4, 6) * 2,
    "view-minus-one": lambda x: x.view(-1),
    "reshape": lambda x: x.reshape(6, -1),
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, 1),
    "transpose-contiguous": lambda x: x.transpose(0, 2).contiguous(),
    "expand": lambda x: x[:, :1].expand(-1, 5, -1),
    "repeat": lambda x: x.repeat(2, 1, 1),
    "masked-fill": lambda x: x.masked_fill(x > 0, 0.0),
    "masked-fill-tensor-mask": lambda x: x.masked_fill(x.sum(-1, keepdim=True) > 0, float("-inf")),
    "sum-keepdim": lambda x: x.sum(dim=1, keepdim=True),
    "sum": lambda x: x.sum(),
    "mean": lambda x: x.mean(dim=-1),
    "mean-all": lambda x: x.mean(),
    "max-dim": lambda x: x.max(dim=1),
    "max-values-indices": lambda x: (x.max(dim=-1).values, x.max(dim=-1).indices),
    "max-unpack": lambda x: _max_unpack(x),
    "to-dtype": lambda x: x.to(torch.float64),
    "to-dtype-kwarg": lambda x: x.to(dtype=torch.float16),
    "long": lambda x: (x * 10).long(),
    "int-float": lambda x: (x * 10).int().float(),
    "bool": lambda x: x.bool(),
    "type": lambda x: x.type(torch.int32),
    "unsqueeze-squeeze": lambda x: x.unsqueeze(0).squeeze(0).unsqueeze(-1),
    "flatten": lambda x: x.flatten(1),
    "clone-detach": lambda x: (x.clone(), x.detach()),
    "chained": lambda x: x.abs().pow(2).exp().clamp_min(1.5).norm(),
    "new-zeros": lambda x: x.new_zeros(2, 3),
}


def _max_unpack(x):
    values, indices = x.max(dim=1)
    return values * 2, indices


@pytest.mark.parametrize("name", list(TENSOR_METHODS))
def test_tensor_methods(name):
    assert_parity(TENSOR_METHODS[name], lambda: (rand(2, 3, 4),))


def test_float_on_int_tensor():
    def f(x):
        return x.float() / 2, x.to(torch.float32).mean()

    assert_parity(f, lambda: (ints(3, 4),))
