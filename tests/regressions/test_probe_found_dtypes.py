"""Regressions found by parity probes of dtypes and random draws: NumPy scalars in tensor constructors, in-place ops
whose result an integer or bool tensor cannot hold, and random draws whose result is unused. Each is compared with
eager on both backends."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import stillframe
from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]
DYNAMIC = [None, True]

# NumPy scalars as the traced code finds them: globals (constants of the trace, guarded by type and value)
F64, F32, F16, I32, I8, C64 = np.float64(1.5), np.float32(1.5), np.float16(2.5), np.int32(3), np.int8(1), \
    np.complex64(1 + 1j)


def _numpy_scalars_as_data(x):
    made = (torch.tensor(F64), torch.as_tensor(F16), torch.asarray(I32), torch.tensor([I8, I8]),
            x * torch.tensor(F64), torch.tensor([F16, x.shape[0]]), torch.tensor((F32, 2.5)), x.new_tensor([I8]))
    # (and where torch takes a NumPy scalar as the number it equals, as the graph's code holds it: both orders)
    return made, (F64 * x, x * F64, x + F32, I32 * x, x / F64, F64 < x, x == F16, torch.full((2,), F64),
                  torch.full((2,), F32), x.new_full((2,), I8))


def _numpy_complex_as_a_number(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's ComplexWarning: it takes the real part)
        return x * C64, C64 * x, torch.full((2,), C64)


def _numpy_float_with_an_integer_dtype(x):
    return x + torch.tensor(F32, dtype=torch.int64)


def _float_args(i=0):
    return (torch.tensor([[1.0, -2.0], [3.0, 4.5]]) + i,)


def _half_args(i=0):
    return (torch.tensor([[1.0, -2.0], [3.0, 4.5]], dtype=torch.float16) + i,)


def _int_args(i=0):
    return (torch.tensor([[1, -2], [3, 4]]) + i,)


@pytest.mark.parametrize("make", [_float_args, _half_args, _int_args], ids=["float32", "float16", "int64"])
@pytest.mark.parametrize("fn", [_numpy_scalars_as_data, _numpy_complex_as_a_number, _numpy_float_with_an_integer_dtype])
@pytest.mark.parametrize("dynamic", DYNAMIC)
@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_scalars_keep_their_meaning(backend, dynamic, fn, make):
    # the graph's code holds a NumPy scalar as the Python number it equals: torch.tensor(np.float64(1.5)) made a
    # float32 tensor (eager: float64, the scalar's own dtype; np.int32: int32, not int64), torch.tensor(np.float32(1.5),
    # dtype=torch.int64) made a tensor where eager raises TypeError, and x * np.complex64(1+1j) a complex product
    # where torch takes the real part of a NumPy complex
    assert_parity(fn, make, backend=backend, calls=2, compile_kwargs={"dynamic": dynamic})


def _mul_input(xi, x):
    xi.mul_(1.5)
    return xi


def _imul_made_inside(xi, x):
    y = torch.arange(4)
    y *= 1.5
    return y


def _imul_numpy_scalar(xi, x):
    y = xi * 1
    y *= F64
    return y


def _mul_float_tensor_into_bool(xi, x):
    mask = x > 0
    mask.mul_(x)
    return mask


def _caught_inside(xi, x):
    y = xi * 2
    z = x * 2
    try:
        y.mul_(1.5)
        return y, "wrote"
    except RuntimeError as e:
        return z + 1, type(e).__name__


def _add_float_alpha(xi, x):
    y = xi + 1
    y.add_(xi, alpha=0.5)
    return y


def _add_bool_alpha(xi, x):
    m = x > 0
    torch.add(m, m, alpha=0.5)  # (its result unused: AOTAutograd dropped the op, and eager's error with it)
    return m


def _sub_complex_alpha(xi, x):
    return x.clone().sub_(x, alpha=1j)


def _add_complex_into_ints(xi, x):
    y = xi * 1
    y.add_(1j)
    return y


def _logit_of_ints(xi, x):
    return xi.clone().logit_()


def _sub_bools(xi, x):
    m = x > 0
    m.sub_(m)  # (the fake kernel of sub_ takes bools; AOTAutograd's functional sub refused them: BackendCompilerFailed)
    return m


def _ints_and_floats(i=0):
    return torch.arange(4) + i, torch.tensor([1.5, -2.0, 0.5, 3.0]) + i


@pytest.mark.parametrize("fn", [_mul_input, _imul_made_inside, _imul_numpy_scalar, _mul_float_tensor_into_bool,
                                _caught_inside, _add_float_alpha, _add_bool_alpha, _sub_complex_alpha,
                                _add_complex_into_ints, _logit_of_ints, _sub_bools])
@pytest.mark.parametrize("dynamic", DYNAMIC)
@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_result_that_cannot_be_cast_raises(backend, dynamic, fn):
    # the fake kernels of mul_ (add_/sub_ with a complex operand, logit_) do not check that the result's dtype can
    # be cast to the tensor written, nor do add/sub check alpha: the trace recorded the op, and AOTAutograd's
    # functional mul + copy_ cast it silently (eager: "result type Float can't be cast to the desired output type
    # Long"), or handed the backend a float alpha on integers (BackendCompilerFailed)
    assert_parity(fn, _ints_and_floats, backend=backend, calls=2, compile_kwargs={"dynamic": dynamic})


def _rand_unused(x):
    torch.rand(3)
    return x + torch.rand(x.shape[0])


def _randn_like_unused(x):
    torch.randn_like(x)
    return x * torch.randn(x.shape[0])


def _dropout_unused(x):
    F.dropout(x, 0.5, training=True)
    return x + torch.rand(x.shape[0])


def _randint_unused(x):
    torch.randint(0, 10, (3,))
    return x + torch.randint(0, 10, (x.shape[0],))


def _in_place_draw_unused(x):
    torch.empty(3).uniform_()
    torch.bernoulli(torch.full((2,), 0.5))
    return x * 2


def _draw_only(x):
    torch.rand(x.shape[0])
    return x.sum()


RANDOM = [_rand_unused, _randn_like_unused, _dropout_unused, _randint_unused, _in_place_draw_unused, _draw_only]


@pytest.mark.parametrize("fn", RANDOM)
@pytest.mark.parametrize("dynamic", [None, True, False])
@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_random_draw_is_kept(backend, dynamic, fn):
    # with dynamic=True, AOTAutograd's dead-code pass (torch.fx's, under a TracingContext, which keeps random ops
    # only with inductor's fallback_random) dropped the draw whose result is unused: every later draw, in the graph
    # and after it, gave other numbers than eager's
    assert_parity(fn, lambda i=0: (torch.randn(5) + i,), backend=backend, calls=2, compile_kwargs={"dynamic": dynamic})
    compiled = stillframe.compile(fn, backend=backend, dynamic=dynamic)
    for size in (5, 7):
        x = torch.randn(size)
        torch.manual_seed(1)
        want = fn(x), torch.rand(4)
        torch.manual_seed(1)
        got = compiled(x), torch.rand(4)
        torch.testing.assert_close(got, want, rtol=0, atol=0)  # the generator after the call too


def test_unused_random_draw_in_a_graph_with_a_higher_order_op():
    # a static graph with cond compiles under a TracingContext too (compat.static_backend_context)
    def fn(x):
        torch.rand(3)
        y = torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1, (x,))
        return y + torch.rand(x.shape[0])

    assert_parity(fn, lambda i=0: (torch.randn(5) + i,), backend="aot_eager", calls=2)
