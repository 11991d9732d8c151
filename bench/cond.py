"""Trace time of ``torch.cond`` nested N deep (N = 1..6): stillframe next to torch.compile (issue 13).

Workload ``nested(N)``: ``f(x)`` is ``torch.cond(x.sum() > k, true_fn, false_fn, (x,))`` whose true branch
is ``nested(N - 1)`` applied to ``x.sin()`` and whose false branch is ``x.cos() * k``; ``nested(0)`` is
``x + 1``. So there are N cond ops, one inside the other's true branch, and 2N + 1 branch bodies
traced. Each frontend hands its graph to the same pass-through backend (``gm.forward``: no compiler
cost), so the first call is tracing alone.

Measured per N, for each frontend: the first call on a fresh compile (median of ``--traces`` samples, each
after ``reset()``), the steady call (median of ``--repeat`` batches of warm calls), graphs and graph
breaks in one compile (both capture one graph with N nested cond ops). stillframe speculates each branch
from one O(1) checkpoint, so its trace time should grow with the number of bodies traced, not with
restarts; the ``ratio`` columns are stillframe / torch.compile.

Run from the repository root::

    python bench/cond.py            # N = 1..6, prints a table
    python bench/cond.py --quick    # fewer samples
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # in a bare checkout, stillframe/

import torch  # noqa: E402

import stillframe  # noqa: E402


def nested(n: int) -> Callable:
    """The workload of depth ``n`` (a new function object, so no frontend reuses a cache)."""
    if n == 0:
        return lambda x: x + 1
    inner = nested(n - 1)

    def true_fn(a):
        return inner(a.sin())

    def false_fn(a):
        return a.cos() * n

    def f(x):
        return torch.cond(x.sum() > n / 10, true_fn, false_fn, (x,))

    return f


def passthrough(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    if hasattr(gm, "real_recompile"):
        gm.real_recompile()
    return gm.forward


def capturing(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The pass-through backend, keeping torch.compile's graphs (to count them)."""
    CAPTURED.append(gm)
    return passthrough(gm, example_inputs)


def frontends() -> dict[str, Callable]:
    def sf(fn):
        stillframe.reset()
        return stillframe.compile(fn, backend=passthrough)

    def tc(fn):
        torch._dynamo.reset()
        CAPTURED.clear()
        return torch.compile(fn, backend=capturing)

    return {"stillframe": sf, "torch.compile": tc}


def counts(name: str, compiled: Callable) -> tuple[int, int, int]:
    """(graphs, graph breaks, cond ops) of one compile, after it ran."""
    if name == "stillframe":
        entries = [e for es in compiled.all_cache_entries().values() for e in es]
        gms = [e.graph_module for e in entries if e.graph_module is not None]
        breaks = sum(e.graph_break is not None for e in entries)
    else:
        gms = CAPTURED
        breaks = max(len(gms) - 1, 0)
    conds = sum(1 for gm in gms for m in gm.modules() if isinstance(m, torch.fx.GraphModule)
                for node in m.graph.nodes if node.target is torch.ops.higher_order.cond)
    return len(gms), breaks, conds


CAPTURED: list = []


def measure(n: int, traces: int, repeat: int) -> dict:
    x = torch.randn(64)
    row = {"N": n}
    for name, make in frontends().items():
        firsts = []
        for _ in range(traces):
            fn = nested(n)
            compiled = make(fn)
            gc.collect()
            gc.disable()
            start = time.perf_counter()
            compiled(x)
            firsts.append(time.perf_counter() - start)
            gc.enable()
        expected = fn(x)
        torch.testing.assert_close(compiled(x), expected)
        batches = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(20):
                compiled(x)
            batches.append((time.perf_counter() - start) / 20)
        graphs, breaks, conds = counts(name, compiled)
        row[name] = {"first_ms": statistics.median(firsts) * 1e3, "call_us": statistics.median(batches) * 1e6,
                     "graphs": graphs, "breaks": breaks, "conds": conds}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--traces", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    traces, repeat = (2, 3) if args.quick else (args.traces, args.repeat)
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}; first call = trace (pass-through backend)")
    header = (f"{'N':>2} | {'stillframe first ms':>19} {'torch.compile first ms':>22} {'ratio':>6} | "
              f"{'sf call us':>10} {'tc call us':>10} {'ratio':>6} | graphs/breaks/conds sf, tc")
    print(header)
    print("-" * len(header))
    for n in range(1, args.max_depth + 1):
        row = measure(n, traces, repeat)
        sf, tc = row["stillframe"], row["torch.compile"]
        print(f"{n:>2} | {sf['first_ms']:>19.1f} {tc['first_ms']:>22.1f} {sf['first_ms'] / tc['first_ms']:>6.2f} | "
              f"{sf['call_us']:>10.1f} {tc['call_us']:>10.1f} {sf['call_us'] / tc['call_us']:>6.2f} | "
              f"{sf['graphs']}/{sf['breaks']}/{sf['conds']}, {tc['graphs']}/{tc['breaks']}/{tc['conds']}")


if __name__ == "__main__":
    main()
