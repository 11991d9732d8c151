"""Blocks: ``BEFORE_WITH``.

Entering ``with torch.no_grad():`` changes the traced grad mode and records
``torch._C._set_grad_enabled(False)`` in the graph (as torch.compile graphs
do); the ``__exit__`` pushed on the stack restores it when the block's normal
exit calls it. ``torch.autocast`` records ``_enter_autocast`` / ``_exit_autocast``
and propagates fake tensors under the same settings. A context manager whose
``__enter__`` and ``__exit__`` are Python (a user class, ``contextlib.nullcontext``)
is inlined like any method call.
"""

from __future__ import annotations

import torch

from ...variables.base import (
    AutocastExitVariable,
    AutocastVariable,
    ConstantVariable,
    ContextExitVariable,
    GradModeVariable,
)
from ..interpreter import handler
from ...rules.context import _python_context_manager
from ...rules.context import set_grad_mode


@handler("BEFORE_WITH")
def BEFORE_WITH(tx, inst):
    manager = tx.pop()
    if isinstance(manager, AutocastVariable):
        node = tx.graph.call_function(torch.amp.autocast_mode._enter_autocast, manager.args, {}, None)
        tx.state = tx.state.replace(autocast=tx.state.autocast + (manager.args,))
        tx.push(AutocastExitVariable(node, manager.args), ConstantVariable(None))
        return
    if not isinstance(manager, GradModeVariable):
        return _python_context_manager(tx, manager)
    if manager.applied:
        previous = manager.previous
    else:
        previous = tx.state.grad_enabled
        set_grad_mode(tx, manager.mode)
    tx.push(ContextExitVariable(previous), ConstantVariable(None))


