"""Attributes of traced tensors: metadata answered from the entry snapshot, view properties as graph ops, ``.grad``
and ``.data`` of inputs read live, attributes a user set on an input tensor."""

from __future__ import annotations

import builtins
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
from .objects import MISSING

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
        return call_tensor_op(tx, "call_function", builtins.getattr, (var, ConstantVariable(name)), {})
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
    attr = getattr(torch.Tensor, name, MISSING)
    if attr is MISSING:
        own = tensor_instance_attr(tx, var, name)
        if own is not MISSING:
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
    trace nothing else can change them: a backward, an optimizer step or a ``.grad =`` breaks the graph, and the
    segment after the break reads them again. ``.data`` of a tensor already written in the trace would give
    the storage's old values to the graph, so that breaks; so does either attribute of a tensor made in the trace
    (its ``.grad`` could only come from a backward, which breaks)."""
    entry = tx.tensor(var)
    live = tx.input_values.get(var.tid)
    if entry.source is None or live is None:
        tx.unsupported("unsupported_attribute", f"reading .{name} of a tensor made inside the compiled function")
    if name == "data" and entry.meta.version != 0:
        tx.unsupported("unsupported_attribute", "reading .data of a tensor written earlier in the trace")
    return wrap(tx, getattr(live, name), AttrSource(entry.source, name))


def tensor_instance_attr(tx: Any, var: TensorVariable, name: str) -> Any:
    """An attribute a graph input tensor carries in its own ``__dict__`` (``t.tag = ...``), guarded; MISSING for
    one it lacks and for tensors made in the trace (the trace never sets one)."""
    entry = tx.tensor(var)
    live = tx.input_values.get(var.tid)
    if entry.source is None or live is None:
        return MISSING
    value = live.__dict__.get(name, MISSING)
    tx.add_guard(Guard(AttrSource(entry.source, "__dict__"), "HAS_KEY", (name, value is not MISSING)))
    return value
