"""Attributes of traced tensors: metadata answered from the entry snapshot, view properties as graph ops, ``.grad``
and ``.data`` of inputs read live, attributes a user set on an input tensor; writes of ``.requires_grad`` and
``.grad``."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from typing import Any

import torch

from .. import compat
from ..guards.guard import Guard
from ..guards.source import AttrSource, GetItemSource
from ..variables.base import (ConstantVariable, PythonObjectVariable, TensorMethodVariable, TensorVariable,
                              VariableTracker)
from ..variables.builder import is_constant, wrap
from ..tensors.ops import call_tensor_op
from ..tensors.symbolic import shape_of
from . import objects

#: Tensor properties that are views of the tensor (graph ops, not metadata).
TENSOR_VIEW_PROPERTIES = {"T", "mT", "H", "mH", "real", "imag"}


def tensor_attr(tx: Any, var: TensorVariable, name: str) -> VariableTracker:
    meta = tx.tensor(var).meta
    if meta.autograd_error is not None and name in ("is_leaf", "grad_fn"):
        tx.user_error(RuntimeError(meta.autograd_error))
    if name in ("shape",):
        return shape_of(tx, tx.tensor(var))
    if name == "ndim":
        return ConstantVariable(len(meta.shape))
    if name == "__class__":
        # an input's own class (Parameter or Tensor: its guard checks it); a tensor made in the trace is a Tensor
        return PythonObjectVariable(type(tx.input_values[var.tid]) if var.tid in tx.input_values else torch.Tensor)
    if name in ("is_leaf", "grad_fn") and meta.grad_fn_pending and _stale(tx, var):
        tx.unsupported("unsupported_attribute", f"reading .{name} of a view that autograd treats as a leaf until "
                       "asked makes its grad_fn (an effect the graph cannot carry)", ("the read runs for real",))
    if name in ("dtype", "device", "layout", "requires_grad", "is_leaf"):
        return ConstantVariable(getattr(meta, name))
    if name == "grad_fn":
        if not meta.has_grad_fn:
            return ConstantVariable(None)
        tx.unsupported("unsupported_attribute", "reading .grad_fn of a tensor that has one")
    if name in TENSOR_VIEW_PROPERTIES:
        return call_tensor_op(tx, "call_function", getattr, (var, ConstantVariable(name)), {})
    if name in ("grad", "data"):
        return _live_tensor_attr(tx, var, name)
    if name == "retains_grad":  # autograd state a fake lacks: an input's own (a write keeps it), False otherwise
        live = tx.input_values.get(var.tid)
        if live is None or tx.tensor(var).source is None:
            return ConstantVariable(False)  # (retain_grad() always runs for real: a graph break)
        return wrap(tx, live.retains_grad, AttrSource(tx.tensor(var).source, "retains_grad"))
    if name == "_base":
        tx.unsupported("unsupported_attribute", "reading ._base of a tensor inside a compiled function")
    if name == "_version":  # the live counter (writes before the call, a fake's own setup writes): read for real
        tx.unsupported("unsupported_attribute", "reading ._version of a tensor inside a compiled function",
                       ("the read runs for real",))
    attr = getattr(torch.Tensor, name, objects.MISSING)
    if attr is objects.MISSING:
        own = tensor_instance_attr(tx, var, name)
        if own is not objects.MISSING:
            return wrap(tx, own, GetItemSource(AttrSource(tx.tensor(var).source, "__dict__"), name))
        tx.user_error(AttributeError(f"'Tensor' object has no attribute '{name}'"))
    if callable(attr) and not isinstance(attr, property):
        return TensorMethodVariable(name, var)
    value = getattr(tx.tensor(var).fake, name)
    if is_constant(value):
        return ConstantVariable(value)
    tx.unsupported("unsupported_attribute", f"reading .{name} of a tensor")


def _stale(tx: Any, var: TensorVariable) -> bool:
    with tx.fake_context():
        return compat.is_stale_view(tx.tensor(var).fake)


def _live_tensor_attr(tx: Any, var: TensorVariable, name: str) -> VariableTracker:
    """``.grad`` / ``.data`` of a tensor that entered the trace from outside, untouched so far: the live attribute,
    read through its own source and guarded like any input (``.grad`` is ``None`` or a tensor of this shape;
    ``.data`` shares the storage, does not require grad and has its own version counter, as eager's). Within one
    trace nothing else can change them: a backward, an optimizer step or a ``.grad = t`` breaks the graph, and the
    segment after the break reads them again. ``.data`` of a tensor already written in the trace would give
    the storage's old values to the graph, so that breaks; so does either attribute of a tensor made in the trace
    (its ``.grad`` could only come from a backward, which breaks). A ``.grad`` the trace wrote
    (:func:`store_tensor_attr`) reads as written."""
    entry = tx.tensor(var)
    live = tx.input_values.get(var.tid)
    if entry.source is None or live is None:
        tx.unsupported("unsupported_attribute", f"reading .{name} of a tensor made inside the compiled function")
    written = tx.state.side_effects.get(grad_write_key(live)) if name == "grad" else None
    if written is not None:  # an earlier traced t.grad = None, not yet on the live tensor
        return written[1][1]
    if name == "data" and entry.meta.version != 0:
        tx.unsupported("unsupported_attribute", "reading .data of a tensor written earlier in the trace")
    return wrap(tx, getattr(live, name), AttrSource(entry.source, name))


def tensor_instance_attr(tx: Any, var: TensorVariable, name: str) -> Any:
    """An attribute a graph input tensor carries in its own ``__dict__`` (``t.tag = ...``), guarded; MISSING for
    one it lacks and for tensors made in the trace (the trace never sets one)."""
    entry = tx.tensor(var)
    live = tx.input_values.get(var.tid)
    if entry.source is None or live is None:
        return objects.MISSING
    value = live.__dict__.get(name, objects.MISSING)
    tx.add_guard(Guard(AttrSource(entry.source, "__dict__"), "HAS_KEY", (name, value is not objects.MISSING)))
    return value


def store_tensor_attr(tx: Any, var: TensorVariable, name: str, value: VariableTracker) -> None:
    """``t.name = value`` on a traced tensor: ``requires_grad`` (``t.requires_grad_(value)``, with its errors) and
    ``grad`` (:func:`_store_grad`); any other write breaks the graph and runs for real.

    Raises:
        Unsupported: any other attribute, and the ``.grad`` writes :func:`_store_grad` does not model.
    """
    if name == "requires_grad":
        call_tensor_op(tx, "call_method", "requires_grad_", (var, value), {})
        return
    if name == "grad":
        _store_grad(tx, var, value)
        return
    tx.unsupported("side_effect", f"assigning .{name} of a {var.python_type().__name__} value")


def grad_write_key(live: torch.Tensor) -> tuple:
    """The side-effect key of a traced write of ``live.grad``: an attribute write (``rules/objects.py``), replayed
    after the graph as ``setattr(t, 'grad', value)``."""
    return ("attr", id(live), "grad")


def _store_grad(tx: Any, var: TensorVariable, value: VariableTracker) -> None:
    """``t.grad = None`` on a tensor that entered the trace from outside (a parameter, a graph input): a side effect
    replayed on the live tensor after the graph (``Optimizer.zero_grad()``, ``Module.zero_grad()``, a user's
    ``p.grad = None``), which later reads of ``t.grad`` in the trace see (:func:`_live_tensor_attr`). Eager's
    ``THPVariable_set_grad`` (``torch/csrc/autograd/python_variable.cpp``) resets the grad, on any tensor, and
    touches nothing else: no version counter, no autograd metadata.

    Raises:
        Unsupported: a tensor made in the trace, not a leaf, or of a subclass other than ``Parameter`` (its
            ``__torch_function__`` sees the write); a tensor value (eager checks it against the tensor's
            ``grad_dtype``, size and device, and against the tensor itself: the write runs for real, with eager's
            own ``TypeError`` or ``RuntimeError``) that :func:`_check_grad_value` cannot show eager accepts, or any
            other value (``TypeError`` there).
    """
    entry = tx.tensor(var)
    live = tx.input_values.get(var.tid)
    if entry.source is None or live is None:
        tx.unsupported("side_effect", "assigning .grad of a tensor made inside the compiled function",
                       ("the assignment runs for real",))
    if type(live) not in (torch.Tensor, torch.nn.Parameter):
        tx.unsupported("side_effect", f"assigning .grad of a {type(live).__name__}", ("the assignment runs for real",))
    if not entry.meta.is_leaf:  # (eager warns at every later read of a non-leaf's .grad, which this would answer)
        tx.unsupported("side_effect", "assigning .grad of a tensor that is not a leaf",
                       ("the assignment runs for real",))
    if not (isinstance(value, ConstantVariable) and value.value is None):
        _check_grad_value(tx, var, live, value)
    objects.record_side_effect(tx, grad_write_key(live), (var, value))
    tx.keepalive.append(live)


def _check_grad_value(tx: Any, var: TensorVariable, live: torch.Tensor, value: VariableTracker) -> None:
    """Break the graph unless eager's ``t.grad = value`` (``THPVariable_set_grad``) provably accepts ``value``: a
    plain tensor, not ``t`` itself, of ``t``'s ``grad_dtype`` (guarded: ``None`` accepts any dtype), device and
    layout (strided), and of ``t``'s size, each dimension a plain int on both. Anything else runs for real, with
    eager's error where there is one (``can't assign Variable as its own grad``, ``attempting to assign a gradient
    of size ...``)."""
    entry = tx.tensor(var)
    if not isinstance(value, TensorVariable) or value.python_type() is not torch.Tensor:
        tx.unsupported("side_effect", f"assigning a {value.python_type().__name__} to .grad",
                       ("the assignment runs for real",))
    if value.tid == var.tid:
        tx.unsupported("side_effect", "assigning a tensor as its own .grad (eager raises)",
                       ("the assignment runs for real",))
    grad_dtype = getattr(live, "grad_dtype", entry.meta.dtype)
    if entry.source is not None and hasattr(live, "grad_dtype"):
        tx.add_guard(Guard(AttrSource(entry.source, "grad_dtype"), "EQUALS", grad_dtype))
    meta, own = tx.tensor(value).meta, entry.meta
    same_size = len(meta.shape) == len(own.shape) and all(
        type(a) is int and type(b) is int and a == b for a, b in zip(meta.shape, own.shape))
    if (grad_dtype is not None and meta.dtype != grad_dtype) or meta.device != own.device or \
            meta.layout != torch.strided or own.layout != torch.strided or not same_size:
        tx.unsupported("side_effect", "assigning .grad a tensor whose dtype, device, layout or size eager may refuse",
                       ("the assignment runs for real, with eager's checks",))
