"""Programs whose Python ints and floats change between calls, and the counters both compilers report on them.

Issue 12's scalar cases: a step counter or loop counter live across a graph break, ``state.step += 1``, a float
``lr`` in tensor math or a branch, a size computed from a float, ``.item()`` and ``nonzero`` / mask indexing.
Every program prints (a graph break) or reads data-dependent values. :func:`torch_compile_counts` and
:func:`stillframe_counts` run one driver under each compiler and return ``(outputs, graphs, recompiles)``:
torch.compile's ``unique_graphs`` and ``recompiles`` log records, stillframe's ``counters``. Used by
``tests/dynamic/test_counters.py`` and ``bench/scalars.py``.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import io
import math
from typing import Any, Callable

import torch

import stillframe

from .. import compat


def step(x, i):
    y = x * i
    print("step", i)
    return y + i


def helper(x, i):
    x = x * i
    print("helper", i)
    return x + i


def calls_helper_in_a_loop(x):
    for i in range(8):
        x = helper(x, i)
    return x


def counter_across_a_break(x, n):
    n = n + 1
    print("log", n)
    return x * n, n


class State:
    def __init__(self):
        self.step = 0


def object_counter(x, state):
    state.step += 1
    print("log", state.step)
    return x * state.step


def dict_counter(x, d):
    d["step"] = d["step"] + 1
    y = x * d["step"]
    print("log", d["step"])
    return y + d["step"]


def inner_break(x, i):
    print("inner", i)
    return x + i


def outer(x, i):
    return inner_break(x * i, i) - i


def loop_with_a_break(x, n):
    for i in range(n):
        x = x * i + 1
        print("step", i)
    return x


def while_with_a_break(x, n):
    i = 0
    while i < n:
        x = x + i
        print("step", i)
        i += 1
    return x


def scaled(x, lr):
    return x * lr + lr


def math_of_a_float(x, lr):
    return x * math.sqrt(lr) + math.cos(lr) + abs(lr - 0.25) + max(lr, 0.25)


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


def driver(kind: str) -> Callable[[Callable], Any]:
    """The calls of one program, as a function of the callable that runs it (eager or compiled)."""
    ones = torch.ones(3)
    return {
        "range8": lambda run: [run(ones, i) for i in range(8)],
        "once": lambda run: [run(ones)],
        "n40": lambda run: [run(ones, 40)],
        "state": lambda run: (lambda st: [(run(ones, st), st.step) for _ in range(8)])(State()),
        "dict": lambda run: (lambda d: [(run(ones, d), dict(d)) for _ in range(8)])({"step": 0}),
        "floats": lambda run: [run(torch.linspace(-1, 1, 4), v) for v in (0.1, 0.2, 0.3, 0.7, 1e-3)],
        "sizes": lambda run: [run(torch.linspace(-1, 1, 4), v) for v in (1.5, 2.5, 0.5, 1.0)],
        "data": lambda run: [run(x) for x in (torch.randn(5, 3, generator=torch.Generator().manual_seed(i))
                                              for i in range(4))],
    }[kind]


def quiet(run: Callable[[], Any]) -> Any:
    """``run()`` with its printing swallowed."""
    with contextlib.redirect_stdout(io.StringIO()):
        return run()


def torch_compile_counts(fn: Callable, drive: Callable, backend: str = "eager", flags: dict | None = None) -> tuple:
    """``(outputs, graphs, recompiles)`` of torch.compile running ``drive`` on ``fn`` with
    ``torch._dynamo.config`` patched by ``flags``."""
    with compat.torch_compile_counted(flags) as counts:
        out = quiet(lambda: drive(torch.compile(fn, backend=backend)))
    return out, counts["graphs"], counts["recompiles"]


def stillframe_counts(fn: Callable, drive: Callable, backend: str = "eager", flags: dict | None = None) -> tuple:
    """``(outputs, graphs, recompiles)`` of stillframe running ``drive`` on ``fn`` with ``stillframe.config``
    set from ``flags`` (restored afterwards)."""
    flags = flags or {}
    stillframe.reset()
    saved = {name: getattr(stillframe.config, name) for name in flags}
    for name, value in flags.items():
        setattr(stillframe.config, name, value)
    try:
        out = quiet(lambda: drive(stillframe.compile(fn, backend=backend)))
    finally:
        for name, value in saved.items():
            setattr(stillframe.config, name, value)
    return out, stillframe.counters["graphs"], stillframe.counters["recompiles"]
