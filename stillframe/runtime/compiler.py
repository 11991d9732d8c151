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
from ..bytecode import read
from ..diagnostics import log
from ..guards.guard import Guard, GuardCodegen, aliasing_pattern, compile_guards
from ..guards.source import AttrSource, FunctionSource, GetItemSource, LocalSource, is_user_argument
from ..trace import ops  # noqa: F401  (registers the opcode handlers)
from ..trace.interpreter import Tracer, make_frame
from ..variables.attrs import EMPTY_CELLS
from ..variables.base import (
    BuiltinVariable,
    ConstantVariable,
    DictVariable,
    ListVariable,
    NNModuleVariable,
    PythonObjectVariable,
    TensorVariable,
    TorchFunctionVariable,
    TupleVariable,
    LazyArgument,
    UserFunctionVariable,
    VariableTracker,
)
from ..variables.objects import ObjectVariable
from .entry import CacheEntry


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
    tracer = Tracer(frame, compat.new_fake_mode(), torch.is_grad_enabled())
    tracer.add_guard(Guard(None, "GLOBAL", ("grad_enabled", torch.is_grad_enabled())))
    tracer.add_guard(Guard(None, "GLOBAL", ("default_dtype", torch.get_default_dtype())))
    autocast_cpu = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
    tracer.add_guard(Guard(None, "GLOBAL", ("autocast_cpu", autocast_cpu)))
    if autocast_cpu[0]:  # called inside an autocast block: ops propagate under it (the graph runs under it too)
        tracer.state = tracer.state.replace(autocast=(("cpu", autocast_cpu[1], True, None),))
    return tracer


def compile_frame(fn: types.FunctionType, L: dict, G: dict, F: Any, backend: Callable) -> TraceOutcome:
    """Trace one call and build its cache entry (raises Unsupported / UserError from the trace)."""
    t0 = time.perf_counter()
    tracer = start_trace(fn, L)
    try:
        result = tracer.run()
        if tracer.state.grad_enabled != torch.is_grad_enabled() or \
                len(tracer.state.autocast) != int(torch.is_autocast_enabled("cpu")):
            tracer.unsupported("global_state", "the function returns with a different grad mode than it was "
                               "called with (torch.set_grad_enabled without a `with`)")
        recipe = ResultCodegen(tracer)
        result_expr = recipe.expr(result)
        recipe.side_effects()
    except Exception as e:
        e.tracer = tracer  # the guards collected so far describe the path that failed
        raise
    _add_aliasing_guard(tracer)
    guards = tracer.guards()
    check, guard_source = compile_guards(guards)
    gm = tracer.graph.finish(tuple(recipe.output_nodes))
    fetch, fetch_source = _fetch_function(tracer)
    rebuild, rebuild_source = recipe.function(result_expr)
    t1 = time.perf_counter()
    compiled = None
    if tracer.graph.num_ops() or recipe.output_nodes:
        example_inputs = fetch(L, G, F)
        compiled = backend(gm, example_inputs)
    t2 = time.perf_counter()
    log.graph(fn, gm, guard_source)
    entry = CacheEntry(check=check, guard_source=guard_source, fetch=fetch, compiled=compiled, rebuild=rebuild,
                       graph_module=gm, rebuild_source=rebuild_source + "\n" + fetch_source)
    return TraceOutcome(entry, tracer, t1 - t0, t2 - t1)


def _add_aliasing_guard(tracer: Tracer) -> None:
    args = [(src, tid) for src, tid in tracer.state.inputs if is_user_argument(src)]
    if len(args) < 2:
        return
    pattern = aliasing_pattern(tuple(tracer.input_values[tid] for _, tid in args))
    tracer.add_guard(Guard(None, "ALIASING", (tuple(src for src, _ in args), pattern)))


def _fetch_function(tracer: Tracer) -> tuple[Callable, str]:
    gen = GuardCodegen()
    refs = [gen.ref(src) for src, _tid in tracer.state.inputs]
    for src, method, args, kwargs in tracer.state.prologue:
        call_args = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        gen.lines.append(f"{gen.ref(src)}.{method}({', '.join(call_args)})  # prologue")
    text = "def ___fetch(L, G, F):\n"
    text += "".join(f"    {line}\n" for line in gen.lines)
    text += f"    return [{', '.join(refs)}]\n"
    ns = gen.namespace()
    exec(compile(text, "<stillframe fetch>", "exec"), ns)
    return ns["___fetch"], text


class ResultCodegen:
    """Renders the traced return value as a Python expression over graph outputs and sources."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.gen = GuardCodegen()
        self.output_nodes: list = []
        self.output_index: dict[int, int] = {}
        self.input_position = {tid: i for i, (_src, tid) in enumerate(tracer.state.inputs)}
        self.objects: dict[int, str] = {}

    def expr(self, var: VariableTracker) -> str:
        tx = self.tracer
        if isinstance(var, LazyArgument):
            return self.gen.ref(var.source)
        if isinstance(var, TensorVariable):
            entry = tx.tensor(var)
            if var.tid in self.input_position:
                return f"___in[{self.input_position[var.tid]}]"  # the very object fetched, as eager returns it
            if var.tid not in self.output_index:
                if entry.node is None:
                    tx.unsupported("hidden_base", "returning the base of an input view")
                self.output_index[var.tid] = len(self.output_nodes)
                self.output_nodes.append(entry.node)
            return f"___out[{self.output_index[var.tid]}]"
        if isinstance(var, ConstantVariable):
            v = var.value
            if type(v) in (int, bool, str, type(None)) or (type(v) is float and v == v and v not in (float("inf"),
                                                                                                   float("-inf"))):
                return repr(v)
            return self.gen.const(v)
        if isinstance(var, TupleVariable):
            inner = "".join(self.expr(v) + ", " for v in var.items)
            if var.cls is tuple:
                return f"({inner})"
            cls = self.gen.const(var.cls)
            if var.cls is torch.Size or hasattr(var.cls, "n_fields"):
                return f"{cls}(({inner}))"
            return f"{cls}({inner})"
        if isinstance(var, ListVariable):
            entry = tx.heap(var.oid)
            if entry.source is not None:
                return self.gen.ref(entry.source)
            return "[" + ", ".join(self.expr(v) for v in entry.items) + "]"
        if isinstance(var, DictVariable):
            entry = tx.heap(var.oid)
            if entry.source is not None:
                return self.gen.ref(entry.source)
            return "{" + ", ".join(f"{self._key(k)}: {self.expr(v)}" for k, v in entry.items) + "}"
        if isinstance(var, ObjectVariable):
            return self._object(var)
        if isinstance(var, (NNModuleVariable, PythonObjectVariable, UserFunctionVariable, TorchFunctionVariable,
                            BuiltinVariable)):
            if var.source is not None:
                return self.gen.ref(var.source)
            value = var.module if isinstance(var, NNModuleVariable) else getattr(var, "value", None) or var.fn
            return self.gen.const(value)
        tx.unsupported("unsupported_return", f"returning a {var.python_type().__name__} value")

    def _object(self, var: ObjectVariable) -> str:
        """An object made in the trace: created once (``cls.__new__``), then its attributes set."""
        if var.oid in self.objects:
            return self.objects[var.oid]
        name = f"o{len(self.objects)}"
        self.objects[var.oid] = name
        entry = self.tracer.heap(var.oid)
        self.gen.lines.append(f"{name} = {self.gen.const(entry.cls)}.__new__({self.gen.const(entry.cls)})")
        for attr, value in entry.attrs.items():
            self.gen.lines.append(f"object.__setattr__({name}, {attr!r}, {self.expr(value)})")
        return name

    def side_effects(self) -> None:
        """Statements replaying recorded mutations of outside objects, in the order they were first made."""
        tx = self.tracer
        for key, (_order, payload) in sorted(tx.state.side_effects.items(), key=lambda kv: kv[1][0]):
            kind = key[0]
            if kind == "list":
                entry = tx.heap(payload.oid)
                items = ", ".join(self.expr(v) for v in entry.items)
                self.gen.lines.append(f"{self.gen.ref(entry.source)}[:] = [{items}]")
            elif kind == "dict":
                entry = tx.heap(payload.oid)
                ref = self.gen.ref(entry.source)
                items = ", ".join(f"{self._key(k)}: {self.expr(v)}" for k, v in entry.items)
                self.gen.lines.append(f"{ref}.clear(); {ref}.update({{{items}}})")
            elif kind == "attr":
                owner, value = payload
                self.gen.lines.append(f"setattr({self.expr(owner)}, {key[2]!r}, {self.expr(value)})")
            elif kind == "cell":
                cell_source, value = payload
                self.gen.lines.append(f"{self.gen.ref(cell_source)}.cell_contents = {self.expr(value)}")
            elif kind == "global":
                module, name = key[1], key[2]
                target = "G" if module is None else f"___module_globals({module!r})"
                self.gen.lines.append(f"{target}[{name!r}] = {self.expr(payload)}")

    def _key(self, k: Any) -> str:
        return repr(k) if type(k) in (int, str, bool, type(None)) else self.gen.const(k)

    def function(self, result_expr: str) -> tuple[Callable, str]:
        text = "def ___rebuild(___out, ___in, L, G, F):\n"
        text += "".join(f"    {line}\n" for line in self.gen.lines)
        text += f"    return {result_expr}\n"
        ns = self.gen.namespace()
        exec(compile(text, "<stillframe rebuild>", "exec"), ns)
        return ns["___rebuild"], text


def eager_entry(tracer: Tracer | None, reason: str) -> CacheEntry:
    """An entry that runs the function eagerly under the guards collected so far."""
    guards = tracer.guards() if tracer is not None else []
    check, source = compile_guards(guards)
    return CacheEntry(check=check, guard_source=source, eager=True, reason=reason)
