"""Dtype checks eager makes before an op runs that torch's fake kernels skip.

A fake kernel that accepts what the real one refuses makes the trace record an op eager raises for; a backend that
runs the graph as it is raises at run time, but AOTAutograd functionalizes ``x.mul_(1.5)`` into ``mul`` and a copy
that casts, so an integer ``x`` silently holds a rounded product where eager raises ``result type Float can't be
cast to the desired output type Long`` (found by a probe). What this module finds is not raised in the trace: the
op runs for real (``UserError(traceable=False)``), so eager's own error, or its result, is what the user sees.

- An in-place op writes its result into its first argument, which must be able to hold the result's dtype: the
  fake kernels of ``mul_`` (and ``__imul__``, ``operator.imul``), of ``add_`` / ``sub_`` with a complex operand,
  of ``logit_`` and ``ldexp_`` do not check (torch 2.13). The result's dtype is the out-of-place op's, on the
  same fakes; where that refuses them (``m.sub_(m)`` on a bool ``m``, whose fake kernel takes it), so does eager.
- ``add`` / ``sub`` check their ``alpha`` against the result's dtype (ATen's ``alpha_check``); no fake kernel
  does.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import operator
import warnings
from typing import Any, Callable

import torch

# Python's in-place operators and their out-of-place forms (``operator.setitem`` has none).
_OUT_OF_PLACE_OPERATORS = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv, operator.imod: operator.mod,
    operator.ipow: operator.pow, operator.imatmul: operator.matmul, operator.iand: operator.and_,
    operator.ior: operator.or_, operator.ixor: operator.xor, operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift,
}

# In-place methods whose out-of-place namesake is not their functional form (``Tensor.resize`` is a deprecated
# op of its own that warns), or that change no values (nothing to cast).
_NO_COUNTERPART = frozenset({"resize_", "resize_as_", "requires_grad_", "share_memory_", "detach_", "set_",
                             "retain_grad_"})

# Where a torch function ``name_`` may live next to its out-of-place ``name``.
_NAMESPACES = (torch, torch.Tensor, torch.nn.functional)

_ALPHA_METHODS = frozenset({"add", "add_", "sub", "sub_", "subtract", "subtract_"})
_ALPHA_FUNCTIONS = frozenset({torch.add, torch.sub, torch.subtract, torch.Tensor.add, torch.Tensor.add_,
                              torch.Tensor.sub, torch.Tensor.sub_, torch.Tensor.subtract, torch.Tensor.subtract_})


def out_of_place(kind: str, target: Any) -> tuple[str, Any] | None:
    """``(kind, target)`` of the out-of-place form of the in-place op ``target`` (``Tensor.mul_``: ``mul``,
    ``__imul__``: ``__mul__``, ``operator.imul``: ``operator.mul``, ``torch.relu_``: ``torch.relu``), or
    ``None`` when it is not an in-place op or has no such form."""
    if kind == "call_method":
        if not isinstance(target, str) or target in _NO_COUNTERPART:
            return None
        if target.startswith("__i") and target.endswith("__"):
            name = "__" + target[3:]
        elif target.endswith("_") and not target.startswith("_"):
            name = target[:-1]
        else:
            return None
        return ("call_method", name) if callable(getattr(torch.Tensor, name, None)) else None
    if kind != "call_function":
        return None
    if target in _OUT_OF_PLACE_OPERATORS:
        return "call_function", _OUT_OF_PLACE_OPERATORS[target]
    name = getattr(target, "__name__", None)
    if not isinstance(name, str) or not name.endswith("_") or name.startswith("_") or name in _NO_COUNTERPART:
        return None
    for namespace in _NAMESPACES:
        if getattr(namespace, name, None) is target:
            functional = getattr(namespace, name[:-1], None)
            return ("call_function", functional) if callable(functional) else None
    return None


def cast_refusal(kind: str, target: Any, fake_args: tuple, fake_kwargs: dict,
                 run: Callable[[Callable[[], Any]], Any]) -> RuntimeError | None:
    """Eager's error for the in-place op ``target`` on ``fake_args`` when its result cannot be cast to the dtype of
    the tensor it writes (its first argument), else ``None``. ``run(thunk)`` calls ``thunk`` on the trace's fake
    tensors (fake mode, grad mode, autocast) and returns its result. The out-of-place form runs on the same fakes,
    before the in-place op writes them; where it refuses them, so does eager's in-place op (at worst, the call runs
    for real for nothing: ``b.pow_(True)`` on a bool ``b``, whose out-of-place form is an int64 power)."""
    if not fake_args or not isinstance(fake_args[0], torch.Tensor) or "out" in fake_kwargs:
        return None
    form = out_of_place(kind, target)
    if form is None:
        return None
    form_kind, fn = form
    def thunk() -> Any:
        with torch.no_grad():  # (with grad, reading a view's grad_fn rebuilds it: the fake's autograd state moves)
            if form_kind == "call_method":
                return getattr(fake_args[0], fn)(*fake_args[1:], **fake_kwargs)
            return fn(*fake_args, **fake_kwargs)
    try:
        with warnings.catch_warnings():  # (its warnings, if any, are the real op's to give)
            warnings.simplefilter("ignore")
            result = run(thunk)
    except (RuntimeError, TypeError, ValueError) as e:  # (m.sub_(m) on a bool m: the in-place fake kernel takes it)
        if "data-dependent" in str(e) or "DataDependent" in type(e).__name__:
            return None  # (what depends on data: the in-place op's fake kernel decides)
        return RuntimeError(f"the out-of-place form of the in-place op refuses its arguments: {e}")
    except Exception:  # the in-place op's fake kernel decides
        return None
    written = fake_args[0].dtype
    if isinstance(result, torch.Tensor) and not torch.can_cast(result.dtype, written):
        return RuntimeError(f"result type {_name(result.dtype)} can't be cast to the desired output type "
                            f"{_name(written)}")
    return None


def alpha_refusal(kind: str, target: Any, fake_args: tuple, fake_kwargs: dict) -> RuntimeError | None:
    """ATen's ``alpha_check`` of ``add`` / ``sub`` (``x.add_(y, alpha=0.5)`` on an integer ``x``): the error eager
    raises for ``alpha`` given the dtype of the result, else ``None``."""
    if "alpha" not in fake_kwargs:
        return None
    if not (target in _ALPHA_METHODS if kind == "call_method" else _hashable_in(target, _ALPHA_FUNCTIONS)):
        return None
    other = fake_args[1] if len(fake_args) > 1 else fake_kwargs.get("other")
    if not isinstance(fake_args[0] if fake_args else None, torch.Tensor) or other is None:
        return None
    try:
        dtype = torch.result_type(fake_args[0], other)
    except Exception:  # operands torch refuses: the fake kernel decides
        return None
    alpha = fake_kwargs["alpha"]
    is_bool = isinstance(alpha, (bool, torch.SymBool))
    is_integral = is_bool or isinstance(alpha, (int, torch.SymInt))
    is_complex = isinstance(alpha, complex)
    if is_bool and dtype is not torch.bool:
        return RuntimeError("Boolean alpha only supported for Boolean results.")
    if not (dtype.is_floating_point or dtype.is_complex or is_integral):
        return RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if is_complex and not dtype.is_complex:
        return RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")
    return None


def _hashable_in(target: Any, table: frozenset) -> bool:
    try:
        return target in table
    except TypeError:  # (an unhashable callable)
        return False


_DTYPE_NAMES = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
                torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char",
                torch.uint8: "Byte", torch.bool: "Bool", torch.complex64: "ComplexFloat",
                torch.complex128: "ComplexDouble", torch.complex32: "ComplexHalf"}


def _name(dtype: torch.dtype) -> str:
    """c10's name of ``dtype``, as eager's message spells it (``Long``)."""
    return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))
