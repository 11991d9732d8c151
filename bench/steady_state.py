"""Steady state after graph breaks, and ``compile(opt.step)``, side by side with torch.compile (issue 15).

Two tables:

1. **steady state**: for small programs that go through a graph break (a Python-only call, a profiler
   context manager, a float from a real call), the traces per call after warm-up (must be 0), and the time
   per call of eager, stillframe and torch.compile.
2. **optimizer step**: ``compile(opt.step)`` per step for SGD (momentum), Adam and AdamW on a small MLP,
   against eager and torch.compile (median over the timed steps; backward outside the compiled step).

Run: ``python bench/steady_state.py [--backend eager] [--calls 200] [--steps 50]``. Both frontends get the same
backend (``eager`` by default: the numbers are the frontends', not code generation's).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import warnings

import torch
import torch._dynamo
from torch import nn

import stillframe
from stillframe.check import steady_programs

PROGRAMS = [*steady_programs.PROGRAMS, steady_programs.clock]
OPTIMIZERS = {
    "SGD": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "Adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "AdamW": lambda p: torch.optim.AdamW(p, lr=1e-3),
}


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


def _steps(make_opt, compile_step, steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = make_opt(model.parameters())
    step = compile_step(opt.step)
    x = torch.randn(32, 64)
    times = []
    for _ in range(steps):
        model(x).pow(2).mean().backward()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
        opt.zero_grad()
    return statistics.median(times[5:])


def optimizer_steps(backend, steps):
    rows = []
    for name, make_opt in OPTIMIZERS.items():
        eager = _steps(make_opt, lambda s: s, steps)
        stillframe.reset()
        ours = _steps(make_opt, lambda s: stillframe.compile(s, backend=backend), steps)
        torch._dynamo.reset()
        theirs = _steps(make_opt, lambda s: torch.compile(s, backend=backend), steps)
        rows.append((name, eager, ours, theirs))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--steps", type=int, default=50)
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
    print(f"\ncompile(opt.step), median per step over {args.steps - 5} steps (MLP 64-128-10, batch 32)")
    print("| optimizer | eager | stillframe | torch.compile |")
    print("|---|---|---|---|")
    for name, eager, ours, theirs in optimizer_steps(args.backend, args.steps):
        print(f"| {name} | {eager * 1e3:.3f} ms | {ours * 1e3:.3f} ms | {theirs * 1e3:.3f} ms |")


if __name__ == "__main__":
    main()
