"""Symbolic sizes in the trace: ``SymInt`` values of torch's ShapeEnv as VariableTrackers with FX nodes.

With dynamic shapes (DESIGN invariant 12) a graph input's fake tensor has sizes
such as ``s0`` instead of ``3``. Reading one in Python code gives a
:class:`SymNodeVariable` whose node computes it in the graph::

    n = x.shape[0]          ->  SymNodeVariable(s0, sym_size_int = torch.ops.aten.sym_size.int(x, 0))
    m = n * 2               ->  SymNodeVariable(2*s0, mul = sym_size_int * 2)
    x.new_zeros(m)          ->  new_zeros = x.new_zeros(mul)
    if n > 2: ...           ->  bool(s0 > 2): the ShapeEnv records the guard 2 < L['x'].size()[0]

A size the ShapeEnv knows to be a constant (a 0/1-specialized or static one) is
a plain ``ConstantVariable``. Using a symbolic value where Python needs a
constant (``range(n)``, a dict key) specializes it: ``int(s0)`` records the
guard ``L['x'].size()[0] == 3`` in the ShapeEnv, never silently.
"""

from __future__ import annotations

import operator
from typing import Any

import torch

from .. import compat
from ..variables.base import ConstantVariable, SymNodeVariable, TupleVariable, VariableTracker

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def plain(value: Any) -> Any:
    """A SymInt / SymFloat / SymBool the ShapeEnv has reduced to a constant, as a Python int / float / bool."""
    if isinstance(value, torch.SymBool):
        return bool(value)
    if isinstance(value, torch.SymFloat):
        return float(value)
    if isinstance(value, torch.SymInt):
        return int(value)
    return value


def sym_or_constant(tx: Any, value: Any, make_node: Any) -> VariableTracker:
    """``value`` as a VT: a constant when it is not symbolic, else a SymNodeVariable whose node is
    ``make_node()`` (called only then)."""
    if not compat.is_symbolic(value):
        return ConstantVariable(plain(value))
    return SymNodeVariable(value, make_node())


def size_of(tx: Any, entry: Any, dim: int) -> VariableTracker:
    """``x.shape[dim]`` of the tensor whose heap entry is ``entry``."""
    value = entry.meta.shape[dim]
    lifted = tx.symbol_nodes.get(compat.symbol_of(value))
    if lifted is not None and not getattr(lifted, "_erased", False):  # the graph input passing that symbol
        return SymNodeVariable(value, lifted)
    return sym_or_constant(tx, value, lambda: tx.graph.call_function(compat.sym_size, (_node(tx, entry), dim), {},
                                                                      value))


def shape_of(tx: Any, entry: Any) -> TupleVariable:
    """``x.shape``: a ``torch.Size`` of constants and, with dynamic shapes, SymNodeVariables."""
    return TupleVariable(tuple(size_of(tx, entry, i) for i in range(len(entry.meta.shape))), torch.Size)


def has_symbols(value: Any) -> bool:
    """Whether ``value`` (a result of an op: a size, a tuple of them ...) holds a symbolic value."""
    if isinstance(value, (tuple, list)):
        return any(has_symbols(v) for v in value)
    return compat.is_symbolic(value)


def is_size_value(value: Any) -> bool:
    """Whether ``value`` is a SymInt / SymFloat / SymBool, or a tuple of them and ints (the value of a size node:
    a graph that does not use it can drop it)."""
    if isinstance(value, (tuple, list)):
        return bool(value) and all(isinstance(v, (int, *SYM_TYPES)) for v in value) and \
            any(isinstance(v, SYM_TYPES) for v in value)
    return isinstance(value, SYM_TYPES)


def wrap_symbolic(tx: Any, value: Any, node: Any) -> VariableTracker:
    """The VT of a non-tensor result ``value`` with symbols in it, computed in the graph by ``node``
    (``x.size()`` -> a ``torch.Size`` whose items are ``getitem`` nodes of ``node``)."""
    if isinstance(value, (tuple, list)):
        items = tuple(wrap_symbolic(tx, v, _getitem(tx, node, i, v)) if has_symbols(v) else ConstantVariable(plain(v))
                      for i, v in enumerate(value))
        cls = torch.Size if isinstance(value, torch.Size) else tuple
        return TupleVariable(items, cls) if isinstance(value, tuple) else tx.new_list(items)
    return sym_or_constant(tx, value, lambda: node)


def _getitem(tx: Any, node: Any, i: int, value: Any) -> Any:
    return tx.graph.call_function(operator.getitem, (node, i), {}, value)


def _node(tx: Any, entry: Any) -> Any:
    if entry.node is None:
        tx.unsupported("hidden_base", "reading a symbolic size of the base of an input view that was not passed in")
    return entry.node


def operand(var: VariableTracker) -> tuple[Any, Any] | None:
    """(value, FX argument) of an operand of symbolic arithmetic, or ``None`` when it is neither a
    SymNodeVariable nor a number constant."""
    if isinstance(var, SymNodeVariable):
        return var.value, var.node
    if isinstance(var, ConstantVariable) and type(var.value) in (int, float, bool):
        return var.value, var.value
    return None


def apply(tx: Any, fn: Any, args: tuple) -> VariableTracker:
    """``fn(*args)`` (an ``operator`` function, ``math`` function or builtin) over symbolic operands: evaluated on
    the SymInts (the ShapeEnv computes the expression) and recorded as a graph node; the user's error (a
    ``ZeroDivisionError``, a ``TypeError``) is raised as eager raises it."""
    operands = [operand(a) for a in args]
    if any(o is None for o in operands):
        tx.unsupported("dynamic_shape", f"{getattr(fn, '__name__', fn)} of a symbolic size and a "
                       f"{next(a for a, o in zip(args, operands) if o is None).python_type().__name__}")
    try:
        value = fn(*(v for v, _ in operands))
    except (ArithmeticError, TypeError, ValueError) as e:
        tx.user_error(e)
    return sym_or_constant(tx, value, lambda: tx.graph.call_function(fn, tuple(n for _, n in operands), {}, value))


def specialize(tx: Any, var: SymNodeVariable) -> Any:
    """The Python value of ``var`` for code that needs a constant; the ShapeEnv records the guard that pins it
    (``L['x'].size()[0] == 3``), so the plan is only used where it holds. A value that depends on tensor data
    (an unbacked symbol: ``t.item()`` under ``capture_scalar_outputs``) cannot be guarded: the graph breaks
    there, as torch.compile breaks it."""
    try:
        return plain(var.value) if not isinstance(var.value, torch.SymBool) else bool(var.value)
    except compat.GuardOnDataDependentSymNode:
        tx.unsupported("data_dependent", "Python needs the value of a number read from tensor data (an unbacked "
                       "symbol)", ("the graph so far runs, this step runs for real, tracing resumes",))
