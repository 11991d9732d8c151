"""Python ints, floats and data-dependent values: graphs and recompiles, stillframe next to torch.compile.

    python bench/scalars.py                    # backend aot_eager
    python bench/scalars.py --backend eager

Rows (issue 12): a loop counter or step counter that changes (an int argument with a graph break inside,
a loop calling a function that breaks, a counter live across a break, ``state.step``, a ``for``/``while``
loop whose body breaks); a float that changes (``x * lr`` for 5 values of ``lr``, a branch on it, a size
computed from it); ``.item()`` and ``nonzero`` / mask indexing with torch._dynamo.config's
``capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops`` off and on (stillframe.config's for
stillframe). Columns: graphs compiled, recompiles (traces of a code point that already had a plan; for
torch.compile its ``recompiles`` log records), and whether every result equals eager's.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging

import torch
from torch._dynamo.utils import counters as torch_counters

import stillframe


def step(x, i):
    y = x * i
    print("step", i)
    return y + i


def helper(x, i):
    x = x * i
    print("helper", i)
    return x + i


def loop_calls_helper(x):
    for i in range(8):
        x = helper(x, i)
    return x


def counter_across_break(x, n):
    n = n + 1
    print("log", n)
    return x * n


class State:
    def __init__(self):
        self.step = 0


def object_counter(x, state):
    state.step += 1
    print("log", state.step)
    return x * state.step


def for_loop_break(x, n):
    for i in range(n):
        x = x * i + 1
        print("step", i)
    return x


def while_loop_break(x, n):
    i = 0
    while i < n:
        x = x + i
        print("step", i)
        i += 1
    return x


def scaled(x, lr):
    return x * lr + lr


def branch(x, r):
    if r > 0.5:
        return x * r
    return x - r


def size_from_float(x, r):
    return torch.zeros(int(x.shape[0] * r)) + r


def item_size(x):
    return torch.zeros((x > 0).sum().item()) + x.sum().item()


def mask(x):
    return x[x > 0] * 2 + x.nonzero().sum()


def _calls(kind):
    """The calls of one row, as a function of the callable under test."""
    ones = torch.ones(3)
    return {
        "range8": lambda run: [run(ones, i) for i in range(8)],
        "once": lambda run: [run(ones)],
        "n40": lambda run: [run(ones, 40)],
        "state": lambda run: (lambda st: [(run(ones, st), st.step) for _ in range(8)])(State()),
        "floats": lambda run: [run(torch.linspace(-1, 1, 4), v) for v in (0.1, 0.2, 0.3, 0.7, 1e-3)],
        "sizes": lambda run: [run(torch.linspace(-1, 1, 4), v) for v in (1.5, 2.5, 0.5, 1.0)],
        "data": lambda run: [run(x) for x in (torch.randn(5, 3, generator=torch.Generator().manual_seed(i))
                                              for i in range(4))],
    }[kind]


ROWS = [
    ("int argument, break inside (i in range(8))", step, "range8", {}),
    ("loop calls a function that breaks", loop_calls_helper, "once", {}),
    ("counter incremented across a break", counter_across_break, "range8", {}),
    ("state.step += 1, break", object_counter, "state", {}),
    ("for i in range(40): print (break in loop)", for_loop_break, "n40", {}),
    ("while i < 40: print (break in loop)", while_loop_break, "n40", {}),
    ("x * lr, 5 values of lr", scaled, "floats", {}),
    ("branch on a float", branch, "floats", {}),
    ("a size computed from a float", size_from_float, "sizes", {}),
    (".item() as a size, flag off", item_size, "data", {}),
    (".item() as a size, capture_scalar_outputs", item_size, "data", {"capture_scalar_outputs": True}),
    ("nonzero / x[mask], flag off", mask, "data", {}),
    ("nonzero / x[mask], capture_dynamic_output_shape_ops", mask, "data",
     {"capture_dynamic_output_shape_ops": True}),
]


class _Recompiles(logging.Handler):
    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        self.count += 1


def _torch_side(fn, calls, backend, flags):
    torch._dynamo.reset()
    torch_counters.clear()
    handler = _Recompiles()
    logger = logging.getLogger("torch._dynamo.guards.__recompiles")
    torch._logging.set_logs(recompiles=True)
    logger.addHandler(handler)
    try:
        with torch._dynamo.config.patch(**flags), contextlib.redirect_stdout(io.StringIO()):
            out = calls(torch.compile(fn, backend=backend))
    finally:
        logger.removeHandler(handler)
        torch._logging.set_logs()
        torch._dynamo.reset()
    return out, torch_counters["stats"]["unique_graphs"], handler.count


def _stillframe_side(fn, calls, backend, flags):
    stillframe.reset()
    saved = {name: getattr(stillframe.config, name) for name in flags}
    for name, value in flags.items():
        setattr(stillframe.config, name, value)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            out = calls(stillframe.compile(fn, backend=backend))
    finally:
        for name, value in saved.items():
            setattr(stillframe.config, name, value)
    return out, stillframe.counters["graphs"], stillframe.counters["recompiles"]


def table(backend: str) -> list[str]:
    rows = ["| program | stillframe graphs / recompiles | torch.compile graphs / recompiles | equal to eager |",
            "|---|---|---|---|"]
    for name, fn, kind, flags in ROWS:
        calls = _calls(kind)
        with contextlib.redirect_stdout(io.StringIO()):
            eager = calls(fn)
        theirs, t_graphs, t_recompiles = _torch_side(fn, calls, backend, flags)
        ours, s_graphs, s_recompiles = _stillframe_side(fn, calls, backend, flags)
        same = repr(ours) == repr(eager) == repr(theirs)
        rows.append(f"| {name} | {s_graphs} / {s_recompiles} | {t_graphs} / {t_recompiles} | {same} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="aot_eager")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, backend {args.backend}\n")
    print("\n".join(table(args.backend)))


if __name__ == "__main__":
    main()
