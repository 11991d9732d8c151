"""Context managers: grad mode, autocast, the profiler's ``record_function``, and Python context managers inlined."""

from __future__ import annotations

import contextlib

import torch

from .. import compat
from ..guards.guard import Guard
from ..variables.base import ConstantVariable, UserMethodVariable
from ..variables.builder import wrap
from . import calls, type_checks


def set_grad_mode(tx, mode: bool) -> None:
    """Change the traced grad mode, recording the change in the graph."""
    if mode == tx.state.grad_enabled:
        return
    tx.graph.call_function(compat.set_grad_enabled, (mode,), {}, None)
    tx.state = tx.state.replace(grad_enabled=mode)


def _python_context_manager(tx, manager) -> None:
    """``with obj:`` where ``type(obj).__enter__`` / ``__exit__`` are Python functions: inline both."""
    import contextlib
    import types

    cls = type_checks.python_type_of(tx, manager)
    enter = getattr(cls, "__enter__", None)
    exit_ = getattr(cls, "__exit__", None)
    if isinstance(manager, ConstantVariable) or (issubclass(cls, contextlib._GeneratorContextManager) and
                                                 not tx.lazy_generators) or \
            not isinstance(enter, types.FunctionType) or not isinstance(exit_, types.FunctionType):
        tx.unsupported("unsupported_context_manager", f"`with` on a {cls.__name__}",
                       ("grad-mode, autocast and context managers written as Python classes are supported",))
    result = calls.call_sync(tx, UserMethodVariable(enter, manager), [], {})
    tx.push(UserMethodVariable(exit_, manager), result)


def exit_autocast(tx, exit_var) -> None:
    if exit_var.node is None:
        tx.unsupported("autocast_exit", "leaving an autocast block entered before a graph break",
                       ("the exit runs for real; tracing resumes after it",))
    tx.graph.call_function(torch.amp.autocast_mode._exit_autocast, (exit_var.node,), {}, None)
    tx.state = tx.state.replace(autocast=tx.state.autocast[:-1])


def profiler_off(tx) -> bool:
    """Whether no profiler is active (``torch.autograd._profiler_enabled()`` False), guarded so while it is: the
    calls that act only for an active profiler are no-ops then (:func:`record_function_manager`, and
    ``Optimizer._optimizer_step_code``, the empty method an active profiler's Python tracer hooks); under a
    profiler they run for real, as in eager."""
    if torch.autograd._profiler_enabled():
        return False
    tx.add_guard(Guard(None, "GLOBAL", ("query", (torch.autograd._profiler_enabled, (), False))))
    return True


def record_function_manager(tx, args: list, kwargs: dict):
    """``torch.autograd.profiler.record_function(name, args)`` while no profiler is active: a no-op context
    manager (``contextlib.nullcontext()``), as torch.compile ignores it. Its ``__enter__`` / ``__exit__`` record an
    event only for an active profiler; under one (:func:`profiler_off` False) this returns None and the call runs
    for real, so its events appear as in eager. Only a manager entered right away whose ``__enter__`` result is
    dropped (``with record_function(...):``) is a no-op: one kept (``r = record_function(...)``) or bound
    (``with ... as r``) is the user's to read (``r.name``, ``r.record``), so the call runs for real."""
    frame = tx.frame
    following = [inst.opname for inst in frame.code.instructions[frame.ip:frame.ip + 2]]
    if following != ["BEFORE_WITH", "POP_TOP"] or not profiler_off(tx):
        return None
    return calls.call_sync(tx, wrap(tx, contextlib.nullcontext, None), [], {})
