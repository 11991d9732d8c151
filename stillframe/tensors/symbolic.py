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
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import math
import operator
from typing import Any, Callable

import torch

from .. import compat
from ..guards.guard import Guard
from ..guards.source import CallSource, ScalarOutputSource
from ..variables.base import ConstantVariable, SymNodeVariable, TensorVariable, TupleVariable, VariableTracker

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
        if isinstance(value, torch.SymFloat):  # (-0.0: see _exact_float)
            return ConstantVariable(_exact_float(tx, value, plain(value)))
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
    if not _defined(tx, fn, args):  # eager's answer (or error) there, on the values
        operands = [(specialize(tx, a), None) if isinstance(a, SymNodeVariable) else o for a, o in zip(args, operands)]
    try:
        value = fn(*(v for v, _ in operands))
    except (ArithmeticError, TypeError, ValueError) as e:
        tx.user_error(e)
    return sym_or_constant(tx, value, lambda: tx.graph.call_function(fn, tuple(n for _, n in operands), {}, value))


_DIVISIONS = {operator.truediv, operator.floordiv, operator.mod, operator.itruediv, operator.ifloordiv, operator.imod}
_POWERS = {operator.pow, operator.ipow}


def _defined(tx: Any, fn: Any, args: tuple) -> bool:
    """Whether a symbolic plan computes ``fn(*args)`` as eager does for every value its guards let through:
    a division needs a divisor other than 0 (eager raises ``ZeroDivisionError``, a backend's tensor ops give an
    infinity), a float power a base above 0 (torch's symbolic power refuses a negative base: Python's answer
    is complex there, and ``0.0 ** -1`` raises). The plan guards that (``Ne(L['r'], 0)``); where it does not
    hold now, the operands are specialized."""
    if len(args) != 2 or not any(isinstance(a, SymNodeVariable) for a in args):
        return True
    if fn in _DIVISIONS and isinstance(args[1], (SymNodeVariable, ConstantVariable)):
        return _holds(tx, operator.ne, args[1]) is not False
    if fn in _POWERS:
        base, exponent = args
        float_power = float in (_kind(base), _kind(exponent)) or _holds(tx, operator.lt, exponent) is not False
        return not float_power or _holds(tx, operator.gt, base) is not False
    return True


def _holds(tx: Any, op: Any, var: VariableTracker) -> bool | None:
    """``op(var, 0)``, guarded by the ShapeEnv; ``None`` where no guard can decide it (an unbacked symbol: the
    plan then computes as torch.compile's does)."""
    try:
        return bool(plain(apply(tx, op, (var, ConstantVariable(0))).value))
    except compat.GuardOnDataDependentSymNode:
        return None


def specialize(tx: Any, var: SymNodeVariable) -> Any:
    """The Python value of ``var`` for code that needs a constant; the ShapeEnv records the guard that pins it
    (``L['x'].size()[0] == 3``), so the plan is only used where it holds. A value that depends on tensor data
    (an unbacked symbol: ``t.item()`` under ``capture_scalar_outputs``) cannot be guarded: the graph breaks
    there, as torch.compile breaks it; nor is a float a real step read out of a tensor (a
    ``ScalarOutputSource``): that use breaks the graph too, rather than re-tracing for every new value."""
    if reads_data(tx, var.value):
        tx.unsupported("data_dependent", "a float produced at run time (read from a tensor by .item() or float(t), "
                       "or returned by a call that ran for real) is used in Python code",
                       ("that step runs for real, so the plan does not depend on the value",))
    if isinstance(var.value, torch.SymFloat):
        return _exact_float(tx, var.value, _evaluate(tx, var, plain))
    return truth(tx, var) if isinstance(var.value, torch.SymBool) else _evaluate(tx, var, plain)


def _exact_float(tx: Any, value: torch.SymFloat, evaluated: float) -> float:
    """The value of the SymFloat ``value`` (``evaluated``: what the ShapeEnv made it, guarded) as eager computes
    it: its hint (the live floats put through the same Python arithmetic), not the ShapeEnv's sympy value, which
    has no ``-0.0`` (``str(s)`` of a dynamic float ``-0.0`` was ``'0.0'``, found by a probe). ``==`` cannot tell
    ``-0.0`` from ``0.0``, so a zero also guards the sign of every int and float input it is computed from
    (``sign(L['s']) == -1.0``), and of every one the ShapeEnv has made a constant 0 (``-s`` after ``s == 0.0``
    is a constant whose expression names no input)."""
    hint = value.node.hint
    if type(hint) is not float or type(evaluated) is not float:
        return evaluated
    if hint == 0.0:
        symbols = getattr(value.node, "_expr", value.node.expr).free_symbols  # (before the ShapeEnv replaced them)
        for source, sym, _ in tx.entry_fakes:
            if not isinstance(sym, (torch.SymInt, torch.SymFloat)):
                continue
            if getattr(sym.node, "_expr", None) in symbols or (sym.node.hint == 0 and not compat.is_symbolic(sym)):
                tx.add_guard(Guard(CallSource(source, sign), "EQUALS", sign(sym.node.hint)))
    return hint


def sign(value: float) -> float:
    """``math.copysign(1.0, value)``: ``-1.0`` for a negative number and for ``-0.0``, else ``1.0``."""
    return math.copysign(1.0, value)


def reads_data(tx: Any, value: Any) -> bool:
    """Whether ``value`` is computed from a float a real step read out of a tensor (a ``ScalarOutputSource``
    input: never guarded by value)."""
    data = {compat.symbol_of(sym) for source, sym, _ in tx.entry_fakes if isinstance(source, ScalarOutputSource)}
    return bool(data) and bool(data & value.node.expr.free_symbols)


def truth(tx: Any, var: VariableTracker) -> bool:
    """The truth of a SymBool (or constant) result, guarded by the ShapeEnv (``0.0 <= L['lr']``)."""
    return bool(var.value) if isinstance(var, ConstantVariable) else _evaluate(tx, var, bool)


def _evaluate(tx: Any, var: SymNodeVariable, convert: Callable) -> Any:
    try:
        return convert(var.value)
    except compat.GuardOnDataDependentSymNode:
        tx.unsupported("data_dependent", "Python needs the value of a number read from tensor data (an unbacked "
                       "symbol)", ("the graph so far runs, this step runs for real, tracing resumes",))



INF = float("inf")
FINITE = (-INF, INF, False)
#: The functions of numbers that torch's SymInt / SymFloat compute without specializing, as torch.compile traces
#: them (``math.sqrt`` becomes ``torch._sym_sqrt``, ``abs`` calls ``SymFloat.__abs__``, ``math.floor`` returns a
#: SymInt): each maps to (the function recorded in the graph, the argument's domain ``(low, high, closed)``).
#: Outside its domain eager raises ``ValueError`` / ``OverflowError`` where a backend's tensor ops would give a
#: NaN or an infinity, so the plan guards the argument inside it and the value outside is specialized (the
#: builtin then raises the user's error). ``math.exp``, ``math.log``, ``math.pow`` have no symbolic form in
#: torch: they specialize on the value, as torch.compile's do.
SYMBOLIC_FUNCTIONS: dict[Callable, tuple[Callable, tuple | None]] = {
    math.sqrt: (compat.sym_math[math.sqrt], (0.0, INF, True)),
    math.log2: (compat.sym_math[math.log2], (0.0, INF, False)),
    math.sin: (compat.sym_math[math.sin], FINITE),
    math.cos: (compat.sym_math[math.cos], FINITE),
    math.tan: (compat.sym_math[math.tan], FINITE),
    math.asin: (compat.sym_math[math.asin], (-1.0, 1.0, True)),
    math.acos: (compat.sym_math[math.acos], (-1.0, 1.0, True)),
    math.atan: (compat.sym_math[math.atan], None),
    math.sinh: (compat.sym_math[math.sinh], (-710.0, 710.0, True)),  # math.sinh / cosh overflow just past 710
    math.cosh: (compat.sym_math[math.cosh], (-710.0, 710.0, True)),
    math.tanh: (compat.sym_math[math.tanh], None),
    math.floor: (math.floor, FINITE),  # an int of an infinity is an OverflowError
    math.ceil: (math.ceil, FINITE),
    math.trunc: (math.trunc, FINITE),
    abs: (abs, None),
}


def call(tx: Any, fn: Any, args: list) -> VariableTracker | None:
    """``fn(*args)`` kept symbolic where some argument is a SymInt / SymFloat and torch computes ``fn`` on one
    (:data:`SYMBOLIC_FUNCTIONS`, ``round``, ``pow``, ``min`` / ``max``), as torch.compile traces it; ``None``
    where the caller must specialize (another function, a ``bool`` or non-number argument, a value outside the
    function's domain)."""
    if not any(isinstance(a, SymNodeVariable) for a in args) or any(_kind(a) is None for a in args):
        return None
    if fn is min or fn is max:
        return _min_max(tx, fn, args) if len(args) >= 2 else None
    if fn is round and len(args) in (1, 2):
        return _round(tx, args)
    if fn is pow and len(args) == 2:
        return apply(tx, operator.pow, tuple(args))
    traced, domain = SYMBOLIC_FUNCTIONS.get(fn, (None, None))
    if traced is None or len(args) != 1 or (domain is not None and not _within(tx, args[0], domain)):
        return None
    return apply(tx, traced, tuple(args))


def _round(tx: Any, args: list) -> VariableTracker | None:
    """``round(x)`` (an int: an infinity raises OverflowError) or ``round(x, n)`` for a constant ``n >= 0``
    (``SymInt.__round__`` ignores ``n``, right only where ``n >= 0``; a symbolic ``n`` has no symbolic form)."""
    if len(args) == 2:
        digits = args[1]
        if not isinstance(digits, ConstantVariable) or type(digits.value) is not int or digits.value < 0 or \
                isinstance(args[0], ConstantVariable):
            return None
        return args[0] if _kind(args[0]) is int else apply(tx, round, tuple(args))
    if _kind(args[0]) is int:
        return args[0]
    return apply(tx, round, tuple(args)) if _within(tx, args[0], FINITE) else None


def _kind(var: VariableTracker) -> type | None:
    """``int`` or ``float`` for a number operand (a SymInt / SymFloat, or a constant of exactly that type)."""
    if isinstance(var, SymNodeVariable):
        return {torch.SymInt: int, torch.SymFloat: float}.get(type(var.value))
    if isinstance(var, ConstantVariable) and type(var.value) in (int, float):
        return type(var.value)
    return None


def _within(tx: Any, var: VariableTracker, domain: tuple) -> bool:
    """Whether ``var`` lies in ``domain`` ``(low, high, closed)``; the plan guards the answer: a finite bound
    through the ShapeEnv (``0.0 <= L['lr']``), an infinite open one (which the ShapeEnv assumes of every symbol)
    as a ``FINITE`` guard on each float input the value is computed from. An unbacked float is not in any
    domain that needs such a guard (it has no source to guard)."""
    low, high, closed = domain
    if _kind(var) is float and (low == -INF or high == INF) and not closed:
        if not isinstance(var, SymNodeVariable):
            return math.isfinite(var.value)
        if not _finite_inputs(tx, var.value):
            return False
    below, above = (operator.le, operator.ge) if closed else (operator.lt, operator.gt)
    return all(truth(tx, apply(tx, op, (var, ConstantVariable(bound))))
               for op, bound in ((above, low), (below, high)) if abs(bound) != INF)


def _finite_inputs(tx: Any, value: Any) -> bool:
    """Guard finite every float graph input whose symbol ``value`` (a SymFloat) is computed from; ``False`` when
    ``value`` is not finite now, or depends on a float without a source (an unbacked one)."""
    hint = getattr(value.node, "hint", None)
    if hint is None or not math.isfinite(hint):
        return False
    floats = {compat.symbol_of(sym): source for source, sym, _ in tx.entry_fakes if isinstance(sym, torch.SymFloat)}
    needed = [s for s in value.node.expr.free_symbols if s.is_real and not s.is_integer]
    if any(s not in floats for s in needed):
        return False
    for s in needed:
        tx.add_guard(Guard(floats[s], "FINITE", None))
    return True


def _min_max(tx: Any, fn: Any, args: list) -> VariableTracker:
    """``min(a, b, ...)`` / ``max(...)``: numbers of one kind as ``torch.sym_min`` / ``sym_max`` (torch.compile's
    trace); an int against a float compares, as the builtin does, and keeps the winner's own type (``sym_max``
    would make it a float), guarded on that comparison."""
    best = args[0]
    for var in args[1:]:
        if _kind(var) is _kind(best):
            best = apply(tx, torch.sym_max if fn is max else torch.sym_min, (best, var))
        elif truth(tx, apply(tx, operator.gt if fn is max else operator.lt, (var, best))):
            best = var
    return best



#: add and sub with an ``alpha``: as a method, in place, and as torch functions.
_ALPHA_OPS = {("call_method", name) for name in ("add", "sub", "add_", "sub_", "subtract", "subtract_")} | \
    {("call_function", fn) for fn in (torch.add, torch.sub, torch.subtract)}


def fold_alpha(tx: Any, kind: str, target: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``x.sub_(s, alpha=a)`` as ``x.sub_(s * a)`` where ``s`` is a symbolic float, for a backend that runs
    AOTAutograd: its pass that turns symbolic floats into tensors (torch's ``tensorify_python_scalars``) rebuilds
    such an op from its positional arguments and drops ``alpha``, so the plan computed ``x - s`` (fuzz 34:55;
    torch.compile computes it too). Only on a floating-point ``x`` (on an integer one, eager raises for a float
    alpha). The product is taken in double precision before the op rounds it, where eager rounds ``s`` and ``a``
    first: they may differ in the last bit, as a fused kernel may. Other calls are returned as they are."""
    if "alpha" not in kwargs or len(args) < 2 or (kind, target) not in _ALPHA_OPS or \
            not (isinstance(args[1], SymNodeVariable) and isinstance(args[1].value, torch.SymFloat)):
        return args, kwargs
    if not isinstance(args[0], TensorVariable) or not tx.state.heap[args[0].tid].meta.dtype.is_floating_point:
        return args, kwargs
    other = apply(tx, operator.mul, (args[1], kwargs["alpha"]))
    return (args[0], other, *args[2:]), {k: v for k, v in kwargs.items() if k != "alpha"}
