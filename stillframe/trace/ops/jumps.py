"""Jumps: ``POP_JUMP_IF_*``, ``JUMP_IF_*_OR_POP``, ``JUMP_FORWARD`` / ``JUMP_BACKWARD``.

A condition must be known at trace time (a Python constant, ``None``-ness, a
shape, a module flag); a condition on tensor *data* is data-dependent control
flow and is unsupported (a graph break in a later release).
"""

from __future__ import annotations

from ...variables.base import (
    LazyArgument,
    BuiltinVariable,
    ConstantVariable,
    DictVariable,
    ListVariable,
    NNModuleVariable,
    PythonObjectVariable,
    RangeVariable,
    TensorMethodVariable,
    TensorVariable,
    TorchFunctionVariable,
    TupleVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from ..interpreter import handler


def truthiness(tx, var) -> bool:
    """``bool(var)`` at trace time, or Unsupported when it depends on tensor data."""
    from ...variables.calls import _len

    if isinstance(var, LazyArgument):
        from ...variables.builder import wrap

        var = wrap(tx, var.value, var.source)
    if isinstance(var, ConstantVariable):
        return bool(var.value)
    if isinstance(var, (TupleVariable, ListVariable, DictVariable)):
        return _len(tx, var) > 0
    if isinstance(var, RangeVariable):
        return bool(var.value)
    if isinstance(var, TensorVariable):
        tx.unsupported("data_dependent", "Python control flow on the value of a tensor (`if tensor:` / bool(tensor))",
                       ("use torch.where, or move the branch out of the compiled function",))
    if isinstance(var, NNModuleVariable):
        if hasattr(type(var.module), "__len__") or hasattr(type(var.module), "__bool__"):
            return bool(_len(tx, var))
        return True
    if isinstance(var, (UserFunctionVariable, UserMethodVariable, TorchFunctionVariable, BuiltinVariable,
                        TensorMethodVariable)):
        return True
    from ...variables.calls import call_dunder

    for dunder in ("__bool__", "__len__"):
        result = call_dunder(tx, var, dunder, [])
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


@handler("POP_JUMP_IF_TRUE")
def POP_JUMP_IF_TRUE(tx, inst):
    if truthiness(tx, tx.pop()):
        tx.jump(inst)


@handler("POP_JUMP_IF_FALSE")
def POP_JUMP_IF_FALSE(tx, inst):
    if not truthiness(tx, tx.pop()):
        tx.jump(inst)


@handler("POP_JUMP_IF_NONE")
def POP_JUMP_IF_NONE(tx, inst):
    if _is_none(tx.pop()):
        tx.jump(inst)


@handler("POP_JUMP_IF_NOT_NONE")
def POP_JUMP_IF_NOT_NONE(tx, inst):
    if not _is_none(tx.pop()):
        tx.jump(inst)


@handler("JUMP_IF_TRUE_OR_POP")
def JUMP_IF_TRUE_OR_POP(tx, inst):
    if truthiness(tx, tx.peek()):
        tx.jump(inst)
    else:
        tx.pop()


@handler("JUMP_IF_FALSE_OR_POP")
def JUMP_IF_FALSE_OR_POP(tx, inst):
    if not truthiness(tx, tx.peek()):
        tx.jump(inst)
    else:
        tx.pop()


@handler("JUMP_FORWARD")
def JUMP_FORWARD(tx, inst):
    tx.jump(inst)


@handler("JUMP_BACKWARD")
def JUMP_BACKWARD(tx, inst):
    tx.jump(inst)
