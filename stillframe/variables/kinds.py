"""Groups of VariableTracker kinds that protocol tables (``stillframe.rules``) treat alike."""

from __future__ import annotations

from .base import (
    AutocastExitVariable,
    AutocastVariable,
    BuiltinVariable,
    CellVariable,
    ContextExitVariable,
    GradModeVariable,
    InferenceModeExitVariable,
    InferenceModeVariable,
    NestedFunctionVariable,
    NullVariable,
    PartialVariable,
    TensorMethodVariable,
    TorchFunctionVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from .objects import ContainerMethodVariable, _Deleted

#: Never a value of the user's program: CPython's NULL, a cell, a deleted-attribute marker.
INTERNAL = (NullVariable, CellVariable, _Deleted)
#: Functions and bound methods of every origin.
CALLABLES = (UserFunctionVariable, UserMethodVariable, NestedFunctionVariable, PartialVariable, TorchFunctionVariable,
             TensorMethodVariable, BuiltinVariable, ContainerMethodVariable)
#: The objects of grad-mode, inference-mode and autocast blocks and their ``__exit__``.
CONTEXT_VALUES = (GradModeVariable, ContextExitVariable, AutocastVariable, AutocastExitVariable, InferenceModeVariable,
                  InferenceModeExitVariable)
