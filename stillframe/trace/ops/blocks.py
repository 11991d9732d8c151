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
    UserMethodVariable,
)
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


def _python_context_manager(tx, manager) -> None:
    """``with obj:`` where ``type(obj).__enter__`` / ``__exit__`` are Python functions: inline both."""
    import contextlib
    import types

    from ...variables.calls import call_sync, python_type_of

    cls = python_type_of(tx, manager)
    enter = getattr(cls, "__enter__", None)
    exit_ = getattr(cls, "__exit__", None)
    if isinstance(manager, ConstantVariable) or (issubclass(cls, contextlib._GeneratorContextManager) and
                                                 not tx.lazy_generators) or \
            not isinstance(enter, types.FunctionType) or not isinstance(exit_, types.FunctionType):
        tx.unsupported("unsupported_context_manager", f"`with` on a {cls.__name__}",
                       ("grad-mode, autocast and context managers written as Python classes are supported",))
    result = call_sync(tx, UserMethodVariable(enter, manager), [], {})
    tx.push(UserMethodVariable(exit_, manager), result)


def exit_autocast(tx, exit_var) -> None:
    if exit_var.node is None:
        tx.unsupported("autocast_exit", "leaving an autocast block entered before a graph break",
                       ("the exit runs for real; tracing resumes after it",))
    tx.graph.call_function(torch.amp.autocast_mode._exit_autocast, (exit_var.node,), {}, None)
    tx.state = tx.state.replace(autocast=tx.state.autocast[:-1])
