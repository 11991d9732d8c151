"""Steady state after graph breaks, side by side with torch.compile (issue 15).

For small programs that go through a graph break (a Python-only call, a profiler context manager, a float
from a real call; :mod:`stillframe.check.steady_programs`), the traces per call after warm-up (must be 0),
and the time per call of eager, stillframe and torch.compile. Then the same for ``compile(opt.step)`` of the custom
optimizers of :data:`stillframe.check.steady_programs.CUSTOM_OPTIMIZERS` (their lazy ``self.state[p]``; time per
step, the grads made once before). torch.optim's own classes have their own benchmark, ``bench/optimizer_step.py``.

Run: ``python bench/steady_state.py [--backend eager] [--calls 200] [--only programs|optimizers]``. Both frontends
get the same backend (``eager`` by default: the numbers are the frontends', not code generation's).
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


def _optimizer_step(optimizer, compile_step):
    """A fresh model with grads, its optimizer, and its (possibly compiled) ``step``."""
    torch.manual_seed(0)
    model = steady_programs.optimizer_model()
    torch.nn.functional.mse_loss(model(torch.randn(16, 4)), torch.randn(16, 2)).backward()
    opt = optimizer(model.parameters())
    return compile_step(opt.step)


def _per_step(step, calls):
    return _per_call(lambda _: step(), None, calls)


def custom_optimizers(backend, calls):
    rows = []
    for optimizer in steady_programs.CUSTOM_OPTIMIZERS:
        stillframe.reset()
        ours = _optimizer_step(optimizer, lambda step: stillframe.compile(step, backend=backend))
        for _ in range(3):
            ours()
        traces = stillframe.counters["traces"]
        ours_s = _per_step(ours, calls)
        per_call = (stillframe.counters["traces"] - traces) / (calls + 3)
        torch._dynamo.reset()
        theirs_s = _per_step(_optimizer_step(optimizer, lambda step: torch.compile(step, backend=backend)), calls)
        eager_s = _per_step(_optimizer_step(optimizer, lambda step: step), calls)
        rows.append((optimizer.__name__, per_call, eager_s, ours_s, theirs_s))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--only", choices=["programs", "optimizers"], help="run one of the two tables")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, Python {platform.python_version()}, {platform.processor() or platform.machine()}, "
          f"backend {args.backend!r}, 1 thread")
    if args.only != "optimizers":
        print("\nsteady state (per call, after warm-up)")
        print(f"| program | stillframe traces per call | eager | stillframe | torch.compile |")
        print("|---|---|---|---|---|")
        for name, per_call, eager, ours, theirs in steady_state(args.backend, args.calls):
            print(f"| `{name}` | {per_call:.2f} | {eager * 1e6:.0f} us | {ours * 1e6:.0f} us | {theirs * 1e6:.0f} us |")
    if args.only == "programs":
        return
    print("\ncustom optimizers, compile(opt.step) (per step, after warm-up; 4 parameters)")
    print(f"| optimizer | stillframe traces per step | eager | stillframe | torch.compile |")
    print("|---|---|---|---|---|")
    for name, per_call, eager, ours, theirs in custom_optimizers(args.backend, args.calls):
        print(f"| `{name}` | {per_call:.2f} | {eager * 1e6:.0f} us | {ours * 1e6:.0f} us | {theirs * 1e6:.0f} us |")


if __name__ == "__main__":
    main()
