"""Frontend cost of stillframe next to torch.compile (TorchDynamo), in one process.

Both frontends hand their graphs to the same backend, one that does not
optimize (:func:`passthrough` runs the FX graph as generated), so what is
measured is the frontend alone: how long the first call takes (bytecode
interpretation, guard building, FX codegen), and what every later call costs
on top of eager PyTorch (guard check, fetching graph inputs, calling the graph,
rebuilding the result).

Workloads: ``add1`` (``x + 1`` on a 1-element tensor), ``linear_chain`` (10
``nn.Linear(4, 4)`` layers called one after another: 20 parameters), ``gpt``
(examples/gpt.py, forward with targets).

Run from the repository root::

    python bench/frontend.py                 # full run, prints a table
    python bench/frontend.py --quick         # fewer repetitions
    python bench/frontend.py --json out.json # also write the numbers
    python bench/frontend.py --only-torch    # torch.compile half only

See bench/README.md for what each column means.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # examples/ and, in a bare checkout, stillframe/

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch import nn  # noqa: E402

from examples.gpt import make_batch, make_model  # noqa: E402


def passthrough(gm, example_inputs):
    """A backend that does not optimize: the captured graph runs as FX generated it."""
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


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    make_fn: Callable[[], Callable]  # the eager function or module (built once, shared by both frontends)
    make_args: Callable[[], tuple]


def _linear_chain() -> LinearChain:
    torch.manual_seed(0)
    return LinearChain()


WORKLOADS = (
    Workload("add1", "x + 1, x a 1-element tensor", lambda: add_one, lambda: (torch.ones(1),)),
    Workload("linear_chain", "10 x nn.Linear(4, 4), 20 parameters", _linear_chain, lambda: (torch.randn(8, 4),)),
    Workload("gpt", "examples/gpt.py, forward with targets", lambda: make_model(seed=0), lambda: make_batch()),
)


# ---------------------------------------------------------------------------
# Frontends
# ---------------------------------------------------------------------------


@dataclass
class Frontend:
    """How to compile with one frontend; ``graphs`` counts graphs its backend received."""

    name: str
    compile: Callable[[Callable, Callable], Callable]  # (fn, backend) -> compiled
    graphs: collections.Counter = field(default_factory=collections.Counter)

    def backend(self, key: str):
        def counting_passthrough(gm, example_inputs):
            self.graphs[key] += 1
            return passthrough(gm, example_inputs)

        return counting_passthrough


def make_frontends(which: list[str]) -> list[Frontend]:
    frontends = []
    if "stillframe" in which:
        import stillframe

        frontends.append(Frontend("stillframe", lambda fn, backend: stillframe.compile(fn, backend=backend)))
    if "torch.compile" in which:
        frontends.append(Frontend("torch.compile", lambda fn, backend: torch.compile(fn, backend=backend)))
    return frontends


def reset_all() -> None:
    """Forget every compiled graph of both frontends (brief: a fresh trace each time)."""
    if "stillframe" in sys.modules:
        sys.modules["stillframe"].reset()
    torch._dynamo.reset()


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


def first_call_ms(frontend: Frontend, fn: Callable, make_args: Callable, traces: int) -> list[float]:
    """Times (ms) of the first call of a freshly compiled ``fn``, each after a full reset.

    One extra trace runs first and is dropped: it pays for lazy imports and
    one-time initialisation that no later trace in the process pays again.
    """
    samples = []
    for _ in range(traces + 1):
        reset_all()
        compiled = frontend.compile(fn, frontend.backend("first_call"))
        args = make_args()
        gc.collect()
        start = time.perf_counter()
        compiled(*args)
        samples.append((time.perf_counter() - start) * 1e3)
    return samples[1:]


def calls_per_sample(call: Callable, args: tuple, target_s: float) -> int:
    """How many calls make one timing sample last at least ``target_s`` (like timeit's autorange)."""
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            call(*args)
        if time.perf_counter() - start >= target_s or number >= 1 << 20:
            return number
        number *= 2


def per_call_us(callables: dict[str, Callable], args: tuple, repeat: int, target_s: float) -> dict[str, list[float]]:
    """Per-call time (us) of each callable: ``repeat`` samples, each the mean of a batch of calls.

    The callables take turns sample by sample, so drift in the machine's speed
    falls on all of them alike; the garbage collector is off while timing.
    """
    numbers = {name: calls_per_sample(call, args, target_s) for name, call in callables.items()}
    samples: dict[str, list[float]] = {name: [] for name in callables}
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for name, call in callables.items():
                number = numbers[name]
                start = time.perf_counter_ns()
                for _ in range(number):
                    call(*args)
                samples[name].append((time.perf_counter_ns() - start) / number / 1e3)
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def same_result(expected, actual) -> bool:
    """Whether a compiled call returned what eager did (so the timings compare like with like)."""
    want, got = _tensors(expected), _tensors(actual)
    if len(want) != len(got):
        return False
    try:
        for w, g in zip(want, got):
            torch.testing.assert_close(g, w)
    except AssertionError:
        return False
    return True


@dataclass
class Row:
    """One workload under one frontend; times are medians, samples are kept for the JSON.

    ``overhead_us`` is the median of the paired differences (compiled sample
    minus the eager sample of the same round), which is steadier than the
    difference of the two medians when the machine's speed drifts.
    """

    workload: str
    frontend: str
    first_call_ms: float
    call_us: float
    eager_us: float
    overhead_us: float
    graphs: int  # graphs the backend received while tracing for the warm calls
    same_result: bool
    notes: list[str] = field(default_factory=list)
    first_call_ms_samples: list[float] = field(default_factory=list)
    call_us_samples: list[float] = field(default_factory=list)
    eager_us_samples: list[float] = field(default_factory=list)


def bench_workload(workload: Workload, frontends: list[Frontend], traces: int, repeat: int, target_s: float) -> list[Row]:
    fn = workload.make_fn()
    args = workload.make_args()
    first = {f.name: first_call_ms(f, fn, workload.make_args, traces) for f in frontends}

    reset_all()
    compiled = {}
    checks = {}
    expected = fn(*args)
    for f in frontends:
        compiled[f.name] = f.compile(fn, f.backend(workload.name))
        checks[f.name] = same_result(expected, compiled[f.name](*args))  # also the tracing call
    for _ in range(3):  # warm every path once more before timing
        for call in (fn, *compiled.values()):
            call(*args)
    times = per_call_us({"eager": fn, **compiled}, args, repeat, target_s)

    fallbacks = 0
    if "stillframe" in compiled:
        fallbacks = sys.modules["stillframe"].counters["fallbacks"]
    eager_us = statistics.median(times["eager"])
    rows = []
    for f in frontends:
        call_us = statistics.median(times[f.name])
        notes = []
        if not checks[f.name]:
            notes.append("result differs from eager")
        if f.name == "stillframe" and fallbacks:
            notes.append(f"{fallbacks} eager fallback(s)")
        if f.graphs[workload.name] != 1:
            notes.append(f"{f.graphs[workload.name]} graphs")
        rows.append(
            Row(
                workload=workload.name,
                frontend=f.name,
                first_call_ms=statistics.median(first[f.name]),
                call_us=call_us,
                eager_us=eager_us,
                # samples alternate, so pair each with the eager sample taken beside it
                overhead_us=statistics.median(c - e for c, e in zip(times[f.name], times["eager"])),
                graphs=f.graphs[workload.name],
                same_result=checks[f.name],
                notes=notes,
                first_call_ms_samples=first[f.name],
                call_us_samples=times[f.name],
                eager_us_samples=times["eager"],
            )
        )
    return rows


def ratios(rows: list[Row]) -> list[dict[str, Any]]:
    """stillframe / torch.compile per workload; overhead ratio only where torch's overhead is over 0.5 us."""
    by_key = {(r.workload, r.frontend): r for r in rows}
    out = []
    for workload in dict.fromkeys(r.workload for r in rows):
        sf, tc = by_key.get((workload, "stillframe")), by_key.get((workload, "torch.compile"))
        if sf is None or tc is None:
            continue
        out.append(
            {
                "workload": workload,
                "first_call": sf.first_call_ms / tc.first_call_ms,
                "call": sf.call_us / tc.call_us,
                "overhead": sf.overhead_us / tc.overhead_us if tc.overhead_us > 0.5 else None,
            }
        )
    return out


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def format_table(rows: list[Row], ratio_rows: list[dict[str, Any]]) -> str:
    header = ("workload", "frontend", "first call ms", "call us", "eager us", "overhead us", "graphs", "notes")
    lines: list[tuple[str, ...]] = []
    ratio_by_workload = {r["workload"]: r for r in ratio_rows}
    for workload in dict.fromkeys(r.workload for r in rows):
        for r in (r for r in rows if r.workload == workload):
            lines.append(
                (
                    r.workload,
                    r.frontend,
                    f"{r.first_call_ms:.2f}",
                    f"{r.call_us:.1f}",
                    f"{r.eager_us:.1f}",
                    f"{r.overhead_us:.1f}",
                    str(r.graphs),
                    "; ".join(r.notes),
                )
            )
        ratio = ratio_by_workload.get(workload)
        if ratio is not None:
            overhead = "n/a" if ratio["overhead"] is None else f"{ratio['overhead']:.2f}x"
            lines.append(
                (workload, "stillframe/torch", f"{ratio['first_call']:.2f}x", f"{ratio['call']:.2f}x", "", overhead, "", "")
            )
    widths = [max(len(row[i]) for row in (header, *lines)) for i in range(len(header))]
    numeric = {2, 3, 4, 5, 6}

    def fmt(row):
        cells = [cell.rjust(w) if i in numeric else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *map(fmt, lines)])


def environment(args: argparse.Namespace) -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "git_commit": commit,
        "quick": args.quick,
        "traces": args.traces,
        "repeat": args.repeat,
        "sample_s": args.sample_s,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (3 traces, 5 samples of 10 ms)")
    parser.add_argument("--json", metavar="PATH", help="write environment, rows and ratios to PATH")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--only-torch", action="store_true", help="measure torch.compile only")
    only.add_argument("--only-stillframe", action="store_true", help="measure stillframe only")
    parser.add_argument(
        "--workload", action="append", choices=[w.name for w in WORKLOADS], help="run only this workload (repeatable)"
    )
    parser.add_argument("--traces", type=int, help="fresh traces timed per workload and frontend (default 11, quick 3)")
    parser.add_argument("--repeat", type=int, help="timing samples of warm calls (default 21, quick 5)")
    parser.add_argument("--sample-s", type=float, help="seconds one timing sample lasts at least (default 0.05, quick 0.01)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1, for steadier numbers)")
    args = parser.parse_args(argv)
    args.traces = args.traces or (3 if args.quick else 11)
    args.repeat = args.repeat or (5 if args.quick else 21)
    args.sample_s = args.sample_s or (0.01 if args.quick else 0.05)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    which = ["torch.compile"] if args.only_torch else ["stillframe"] if args.only_stillframe else ["stillframe", "torch.compile"]
    frontends = make_frontends(which)
    workloads = [w for w in WORKLOADS if args.workload is None or w.name in args.workload]

    rows: list[Row] = []
    for workload in workloads:
        print(f"measuring {workload.name} ({workload.description}) ...", file=sys.stderr, flush=True)
        rows += bench_workload(workload, frontends, args.traces, args.repeat, args.sample_s)
    ratio_rows = ratios(rows)

    env = environment(args)
    print(f"\npython {env['python']}, torch {env['torch']}, {env['processor']}, {env['torch_threads']} thread(s), "
          f"{args.traces} traces, {args.repeat} samples")
    print(format_table(rows, ratio_rows))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"environment": env, "rows": [asdict(r) for r in rows], "ratios": ratio_rows}, indent=2) + "\n"
        )
        print(f"\nwrote {args.json}")
    return 0 if all(r.same_result for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
