"""``compile(opt.step)`` per step: eager, stillframe and torch.compile side by side in one process (issues 11, 15).

For SGD (momentum), Adam and AdamW (torch's default implementation for the device, and ``foreach=True``) on an
MLP, the backward runs outside the compiled step; the median time of the step call alone is reported for each
frontend, with the ratio to eager, the graphs each frontend handed to the backend (recompiles included), and
the largest difference of any parameter from eager's after the run. The three are stepped in turn, each on its
own model and optimizer, so a change of machine load falls on all three alike.

With ``--scheduler``, a ``CosineAnnealingLR`` changes ``lr`` after every step (stillframe takes ``lr`` as a graph
input; torch.compile compiles it as a constant first, then as a symbolic float).

Run: ``python bench/optimizer_step.py [--backend eager] [--steps 60] [--width 128] [--scheduler] [--device cuda]``
(on CUDA each step call is timed between two ``torch.cuda.synchronize()``). Both frontends
get the same backend (``eager`` by default: the numbers are the frontends' and the update's, not code generation's;
``--backend inductor`` fuses the update).
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

OPTIMIZERS = {
    "SGD momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "Adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "AdamW": lambda p: torch.optim.AdamW(p, lr=1e-3),
    "Adam foreach": lambda p: torch.optim.Adam(p, lr=1e-3, foreach=True),
    "AdamW foreach": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True),
}


class Counted:
    """A backend wrapper that counts the graphs it compiles (a graph it fails on is not counted)."""

    def __init__(self, backend):
        self.backend = torch._TorchCompileWrapper(backend, None, None, None) if isinstance(backend, str) \
            and backend != "inductor" else backend
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        if self.backend == "inductor":
            from torch._inductor.compile_fx import compile_fx
            compiled = compile_fx(gm, example_inputs)
        else:
            compiled = self.backend(gm, example_inputs)
        self.graphs += 1
        return compiled


def run(make_opt, compile_steps, steps, width, scheduler=False, device="cpu"):
    """One model and optimizer per entry of ``compile_steps``, stepped in turn (the order rotates every step, so
    a change of machine load falls on every frontend alike): per frontend, the median time of the step call
    and the parameters after the run."""
    sides = []
    for compile_step in compile_steps:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, 10)).to(device)
        opt = make_opt(model.parameters())
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps) if scheduler else None
        sides.append((model, opt, sched, compile_step(opt.step), []))
    x = torch.randn(32, 64, device=device)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    for i in range(steps):
        for j in range(len(sides)):
            model, opt, sched, step, times = sides[(i + j) % len(sides)]
            model(x).pow(2).mean().backward()
            sync()
            start = time.perf_counter()
            step()
            sync()
            times.append(time.perf_counter() - start)
            opt.zero_grad()
            if sched is not None:
                sched.step()
    return [(statistics.median(times[10:]), [p.detach().clone() for p in model.parameters()])
            for model, _, _, _, times in sides]


def max_diff(a, b):
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--scheduler", action="store_true", help="change lr after every step (CosineAnnealingLR)")
    parser.add_argument("--device", default="cpu", help="where the model and optimizer state live (cpu or cuda)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}, backend "
          f"{args.backend!r}, device {args.device}, 1 CPU thread; MLP 64-{args.width}-{args.width}-10, batch 32; median step time over "
          f"{args.steps - 10} steps, the three stepped in turn" +
          ("; lr changed after every step" if args.scheduler else ""))
    print("| optimizer | eager | stillframe | ratio | graphs / recompiles | max diff | torch.compile | ratio | "
          "graphs | max diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, make_opt in OPTIMIZERS.items():
        stillframe.reset()
        torch._dynamo.reset()
        ours_backend, theirs_backend = Counted(args.backend), Counted(args.backend)
        (eager_s, eager_p), (ours_s, ours_p), (theirs_s, theirs_p) = run(
            make_opt, [lambda s: s, lambda s: stillframe.compile(s, backend=ours_backend),
                       lambda s: torch.compile(s, backend=theirs_backend)], args.steps, args.width, args.scheduler, args.device)
        recompiles = stillframe.counters["recompiles"]
        print(f"| {name} | {eager_s * 1e3:.3f} ms | {ours_s * 1e3:.3f} ms | {ours_s / eager_s:.2f} | "
              f"{ours_backend.graphs} / {recompiles} | {max_diff(ours_p, eager_p):.1e} | {theirs_s * 1e3:.3f} ms | "
              f"{theirs_s / eager_s:.2f} | {theirs_backend.graphs} | {max_diff(theirs_p, eager_p):.1e} |")


if __name__ == "__main__":
    main()
