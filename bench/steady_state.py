"""Steady state after graph breaks, side by side with torch.compile (issue 15).

For small programs that go through a graph break (a Python-only call, a profiler context manager, a float
from a real call; :mod:`stillframe.check.steady_programs`), the traces per call after warm-up (must be 0),
and the time per call of eager, stillframe and torch.compile. ``compile(opt.step)`` has its own benchmark,
``bench/optimizer_step.py``.

Run: ``python bench/steady_state.py [--backend eager] [--calls 200]``. Both frontends get the same backend
(``eager`` by default: the numbers are the frontends', not code generation's).
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings

import torch
import torch._dynamo

import stillframe
from stillframe.check import steady_programs

PROGRAMS = [*steady_programs.PROGRAMS, steady_programs.clock]


def _per_call(fn, x, calls):
    for _ in range(3):
        fn(x)
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - start) / calls


def steady_state(backend, calls):
    rows = []
    x = torch.randn(8)
    for fn in PROGRAMS:
        stillframe.reset()
        ours = stillframe.compile(fn, backend=backend)
        for _ in range(3):
            ours(x)
        traces = stillframe.counters["traces"]
        ours_s = _per_call(ours, x, calls)
        per_call = (stillframe.counters["traces"] - traces) / (calls + 3)
        torch._dynamo.reset()
        theirs_s = _per_call(torch.compile(fn, backend=backend), x, calls)
        rows.append((fn.__name__, per_call, _per_call(fn, x, calls), ours_s, theirs_s))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, Python {platform.python_version()}, {platform.processor() or platform.machine()}, "
          f"backend {args.backend!r}, 1 thread")
    print("\nsteady state (per call, after warm-up)")
    print(f"| program | stillframe traces per call | eager | stillframe | torch.compile |")
    print("|---|---|---|---|---|")
    for name, per_call, eager, ours, theirs in steady_state(args.backend, args.calls):
        print(f"| `{name}` | {per_call:.2f} | {eager * 1e6:.0f} us | {ours * 1e6:.0f} us | {theirs * 1e6:.0f} us |")


if __name__ == "__main__":
    main()
