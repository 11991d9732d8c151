"""Truthiness: ``bool(v)`` of a VariableTracker at trace time, one rule per VariableTracker kind."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from . import builtin_calls, type_checks
from .protocol import Protocol
from ..variables.kinds import CALLABLES, CONTEXT_VALUES, INTERNAL
from ..variables.base import (
    ConstantVariable,
    DictVariable,
    NumpyArrayVariable,
    DictViewVariable,
    GeneratorVariable,
    IteratorVariable,
    LazyArgument,
    ListVariable,
    SetVariable,
    DequeVariable,
    LiveIteratorVariable,
    NNModuleVariable,
    PythonObjectVariable,
    RangeVariable,
    SliceVariable,
    TensorVariable,
    TupleVariable,
)
from ..variables.base import is_builtin_class
from ..variables.builder import of_type, wrap
from ..variables.objects import ObjectVariable, SuperVariable


def _refused(tx, var, reason):
    tx.unsupported("unsupported_condition", f"truth value of a {var.python_type().__name__} value: {reason}")


#: ``bool(var)`` at trace time, or Unsupported when it depends on tensor data.
truthiness = Protocol("truthiness", _refused)


@truthiness.rule(LazyArgument)
def _lazy(tx, var):
    return truthiness(tx, wrap(tx, var.value, var.source))


@truthiness.rule(ConstantVariable, RangeVariable)
def _constant(tx, var):
    return bool(var.value)


@truthiness.rule(TupleVariable, ListVariable, DictVariable, SetVariable, DequeVariable, DictViewVariable)
def _sized(tx, var):
    return builtin_calls._len(tx, var) > 0


@truthiness.rule(TensorVariable, NumpyArrayVariable)
def _tensor(tx, var):
    tx.unsupported("data_dependent", "Python control flow on the value of a tensor (`if tensor:` / bool(tensor))",
                   ("use torch.where, or move the branch out of the compiled function",))


@truthiness.rule(NNModuleVariable)
def _module(tx, var):
    if hasattr(type(var.module), "__len__") or hasattr(type(var.module), "__bool__"):
        return bool(builtin_calls._len(tx, var))
    return True


# Objects whose type defines neither __bool__ nor __len__: always true in Python.
@truthiness.rule(*CALLABLES, *CONTEXT_VALUES, SliceVariable, IteratorVariable, LiveIteratorVariable,
                 GeneratorVariable, SuperVariable)
def _always_true(tx, var):
    return True


@truthiness.rule(ObjectVariable, PythonObjectVariable)
def _object(tx, var):
    result = builtin_calls.call_dunder(tx, var, "__bool__", [])
    if result is not None:  # CPython's slot_nb_bool: exactly a bool, else TypeError
        if isinstance(result, ConstantVariable) and type(result.value) is bool:
            return result.value
        if isinstance(result, TensorVariable) or not isinstance(result, (ConstantVariable, ObjectVariable,
                                                                          PythonObjectVariable)):
            tx.unsupported("unsupported_condition", "__bool__ returned a value that is not a Python constant")
        returned = type_checks.python_type_of(tx, result).__name__
        tx.user_error(TypeError(f"__bool__ should return bool, returned {returned}"))
    result = builtin_calls.call_dunder(tx, var, "__len__", [])
    if result is not None:  # CPython's slot_sq_length checks
        return builtin_calls.checked_len(tx, result) > 0
    cls = type_checks.python_type_of(tx, var)
    if getattr(cls, "__bool__", None) is None and getattr(cls, "__len__", None) is None:
        return True
    if isinstance(var, PythonObjectVariable) and of_type(var.value, (dict, list, tuple, set, frozenset)):
        # a live container the trace does not model (a dict keyed by tensors): its length, guarded (bool() was
        # folded from the live value unguarded, and an empty dict passed later took the non-empty branch)
        return builtin_calls._len(tx, var) > 0
    if isinstance(var, PythonObjectVariable) and (of_type(var.value, (type, type(tx)))
                                                  or is_builtin_class(cls)):
        return bool(var.value)
    tx.unsupported("unsupported_condition", f"truth value of a {cls.__name__} value (its __bool__ or __len__ is "
                   "not Python code stillframe can trace)")


truthiness.refuse("CPython's NULL and internal markers are never tested for truth", *INTERNAL)


def _is_none(var) -> bool:
    return isinstance(var, ConstantVariable) and var.value is None
