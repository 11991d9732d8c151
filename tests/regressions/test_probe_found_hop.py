"""Regressions found by hand-written parity probes of higher-order operators and autograd extension points
(session 31). Each is compared with eager on both backends."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.library import custom_op

from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


class _RoundSTE(torch.autograd.Function):
    """A straight-through estimator: its backward and jvp rules are not its forward's derivative."""

    @staticmethod
    def forward(x):
        return x.round()

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def jvp(ctx, t):
        return t


class _Double(torch.autograd.Function):
    """A Function with a batching rule of its own (deliberately not its forward's)."""

    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * 2

    @staticmethod
    def vmap(info, in_dims, x):
        return x * 3, in_dims[0]


class _OldStyle(torch.autograd.Function):
    """forward(ctx, ...) with no setup_context: functorch transforms refuse it."""

    @staticmethod
    def forward(ctx, x):
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        return g


def _ste_grad(x):
    return torch.func.grad(lambda a: (_RoundSTE.apply(a) * a).sum())(x)


def _ste_jvp(x):
    return torch.func.jvp(_RoundSTE.apply, (x,), (torch.ones_like(x),))[1]


def _vmap_rule(x):
    return torch.func.vmap(_Double.apply)(x)


def _old_style_grad(x):
    return torch.func.grad(lambda a: _OldStyle.apply(a).sum())(x)


@pytest.mark.parametrize("fn", [_ste_grad, _ste_jvp, _vmap_rule, _old_style_grad])
@pytest.mark.parametrize("backend", BACKENDS)
def test_function_inside_a_func_transform_uses_its_own_rules(backend, fn):
    # inside a torch.func body (speculated on tensors needing no grad) the Function's forward was inlined, so the
    # transform differentiated or batched the forward's ops: grad and jvp of a straight-through estimator were
    # zeros, a vmap rule was ignored, and an old-style Function returned values where eager raises. A Function
    # applied there now breaks, and the transform runs for real
    assert_parity(fn, lambda i=0: (torch.tensor([0.2, 1.7, -2.4]) + i,), backend=backend, calls=2)


class _Bad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        raise ValueError("bad input")

    @staticmethod
    def backward(ctx, g):
        return g


def _raising_forward_in_try(x):
    try:
        return _Bad.apply(x) + 1
    finally:
        torch.is_grad_enabled()


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_whose_forward_raises_leaves_grad_mode(backend):
    # the forward runs under no_grad; when it raised inside a try block, the trace's grad mode stayed off, and
    # the call left grad mode disabled for the whole process (parity checks the grad mode after the call)
    assert_parity(_raising_forward_in_try, lambda i=0: (torch.ones(2) + i,), backend=backend, calls=2)


class _SinSavedForForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def jvp(ctx, t):
        x, = ctx.saved_tensors
        return t * x.cos()


def _save_for_forward(x):
    with fwAD.dual_level():
        return _SinSavedForForward.apply(x) + 1


def _tangent_through_jvp_rule(x):
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones_like(x))
        return fwAD.unpack_dual(_SinSavedForForward.apply(dual)).tangent * 1


@pytest.mark.parametrize("fn", [_save_for_forward, _tangent_through_jvp_rule])
@pytest.mark.parametrize("backend", BACKENDS)
def test_function_saving_for_forward(backend, fn):
    # ctx.save_for_forward: the traced ctx had no such method, and stillframe's AttributeError reached the user
    # (with grad mode left off). A Function taking part in forward-mode AD now runs for real
    assert_parity(fn, lambda i=0: (torch.ones(2) + i,), backend=backend, calls=2)


@custom_op("stillframe_test::sin_plus", mutates_args=())
def _sin_plus(x: torch.Tensor) -> torch.Tensor:
    return x.sin() + 1


@_sin_plus.register_fake
def _(x):
    return torch.empty_like(x)


@custom_op("stillframe_test::add_into", mutates_args=("out",))
def _add_into(x: torch.Tensor, out: torch.Tensor) -> None:
    out.add_(x)


def _custom_ops(x, o):
    _add_into(x, o)
    return _sin_plus(x) * o


@pytest.mark.parametrize("backend", BACKENDS)
def test_custom_ops(backend):
    # a torch.library.custom_op object reached FX as the call target (it has no __name__), and the op writing
    # its `out` was not known to write it: an internal error each, and the function ran eagerly with a warning.
    # The op object is its OpOverload now, whose schema says what it writes
    assert_parity(_custom_ops, lambda i=0: (torch.ones(3) + i, torch.zeros(3)), backend=backend, calls=2)


class _KeywordOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, *, k=2.0):
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g


def _apply_with_a_keyword_only_argument(x):
    try:
        return _KeywordOnly.apply(x, k=3.0)
    except TypeError as e:
        return x - 1, str(e)


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_apply_with_a_keyword_only_argument(backend):
    # eager's apply binds keywords to forward's positions, and a keyword-only parameter has none: TypeError. The
    # trace called forward with the keyword and returned x * 3 (found by a probe). Such a call runs for real now
    assert_parity(_apply_with_a_keyword_only_argument, lambda i=0: (torch.ones(2) + i,), backend=backend, calls=2)
