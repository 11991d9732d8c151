"""Context managers: grad mode, autocast, the profiler's ``record_function``, and Python context managers inlined."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib

import torch

from .. import compat
from ..guards.guard import Guard
from ..variables.base import ConstantVariable, InferenceModeExitVariable, InferenceModeVariable, UserMethodVariable
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


def inference_mode_manager(tx, args: list, kwargs: dict):
    """``torch.inference_mode(mode=True)`` (``mode`` a bool; the decorator form ``torch.inference_mode(fn)`` runs
    for real): a manager entered by :func:`enter_inference_mode`."""
    if len(args) + len(kwargs) > 1 or set(kwargs) - {"mode"}:
        tx.unsupported("unsupported_argument", "torch.inference_mode takes one argument, mode")
    arg = args[0] if args else kwargs.get("mode", ConstantVariable(True))
    if not (isinstance(arg, ConstantVariable) and type(arg.value) is bool):
        tx.unsupported("unsupported_argument", "torch.inference_mode(mode) with mode not a bool (the decorator "
                       "form) runs for real")
    return InferenceModeVariable(arg.value)


def enter_inference_mode(tx, manager) -> None:
    """``with torch.inference_mode(mode):``: records ``_enter_inference_mode(mode)`` in the graph (as torch.compile's
    graphs do) and traces the block under the mode: fake tensors made in it are inference tensors, and grad mode
    is ``not mode`` inside, as the C++ guard sets it. Pushes the ``__exit__`` that restores both.

    On a backend that functionalizes the graph (AOTAutograd), entering is a graph break: AOTAutograd traces the
    switch away, so its graph would run the block's ops outside inference mode (torch.compile's results then are
    not inference tensors where eager's are, and a view made in the block fails to compile). The block is entered
    for real, and its body is a graph of its own, called in inference mode."""
    if tx.functional_backend:
        tx.unsupported("global_state", "entering torch.inference_mode() on a backend that functionalizes the graph "
                       "(AOTAutograd would run the block outside inference mode)",
                       ("the block is entered for real; its body is traced as a graph called in inference mode",
                        "the \"eager\" backend keeps the block in one graph"))
    previous = (tx.state.inference_mode, tx.state.grad_enabled)
    node = tx.graph.call_function(compat.enter_inference_mode, (manager.mode,), {}, None)
    tx.state = tx.state.replace(inference_mode=manager.mode, grad_enabled=not manager.mode)
    tx.push(InferenceModeExitVariable(node, manager.mode, previous), ConstantVariable(None))


def exit_inference_mode(tx, exit_var) -> None:
    """Leaving an inference-mode block entered in this graph: ``_exit_inference_mode(node)``, and the traced modes
    as they were before it. A block entered before a graph break (re-entered for real by the plan's exit) is left
    by a real step."""
    if exit_var.node is None:
        tx.unsupported("global_state", "leaving a torch.inference_mode() block entered before a graph break",
                       ("the exit runs for real; tracing resumes after it",))
    tx.graph.call_function(compat.exit_inference_mode, (exit_var.node,), {}, None)
    inference_mode, grad_enabled = exit_var.previous
    tx.state = tx.state.replace(inference_mode=inference_mode, grad_enabled=grad_enabled)
