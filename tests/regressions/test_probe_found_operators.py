"""Regressions found by hand-written parity probes: binary operators and comparisons. CPython tries the right
operand's reflected method first when its type is a proper subclass of the left's (and, for a binary operator,
overrides it), never between operands of one type; ``torch.Size``'s slots make ``(1,) + x.shape`` and
``2 * x.shape`` Sizes and word their own errors; ``l *= n`` repeats a list in place. Each is compared with eager
on both backends."""

from __future__ import annotations

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


def _args(i=0):
    return (torch.randn(2 + i, 3),)


class _V:
    def __init__(self, v):
        self.v = v

    def __add__(self, o):
        return _V(self.v + o.v)


class _W(_V):
    def __radd__(self, o):
        return _W(-1)


class _I(_V):
    def __iadd__(self, o):
        return _V(100)

    def __radd__(self, o):
        return _W(-7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reflected_method_of_a_subclass_runs_first(backend):
    # `V(1) + W(2)` ran V.__add__ (3): W, a subclass of V with its own __radd__, has it tried first (-1)
    def fn(x):
        return x * (_V(1) + _W(2)).v

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reflected_method_of_a_subclass_runs_first_in_place(backend):
    # `+=` tries __iadd__, then the binary rule: `c += I(5)` on a V runs I.__radd__; `b += V(3)` on an I, I.__iadd__
    def fn(x):
        a = _V(1)
        a += _W(2)
        b = _I(1)
        b += _V(3)
        c = _V(1)
        c += _I(5)
        torch._dynamo.graph_break()
        return x * a.v, b.v, c.v, type(a).__name__, type(b).__name__, type(c).__name__

    assert_parity(fn, _args, backend=backend, calls=3)


class _NoAdd:
    def __init__(self, v):
        self.v = v

    def __add__(self, o):
        return NotImplemented

    def __radd__(self, o):
        return _NoAdd(99)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reflected_method_not_tried_between_operands_of_one_type(backend):
    # `a + b` of one type whose __add__ returns NotImplemented ran b.__radd__ (99): eager raises TypeError
    def fn(x):
        try:
            return x, (_NoAdd(1) + _NoAdd(2)).v
        except TypeError as e:
            return x + 1, str(e)

    assert_parity(fn, _args, backend=backend, calls=3)


class _Lt:
    def __lt__(self, o):
        return True


class _Gt(_Lt):
    def __gt__(self, o):
        return False


@pytest.mark.parametrize("backend", BACKENDS)
def test_reflected_comparison_of_a_subclass_runs_first(backend):
    # `Lt() < Gt()` ran Lt.__lt__ (True): Gt, a subclass, has its __gt__ tried first (False)
    def fn(x):
        return x * (_Lt() < _Gt()), _Gt() > _Lt(), _Lt() > _Gt()

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuple_plus_size_is_a_size(backend):
    # `(1,) + x.shape` and `() + x.shape` gave a plain tuple: torch.Size's nb_add makes a Size of two tuples
    def fn(x):
        a = (1,) + x.shape
        b = () + x.shape
        print(end="")
        c = (1,) + x.shape[1:]
        t = (5,)
        t += x.shape
        return x.reshape(a), a, b, c, t, x.shape + (1,)

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_times_size_is_a_size(backend):
    # `2 * x.shape` gave a plain tuple: the right side's sq_repeat is torch.Size's, which makes a Size
    def fn(x):
        n = 3
        n *= x.shape
        return x, 2 * x.shape, True * x.shape, x.shape * 2, n

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", range(6))
def test_failing_operators_on_a_size_raise_eagers_error(backend, case):
    # the messages named `Size` in tuple's and list's words (`can only concatenate Size (not "list") to Size`);
    # `x.shape * 2.5` fell back to eager with an internal error
    def fn(x):
        thunks = (lambda: [1] + x.shape, lambda: x.shape + [1], lambda: x.shape[1:] + None, lambda: x.shape * 2.5,
                  lambda: x.shape * x.shape, lambda: [1] * x.shape)
        try:
            return x, thunks[case]()
        except TypeError as e:
            return x + 1, str(e)

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_repeat_in_place_keeps_the_list(backend):
    # `l *= 2` made a new list: the list is repeated in place, so another name for it sees the change
    def fn(x):
        l = [x, 1]
        m = l
        l *= 2
        return l, m, l is m

    assert_parity(fn, _args, backend=backend, calls=3)


_INTEGER_DIVISIONS = {
    "floordiv_by_zero": lambda xi, z: xi // 0,
    "mod_by_zero_tensor": lambda xi, z: xi % z,
    "reflected_floordiv": lambda xi, z: 3 // z,
    "fmod": lambda xi, z: torch.fmod(xi, z),
    "remainder_in_place": lambda xi, z: xi.clone().remainder_(0),
    "div_floor": lambda xi, z: torch.div(xi, z, rounding_mode="floor"),
    "div_trunc_method": lambda xi, z: xi.div(0, rounding_mode="trunc"),
    "floordiv_in_place": lambda xi, z: xi.clone().__ifloordiv__(z),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(_INTEGER_DIVISIONS))
def test_integer_division_by_zero_inside_try(backend, case):
    # integer tensors divided by 0 raise "ZeroDivisionError" in eager; the fake kernels do not, so the graph raised
    # after the trace had left the user's try: the call ran again for real with a warning calling it a divergence.
    # Inside a try such a division now runs for real (tensors/effects.INTEGER_DIVISIONS), as an index out of range
    op = _INTEGER_DIVISIONS[case]

    def fn(xi, z):
        out = [xi + 1]
        try:
            out.append(op(xi, z))
        except RuntimeError as e:
            out.append(str(e))
        return out

    assert_parity(fn, lambda: (torch.arange(4), torch.zeros(4, dtype=torch.long)), backend=backend, calls=3,
                  grad=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_division_by_zero_outside_try_raises_eagers_error(backend):
    # no try: the graph raises, the call runs again for real and raises eager's error (no warning); unused, the
    # division is kept by AOTAutograd backends all the same (runtime/compiler._keep_raising_ops)
    def fn(xi, z):
        xi.add_(1)
        xi // z
        return xi * 2

    assert_parity(fn, lambda: (torch.arange(4), torch.zeros(4, dtype=torch.long)), backend=backend, calls=3,
                  grad=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_division_that_cannot_raise_stays_in_the_graph(backend):
    # float division, or an integer one by a nonzero constant, never raises: one graph, no break inside the try
    def fn(xi, xf):
        try:
            return xi // 2 + xi % 3, xf // 0, torch.div(xi, 0)
        except RuntimeError:
            return None

    compiled = stillframe.compile(fn, backend=backend)
    args = (torch.arange(4), torch.randn(4))
    assert_parity(fn, lambda: args, compiled=compiled, calls=2, grad=False)
    assert stillframe.explain(fn, backend=backend)(*args).break_count == 0
