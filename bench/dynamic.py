"""Dynamic shapes: graphs and recompiles over changing shapes, stillframe next to torch.compile.

    python bench/dynamic.py                      # the recompile table, backend aot_eager
    python bench/dynamic.py --generate           # also GPT-2 / Llama generate(max_new_tokens=30)
    python bench/dynamic.py --backend inductor --generate --tokens   # tokens per second against eager
    python bench/dynamic.py --backend inductor --generate --tokens --device cuda   # the same on a GPU

Workloads (each called once per shape, fresh inputs, default ``dynamic=None``):

* ``add1``: ``x + 1`` on (n, 8) for 4 values of n;
* ``mlp``: a 3-layer MLP (6 parameters) on (n, 16) for 4 batch sizes;
* ``gpt2``: ``GPT2LMHeadModel`` (stillframe.check.models) on input_ids (2, t) for 4 lengths t.

Columns: graphs compiled, recompiles (traces after the first: for torch.compile, frames compiled after the
first), seconds spent in calls that compiled.
``--generate``: ``model.generate(ids, max_new_tokens=30)`` with ``model.forward`` compiled, the graphs
each frontend compiled, whether the greedy tokens equal eager's, and whether the cache limit was hit.
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

import stillframe


def _torch_counts() -> dict:
    from torch._dynamo.utils import counters

    return {"graphs": counters["stats"]["unique_graphs"], "recompiles": max(counters["frames"]["ok"] - 1, 0)}


def _stillframe_counts() -> dict:
    return {"graphs": stillframe.counters["graphs"], "recompiles": max(stillframe.counters["traces"] - 1, 0)}


def _reset() -> None:
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    stillframe.reset()


def workloads() -> dict:
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 4))
    out = {
        "add1": (lambda x: x + 1, [(torch.randn(n, 8),) for n in (2, 3, 5, 9)]),
        "mlp": (mlp, [(torch.randn(n, 16),) for n in (4, 6, 10, 17)]),
    }
    try:
        from stillframe.check.models import build

        gpt2 = build("gpt2")
        out["gpt2"] = (gpt2, [(torch.randint(0, 1000, (2, t)),) for t in (8, 12, 16, 24)])
    except ImportError:
        pass
    return out


def recompile_table(backend: str) -> list[str]:
    rows = ["| workload | shapes | stillframe graphs / recompiles / s in compiling calls | "
            "torch.compile graphs / recompiles / s in compiling calls |", "|---|---|---|---|"]
    for name, (fn, calls) in workloads().items():
        cells = []
        for frontend in ("stillframe", "torch"):
            _reset()
            compiled = (stillframe.compile if frontend == "stillframe" else torch.compile)(fn, backend=backend)
            compiling_seconds = 0.0
            with torch.no_grad():
                for args in calls:
                    before = (stillframe.counters["traces"] if frontend == "stillframe"
                              else _torch_counts()["graphs"] + _torch_counts()["recompiles"])
                    t0 = time.perf_counter()
                    compiled(*args)
                    took = time.perf_counter() - t0
                    after = (stillframe.counters["traces"] if frontend == "stillframe"
                             else _torch_counts()["graphs"] + _torch_counts()["recompiles"])
                    if after != before:
                        compiling_seconds += took
            counts = _stillframe_counts() if frontend == "stillframe" else _torch_counts()
            cells.append(f"{counts['graphs']} / {counts['recompiles']} / {compiling_seconds:.2f}")
        shapes = ", ".join(str(tuple(a[0].shape)) for a in calls)
        rows.append(f"| `{name}` | {shapes} | {cells[0]} | {cells[1]} |")
    return rows


def generate_table(backend: str, models: tuple, tokens_per_second: bool, device: str = "cpu") -> list[str]:
    from stillframe.check.models import build as build_on_cpu

    def build(name):
        return build_on_cpu(name).to(device)

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    rows = ["| model | frontend | graphs | recompiles | same tokens as eager | cache limit hit | tokens/s |",
            "|---|---|---|---|---|---|---|"]
    for name in models:
        ids = torch.randint(1, 1000, (1, 8), generator=torch.Generator().manual_seed(0)).to(device)
        eager_model = build(name)
        with torch.no_grad():
            eager_model.generate(ids, max_new_tokens=30, do_sample=False)  # warm-up (CUDA context, kernels)
            sync()
            t0 = time.perf_counter()
            expected = eager_model.generate(ids, max_new_tokens=30, do_sample=False)
            sync()
            eager_tps = 30 / (time.perf_counter() - t0)
        rows.append(f"| {name} | eager | - | - | - | - | {eager_tps:.0f} |" if tokens_per_second else
                    f"| {name} | eager | - | - | - | - | - |")
        for frontend in ("stillframe", "torch"):
            _reset()
            model = build(name)
            compile_fn = stillframe.compile if frontend == "stillframe" else torch.compile
            model.forward = compile_fn(model.forward, backend=backend)
            with warnings.catch_warnings(record=True) as caught, torch.no_grad():
                warnings.simplefilter("always")
                got = model.generate(ids, max_new_tokens=30, do_sample=False)
                tps = "-"
                if tokens_per_second:
                    sync()
                    t0 = time.perf_counter()
                    model.generate(ids, max_new_tokens=30, do_sample=False)
                    sync()
                    tps = f"{30 / (time.perf_counter() - t0):.0f}"
            limit = any("cache_size_limit" in str(w.message) for w in caught)
            counts = _stillframe_counts() if frontend == "stillframe" else _torch_counts()
            rows.append(f"| {name} | {frontend} | {counts['graphs']} | {counts['recompiles']} | "
                        f"{torch.equal(got, expected)} | {limit} | {tps} |")
    return rows


def overhead(calls: int = 20000) -> str:
    """Microseconds per call of ``x + 1`` on a (4, 8) tensor: eager, a static and a dynamic stillframe plan, and
    torch.compile with dynamic=True (backend "eager": the frontends' own cost)."""
    def f(x):
        return x + 1

    def per_call(fn, x):
        for _ in range(200):
            fn(x)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(x)
        return (time.perf_counter() - t0) / calls * 1e6

    _reset()
    x = torch.randn(4, 8)
    sides = {"eager": f, "stillframe static": stillframe.compile(f, backend="eager", dynamic=False),
             "stillframe dynamic": stillframe.compile(f, backend="eager", dynamic=True),
             "torch.compile dynamic": torch.compile(f, backend="eager", dynamic=True)}
    return "; ".join(f"{name} {per_call(fn, x):.1f} us" for name, fn in sides.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--generate", action="store_true")
    parser.add_argument("--tokens", action="store_true", help="time generate() (tokens per second)")
    parser.add_argument("--models", default="gpt2,llama")
    parser.add_argument("--overhead", action="store_true", help="per-call cost of a static and a dynamic plan")
    parser.add_argument("--device", default="cpu", help="where generate()'s models run (cpu or cuda)")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, backend {args.backend}\n")
    print("\n".join(recompile_table(args.backend)))
    if args.overhead:
        print("\n" + overhead())
    if args.generate:
        print()
        print("\n".join(generate_table(args.backend, tuple(args.models.split(",")), args.tokens,
                                       args.device)))


if __name__ == "__main__":
    main()
