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
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import time
import types
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .. import compat
from ..bytecode.reader import read, unsteppable
from ..config import config
from ..errors import (GraphBreak, GraphBreakKind, InternalError, RetraceRunForReal, RetraceSymbolic, Unsupported,
                      UserLocation)
from ..tensors.aot_writes import refuse_bases_remade_as_views, refuse_output_views_of_aliased_written_inputs
from ..tensors.effects import runs_for_real
from ..graph import passes
from ..guards.guard import (Guard, GuardCodegen, aliasing_pattern, compile_guards, finalizer_names, tensor_examples,
                           weak_type_guards)
from ..guards.source import (
    AttrSource,
    FunctionSource,
    GetItemSource,
    LocalSource,
    ScalarOutputSource,
    SizeSource,
    is_user_argument,
)
from ..trace.state import make_frame
from ..tensors import symbolic as symbolic_values
from ..rules.known import live_iterator_index
from ..rules.speculation import draws_random_numbers
from ..tensors.meta import TensorEntry
from ..variables.base import (AutocastExitVariable, InferenceModeExitVariable, LazyArgument, LiveIteratorVariable,
                              SymNodeVariable, TensorVariable)
from ..variables.builder import grad_stand_in, is_lazy_scalar, wrap
from ..rules.frames import EMPTY_CELLS
from ..rules.generators import refuse_unclosed
from ..trace import ops  # noqa: F401  (registers the opcode handlers)
from ..trace.interpreter import Tracer
from . import live
from .function_apply import with_checked_function_apply
from .graph_parts import Part, independent_parts, run_parts, run_prefix, saving_free_prefix
from .input_grads import eager_input_grads
from .executors import EXECUTORS
from .optimizer_step import optimizer_outcome
from .entry import CacheEntry
from .versions import version_plan
from .rebuild import StateCodegen
from .shapes import ShapePolicy
from ..diagnostics import log


@dataclass
class TraceOutcome:
    entry: CacheEntry
    tracer: Tracer | None  # None for an optimizer step (runtime/optimizer_step.py): no bytecode was traced
    trace_seconds: float
    compile_seconds: float


def _fake_mode(shapes: ShapePolicy | None) -> Any:
    """The fake mode of one trace: with a ShapeEnv where the shape policy makes something symbolic, allowing
    unbacked symbols as ``capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops`` say."""
    return compat.new_fake_mode(shapes is not None and shapes.symbolic, config.capture_scalar_outputs,
                                config.capture_dynamic_output_shape_ops)


def start_trace(fn: types.FunctionType, L: dict, shapes: ShapePolicy | None = None) -> Tracer:
    """A tracer positioned at the first instruction of ``fn`` with the call's arguments bound lazily; ``shapes``
    says which input dimensions are symbolic (``None``: all static)."""
    code = fn.__code__
    cells = {}
    if fn.__closure__:
        for i, (name, cell) in enumerate(zip(code.co_freevars, fn.__closure__)):
            cells[name] = ("real", cell, GetItemSource(AttrSource(FunctionSource(), "__closure__"), i))
    locals_ = {name: LazyArgument(value, LocalSource(name)) for name, value in L.items()}
    frame = make_frame(read(code), locals_, fn.__globals__, None, fn, FunctionSource(), EMPTY_CELLS.update(cells))
    tracer = Tracer(frame, _fake_mode(shapes), torch.is_grad_enabled(),
                    EXECUTORS)
    tracer.shapes = shapes
    _global_guards(tracer)
    return tracer


def start_resume(cont: live.Continuation, L: dict, shapes: ShapePolicy | None = None) -> Tracer:
    """A tracer positioned where a continuation stands after its real step, reading live values from ``L``.

    ``L`` is :func:`stillframe.runtime.live.flatten` of the continuation: stack
    values are wrapped (and guarded) now, locals lazily on first read, and live
    cells are read through their own sources.
    """
    frames = []
    tracer = Tracer(None, _fake_mode(shapes), torch.is_grad_enabled(),
                    EXECUTORS)
    tracer.shapes = shapes
    _global_guards(tracer)
    # the rebuild passes every bound local on, read or not: a plan made where a local was bound (by one
    # branch of an ``if``) must not run where it is unbound
    tracer.add_guard(Guard(None, "GLOBAL", ("live_names", frozenset(L))))
    # live values whose collection runs code: the trace breaks where it drops its last reference to one
    finalizers = finalizer_names(L)
    tracer.add_guard(Guard(None, "GLOBAL", ("finalizers", finalizers)))
    tracer.finalizers = frozenset(id(L[name]) for name in finalizers)
    for i, f in enumerate(cont.frames):
        locals_ = {name: LazyArgument(value, (ScalarOutputSource if name in f.data and type(value) is float
                                              else LocalSource)(f"{i}:{name}")) for name, value in f.locals.items()}
        cells = {name: ("real", cell, LocalSource(f"{i}:cell:{name}")) for name, cell in f.cells.items()}
        frame = make_frame(read(f.code.code), locals_, f.globals, f.globals_module, None, None,
                           EMPTY_CELLS.update(cells))
        frames.append(frame.with_ip(f.ip))
    tracer.state = tracer.state.replace(frames=tuple(frames))
    read_from_tensor = _produced_data(cont)
    for i, f in enumerate(cont.frames):  # stack values are read by handlers directly: wrap them now
        tracer.state = tracer.state.replace(frames=tracer.state.frames)
        stack = tuple(LazyArgument(v, _stack_source(i, j, v, read_from_tensor and i == len(cont.frames) - 1
                                                    and j == len(f.stack) - 1)) if is_lazy_scalar(v) else
                      wrap(tracer, v, LocalSource(live.stack_name(i, j))) for j, v in enumerate(f.stack))
        yields = None if f.yields is None else tuple(
            wrap(tracer, v, GetItemSource(LocalSource(live.yields_name(i)), k)) for k, v in enumerate(f.yields))
        frames = list(tracer.state.frames)
        frames[i] = frames[i].with_stack(stack)._with(kw_names=tuple(f.kw_names), yields=yields)
        tracer.state = tracer.state.replace(frames=tuple(frames))
    return tracer


def _produced_data(cont: live.Continuation) -> bool:
    """Whether a float the real step left on top of the stack is data, never guarded by value: read out of a
    tensor (``t.item()``), or returned by a call that ran for real (``random.random()``, ``time.time()``: a
    new value on every call, which a guard would re-trace for until the cache limit)."""
    if getattr(cont.reason, "kind", None) == "data_dependent":
        return True
    frame = cont.frames[-1] if cont.frames else None
    return frame is not None and frame.ip > 0 and frame.code.instructions[frame.ip - 1].opname in _CALLS


_CALLS = frozenset({"CALL", "CALL_FUNCTION_EX", "CALL_KW"})


def _stack_source(i: int, j: int, value: Any, read_from_tensor: bool) -> LocalSource:
    """Where a resumed trace reads stack slot ``j`` of frame ``i``; a float the real step just produced as
    data (see :func:`_produced_data`) is a ScalarOutputSource (never guarded by value)."""
    if read_from_tensor and type(value) is float:
        return ScalarOutputSource(live.stack_name(i, j))
    return LocalSource(live.stack_name(i, j))


def _global_guards(tracer: Tracer) -> None:
    tracer.add_guard(Guard(None, "GLOBAL", ("grad_enabled", torch.is_grad_enabled())))
    tracer.add_guard(Guard(None, "GLOBAL", ("default_dtype", torch.get_default_dtype())))
    tracer.add_guard(Guard(None, "GLOBAL", ("default_device", compat.default_device_context())))
    tracer.add_guard(Guard(None, "GLOBAL", ("inference_mode", torch.is_inference_mode_enabled())))
    autocast_cpu = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
    tracer.add_guard(Guard(None, "GLOBAL", ("autocast_cpu", autocast_cpu)))
    if autocast_cpu[0]:  # called inside an autocast block: ops propagate under it (the graph runs under it too)
        tracer.state = tracer.state.replace(autocast=(("cpu", autocast_cpu[1], True, None),))


def compile_frame(fn: types.FunctionType, L: dict, G: dict, F: Any, backend: Callable,
                  fullgraph: bool = False, shapes: ShapePolicy | None = None) -> TraceOutcome:
    """Trace one call of ``fn`` and build its cache entry (raises Unsupported / UserError from the trace).

    ``opt.step`` of an optimizer class with a rule (``rules/optimizers.py``) is captured by
    :func:`~stillframe.runtime.optimizer_step.optimizer_outcome`. Any other function whose every call must run
    for real (``stillframe.compile(opt.step)``: torch.optim keeps its state in Python objects, see
    ``tensors/effects.py``) is not traced at all: Unsupported, so it runs eagerly, without the per-call guards
    and graph breaks of a plan that would capture nothing.
    """
    captured = optimizer_outcome(fn, L, lambda gm, examples: _call_backend(backend, gm, examples, None), fullgraph,
                                 backend)
    if captured is not None:  # opt.step of SGD, Adam, AdamW: the update in one graph (runtime/optimizer_step.py)
        entry, trace_seconds, compile_seconds = captured
        return TraceOutcome(entry, None, trace_seconds, compile_seconds)
    found = unsteppable(read(fn.__code__))
    if found is not None:  # (except*, type parameters): a graph break inside could not run the rest for real
        raise Unsupported(GraphBreak(GraphBreakKind.UNSUPPORTED_OPCODE, f"the instruction {found.opname} "
                                     f"{found.argval or ''} (except*, or a type parameter) has no real step, so no "
                                     "graph break in this function could run its rest: it runs eagerly",
                                     ("move the construct into a helper function",),
                                     UserLocation(fn.__code__.co_filename, found.lineno)))
    reason = runs_for_real(fn)
    if reason is not None:
        raise Unsupported(GraphBreak(GraphBreakKind.EFFECTFUL_CALL, reason,
                                     ("it runs eagerly; code that calls it can be compiled",),
                                     UserLocation(fn.__code__.co_filename, fn.__code__.co_firstlineno)))
    return compile_retrying(lambda: start_trace(fn, L, shapes), L, G, F, backend, fullgraph, fn, shapes)


def compile_retrying(make_tracer: Callable[[], Tracer], L: dict, G: dict, F: Any, backend: Callable,
                     fullgraph: bool, fn: Any = None, shapes: ShapePolicy | None = None) -> TraceOutcome:
    """:func:`compile_segment` on a fresh tracer; when a generator stepped by ``next()`` is still suspended
    at the graph break (no real generator can stand for it), trace again draining generators at once. A trace
    that writes in place a tensor saved for backward is traced again with the saving calls run for real. A static
    trace that meets a dimension the shape policy makes dynamic is traced again with a ShapeEnv; a backend that
    fails on higher-order ops gets the frame again with those ops as graph breaks, one that specialized floats
    with those floats static. Each retry keeps what the ones before it learned (a trace draining generators
    still takes a backend's request: fuzz 34:68)."""
    rejected: set[str] = set()
    run_for_real: dict = {}  # calls that must run for real (tensors/saved.py), and why
    lazy_generators = True  # False once a generator was suspended at the break: every retry drains them then

    while True:
        tracer = make_tracer()
        tracer.uncaptured_ops = frozenset(rejected)
        tracer.run_for_real = frozenset(run_for_real)
        tracer.run_for_real_why = dict(run_for_real)
        tracer.functional_backend = not compat.is_eager_backend(backend)
        tracer.lazy_generators = lazy_generators
        try:
            # each try starts from the global state as found: a try that failed after its fetch switched grad mode
            # (the graph's mode, for the backend) left the next one comparing its traced mode with that one, and
            # the plan then never switched back (a no_grad block exited after a break stayed off in the caller)
            with compat.global_state_kept():
                return compile_segment(tracer, L, G, F, backend, fullgraph, fn)
        except RetraceRunForReal as e:  # (RetraceSavedTensor too)
            if e.locations <= run_for_real.keys():
                raise InternalError(f"traced again with {e.locations} run for real, the trace asked again") from None
            run_for_real.update(dict.fromkeys(e.locations, e.why))
        except RetraceSymbolic as e:
            if shapes is None or shapes.symbolic:
                raise InternalError(f"a symbolic trace asked to be traced symbolically again: {e}") from None
            log.event("dynamic", "tracing again with symbolic shapes: %s", e)
            shapes.symbolic = True
        except BackendSpecializedFloats as e:
            if shapes is None or not e.sources or e.sources <= shapes.static:
                raise InternalError(f"{e}, and tracing them static did not help") from None
            log.event("dynamic", "tracing again: %s", e)
            shapes.static |= e.sources
        except BackendRejectedOps as e:  # e.g. AOTAutograd's fake while_loop needs a ShapeEnv: break at it instead
            if e.ops <= rejected:
                raise e.__cause__ from None
            rejected |= e.ops
        except Unsupported as e:
            if not lazy_generators or e.graph_break.kind is not GraphBreakKind.SUSPENDED_GENERATOR:
                raise
            lazy_generators = False


class BackendSpecializedFloats(Exception):
    """The backend could not turn some float inputs' uses into tensor ops (AOTAutograd's tensorify pass raised
    ``TensorifyScalarRestartAnalysis``): the frame is traced again with those floats (source names in
    ``sources``) static, as torch.compile restarts its analysis with them specialized."""

    def __init__(self, sources: set) -> None:
        super().__init__(f"the backend specialized the floats {', '.join(sorted(sources))}")
        self.sources = sources


def _float_sources(tracer: Tracer, symbols: set[str]) -> set[str]:
    """The names of the float inputs of ``tracer`` whose symbols (``zf0``) are among ``symbols``."""
    return {src.name for src, sym, _ in tracer.entry_fakes if isinstance(sym, torch.SymFloat)
            and str(getattr(sym.node, "_expr", sym.node.expr)) in symbols}


class BackendRejectedOps(Exception):
    """The backend failed on a graph holding higher-order ops (names in ``ops``): the frame is traced again
    with those calls as graph breaks (they run for real), so the backend's limit costs a break, not the frame."""

    def __init__(self, ops: frozenset) -> None:
        super().__init__(f"the backend failed on a graph with {', '.join(sorted(ops))}")
        self.ops = ops


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
        refuse_unclosed(tracer)
        codegen = StateCodegen(tracer)
        if result is not None:
            if tracer.state.autocast and len(tracer.state.autocast) != int(torch.is_autocast_enabled("cpu")):
                tracer.unsupported("global_state", "the function returns inside an autocast block it entered")
            if tracer.state.inference_mode != torch.is_inference_mode_enabled():
                tracer.unsupported("global_state", "the function returns inside a torch.inference_mode() block it "
                                   "entered")
            codegen.final = True
            result_expr = codegen.expr(result)
        else:
            # autocast and inference-mode blocks open at the break are closed at the end of this graph, innermost
            # first, and re-entered for real by the plan's exit (codegen of AutocastExitVariable,
            # InferenceModeExitVariable), so the real step runs under them
            for frame in reversed(tracer.state.frames):
                for value in reversed(frame.stack):
                    if isinstance(value, AutocastExitVariable) and value.node is not None:
                        tracer.graph.call_function(torch.amp.autocast_mode._exit_autocast, (value.node,), {}, None)
                    if isinstance(value, InferenceModeExitVariable) and value.node is not None:
                        tracer.graph.call_function(compat.exit_inference_mode, (value.node,), {},
                                                   None)
            hints = _dynamic_hints(tracer) if tracer.fake_mode.shape_env is not None else {}
            hints.update(_loop_counter_hint(tracer))
            handling = tracer.state.handling
            # a break inside a traced `except` block: the continuation knows the exception being handled (a bare
            # `raise`, implicit chaining), and runs the rest of the block instruction by instruction (api._resume)
            result_expr = (f"{codegen.gen.const(live.Continuation)}({codegen.frames()}, "
                           f"{codegen.gen.const(tracer.graph_break)}"
                           + (f", dynamic={codegen.gen.const(hints)}" if hints else "")
                           + (f", handling={codegen.expr(handling)}" if handling is not None else "")
                           + ")")
        codegen.side_effects()
        if tracer.state.grad_enabled != torch.is_grad_enabled() or any(
                n.target is compat.set_grad_enabled for n in tracer.graph.graph.nodes):
            # leave the grad mode as the traced code left it (as eager does), whatever the backend did: torch
            # 2.11's AOTAutograd loses a switch the graph ends with (a no_grad block left in the graph, whose entry
            # is hoisted out of it below)
            codegen.gen.lines.append(f"{codegen.gen.const(compat.set_grad_enabled)}({tracer.state.grad_enabled!r})")
    except Exception as e:
        e.tracer = tracer  # the guards collected so far describe the path that failed
        raise
    _add_aliasing_guard(tracer)
    guards = weak_type_guards(tracer.guards())
    symbolic = tracer.fake_mode.shape_env is not None
    if tracer.functional_backend:
        _keep_raising_ops(tracer, codegen.output_nodes)
        refuse_bases_remade_as_views(tracer, codegen.output_nodes)
    if symbolic:
        _drop_dead_symbolic_nodes(tracer, codegen.output_nodes)
    else:
        check, guard_source = compile_guards(guards, examples=tensor_examples(guards, L, G, F))
    used_inputs = _drop_unread_placeholders(tracer)
    gm = tracer.graph.finish(tuple(codegen.output_nodes))
    if tracer.functional_backend:
        refuse_output_views_of_aliased_written_inputs(tracer, gm)
    call_mode = passes.hoist_grad_mode(gm, torch.is_grad_enabled())
    if tracer.functional_backend:
        passes.end_in_call_mode(gm, torch.is_grad_enabled() if call_mode is None else call_mode)
    fetch, fetch_source = _fetch_function(tracer, call_mode)
    rebuild, rebuild_source = codegen.function(result_expr)
    undoable = _without_effects(tracer, gm)
    t1 = time.perf_counter()
    compiled = parts = None
    if tracer.graph.num_ops() or codegen.output_nodes:
        example_inputs = fetch(L, G, F)
        # an input whose .grad lost its shape is handed over as its stand-in: AOTAutograd fakeifies examples,
        # copying .grad, and refuses such a grad (fuzz 22:730); the call itself gets the live tensor
        examples = [_stand_in_or(tracer, example_inputs[i]) for i in used_inputs]
        values = examples  # (this call's values, where a symbolic trace's examples become symbolic below)
        if symbolic:  # a symbol's example is its SymInt, as torch.compile hands it to the backend
            inputs = list(tracer.state.inputs)
            examples = [_symbolic_example(tracer, inputs[i][1], e) for i, e in zip(used_inputs, examples)]
            compat.drop_pending_unbacked(tracer.fake_mode)
            context = compat.backend_context(tracer.fake_mode)
        else:  # higher-order ops: a ShapeEnv, as torch.compile gives (AOTAutograd's fake while_loop needs one)
            hops = passes.higher_order_ops(gm)
            context = compat.static_backend_context(examples) if hops else contextlib.nullcontext()
        one_node = compat.makes_one_autograd_node(backend)
        # on a backend making one autograd node of a graph: the differentiable outputs made by ops that save nothing
        # run as eager ops (a backward may pass them twice), and a node per part that shares no op with the others
        prefix = saving_free_prefix(gm, frozenset(at for _, at in tracer.saved_for_backward),
                                    torch.is_grad_enabled() if call_mode is None else call_mode) \
            if one_node and tracer.functional_backend else None
        rest, rest_examples, rest_live = gm if prefix is None else prefix.rest, examples, values
        parts = independent_parts(rest) if one_node and rest is not None else None
        if prefix is not None and rest is not None:  # (leaves like the other examples: AOTAutograd reads .grad)
            # the part run on this call's values (a symbolic int as its int: an op of a real tensor and a SymInt
            # would pin the symbol); a symbolic trace hands the rest's backend the part's fakes, with the symbolic
            # sizes the rest's other inputs have
            made = prefix.part.gm.forward(*[values[i] for i in prefix.part.inputs])[:prefix.handed]
            rest_live = prefix.rest_args(values, [t.detach().requires_grad_(t.requires_grad) for t in made])
            rest_examples = rest_live
            if symbolic:
                output = next(node for node in prefix.part.gm.graph.nodes if node.op == "output")
                with tracer.fake_mode:
                    rest_examples = prefix.rest_args(examples, [
                        out.meta["val"].detach().requires_grad_(out.meta["val"].requires_grad)
                        for out in output.args[0][:prefix.handed]])
        with context:
            try:
                if rest is None:
                    compiled = None
                elif parts is None:
                    compiled = _call_backend(backend, rest, rest_examples, tracer)
                else:
                    compiled = run_parts(parts, [_compile_part(tracer, backend, part, rest_examples, rest_live)
                                                 for part in parts], rest)
            except Exception as e:
                freed = _grads_that_freed_outputs(gm, e)
                if freed:
                    raise RetraceRunForReal(freed, "torch.autograd.grad in a graph whose outputs require grad, "
                                            "which AOTAutograd cannot differentiate") from e
                ops = passes.higher_order_ops(gm)
                if not ops:
                    raise
                raise BackendRejectedOps(ops) from e  # retried with those ops as graph breaks
        if tracer.functional_backend and parts is None and rest is not None:
            compiled = eager_input_grads(rest, compiled, lambda node: _root_of(tracer, node), rest_live)
        if prefix is not None:
            compiled = run_prefix(prefix, compiled)
    t2 = time.perf_counter()
    if symbolic:  # after the backend: what it specialized (inductor may) is guarded too
        guards = guards + _shape_guards(tracer)
        check, guard_source = compile_guards(guards, examples=tensor_examples(guards, L, G, F))
    log.graph(fn, gm, guard_source)
    if tracer.graph_break is not None:
        log.event("breaks", "graph break in %s: %s", getattr(fn, "__qualname__", fn), tracer.graph_break.format())
    entry = CacheEntry(check=check, guard_source=guard_source, fetch=fetch, compiled=compiled, rebuild=rebuild,
                       graph_module=gm, rebuild_source=rebuild_source + "\n" + fetch_source,
                       graph_break=tracer.graph_break, guards=guards, held=tuple(codegen.held),
                       used_inputs=None if len(used_inputs) == len(tracer.state.inputs) else tuple(used_inputs),
                       # (parts run one after another: a write into an input with history may come before a
                       # raise that precedes it in the graph)
                       rerun_on_raise=compiled is not None and undoable is not None and
                       not (parts is not None and undoable[3]),
                       reshaped_inputs=undoable[0] if undoable else (), written_inputs=undoable[1] if undoable else (),
                       draws_random=bool(undoable and undoable[2]),
                       versions=version_plan(tracer, gm) if compiled is not None else None)
    return TraceOutcome(entry, tracer, t1 - t0, t2 - t1)


def _grads_that_freed_outputs(gm: torch.fx.GraphModule, error: Exception) -> frozenset:
    """Where the graph calls ``torch.autograd.grad``, if the backend failed as AOTAutograd does when an output the
    graph returns requires grad through the history such a call freed (``l = (x * y).sum(); g, = grad(l, [x]);
    return l, g``: "Trying to backward through the graph a second time", found by a probe; torch.compile breaks
    at every ``autograd.grad``), or finds the input differentiated unused in its own trace of the call (``t = w *
    1; grad(t.sum(), [w], retain_graph=True); return t``: fuzz 53:62). Those calls then run for real: eager's ``l``
    keeps its freed history."""
    cause = getattr(error, "inner_exception", None) or error
    if "backward through the graph a second time" not in str(cause) and \
            "appears to not have been used in the graph" not in str(cause):  # (``t = w * 1; grad(t.sum(), [w],
        return frozenset()  # retain_graph=True); return t``: AOTAutograd's trace of the grad, fuzz 53:62)
    return frozenset(node.meta["location"] for node in gm.graph.nodes if node.op == "call_function" and
                     node.target is torch.autograd.grad and "location" in node.meta)


def _compile_part(tracer: Tracer, backend: Callable, part: Part, examples: list, live: list) -> Callable:
    """One part of a graph (``runtime/graph_parts.py``) compiled by the backend, passing gradients on as eager
    (``examples``: the backend's example inputs of the whole graph; ``live``: its values on this call)."""
    compiled = _call_backend(backend, part.gm, [examples[i] for i in part.inputs], tracer)
    return eager_input_grads(part.gm, compiled, lambda node: _root_of(tracer, node), [live[i] for i in part.inputs])


def _root_of(tracer: Tracer, node: torch.fx.Node) -> int | None:
    """The trace's identity of the autograd root of the tensor ``node`` computes (its base, or itself), ``None``
    where the node computes no tensor the trace knows."""
    val = node.meta.get("val")
    tid = tracer.tid_of_fake(val) if isinstance(val, torch.Tensor) else None
    if tid is None:
        return None
    base = tracer.state.heap[tid].meta.base
    return tid if base is None else base


def _without_effects(tracer: Tracer, gm: torch.fx.GraphModule) -> tuple | None:
    """Whether every effect of the graph's own can be undone, so that if it raises, running the code it stands for again
    for real is eager's behaviour (``CacheEntry.rerun_on_raise``): it holds no higher-order op (whose subgraphs are not
    looked into) and no switch of global state but grad mode (which ``CacheEntry.run`` restores). A tensor it did not
    make (a graph input, or a view of one) that it writes must require no grad (no autograd history to keep), or be
    written only after every op that may raise (:func:`_raises_only_before_writes`): an input whose shape only an
    ``unsqueeze_``-like op changed has its geometry put back; an input whose data it writes has its storage copied
    before each call and put back (a write before the op that raised would be made twice, and eager's ``index_put_``
    writes part of its input before it raises). Data writes are allowed only in a graph that may raise at run time
    (:func:`stillframe.graph.passes.may_raise_at_run_time`), so a graph that cannot raise pays no copy. So are random
    draws (eager's stream would move twice): the generators' states are saved before each call and put back.

    Returns the positions (among the fetched inputs) of the reshaped inputs and of the written ones, whether it
    draws random numbers, and whether an input it writes requires grad; ``None`` where the graph has an effect of
    its own that cannot be undone."""
    reshaped, written, with_history = set(), set(), set()
    for tid in tracer.input_values:
        entry = tracer.state.heap.get(tid)
        if not isinstance(entry, TensorEntry) or entry.meta.version == 0:
            continue
        live = tracer.input_values[tid]
        if not isinstance(live, torch.Tensor) or live.layout != torch.strided:
            return None
        if live.requires_grad:
            with_history.add(tid if entry.meta.base is None else entry.meta.base)
        if tid not in tracer.inputs_written and tid not in tracer.inputs_reshaped:
            return None
        if tid in tracer.inputs_written:
            written.add(tid)
        if tid in tracer.inputs_reshaped:
            reshaped.add(tid)
    positions = {tid: i for i, (_src, tid) in enumerate(tracer.state.inputs)}
    if not (reshaped | written) <= positions.keys():
        return None
    graphs = [module.graph for module in gm.modules() if isinstance(module, torch.fx.GraphModule)]
    draws = False
    for graph in graphs:
        for node in graph.nodes:
            if node.op == "call_module":
                return None
            if draws_random_numbers(node):
                if node.kwargs.get("generator") is not None:  # only the default generators' states are saved
                    return None
                draws = True
            if node.op == "call_function" and (isinstance(node.target, compat.HigherOrderOperator) or
                                                node.target in _GLOBAL_STATE_SWITCHES):
                return None
    if (written or draws) and not any(passes.may_raise_at_run_time(node) for graph in graphs for node in graph.nodes):
        return None
    if with_history and not _raises_only_before_writes(gm, with_history):
        return None
    return tuple(sorted(positions[t] for t in reshaped)), tuple(sorted(positions[t] for t in written)), draws, \
        bool(with_history)


def _raises_only_before_writes(gm: torch.fx.GraphModule, roots: set) -> bool:
    """Whether no op that may raise at run time comes after the first write (of data or shape) into the tensors of
    alias groups ``roots`` (inputs that require grad) in graph order: where the graph raises, that write has not
    been made (or is the op that raised, which changed no autograd history), so the input's history is eager's and
    putting back its data or geometry undoes the rest (fuzz 53:219: ``OUT.append(...)`` then ``t5[idx] = x``, out
    of range, on a ``t5`` that requires grad; the append was lost). A write's own history could not be undone."""
    nodes = list(gm.graph.nodes)
    first = next((i for i, node in enumerate(nodes) if roots & node.meta.get("writes", frozenset())), None)
    if first is None:  # (written where the graph does not show it)
        return False
    return not any(passes.may_raise_at_run_time(node) for node in nodes[first + 1:])


_GLOBAL_STATE_SWITCHES = (torch.amp.autocast_mode._enter_autocast, torch.amp.autocast_mode._exit_autocast)


def _call_backend(backend: Callable, gm: torch.fx.GraphModule, example_inputs: list, tracer: Tracer) -> Callable:
    """``backend(gm, example_inputs)``, which must return a callable; else torch.compile's error for it,
    ``BackendCompilerFailed`` naming the backend and its exception (a fake tensor's refusal is let through:
    torch.compile runs that code eagerly). The error carries ``tracer``: its guards say which calls it covers."""
    if compat.is_eager_backend(backend):  # it runs the graph as is: a Function's saves must be eager's
        gm = with_checked_function_apply(gm)
    try:
        with compat.random_ops_kept():  # (an unused draw still moves the generator, as in eager)
            compiled = backend(gm, example_inputs)
        if callable(compiled):
            return compiled
        error: Exception = TypeError(f"the backend returned {type(compiled).__name__} {compiled!r}, not the "
                                     "compiled callable: a backend is (gm, example_inputs) -> callable")
        error_tb = None
    except compat.BACKEND_FALLBACK_ERRORS:
        raise
    except compat.TensorifyScalarRestartAnalysis:
        if tracer is None:  # an optimizer's update (runtime/optimizer_step.py): traced again in its tensor form
            raise
        raise BackendSpecializedFloats(_float_sources(tracer, compat.take_float_specializations())) from None
    except Exception as e:
        error, error_tb = e, e.__traceback__
    failed = compat.backend_compiler_failed(backend, error)
    failed.tracer = tracer
    raise failed.with_traceback(error_tb) from None


def _keep_raising_ops(tracer: Tracer, outputs: list) -> None:
    """Make each op that may raise on its index values (``tensors/effects.raises_on_values``: ``x[i]``,
    ``index_select``) and whose result nothing reads an output of the graph (that the rebuild ignores): a backend
    that retraces the graph (AOTAutograd) drops an unused op as dead, and with it eager's ``IndexError`` (found by a
    probe: ``x[i]`` with ``i`` out of range, its result unused, returned where eager raises).

    A write into graph inputs only (``out.index_copy_(0, i, v)`` on an input ``out``) is not dead: AOTAutograd
    copies the inputs' new values back. Its result stays no output: as an output it aliases a written input, and
    AOTAutograd then returned a written input's value in place of a symbolic int output beside it (probe:
    nn.AdaptiveLogSoftmaxWithLoss, whose ``used_rows`` came back as a tensor, and ``if used_rows != batch_size``
    raised)."""
    inputs = {tid for _, tid in tracer.state.inputs}
    for node in tracer.graph.graph.nodes:
        if node.meta.get("raises_on_values") and not node.users and node not in outputs and \
                not (node.meta.get("writes") and node.meta["writes"] <= inputs):
            outputs.append(node)


def _stand_in_or(tracer: Tracer, value: Any) -> Any:
    stand_in = grad_stand_in(tracer, value) if isinstance(value, torch.Tensor) else None
    return value if stand_in is None else stand_in


def _symbolic_example(tracer: Tracer, tid: int, value: Any) -> Any:
    node = tracer.tensor_node_of_input(tid)
    if type(value) is int and node is not None and isinstance(node.meta.get("val"), torch.SymInt):
        return node.meta["val"]
    if node is not None and getattr(node.meta.get("val"), "item_memo", None) is not None:
        return tracer.input_values.get(tid, value)  # a float's tensor: the one faked (its fake knows its .item())
    return value


def _dynamic_hints(tracer: Tracer) -> dict:
    """What is symbolic among the live values at a graph break, by the name of the source the resumed trace
    reads each from (``L['0:x']``, ``L['0:stack:2']``): see ``Continuation.dynamic``."""
    hints: dict = {}

    def hint(name: str, var: Any) -> None:
        if isinstance(var, TensorVariable):
            dims = tuple(compat.is_symbolic(n) for n in tracer.tensor(var).fake.shape)
            if any(dims):
                hints[LocalSource(name).name] = dims
        elif isinstance(var, SymNodeVariable) and isinstance(var.value, torch.SymInt) and \
                compat.is_symbolic(var.value):
            hints[LocalSource(name).name] = "int"

    for i, frame in enumerate(tracer.state.frames):
        for name, var in frame.locals.items():
            hint(f"{i}:{name}", var)
        for j, var in enumerate(frame.stack):
            hint(live.stack_name(i, j), var)
    return hints


def _loop_counter_hint(tracer: Tracer) -> dict:
    """At a loop whose body broke the graph, the next item is taken for real (a ``loop_iteration`` break) and
    pushed where the resumed trace reads it (``L['0:stack:1']``). Where the items still to come are ints (a counter:
    ``for i in range(n)``), the item is an int that changed at that point of the code since this trace saw the
    previous one, so automatic dynamic makes it symbolic from the resumed code's first trace
    (``"loop"``; ``dynamic=False`` keeps it static) instead of tracing the body once more for the second value,
    as torch.compile unspecializes an int that changed."""
    if tracer.graph_break is None or tracer.graph_break.kind is not GraphBreakKind.LOOP_ITERATION:
        return {}
    frames = tracer.state.frames
    top = frames[-1]
    it = top.stack[-1] if top.stack else None
    if not isinstance(it, LiveIteratorVariable):
        return {}
    rest = it.values[live_iterator_index(tracer, it):]
    if not rest or type(rest) is not range and any(type(v) is not int for v in rest):
        return {}
    return {LocalSource(live.stack_name(len(frames) - 1, len(top.stack))).name: "loop"}


def _shape_guards(tracer: Tracer) -> list[Guard]:
    """The ShapeEnv's guards on the symbolic sizes of the graph inputs, produced from their entry snapshots
    (DESIGN invariants 5 and 12: an in-place ``t_()`` since then does not change them)."""
    seen: set = set()
    inputs = [entry for entry in tracer.entry_fakes if id(entry[1]) not in seen and not seen.add(id(entry[1]))]
    sources = tuple(src for src, _, _ in inputs)
    try:
        exprs = compat.shape_guard_exprs(tracer.fake_mode, [fake for _, fake, _ in inputs])
    except Exception as e:  # a guard on a symbol no input of this plan carries
        raise Unsupported(GraphBreak(GraphBreakKind.DYNAMIC_SHAPE, f"the shape guards cannot be expressed over "
                                     f"the graph inputs ({type(e).__name__}: {e})")) from None
    for j, (_src, fake, symbolic) in enumerate(inputs):  # symbolic at entry, a constant now: guarded by value
        if symbolic is None:
            continue
        for what, values, flags in (("size", fake.shape, symbolic[0]), ("stride", fake.stride(), symbolic[1])):
            exprs += [f"___t{j}.{what}()[{i}] == {symbolic_values.plain(n)}"
                      for i, (n, was) in enumerate(zip(values, flags)) if was and not compat.is_symbolic(n)]
    return [Guard(None, "SHAPE", (sources, expr)) for expr in exprs]


def _drop_dead_symbolic_nodes(tracer: Tracer, outputs: list) -> None:
    """Erase size arithmetic nothing reads (``x.shape[0] > 2`` decided a branch: the ShapeEnv guards it)."""
    keep = {id(n) for n in outputs}
    for node in reversed(list(tracer.graph.nodes)):
        if node.op in ("call_function", "call_method") and not node.users and id(node) not in keep and \
                symbolic_values.is_size_value(node.meta.get("val")):
            tracer.graph.erase_input(node)


def _drop_unread_placeholders(tracer: Tracer) -> list[int]:
    """Erase graph inputs no node reads (a tensor only read for its shape); return the positions kept.

    The backend never sees them, so an unread input cannot take part in, say,
    AOTAutograd's handling of aliased inputs.
    """
    kept = []
    for i, (src, tid) in enumerate(tracer.state.inputs):
        node = tracer.tensor_node_of_input(tid)
        if node is not None and not node.users and not isinstance(src, SizeSource):  # symbols stay, as in torch
            tracer.graph.erase_input(node)
        else:
            kept.append(i)
    return kept


def _add_aliasing_guard(tracer: Tracer) -> None:
    args = [(src, tid) for src, tid in tracer.state.inputs if is_user_argument(src) and tid in tracer.input_values]
    if len(args) < 2:
        return
    pattern = aliasing_pattern(tuple(tracer.input_values[tid] for _, tid in args))
    tracer.add_guard(Guard(None, "ALIASING", (tuple(src for src, _ in args), pattern)))


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
    guards = weak_type_guards(tracer.guards()) if tracer is not None else []
    check, source = compile_guards(guards)
    return CacheEntry(check=check, guard_source=source, eager=True, reason=reason, guards=guards)
