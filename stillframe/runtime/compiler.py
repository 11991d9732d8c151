"""From a live call to a cache entry: trace the frame, build the graph and the plan, call the backend.

``compile_frame(fn, L, G, F, backend, ...)`` is the miss path of the runtime::

    trace  ->  FX graph (tuple output) + guards + result recipe
           ->  backend(gm, example_inputs)
           ->  CacheEntry(check, fetch, compiled, rebuild)

If the trace is unsupported, the entry is an *eager* entry guarded by the
guards collected so far (they describe the path on which tracing failed), so
the same call does not trace again.
"""

from __future__ import annotations

import time
import types
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .. import compat
from ..bytecode.reader import read
from ..errors import GraphBreakKind, Unsupported
from ..guards.guard import Guard, GuardCodegen, aliasing_pattern, compile_guards, tensor_examples
from ..guards.source import (
    AttrSource,
    FunctionSource,
    GetItemSource,
    LocalSource,
    ScalarOutputSource,
    is_user_argument,
)
from ..trace.state import make_frame
from ..variables.base import AutocastExitVariable, LazyArgument
from ..variables.builder import is_lazy_scalar, wrap
from ..rules.attrs import EMPTY_CELLS
from ..trace import ops  # noqa: F401  (registers the opcode handlers)
from ..trace.interpreter import Tracer
from . import live
from .executors import EXECUTORS
from .entry import CacheEntry
from .rebuild import StateCodegen
from ..diagnostics import log


@dataclass
class TraceOutcome:
    entry: CacheEntry
    tracer: Tracer
    trace_seconds: float
    compile_seconds: float


def start_trace(fn: types.FunctionType, L: dict) -> Tracer:
    """A tracer positioned at the first instruction of ``fn`` with the call's arguments bound lazily."""
    code = fn.__code__
    cells = {}
    if fn.__closure__:
        for i, (name, cell) in enumerate(zip(code.co_freevars, fn.__closure__)):
            cells[name] = ("real", cell, GetItemSource(AttrSource(FunctionSource(), "__closure__"), i))
    locals_ = {name: LazyArgument(value, LocalSource(name)) for name, value in L.items()}
    frame = make_frame(read(code), locals_, fn.__globals__, None, fn, FunctionSource(), EMPTY_CELLS.update(cells))
    tracer = Tracer(frame, compat.new_fake_mode(), torch.is_grad_enabled(), EXECUTORS)
    _global_guards(tracer)
    return tracer


def start_resume(cont: live.Continuation, L: dict) -> Tracer:
    """A tracer positioned where a continuation stands after its real step, reading live values from ``L``.

    ``L`` is :func:`stillframe.runtime.live.flatten` of the continuation: stack
    values are wrapped (and guarded) now, locals lazily on first read, and live
    cells are read through their own sources.
    """
    frames = []
    tracer = Tracer(None, compat.new_fake_mode(), torch.is_grad_enabled(), EXECUTORS)
    _global_guards(tracer)
    # the rebuild passes every bound local on, read or not: a plan made where a local was bound (by one
    # branch of an ``if``) must not run where it is unbound
    tracer.add_guard(Guard(None, "GLOBAL", ("live_names", frozenset(L))))
    for i, f in enumerate(cont.frames):
        locals_ = {name: LazyArgument(value, LocalSource(f"{i}:{name}")) for name, value in f.locals.items()}
        cells = {name: ("real", cell, LocalSource(f"{i}:cell:{name}")) for name, cell in f.cells.items()}
        frame = make_frame(read(f.code.code), locals_, f.globals, f.globals_module, None, None,
                           EMPTY_CELLS.update(cells))
        frames.append(frame.with_ip(f.ip))
    tracer.state = tracer.state.replace(frames=tuple(frames))
    read_from_tensor = getattr(cont.reason, "kind", None) == "data_dependent"  # the real step was t.item() ...
    for i, f in enumerate(cont.frames):  # stack values are read by handlers directly: wrap them now
        tracer.state = tracer.state.replace(frames=tracer.state.frames)
        stack = tuple(LazyArgument(v, _stack_source(i, j, v, read_from_tensor and i == len(cont.frames) - 1
                                                    and j == len(f.stack) - 1)) if is_lazy_scalar(v) else
                      wrap(tracer, v, LocalSource(f"{i}:s{j}")) for j, v in enumerate(f.stack))
        yields = None if f.yields is None else tuple(
            wrap(tracer, v, GetItemSource(LocalSource(f"{i}:yields"), k)) for k, v in enumerate(f.yields))
        frames = list(tracer.state.frames)
        frames[i] = frames[i].with_stack(stack)._with(kw_names=tuple(f.kw_names), yields=yields)
        tracer.state = tracer.state.replace(frames=tuple(frames))
    return tracer


def _stack_source(i: int, j: int, value: Any, read_from_tensor: bool) -> LocalSource:
    """Where a resumed trace reads stack slot ``j`` of frame ``i``; a float the real step just read out of a
    tensor is a ScalarOutputSource (never guarded by value)."""
    if read_from_tensor and type(value) is float:
        return ScalarOutputSource(f"{i}:s{j}")
    return LocalSource(f"{i}:s{j}")


def _global_guards(tracer: Tracer) -> None:
    tracer.add_guard(Guard(None, "GLOBAL", ("grad_enabled", torch.is_grad_enabled())))
    tracer.add_guard(Guard(None, "GLOBAL", ("default_dtype", torch.get_default_dtype())))
    tracer.add_guard(Guard(None, "GLOBAL", ("inference_mode", torch.is_inference_mode_enabled())))
    autocast_cpu = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
    tracer.add_guard(Guard(None, "GLOBAL", ("autocast_cpu", autocast_cpu)))
    if autocast_cpu[0]:  # called inside an autocast block: ops propagate under it (the graph runs under it too)
        tracer.state = tracer.state.replace(autocast=(("cpu", autocast_cpu[1], True, None),))


def compile_frame(fn: types.FunctionType, L: dict, G: dict, F: Any, backend: Callable,
                  fullgraph: bool = False) -> TraceOutcome:
    """Trace one call of ``fn`` and build its cache entry (raises Unsupported / UserError from the trace)."""
    return compile_retrying(lambda: start_trace(fn, L), L, G, F, backend, fullgraph, fn)


def compile_retrying(make_tracer: Callable[[], Tracer], L: dict, G: dict, F: Any, backend: Callable,
                     fullgraph: bool, fn: Any = None) -> TraceOutcome:
    """:func:`compile_segment` on a fresh tracer; when a generator stepped by ``next()`` is still suspended
    at the graph break (no real generator can stand for it), trace again draining generators at once."""
    try:
        return compile_segment(make_tracer(), L, G, F, backend, fullgraph, fn)
    except Unsupported as e:
        if e.graph_break.kind is not GraphBreakKind.SUSPENDED_GENERATOR:
            raise
    tracer = make_tracer()
    tracer.lazy_generators = False
    return compile_segment(tracer, L, G, F, backend, fullgraph, fn)


def compile_segment(tracer: Tracer, L: dict, G: dict, F: Any, backend: Callable, fullgraph: bool,
                    fn: Any = None) -> TraceOutcome:
    """Run ``tracer`` to a return or a graph break and build the cache entry for what it traced.

    The entry's plan ends in the function's return value, or -- at a graph
    break -- in a :class:`~stillframe.runtime.live.Continuation` holding the
    live call stack, whose one instruction the runtime then executes for real.
    """
    t0 = time.perf_counter()
    tracer.fullgraph = fullgraph
    top = tracer.state.frames[-1]
    log.event("bytecode", "tracing %s from instruction %d:\n%s", top.code.code.co_qualname, top.ip, top.code.format())
    try:
        result = tracer.run()
        codegen = StateCodegen(tracer)
        if result is not None:
            if tracer.state.autocast and len(tracer.state.autocast) != int(torch.is_autocast_enabled("cpu")):
                tracer.unsupported("global_state", "the function returns inside an autocast block it entered")
            codegen.final = True
            result_expr = codegen.expr(result)
        else:
            # autocast blocks open at the break are closed at the end of this graph and re-entered for real by
            # the plan's exit (codegen of AutocastExitVariable), so the real step runs under them
            for frame in reversed(tracer.state.frames):
                for value in reversed(frame.stack):
                    if isinstance(value, AutocastExitVariable) and value.node is not None:
                        tracer.graph.call_function(torch.amp.autocast_mode._exit_autocast, (value.node,), {}, None)
            result_expr = (f"{codegen.gen.const(live.Continuation)}({codegen.frames()}, "
                           f"{codegen.gen.const(tracer.graph_break)})")
        codegen.side_effects()
        if tracer.state.grad_enabled != torch.is_grad_enabled():
            # leave the grad mode as the traced code left it (as eager does), whatever the backend did
            codegen.gen.lines.append(f"{codegen.gen.const(compat.set_grad_enabled)}({tracer.state.grad_enabled!r})")
    except Exception as e:
        e.tracer = tracer  # the guards collected so far describe the path that failed
        raise
    _add_aliasing_guard(tracer)
    guards = tracer.guards()
    check, guard_source = compile_guards(guards, examples=tensor_examples(guards, L, G, F))
    used_inputs = _drop_unread_placeholders(tracer)
    gm = tracer.graph.finish(tuple(codegen.output_nodes))
    fetch, fetch_source = _fetch_function(tracer, _hoist_grad_mode(gm))
    rebuild, rebuild_source = codegen.function(result_expr)
    t1 = time.perf_counter()
    compiled = None
    if tracer.graph.num_ops() or codegen.output_nodes:
        example_inputs = fetch(L, G, F)
        compiled = backend(gm, [example_inputs[i] for i in used_inputs])
    t2 = time.perf_counter()
    log.graph(fn, gm, guard_source)
    if tracer.graph_break is not None:
        log.event("breaks", "graph break in %s: %s", getattr(fn, "__qualname__", fn), tracer.graph_break.format())
    entry = CacheEntry(check=check, guard_source=guard_source, fetch=fetch, compiled=compiled, rebuild=rebuild,
                       graph_module=gm, rebuild_source=rebuild_source + "\n" + fetch_source,
                       graph_break=tracer.graph_break, guards=guards,
                       used_inputs=None if len(used_inputs) == len(tracer.state.inputs) else tuple(used_inputs))
    return TraceOutcome(entry, tracer, t1 - t0, t2 - t1)


def _drop_unread_placeholders(tracer: Tracer) -> list[int]:
    """Erase graph inputs no node reads (a tensor only read for its shape); return the positions kept.

    The backend never sees them, so an unread input cannot take part in, say,
    AOTAutograd's handling of aliased inputs.
    """
    kept = []
    for i, (_src, tid) in enumerate(tracer.state.inputs):
        node = tracer.tensor_node_of_input(tid)
        if node is not None and not node.users:
            tracer.graph.erase_input(node)
        else:
            kept.append(i)
    return kept


def _add_aliasing_guard(tracer: Tracer) -> None:
    args = [(src, tid) for src, tid in tracer.state.inputs if is_user_argument(src)]
    if len(args) < 2:
        return
    pattern = aliasing_pattern(tuple(tracer.input_values[tid] for _, tid in args))
    tracer.add_guard(Guard(None, "ALIASING", (tuple(src for src, _ in args), pattern)))


def _hoist_grad_mode(gm: torch.fx.GraphModule) -> bool | None:
    """Take the grad-mode switch a graph starts with (a segment resumed inside ``no_grad`` that leaves it) out
    of the graph, to be made before the graph is called: a backend decides at call time whether the call is
    differentiable (AOTAutograd, called with grad off, left an in-place op on an input out of autograd)."""
    mode = None
    for node in list(gm.graph.nodes):
        if node.op == "placeholder":
            continue
        if node.op == "call_function" and node.target is compat.set_grad_enabled and not node.users:
            mode = node.args[0]
            gm.graph.erase_node(node)
            continue
        break
    if mode is not None:
        gm.recompile()
    return mode


def _fetch_function(tracer: Tracer, grad_mode: bool | None = None) -> tuple[Callable, str]:
    gen = GuardCodegen()
    refs = [gen.ref(src) for src, _tid in tracer.state.inputs]
    if grad_mode is not None:
        gen.lines.append(f"{gen.const(compat.set_grad_enabled)}({grad_mode!r})  # the graph's grad mode")
    for src, method, args, kwargs in tracer.state.prologue:
        call_args = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        gen.lines.append(f"{gen.ref(src)}.{method}({', '.join(call_args)})  # prologue")
    text = "def ___fetch(L, G, F):\n"
    text += "".join(f"    {line}\n" for line in gen.lines)
    text += f"    return [{', '.join(refs)}]\n"
    ns = gen.namespace()
    exec(compile(text, "<stillframe fetch>", "exec"), ns)
    return ns.pop("___fetch"), text  # popped: the function and its globals form no reference cycle


def eager_entry(tracer: Tracer | None, reason: str) -> CacheEntry:
    """An entry that runs the function eagerly under the guards collected so far."""
    guards = tracer.guards() if tracer is not None else []
    check, source = compile_guards(guards)
    return CacheEntry(check=check, guard_source=source, eager=True, reason=reason, guards=guards)
