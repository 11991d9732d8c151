"""After a graph break at a C method bound to a live object, later calls reuse the resumed plans (issue 15: the
bound method, a new object on every attribute read, was guarded by its id, so every call traced again)."""

import collections

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity

HOOKS = collections.OrderedDict(a=1)
QUEUE = collections.deque([1, 2])


def ordered_dict_values(x):
    y = x + 1
    values = HOOKS.values()
    return y * 2, list(values)


def deque_append_pop(x):
    y = x + 1
    QUEUE.append(3)
    last = QUEUE.pop()
    return y * last


def record_function_block(x):
    y = x + 1
    with torch.autograd.profiler.record_function("block"):
        y = y * 2
    return y - 1


def method_of_a_constant(x, join):
    return x + 1, join(["a", "b"])


@pytest.mark.parametrize("fn", [ordered_dict_values, deque_append_pop, record_function_block])
def test_resumed_plans_are_reused(fn):
    assert_parity(fn, lambda: (torch.randn(3),), calls=3)
    compiled = stillframe.compile(fn, backend="eager")
    x = torch.randn(3)
    for _ in range(2):
        compiled(x)
    traces = stillframe.counters["traces"]
    for _ in range(5):
        torch.testing.assert_close(compiled(x), fn(x))
    assert stillframe.counters["traces"] == traces


def test_a_constant_owner_is_guarded_by_value():
    compiled = stillframe.compile(method_of_a_constant, backend="eager")
    x = torch.randn(2)
    for sep in [",", ",", "-", ","]:
        assert compiled(x, sep.join)[1] == method_of_a_constant(x, sep.join)[1]
