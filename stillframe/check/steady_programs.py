"""Small programs that go through a graph break on every call, for the steady-state test and benchmark.

Each takes one float32 tensor ``x`` of any shape and returns a tensor of the same shape. After warm-up a
compiled call of any of them must not trace again (issue 15): the breaks are on Python-only calls
(``OrderedDict.values``, ``deque`` operations, logging, ``print``), a profiler context manager, or a float
that a real call returns (``random.random()``, ``time.time()``), which is data, never guarded by value.
Used by ``tests/api/test_steady_state.py`` and ``bench/steady_state.py``.
"""

from __future__ import annotations

import collections
import logging
import random
import time

import torch
from torch import nn

HOOKS = collections.OrderedDict(a=1, b=2)
QUEUE: collections.deque = collections.deque()
LOG = logging.getLogger("stillframe.check.steady")


def ordered_dict_values(x):
    y = x + 1
    HOOKS.values()
    return y * 2


def deque_append_pop(x):
    y = x + 1
    QUEUE.append(y.shape[0])
    QUEUE.pop()
    return y * 2


def record_function(x):
    with torch.autograd.profiler.record_function("block"):
        y = x + 1
    return y * 2


def logging_call(x):
    y = x + 1
    LOG.debug("shape %s", tuple(y.shape))
    return y * 2


def print_call(x):
    y = x + 1
    print("", end="")
    return y * 2


def random_scale(x):
    return x * random.random()


def random_used_twice(x):
    r = random.uniform(0.5, 1.5)
    y = x * r
    z = y + r
    if r > 2:  # never true: a Python branch on the float
        z = z * 0
    return z - r


def random_seeded_inside(x):
    """Reseeds Python's RNG and draws from it (``random.seed`` calls ``super().seed``: traced through, that held a
    ``super()`` object across the break at its C call and the frame ran eagerly)."""
    random.seed(7)
    order = [1, 2, 3]
    random.shuffle(order)
    return x * random.randint(1, 5) + order[0]


def clock(x):
    """Reads the wall clock: two runs of it never agree on values, only on traces."""
    return x * (time.time() % 1.0)


class Jitter(nn.Module):
    """A module whose forward scales by ``random.uniform`` (input ``(N, 4)``, output ``(N, 4)``)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * random.uniform(0.9, 1.1)


#: The programs whose values are reproducible (Python's ``random`` seeded alike on both sides).
PROGRAMS = [ordered_dict_values, deque_append_pop, record_function, logging_call, print_call, random_scale,
            random_used_twice, random_seeded_inside]
