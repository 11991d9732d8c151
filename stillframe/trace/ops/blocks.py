"""Blocks: ``BEFORE_WITH`` for grad-mode context managers.

Entering ``with torch.no_grad():`` changes the traced grad mode and records
``torch._C._set_grad_enabled(False)`` in the graph (as torch.compile graphs
do); the ``__exit__`` pushed on the stack restores it when the block's normal
exit calls it. Other context managers are unsupported for now.
"""

from __future__ import annotations

import torch

from ...variables.base import ConstantVariable, ContextExitVariable, GradModeVariable
from ..interpreter import handler


def set_grad_mode(tx, mode: bool) -> None:
    """Change the traced grad mode, recording the change in the graph."""
    if mode == tx.state.grad_enabled:
        return
    tx.graph.call_function(torch._C._set_grad_enabled, (mode,), {}, None)
    tx.state = tx.state.replace(grad_enabled=mode)


@handler("BEFORE_WITH")
def BEFORE_WITH(tx, inst):
    manager = tx.pop()
    if not isinstance(manager, GradModeVariable):
        tx.unsupported("unsupported_context_manager", f"`with` on a {manager.python_type().__name__}",
                       ("grad-mode context managers are supported; others come in a later release",))
    if manager.applied:
        previous = manager.previous
    else:
        previous = tx.state.grad_enabled
        set_grad_mode(tx, manager.mode)
    tx.push(ContextExitVariable(previous), ConstantVariable(None))
