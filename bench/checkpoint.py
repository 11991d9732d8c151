"""Checkpoint and restore cost of the tracer, against the length of the trace (DESIGN invariant 2).

The tracer's state is persistent (:mod:`stillframe.trace.state`), so
``tracer.checkpoint()`` is a reference to the current state plus the FX
graph's length, and ``tracer.restore(token)`` re-binds the state and erases
the FX nodes added after the mark. Neither should depend on how long the
trace already is. This measures it on traces of 10, 100 and 1000 graph nodes.

Workload: a generated function ``f(x)`` of ``N - 1`` lines ``x = x + 1`` (one
placeholder and ``N - 1`` add nodes: ``N`` graph nodes), interpreted up to
the last instruction (``RETURN_VALUE`` not run). At that point:

* ``checkpoint``: ``token = tracer.checkpoint()``;
* ``restore (0 back)``: ``tracer.restore(token)`` to a token taken just
  before, so no FX node is erased: the fixed cost of restoring;
* ``ckpt + restore``: the two together, the pair a speculative step pays;
* ``restore (k back)``: restore to a token taken ``k`` nodes earlier (``k``
  lines, ``4 k`` instructions), which erases ``k`` FX nodes: ``O(k)``. The
  states interpreted since the token are dropped, and freed, inside the
  restore; a second column keeps them alive to time the restore alone;
* ``retrace``: TorchDynamo's alternative to a persistent state, re-tracing
  from the start: ``start_trace(f, L)`` and interpreting to the same point;
  the ratio column is ``retrace / (ckpt + restore)``.

Cheap operations are timed in batches (``--inner`` calls per sample, the
median of ``--repeat`` samples); ``restore (k back)`` is timed one call at a
time (the ``k`` nodes have to be re-traced, untimed, before each sample).
The garbage collector is off while timing.

Run from the repository root::

    python bench/checkpoint.py                          # full run, prints a table
    python bench/checkpoint.py --quick                  # fewer repetitions
    python bench/checkpoint.py --markdown               # also print a docs/benchmarks.md section
    python bench/checkpoint.py --append docs/benchmarks.md   # append that section to the file
"""

from __future__ import annotations

import argparse
import gc
import linecache
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # in a bare checkout, stillframe/

import torch  # noqa: E402

import stillframe  # noqa: E402
from stillframe.runtime.compiler import start_trace  # noqa: E402
from stillframe.trace.interpreter import Tracer  # noqa: E402

HEADING = "## Checkpoint and restore (bench/checkpoint.py)"
INSTRUCTIONS_PER_LINE = 4  # LOAD_FAST x, LOAD_CONST 1, BINARY_OP +, STORE_FAST x


def chain_function(n_nodes: int) -> Callable:
    """``def f(x): x = x + 1`` repeated ``n_nodes - 1`` times, ``return x``: ``n_nodes`` graph nodes."""
    body = "".join("    x = x + 1\n" for _ in range(n_nodes - 1))
    src = f"def f(x):\n{body}    return x\n"
    filename = f"<bench/checkpoint.py chain {n_nodes}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(src, filename, "exec"), namespace)
    return namespace["f"]


def count_instructions(fn: Callable, L: dict) -> int:
    tracer = start_trace(fn, L)
    tracer.run()
    return tracer.steps


def trace_to(fn: Callable, L: dict, steps: int) -> Tracer:
    tracer = start_trace(fn, L)
    for _ in range(steps):
        tracer.step()
    return tracer


def batched_us(op: Callable[[], None], inner: int, repeat: int) -> float:
    """Median over ``repeat`` samples of the mean time of ``inner`` calls of ``op``, in microseconds."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(inner):
            op()
        samples.append((time.perf_counter_ns() - t0) / inner / 1e3)
    return statistics.median(samples)


def measure(n_nodes: int, k: int, inner: int, repeat: int, repeat_k: int, repeat_retrace: int) -> dict[str, Any]:
    fn = chain_function(n_nodes)
    L = {"x": torch.randn(4)}
    total = count_instructions(fn, L)
    end = total - 1  # every instruction but RETURN_VALUE
    tracer = trace_to(fn, L, end)
    assert tracer.result is None and len(tracer.graph.nodes) == n_nodes, (len(tracer.graph.nodes), n_nodes)
    code_before = tracer.graph.graph.python_code("self").src

    gc.collect()
    gc.disable()
    try:
        # checkpoint alone
        checkpoint_us = batched_us(tracer.checkpoint, inner, repeat)

        # restore to a token taken just before: nothing to erase
        token = tracer.checkpoint()
        restore0_us = batched_us(lambda: tracer.restore(token), inner, repeat)

        # the pair
        def pair() -> None:
            tracer.restore(tracer.checkpoint())

        pair_us = batched_us(pair, inner, repeat)
        assert tracer.state is token.state and len(tracer.graph.nodes) == n_nodes

        # restore to a token k nodes back: erases k FX nodes (re-trace them, untimed, before each sample);
        # a trace shorter than k + 1 nodes rolls back all its ops (k_eff = N - 1). Timed twice: as is (the
        # states and fakes the restore drops are freed inside it), and with them kept alive (restore alone).
        k_eff = min(k, n_nodes - 1)
        back = k_eff * INSTRUCTIONS_PER_LINE
        tracer.restore(token)
        early = trace_to(fn, L, end - back)  # a tracer positioned k_eff nodes before the end
        restore_k = {}
        for keep in (False, True):
            samples, kept = [], []
            for _ in range(repeat_k):
                token_k = early.checkpoint()
                for _ in range(back):
                    early.step()
                    if keep:
                        kept.append(early.state)
                assert len(early.graph.nodes) == token_k.graph_mark + k_eff
                t0 = time.perf_counter_ns()
                early.restore(token_k)
                samples.append((time.perf_counter_ns() - t0) / 1e3)
            restore_k[keep] = statistics.median(samples)
            del kept
        restore_k_us, restore_k_kept_us = restore_k[False], restore_k[True]

        # retrace from the start to the same point
        samples = []
        for _ in range(repeat_retrace):
            t0 = time.perf_counter_ns()
            trace_to(fn, L, end)
            samples.append((time.perf_counter_ns() - t0) / 1e3)
        retrace_us = statistics.median(samples)
    finally:
        gc.enable()

    assert tracer.graph.graph.python_code("self").src == code_before  # restoring changed nothing
    return {
        "nodes": n_nodes,
        "instructions": end,
        "checkpoint_us": checkpoint_us,
        "restore0_us": restore0_us,
        "pair_us": pair_us,
        "k": k_eff,
        "restore_k_us": restore_k_us,
        "restore_k_kept_us": restore_k_kept_us,
        "retrace_us": retrace_us,
        "ratio": retrace_us / pair_us,
        "ratio_k": retrace_us / restore_k_us,
    }


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown processor"


def environment() -> dict[str, str]:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.strip()
        if dirty:
            commit += " + uncommitted changes"
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "stillframe": stillframe.__version__,
        "machine": f"{_cpu_name()} ({platform.machine()}, {os.cpu_count()} CPUs)",
        "platform": platform.platform(),
        "commit": commit,
    }


def _fmt(v: float, digits: int = 2) -> str:
    return "n/a" if v != v else f"{v:,.{digits}f}"


def table(rows: list[dict[str, Any]], k: int) -> str:
    header = (f"| graph nodes | instructions | checkpoint (µs) | restore, 0 back (µs) | ckpt + restore (µs) "
              f"| restore, {k} back (µs) | same, dropped states kept alive (µs) | retrace (µs) "
              f"| retrace ÷ (ckpt + restore) | retrace ÷ restore {k} back |")
    lines = [header, "|" + "---:|" * 10]
    for r in rows:
        k_note = "" if r["k"] == k else f" ({r['k']} back)"
        lines.append(
            f"| {r['nodes']} | {r['instructions']} | {_fmt(r['checkpoint_us'])} | {_fmt(r['restore0_us'])} "
            f"| {_fmt(r['pair_us'])} | {_fmt(r['restore_k_us'], 1)}{k_note} | {_fmt(r['restore_k_kept_us'], 1)} "
            f"| {_fmt(r['retrace_us'], 0)} "
            f"| {_fmt(r['ratio'], 0)}x | {_fmt(r['ratio_k'], 0)}x |"
        )
    return "\n".join(lines)


def _span(rows: list[dict[str, Any]], key: str, digits: int = 2) -> str:
    values = [r[key] for r in rows]
    lo, hi = min(values), max(values)
    return _fmt(lo, digits) if _fmt(lo, digits) == _fmt(hi, digits) else f"{_fmt(lo, digits)} to {_fmt(hi, digits)}"


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace, command: str) -> str:
    env = environment()
    sizes = ", ".join(str(r["nodes"]) for r in rows[:-1]) + f" or {rows[-1]['nodes']} nodes" if len(rows) > 1 \
        else f"{rows[0]['nodes']} nodes"
    ck, r0 = _span(rows, "checkpoint_us"), _span(rows, "restore0_us")
    rk, rkk, rt = _span(rows, "restore_k_us", 1), _span(rows, "restore_k_kept_us", 1), _span(rows, "retrace_us", 0)
    return f"""
{HEADING}

Command: `{command}` (median of {args.repeat} samples of {args.inner} calls for checkpoint and restore,
{args.repeat_k} single calls for the restore {args.k} nodes back, {args.repeat_retrace} re-traces; the garbage
collector off while timing).

Machine: {env['machine']}, {env['platform']}; Python {env['python']}, torch {env['torch']},
stillframe {env['stillframe']} at {env['commit']}. Date: {time.strftime('%Y-%m-%d')}.

Workload: `def f(x)` of `N - 1` lines `x = x + 1` (`N` graph nodes: one placeholder, `N - 1` adds),
interpreted up to its last instruction; then `token = tracer.checkpoint()` and `tracer.restore(token)`.

{table(rows, args.k)}

Reading it:

- Checkpoint and restore cost the same on a trace of {sizes}: {ck} µs and {r0} µs. A checkpoint is a
  reference to the persistent state plus the FX graph's length; a restore to a token taken just before
  re-binds the state and erases nothing.
- Restoring a token taken {args.k} nodes back costs what erasing {args.k} FX nodes costs (`Graph.erase_node`,
  about 1 µs a node) plus freeing what the restore drops: {rk} µs. With the dropped states kept
  alive, the restore alone costs {rkk} µs; the difference is the deallocation of the states interpreted
  since the token (their persistent-map path copies get deeper as the heap grows, log32 of its size)
  and of the erased ops' fake tensors: the cost of discarding that work, `O(k log N)`, not a copy.
- Re-tracing from the start, what a tracer without a persistent state does to get back to an earlier
  point, grows with the trace ({rt} µs); the last two columns are how many checkpoint + restore pairs
  (or {args.k}-node rollbacks) one re-trace to the same point costs.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000], help="graph nodes per trace")
    parser.add_argument("--k", type=int, default=10, help="nodes rolled back in the 'k back' column")
    parser.add_argument("--inner", type=int, default=1000, help="calls per sample for checkpoint/restore")
    parser.add_argument("--repeat", type=int, default=201, help="samples for checkpoint/restore")
    parser.add_argument("--repeat-k", type=int, default=501, help="samples of the restore k nodes back")
    parser.add_argument("--repeat-retrace", type=int, default=21, help="samples of the re-trace")
    parser.add_argument("--quick", action="store_true", help="few repetitions: a smoke run")
    parser.add_argument("--markdown", action="store_true", help="print the docs/benchmarks.md section")
    parser.add_argument("--append", metavar="PATH", help="append the docs/benchmarks.md section to PATH")
    args = parser.parse_args(argv)
    if args.quick:
        args.inner, args.repeat, args.repeat_k, args.repeat_retrace = 100, 11, 21, 3
    torch.set_num_threads(1)
    stillframe.config.max_trace_steps = 10**9  # the 'k back' column re-traces the same nodes many times

    rows = []
    for n in args.sizes:
        rows.append(measure(n, args.k, args.inner, args.repeat, args.repeat_k, args.repeat_retrace))
        r = rows[-1]
        print(f"N={n:5d}: checkpoint {r['checkpoint_us']:.2f} µs, restore {r['restore0_us']:.2f} µs, "
              f"pair {r['pair_us']:.2f} µs, restore {args.k} back {r['restore_k_us']:.1f} µs, "
              f"retrace {r['retrace_us']:,.0f} µs", file=sys.stderr)
    print(table(rows, args.k))
    shown = [a for a in (sys.argv[1:] if argv is None else argv) if a not in ("--markdown", "--append", args.append)]
    command = " ".join(["python bench/checkpoint.py"] + shown)
    if args.markdown or args.append:
        section = markdown(rows, args, command)
        if args.markdown:
            print(section)
        if args.append:
            with open(args.append, "a", encoding="utf-8") as f:
                f.write(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
