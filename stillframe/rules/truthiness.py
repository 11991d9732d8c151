"""Truthiness: ``bool(v)`` of a VariableTracker at trace time."""

from __future__ import annotations
from ..variables.builder import wrap
from . import builtin_calls
from ..variables.base import BuiltinVariable
from ..variables.base import ConstantVariable
from ..variables.base import DictVariable
from ..variables.base import LazyArgument
from ..variables.base import ListVariable
from ..variables.base import NNModuleVariable
from ..variables.base import PythonObjectVariable
from ..variables.base import RangeVariable
from ..variables.base import TensorMethodVariable
from ..variables.base import TensorVariable
from ..variables.base import TorchFunctionVariable
from ..variables.base import TupleVariable
from ..variables.base import UserFunctionVariable
from ..variables.base import UserMethodVariable


def truthiness(tx, var) -> bool:
    """``bool(var)`` at trace time, or Unsupported when it depends on tensor data."""
    if isinstance(var, LazyArgument):
        var = wrap(tx, var.value, var.source)
    if isinstance(var, ConstantVariable):
        return bool(var.value)
    if isinstance(var, (TupleVariable, ListVariable, DictVariable)):
        return builtin_calls._len(tx, var) > 0
    if isinstance(var, RangeVariable):
        return bool(var.value)
    if isinstance(var, TensorVariable):
        tx.unsupported("data_dependent", "Python control flow on the value of a tensor (`if tensor:` / bool(tensor))",
                       ("use torch.where, or move the branch out of the compiled function",))
    if isinstance(var, NNModuleVariable):
        if hasattr(type(var.module), "__len__") or hasattr(type(var.module), "__bool__"):
            return bool(builtin_calls._len(tx, var))
        return True
    if isinstance(var, (UserFunctionVariable, UserMethodVariable, TorchFunctionVariable, BuiltinVariable,
                        TensorMethodVariable)):
        return True
    for dunder in ("__bool__", "__len__"):
        result = builtin_calls.call_dunder(tx, var, dunder, [])
        if result is not None:
            return truthiness(tx, result)
    if isinstance(var, PythonObjectVariable):
        cls = type(var.value)
        if getattr(cls, "__bool__", None) is None and getattr(cls, "__len__", None) is None:
            return True
        if isinstance(var.value, (type, type(tx))) or cls.__module__ == "builtins":
            return bool(var.value)
    tx.unsupported("unsupported_condition", f"truth value of a {var.python_type().__name__} value")


def _is_none(var) -> bool:
    return isinstance(var, ConstantVariable) and var.value is None
