"""Blocks: ``BEFORE_WITH``.

Entering ``with torch.no_grad():`` changes the traced grad mode and records
``torch._C._set_grad_enabled(False)`` in the graph (as torch.compile graphs
do); the ``__exit__`` pushed on the stack restores it when the block's normal
exit calls it. ``torch.inference_mode(mode)`` records ``_enter_inference_mode`` /
``_exit_inference_mode`` and traces the block under the mode (on a backend that runs the graph as written;
on AOTAutograd backends entering it is a graph break: see ``rules/context.py``).
``torch.autocast`` records ``_enter_autocast`` / ``_exit_autocast``
and propagates fake tensors under the same settings, also for an autocast object made before the trace
(``@torch.autocast(...)`` on a function enters the same object on every call). A context manager whose
``__enter__`` and ``__exit__`` are Python (a user class, ``contextlib.nullcontext``)
is inlined like any method call.
"""

from __future__ import annotations
from ...own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import torch

from ...variables.base import (
    AutocastExitVariable,
    AutocastVariable,
    ConstantVariable,
    ContextExitVariable,
    GradModeVariable,
    InferenceModeVariable,
    PythonObjectVariable,
)
from ..interpreter import handler
from ...rules.attrs import getattr_var
from ...rules.context import _python_context_manager
from ...rules.context import enter_inference_mode, set_grad_mode
from ...rules.known import const_value

#: The attributes of a ``torch.autocast`` object that say what entering it does, in ``_enter_autocast``'s order.
_AUTOCAST_SETTINGS = ("device", "fast_dtype", "_enabled", "_cache_enabled")


@handler("BEFORE_WITH")
def BEFORE_WITH(tx, inst):
    manager = tx.pop()
    if isinstance(manager, PythonObjectVariable) and type(manager.value) is torch.autocast:
        # made outside the trace: entered as one made in it, from its settings (each read is guarded)
        manager = AutocastVariable(tuple(const_value(tx, getattr_var(tx, manager, name))
                                         for name in _AUTOCAST_SETTINGS))
    if isinstance(manager, AutocastVariable):
        node = tx.graph.call_function(torch.amp.autocast_mode._enter_autocast, manager.args, {}, None)
        tx.state = tx.state.replace(autocast=tx.state.autocast + (manager.args,))
        tx.push(AutocastExitVariable(node, manager.args), ConstantVariable(None))
        return
    if isinstance(manager, InferenceModeVariable):
        return enter_inference_mode(tx, manager)
    if not isinstance(manager, GradModeVariable):
        return _python_context_manager(tx, manager)
    if manager.applied:
        previous = manager.previous
    else:
        previous = tx.state.grad_enabled
        set_grad_mode(tx, manager.mode)
    tx.push(ContextExitVariable(previous), ConstantVariable(None))


