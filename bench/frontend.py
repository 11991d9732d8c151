"""Frontend cost of stillframe next to torch.compile (TorchDynamo), in one process.

Two modes.

Default (``--backend passthrough``): both frontends hand their graphs to the
same backend, one that does not optimize (:func:`passthrough` runs the FX
graph as generated), so what is measured is the frontend alone: how long the
first call takes (bytecode interpretation, guard building, FX codegen), and
what every later call costs on top of eager PyTorch (guard check, fetching
graph inputs, calling the graph, rebuilding the result).

``--backend inductor``: both frontends compile with inductor, and the number
that matters is the steady-state time per call (median of warm calls) of
eager, stillframe and torch.compile. First calls are still timed, but they are
inductor's compile time far more than the frontend's.

Workloads: ``add1`` (``x + 1`` on a 1-element tensor), ``linear_chain`` (10
``nn.Linear(4, 4)`` layers called one after another: 20 parameters), ``gpt``
(examples/gpt.py, forward with targets, grad mode on), and the Hugging Face
models of :mod:`stillframe.check.models` -- ``gpt2``, ``bert``, ``llama``,
``t5`` -- each an eval forward under ``torch.no_grad()`` called as
``model(**example_inputs(name, mask=True))`` (skipped, with a note, when
``transformers`` is not installed).

For each workload and frontend:

* first call: ``--traces`` samples, each a fresh compile: the frontend's own
  state is reset (``stillframe.reset()`` or ``torch._dynamo.reset()``) and a
  fresh ``copy.deepcopy`` of the module is compiled, then the first call alone
  is timed. In the default mode one extra sample runs first and is dropped (it
  pays for lazy imports and one-time setup). In inductor mode each sample runs
  inside ``torch._inductor.utils.fresh_cache()`` (an empty on-disk cache
  directory and cleared in-memory kernel caches), so every sample is a cold
  inductor compile and neither frontend reuses kernels the other compiled; a
  one-time warm-up compile of a tiny function through both frontends pays
  inductor's imports and worker start-up first.
* a sequence of ``--calls`` calls (default 10), the same shapes each call
  (fresh argument tensors each call): the first is the last first-call sample
  above. Counted over it:

  - ``graphs``: graphs the backend received. Both frontends get the same
    counting wrapper around the backend, so this is counted the same way for
    both (cross-checked against ``stillframe.counters["graphs"]`` and
    ``torch._dynamo.utils.counters["stats"]["unique_graphs"]``).
  - ``breaks``: graph breaks on one call. stillframe: the increase of
    ``stillframe.counters["graph_breaks"]`` over the first call (it counts each
    break a call goes through). torch.compile: graphs received whose
    ``gm.compile_subgraph_reason.graph_break`` is true -- exactly what
    ``torch._dynamo.explain(...).graph_break_count`` counts (so a break with
    no graph before it is not counted for torch.compile).
    ``torch._dynamo.utils.counters["graph_break"]`` is not used: only some of
    TorchDynamo's break paths add to it.
  - ``recompiles``: stillframe: the increase of
    ``stillframe.counters["recompiles"]`` over the sequence. torch.compile:
    compiles whose ``recompile_reason`` is set in
    ``torch._dynamo.utils.get_compilation_metrics()`` (the reason is kept in
    the JSON). A note flags any trace (stillframe ``counters["traces"]``,
    TorchDynamo ``counters["frames"]["total"]``) after the first call.

* warm calls: ``--repeat`` samples of eager and each compiled object (the one
  the sequence ran on), taking turns sample by sample; each sample is the mean
  over a batch of calls lasting at least ``--sample-s``. ``overhead`` is the
  median of (compiled sample - eager sample of the same round). In the default
  mode each frontend's captured graphs are also timed alone (called directly
  on the inputs one compiled call gave them, logged on the trace before the
  last), and ``call - graphs`` is the median of (compiled sample - graphs
  sample): the frontend's own per-call cost. For modules ``overhead`` is
  often negative: the graph skips ``nn.Module.__call__`` and, for the
  transformers models, all the Python around the tensor ops, so
  ``call - graphs`` is the per-call overhead to compare there.

Medians throughout; ratios are stillframe / torch.compile. Compiled results
(first and last call of the sequence, and one call after the warm timing) are
compared with eager's. In inductor mode both frontends get the same backend:
the counting wrapper around what ``backend="inductor"`` resolves to
(``torch._TorchCompileInductorWrapper(None, None, None)``, as in
stillframe/compat.py).

Run from the repository root::

    python bench/frontend.py                      # full run, prints a markdown table
    python bench/frontend.py --quick              # fewer repetitions
    python bench/frontend.py --only gpt2          # one workload (repeatable)
    python bench/frontend.py --backend inductor   # steady-state time per call
    python bench/frontend.py --json out.json      # also write every number

See bench/README.md for what each column means.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import gc
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # examples/ and, in a bare checkout, stillframe/

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch import nn  # noqa: E402
from torch._dynamo.utils import counters as dynamo_counters  # noqa: E402

from examples.gpt import make_batch, make_model  # noqa: E402

FRONTENDS = ("stillframe", "torch.compile")


def passthrough(gm, example_inputs):
    """A backend that does not optimize: the captured graph runs as FX generated it.

    TorchDynamo hands over a ``_LazyGraphModule``, whose ``forward`` (until its
    code is generated) is a stub that generates it and then calls
    ``self(*args)``, through ``nn.Module.__call__``, on every call made through
    that bound method; generating the code first makes ``gm.forward`` the
    generated function itself, as stillframe's graphs already are.
    """
    from torch.fx._lazy_graph_module import _LazyGraphModule

    if isinstance(gm, _LazyGraphModule):
        gm.real_recompile()
    return gm.forward


# ---------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------


def add_one(x):
    return x + 1


class LinearChain(nn.Module):
    """Ten ``nn.Linear(4, 4)`` layers called one after another: 20 parameters to guard and fetch."""

    def __init__(self):
        super().__init__()
        for i in range(10):
            setattr(self, f"l{i}", nn.Linear(4, 4))

    def forward(self, x):
        x = self.l0(x)
        x = self.l1(x)
        x = self.l2(x)
        x = self.l3(x)
        x = self.l4(x)
        x = self.l5(x)
        x = self.l6(x)
        x = self.l7(x)
        x = self.l8(x)
        x = self.l9(x)
        return x


Args = tuple[tuple, dict]


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    make_fn: Callable[[], Callable]  # the eager function or module (a template: modules are deep-copied per compile)
    make_args: Callable[[], Args]  # (positional, keyword) arguments of one call; the same values every time
    no_grad: bool = False  # run everything (eager, compiled, timing) under torch.no_grad()
    requires: str | None = None  # why it cannot run here, or None


def _linear_chain() -> LinearChain:
    torch.manual_seed(0)
    return LinearChain()


def _model_workload(name: str, description: str) -> Workload:
    from stillframe.check import models

    return Workload(
        name,
        description,
        lambda: models.build(name),
        lambda: ((), models.example_inputs(name, mask=True)),
        no_grad=True,
        requires=None if models.available()
        else "transformers is not installed (pip install torch==2.13.0 -e '.[models]')",
    )


WORKLOADS = (
    Workload("add1", "`x + 1`, 1 element", lambda: add_one, lambda: ((torch.ones(1),), {})),
    Workload("linear_chain", "10 x Linear(4,4), 20 params", _linear_chain,
             lambda: ((torch.randn(8, 4, generator=torch.Generator().manual_seed(0)),), {})),
    Workload("gpt", "`examples/gpt.py`, forward + loss", lambda: make_model(seed=0), lambda: (make_batch(), {})),
    _model_workload("gpt2", "GPT2LMHeadModel, eval, mask"),
    _model_workload("bert", "BertModel, eval, mask"),
    _model_workload("llama", "LlamaForCausalLM, eval, mask"),
    _model_workload("t5", "T5ForConditionalGeneration, eval, mask"),
)


# ---------------------------------------------------------------------------
# Frontends
# ---------------------------------------------------------------------------


@dataclass
class Frontend:
    """How to compile with one frontend, reset it, and read its counters.

    ``received`` lists, for every graph the backend got, whether TorchDynamo
    marked it as ending at a graph break (always False for stillframe, which
    counts breaks itself).
    """

    name: str
    inner_backend: Callable  # passthrough, or what backend="inductor" resolves to
    received: list[bool] = field(default_factory=list)
    recording: list | None = None  # where graphs compiled now log (graph, inputs) per call; None: plain graphs

    def backend(self, gm, example_inputs):
        reason = getattr(gm, "compile_subgraph_reason", None)
        self.received.append(bool(getattr(reason, "graph_break", False)))
        compiled = self.inner_backend(gm, example_inputs)
        log = self.recording
        if log is None:
            return compiled

        def recording(*inputs):
            log.append((compiled, inputs))
            return compiled(*inputs)

        return recording

    def compile(self, fn: Callable) -> Callable:
        if self.name == "stillframe":
            import stillframe

            return stillframe.compile(fn, backend=self.backend)
        return torch.compile(fn, backend=self.backend)

    def reset(self) -> None:
        """Forget every compiled plan of this frontend (the other frontend's stay)."""
        if self.name == "stillframe":
            import stillframe

            stillframe.reset()
        else:
            torch._dynamo.reset()

    def snapshot(self) -> dict[str, int]:
        """The counters this frontend keeps, plus graphs its backend received so far."""
        snap = {"received": len(self.received), "received_breaks": sum(self.received)}
        if self.name == "stillframe":
            import stillframe

            for key in ("traces", "graphs", "fallbacks", "cache_hits", "graph_breaks", "recompiles"):
                snap[key] = stillframe.counters[key]
        else:
            from torch._dynamo.utils import get_compilation_metrics

            metrics = get_compilation_metrics()
            snap["frames"] = dynamo_counters["frames"]["total"]
            snap["unique_graphs"] = dynamo_counters["stats"]["unique_graphs"]
            snap["compiles"] = len(metrics)
            snap["recompiles"] = sum(m.recompile_reason is not None for m in metrics)
        return snap


def make_frontends(which: list[str], inner_backend: Callable) -> list[Frontend]:
    if "stillframe" in which:
        import stillframe  # noqa: F401  (imported before any timing)
    return [Frontend(name, inner_backend) for name in FRONTENDS if name in which]


def inductor_backend() -> Callable:
    """What ``backend="inductor"`` resolves to, in torch.compile and in stillframe (stillframe/compat.py)."""
    return torch._TorchCompileInductorWrapper(None, None, None)


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


def _synchronize() -> None:
    """Wait for the GPU's queued work (``--device cuda``), so a timed call includes its kernels."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _to_device(value: Any, device: str) -> Any:
    if isinstance(value, (torch.Tensor, nn.Module)):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(_to_device(v, device) for v in value)
    if isinstance(value, list):
        return [_to_device(v, device) for v in value]
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


def on_device(workload: Workload, device: str) -> Workload:
    """``workload`` with its module (or function) and arguments on ``device`` (``"cpu"``: unchanged)."""
    if device == "cpu":
        return workload
    return Workload(workload.name, workload.description, lambda: _to_device(workload.make_fn(), device),
                    lambda: _to_device(workload.make_args(), device), workload.no_grad, workload.requires)


def _fresh(template: Callable) -> Callable:
    return copy.deepcopy(template) if isinstance(template, nn.Module) else template


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):  # includes transformers' ModelOutput
        return [t for item in value.values() for t in _tensors(item)]
    return []


def same_result(expected, actual, tol: dict) -> bool:
    """Whether a compiled call returned what eager did (so the timings compare like with like)."""
    want, got = _tensors(expected), _tensors(actual)
    if len(want) != len(got):
        return False
    try:
        for w, g in zip(want, got):
            torch.testing.assert_close(g, w, **tol)
    except AssertionError:
        return False
    return True


@dataclass
class Compiled:
    """One frontend on one workload: first-call samples, what the call sequence did, the warm object."""

    first_call_ms_samples: list[float]
    call: Callable | None = None  # the compiled object the sequence ran on, timed warm next
    graph_calls: list = field(default_factory=list)  # (graph, inputs) of each graph one call ran, in order
    graphs: int = 0
    breaks: int = 0
    recompiles: int = 0
    fallbacks: int = 0
    traces_after_first: int = 0
    recompile_reasons: list[str] = field(default_factory=list)
    same_result: bool = True
    notes: list[str] = field(default_factory=list)
    counters_first_call: dict[str, int] = field(default_factory=dict)
    counters_sequence: dict[str, int] = field(default_factory=dict)


def _delta(after: dict, before: dict) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after}


def compile_and_run(frontend: Frontend, workload: Workload, template: Callable, expected: Any, *, traces: int,
                    dropped: int, calls: int, inductor: bool, tol: dict) -> Compiled:
    """First-call samples (each a fresh compile), then the call sequence on the last compiled object."""
    samples: list[float] = []
    compiled = None
    before = after_first = None
    graph_calls: list = []
    for i in range(dropped + traces):
        frontend.reset()
        # Every compile but the last logs its graphs' calls (to time the graphs alone); the last one, which
        # the sequence and the warm timing use, gets the backend's graphs unwrapped.
        last_sample = i == dropped + traces - 1
        frontend.recording = None if last_sample or inductor else []
        compiled = frontend.compile(_fresh(template))
        args, kwargs = workload.make_args()
        if frontend.name == "torch.compile":
            from torch._dynamo.utils import clear_compilation_metrics

            clear_compilation_metrics()
        gc.collect()
        before = frontend.snapshot()
        cache = _fresh_inductor_cache() if inductor else contextlib.nullcontext()
        with cache:
            start = time.perf_counter()
            first = compiled(*args, **kwargs)
            _synchronize()
            elapsed = time.perf_counter() - start
        after_first = frontend.snapshot()
        if frontend.recording is not None:
            graph_calls, frontend.recording = list(frontend.recording), None
        if i >= dropped:
            samples.append(elapsed * 1e3)
    out = Compiled(samples, call=compiled, graph_calls=graph_calls)
    out.same_result = same_result(expected, first, tol)
    last = first
    for _ in range(calls - 1):
        args, kwargs = workload.make_args()
        last = compiled(*args, **kwargs)
    out.same_result = out.same_result and same_result(expected, last, tol)
    after = frontend.snapshot()
    first_d, seq_d, later_d = _delta(after_first, before), _delta(after, before), _delta(after, after_first)
    out.counters_first_call, out.counters_sequence = first_d, seq_d
    out.graphs = seq_d["received"]
    if frontend.name == "stillframe":
        out.breaks = first_d["graph_breaks"]
        out.recompiles = seq_d["recompiles"]
        out.fallbacks = seq_d["fallbacks"]
        out.traces_after_first = later_d["traces"]
        if seq_d["graphs"] != out.graphs:
            out.notes.append(f"counters say {seq_d['graphs']} graphs")
        if later_d["graph_breaks"] != (calls - 1) * out.breaks:
            out.notes.append(f"{later_d['graph_breaks']} breaks over calls 2-{calls}")
    else:
        from torch._dynamo.utils import get_compilation_metrics

        out.breaks = first_d["received_breaks"]
        out.recompiles = seq_d["recompiles"]
        out.traces_after_first = later_d["frames"]
        out.recompile_reasons = [str(m.recompile_reason) for m in get_compilation_metrics()
                                 if m.recompile_reason is not None]
        if seq_d["unique_graphs"] != out.graphs:
            out.notes.append(f"counters say {seq_d['unique_graphs']} graphs")
    if not out.same_result:
        out.notes.append("result differs from eager")
    if out.fallbacks:
        out.notes.append(f"{out.fallbacks} eager fallback(s)")
    if out.traces_after_first:
        what = "trace(s)" if frontend.name == "stillframe" else "frame compile(s)"
        out.notes.append(f"{out.traces_after_first} {what} after call 1")
    return out


def _fresh_inductor_cache():
    from torch._inductor.utils import fresh_cache

    return fresh_cache()


def run_graphs(graph_calls: list) -> None:
    """Run the captured graphs alone, on the inputs one compiled call gave them, in the same order."""
    for graph, inputs in graph_calls:
        graph(*inputs)


def calls_per_sample(call: Callable, args: Args, target_s: float) -> int:
    """How many calls make one timing sample last at least ``target_s`` (like timeit's autorange)."""
    pos, kw = args
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            call(*pos, **kw)
        _synchronize()
        if time.perf_counter() - start >= target_s or number >= 1 << 20:
            return number
        number *= 2


def per_call_us(callables: dict[str, tuple[Callable, Args]], repeat: int, target_s: float) -> dict[str, list[float]]:
    """Per-call time (us) of each callable on its arguments: ``repeat`` samples, each the mean of a batch of calls.

    The callables take turns sample by sample, so drift in the machine's speed
    falls on all of them alike; the garbage collector is off while timing.
    """
    numbers = {name: calls_per_sample(call, args, target_s) for name, (call, args) in callables.items()}
    samples: dict[str, list[float]] = {name: [] for name in callables}
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for name, (call, (pos, kw)) in callables.items():
                number = numbers[name]
                start = time.perf_counter_ns()
                for _ in range(number):
                    call(*pos, **kw)
                _synchronize()
                samples[name].append((time.perf_counter_ns() - start) / number / 1e3)
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


@dataclass
class Row:
    """One workload under one frontend; times are medians, samples are kept for the JSON.

    ``overhead_us`` is the median of the paired differences (compiled sample
    minus the eager sample of the same round), which is steadier than the
    difference of the two medians when the machine's speed drifts;
    ``overhead_iqr_us`` their first and third quartiles.
    """

    workload: str
    frontend: str
    backend: str
    first_call_ms: float | None
    call_us: float | None
    eager_us: float
    overhead_us: float | None
    overhead_iqr_us: tuple[float, float] | None
    graph_us: float | None  # the captured graphs alone, on the inputs a compiled call gives them
    glue_us: float | None  # call - graphs, paired: guards, input fetching, result rebuilding, steps between graphs
    glue_iqr_us: tuple[float, float] | None
    call_vs_eager: float | None  # call_us / eager_us
    graphs: int | None
    breaks: int | None
    recompiles: int | None
    fallbacks: int | None
    same_result: bool
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    counters_first_call: dict[str, int] = field(default_factory=dict)
    counters_sequence: dict[str, int] = field(default_factory=dict)
    first_call_ms_samples: list[float] = field(default_factory=list)
    call_us_samples: list[float] = field(default_factory=list)
    eager_us_samples: list[float] = field(default_factory=list)
    graph_us_samples: list[float] = field(default_factory=list)


def bench_workload(workload: Workload, frontends: list[Frontend], args: argparse.Namespace) -> list[Row]:
    inductor = args.backend == "inductor"
    tol = {"rtol": 1e-3, "atol": 1e-3} if inductor else {}
    grad = torch.no_grad() if workload.no_grad else contextlib.nullcontext()
    with grad:
        template = workload.make_fn()
        call_args = workload.make_args()
        pos, kw = call_args
        expected = template(*pos, **kw)
        results: dict[str, Compiled | str] = {}
        for f in frontends:
            try:
                results[f.name] = compile_and_run(
                    f, workload, template, expected, traces=args.traces, dropped=0 if inductor else 1,
                    calls=args.calls, inductor=inductor, tol=tol)
            except Exception as e:  # a crash: reported in the table and on stderr, the run goes on
                traceback.print_exc()
                results[f.name] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
        ok = {name: r for name, r in results.items() if isinstance(r, Compiled)}
        before = {f.name: f.snapshot() for f in frontends if f.name in ok}
        for _ in range(3):  # warm every path once more before timing
            for call in (template, *(r.call for r in ok.values())):
                call(*pos, **kw)
        timed = {"eager": (template, call_args), **{name: (r.call, call_args) for name, r in ok.items()}}
        for name, r in ok.items():
            if len(r.graph_calls) == 1:  # one graph: call it directly, no loop around it
                graph, inputs = r.graph_calls[0]
                timed[f"graphs:{name}"] = (graph, (inputs, {}))
            elif r.graph_calls:
                timed[f"graphs:{name}"] = (run_graphs, ((r.graph_calls,), {}))
        times = per_call_us(timed, args.repeat, args.sample_s)
        for f in frontends:
            if f.name in ok:
                changed = _delta(f.snapshot(), before[f.name])
                traced = changed.get("traces", 0) + changed.get("frames", 0)
                if traced:
                    ok[f.name].notes.append(f"{traced} trace(s) while timing warm calls")
                if not same_result(expected, ok[f.name].call(*pos, **kw), tol):  # still right after the others ran
                    ok[f.name].same_result = False
                    ok[f.name].notes.append("result differs from eager after the warm calls")

    eager_us = statistics.median(times["eager"])
    rows = []
    for f in frontends:
        r = results[f.name]
        if isinstance(r, str):
            rows.append(Row(workload.name, f.name, args.backend, None, None, eager_us, None, None, None, None, None,
                            None, None, None, None, None, False, error=r, notes=[f"failed: {r}"],
                            eager_us_samples=times["eager"]))
            continue
        call_us = statistics.median(times[f.name])
        diffs = [c - e for c, e in zip(times[f.name], times["eager"])]  # pair each with the eager sample beside it
        graph_times = times.get(f"graphs:{f.name}", [])
        glue = [c - g for c, g in zip(times[f.name], graph_times)]
        rows.append(
            Row(
                workload=workload.name,
                frontend=f.name,
                backend=args.backend,
                first_call_ms=statistics.median(r.first_call_ms_samples),
                call_us=call_us,
                eager_us=eager_us,
                overhead_us=statistics.median(diffs),
                overhead_iqr_us=_quartiles(diffs),
                graph_us=statistics.median(graph_times) if graph_times else None,
                glue_us=statistics.median(glue) if glue else None,
                glue_iqr_us=_quartiles(glue) if glue else None,
                call_vs_eager=call_us / eager_us,
                graphs=r.graphs,
                breaks=r.breaks,
                recompiles=r.recompiles,
                fallbacks=r.fallbacks if f.name == "stillframe" else None,
                same_result=r.same_result,
                notes=r.notes,
                recompile_reasons=r.recompile_reasons,
                counters_first_call=r.counters_first_call,
                counters_sequence=r.counters_sequence,
                first_call_ms_samples=r.first_call_ms_samples,
                call_us_samples=times[f.name],
                eager_us_samples=times["eager"],
                graph_us_samples=graph_times,
            )
        )
    return rows


def ratios(rows: list[Row]) -> list[dict[str, Any]]:
    """stillframe / torch.compile per workload; overhead ratios only where torch's overhead is over 0.5 us."""
    by_key = {(r.workload, r.frontend): r for r in rows}
    out = []
    for workload in dict.fromkeys(r.workload for r in rows):
        sf, tc = by_key.get((workload, "stillframe")), by_key.get((workload, "torch.compile"))
        if sf is None or tc is None or sf.error or tc.error:
            continue
        out.append(
            {
                "workload": workload,
                "first_call": sf.first_call_ms / tc.first_call_ms,
                "torch_overhead_us": tc.overhead_us,
                "torch_glue_us": tc.glue_us,
                "call": sf.call_us / tc.call_us,
                "overhead": sf.overhead_us / tc.overhead_us if tc.overhead_us > 0.5 else None,
                "glue": sf.glue_us / tc.glue_us if sf.glue_us is not None and tc.glue_us is not None
                and tc.glue_us > 0.5 else None,
            }
        )
    return out


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def _markdown(header: tuple[str, ...], lines: list[tuple[str, ...]], right: set[int]) -> str:
    widths = [max(len(row[i]) for row in (header, *lines)) for i in range(len(header))]

    def fmt(row):
        cells = [cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        return "| " + " | ".join(cells) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return "\n".join([fmt(header), rule, *map(fmt, lines)])


def _num(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def _int(value: int | None) -> str:
    return "" if value is None else str(value)


def format_table(rows: list[Row], ratio_rows: list[dict[str, Any]], backend: str) -> str:
    """A markdown table in the style of docs/benchmarks.md: per workload one row per frontend, then the ratios."""
    descriptions = {w.name: w.description for w in WORKLOADS}
    ratio_by_workload = {r["workload"]: r for r in ratio_rows}
    lines: list[tuple[str, ...]] = []
    inductor = backend == "inductor"
    if inductor:
        header = ("workload", "frontend", "first call (ms)", "steady call (µs)", "eager (µs)", "÷ eager",
                  "graphs", "breaks", "recompiles", "notes")
    else:
        header = ("workload", "frontend", "first call (ms)", "warm call (µs)", "eager (µs)", "overhead (µs)",
                  "graphs alone (µs)", "call − graphs (µs)", "graphs", "breaks", "recompiles", "notes")
    for workload in dict.fromkeys(r.workload for r in rows):
        label = f"{workload} ({descriptions.get(workload, '')})"
        for i, r in enumerate(x for x in rows if x.workload == workload):
            name = label if i == 0 else ""
            counts = (_int(r.graphs), _int(r.breaks), _int(r.recompiles), "; ".join(r.notes))
            if inductor:
                lines.append((name, r.frontend, _num(r.first_call_ms, ",.1f"), _num(r.call_us, ",.1f"),
                              f"{r.eager_us:,.1f}", _num(r.call_vs_eager, ".2f") + ("x" if r.call_vs_eager else ""),
                              *counts))
            else:
                lines.append((name, r.frontend, _num(r.first_call_ms, ",.2f"), _num(r.call_us, ",.1f"),
                              f"{r.eager_us:,.1f}", _num(r.overhead_us, ",.1f"), _num(r.graph_us, ",.1f"),
                              _num(r.glue_us, ",.1f"), *counts))
        ratio = ratio_by_workload.get(workload)
        if ratio is not None:
            first, call = f"**{ratio['first_call']:.2f}x**", f"{ratio['call']:.2f}x"
            if inductor:
                lines.append(("", "**ratio**", first, f"**{ratio['call']:.2f}x**", "", "", "", "", "", ""))
            else:
                overhead = "n/a" if ratio["overhead"] is None else f"**{ratio['overhead']:.2f}x**"
                glue = "n/a" if ratio["glue"] is None else f"**{ratio['glue']:.2f}x**"
                lines.append(("", "**ratio**", first, call, "", overhead, "", glue, "", "", "", ""))
    right = set(range(2, len(header) - 1))
    return _markdown(header, lines, right)


def format_aims(ratio_rows: list[dict[str, Any]]) -> str:
    """The issue's aims, per workload: first call at most 1/3 of torch.compile's, overhead at most 1/2."""
    out = [("Aims (stillframe ÷ torch.compile): first call <= 0.33x, per-call overhead <= 0.50x "
            "(overhead over eager, and call − graphs)")]

    def judge(label: str, ratio: float | None, aim: float, theirs: float | None = None) -> str:
        if ratio is None:
            if theirs is None:
                return f"{label} n/a"
            return f"{label} n/a (torch.compile's is {theirs:,.1f} µs: no ratio below 0.5 µs)"
        return f"{label} {ratio:.3f}x {'met' if ratio <= aim else 'NOT met'}"

    for r in ratio_rows:
        parts = (judge("first call", r["first_call"], 1 / 3),
                 judge("overhead", r["overhead"], 0.5, r["torch_overhead_us"]),
                 judge("call − graphs", r["glue"], 0.5, r["torch_glue_us"]))
        out.append(f"- {r['workload']}: " + "; ".join(parts))
    return "\n".join(out)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*cmd: str) -> str | None:
    try:
        return subprocess.run(["git", "--no-optional-locks", *cmd], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.rstrip()
    except (OSError, subprocess.CalledProcessError):
        return None


def environment(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    try:
        import transformers

        transformers_version = transformers.__version__
    except ImportError:
        transformers_version = None
    status = _git("status", "--porcelain", "--untracked-files=no") or ""
    changed = sorted(line[2:].strip() for line in status.splitlines() if line.strip())
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python " + shlex.join(["bench/frontend.py", *argv]),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers_version,
        "torch_threads": torch.get_num_threads(),
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_uncommitted_changes": changed,
        "backend": args.backend,
        "device": args.device + (f" ({torch.cuda.get_device_name()})" if args.device.startswith("cuda") else ""),
        "quick": args.quick,
        "traces": args.traces,
        "dropped_traces": 0 if args.backend == "inductor" else 1,
        "calls": args.calls,
        "repeat": args.repeat,
        "sample_s": args.sample_s,
    }
    try:
        import stillframe

        env["stillframe"] = stillframe.__version__
    except ImportError:
        pass
    if args.backend == "inductor":
        cxx = next((c for c in ("g++", "c++", "clang++", "gcc", "cc") if shutil.which(c)), None)
        env["cxx"] = cxx and shutil.which(cxx)
        if cxx:
            try:
                env["cxx_version"] = subprocess.run([cxx, "--version"], capture_output=True, text=True,
                                                    check=True).stdout.splitlines()[0]
            except (OSError, subprocess.CalledProcessError, IndexError):
                env["cxx_version"] = None
        env["inductor_caches"] = "fresh_cache() around every first call (cold compiles)"
    return env


def format_environment(env: dict[str, Any]) -> str:
    changes = env["git_uncommitted_changes"]
    commit = f"{env['git_commit'] or 'unknown'}" + (f" plus uncommitted changes to {len(changes)} tracked file(s): "
                                       f"{', '.join(changes)}" if changes else "")
    lines = [
        f"Command: `{env['command']}`",
        f"Date: {env['date']}",
        f"Machine: {env['cpu']}, {env['cpu_count']} CPU(s) ({env['cpus_usable']} usable), {env['platform']}",
        (f"Python {env['python']}, torch {env['torch']}, transformers {env['transformers'] or 'not installed'}, "
         f"stillframe {env.get('stillframe', '?')}, {env['torch_threads']} torch thread(s)"),
        f"Commit: {commit}",
        (f"Backend: {env['backend']} on {env['device']}; {env['traces']} fresh trace(s) per workload and frontend "
         f"(+{env['dropped_traces']} dropped), {env['calls']} calls in the sequence, {env['repeat']} warm samples "
         f"of at least {env['sample_s']} s"),
    ]
    if env["backend"] == "inductor":
        cxx = f"{env['cxx']} ({env.get('cxx_version')})" if env.get("cxx") else "none found"
        lines.append(f"C++ compiler: {cxx}; inductor caches: {env['inductor_caches']}")
    return "\n".join(lines)


def check_inductor(frontends: list[Frontend]) -> str | None:
    """Compile and run a tiny function through each frontend with inductor; the reason it fails, or None.

    Also the warm-up for inductor mode: it pays inductor's imports and compile workers once.
    """
    if not any(shutil.which(c) for c in ("g++", "c++", "clang++", "gcc", "cc")):
        return "no C++ compiler on PATH (g++, c++, clang++, gcc, cc): inductor cannot build CPU kernels"

    def tiny(x):
        return torch.sin(x) * 2 + 1

    x = torch.randn(8)
    for f in frontends:
        try:
            f.reset()
            with _fresh_inductor_cache():
                got = f.compile(tiny)(x)
            torch.testing.assert_close(got, tiny(x))
            if f.name == "stillframe" and sys.modules["stillframe"].counters["fallbacks"]:
                return "stillframe fell back to eager on a tiny function with backend inductor"
        except Exception as e:  # any failure here means: no inductor on this machine
            return f"{f.name} with inductor failed on a tiny function: {type(e).__name__}: {e}".splitlines()[0]
        finally:
            f.reset()
            f.received.clear()
    return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("passthrough", "inductor"), default="passthrough",
                        help="passthrough (default): a backend that does not optimize, so the frontend alone is "
                             "timed; inductor: steady-state time per call against eager")
    parser.add_argument("--quick", action="store_true",
                        help="fewer repetitions (3 traces, 5 samples of 10 ms; inductor: 1 trace)")
    parser.add_argument("--json", metavar="PATH", help="write environment, rows and ratios to PATH")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--only-torch", action="store_true", help="measure torch.compile only")
    only.add_argument("--only-stillframe", action="store_true", help="measure stillframe only")
    parser.add_argument("--only", "--workload", dest="only", action="append", choices=[w.name for w in WORKLOADS],
                        metavar="NAME", help="run only this workload (repeatable): "
                                             + ", ".join(w.name for w in WORKLOADS))
    parser.add_argument("--traces", type=int,
                        help="fresh traces timed per workload and frontend (default 21, quick 3; inductor 1)")
    parser.add_argument("--calls", type=int, default=10,
                        help="calls in the sequence that counts graphs, breaks and recompiles (default 10)")
    parser.add_argument("--repeat", type=int, help="timing samples of warm calls (default 41, quick 5)")
    parser.add_argument("--sample-s", type=float,
                        help="seconds one timing sample lasts at least (default 0.05, quick 0.01)")
    parser.add_argument("--device", default="cpu",
                        help="where the workloads' modules and inputs live: cpu (default) or cuda; on cuda every "
                             "timed call waits for the GPU (torch.cuda.synchronize)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1, for steadier numbers)")
    args = parser.parse_args(argv)
    inductor = args.backend == "inductor"
    args.traces = args.traces or (1 if inductor else 3 if args.quick else 21)
    args.repeat = args.repeat or (5 if args.quick else 41)
    args.sample_s = args.sample_s or (0.01 if args.quick else 0.05)
    if args.calls < 2:
        parser.error("--calls must be at least 2")
    return args


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    which = ["torch.compile"] if args.only_torch else ["stillframe"] if args.only_stillframe else list(FRONTENDS)
    inductor = args.backend == "inductor"
    frontends = make_frontends(which, inductor_backend() if inductor else passthrough)
    env = environment(args, argv)
    result: dict[str, Any] = {"environment": env, "rows": [], "ratios": [], "skipped": {}}

    def finish(text: str, status: int) -> int:
        elapsed = time.perf_counter() - started
        env["wall_s"] = round(elapsed, 1)
        print(text)
        print(f"\nWall time: {elapsed:.0f} s")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2, default=str) + "\n")
            print(f"wrote {args.json}")
        return status

    if inductor:
        print("checking that inductor compiles here (and warming it up) ...", file=sys.stderr, flush=True)
        reason = check_inductor(frontends)
        if reason is not None:
            result["skipped"]["inductor"] = reason
            return finish(f"{format_environment(env)}\n\nSKIPPED: inductor cannot compile on this machine: {reason}", 0)

    workloads = [on_device(w, args.device) for w in WORKLOADS if args.only is None or w.name in args.only]
    rows: list[Row] = []
    for workload in workloads:
        if workload.requires is not None:
            print(f"skipping {workload.name}: {workload.requires}", file=sys.stderr, flush=True)
            result["skipped"][workload.name] = workload.requires
            continue
        print(f"measuring {workload.name} ({workload.description}) ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        rows += bench_workload(workload, frontends, args)
        print(f"  {workload.name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    ratio_rows = ratios(rows)
    result["rows"], result["ratios"] = [asdict(r) for r in rows], ratio_rows

    parts = [format_environment(env), "", format_table(rows, ratio_rows, args.backend)]
    if result["skipped"]:
        parts += ["", *(f"Skipped {name}: {why}" for name, why in result["skipped"].items())]
    if not inductor and ratio_rows:
        parts += ["", format_aims(ratio_rows)]
    return finish("\n".join(parts), 0 if all(r.same_result for r in rows) else 1)


if __name__ == "__main__":
    sys.exit(main())
