"""``collections.deque`` made in traced code is traced (issue 16: constructing one broke the graph)."""

import collections

import pytest
import torch

from stillframe.check.parity import assert_parity


def ends(x):
    d = collections.deque([1, 2])
    d.append(3)
    d.appendleft(0)
    a, b = d.pop(), d.popleft()
    return x + a + b + len(d), d


def bounded_window(x):
    window = collections.deque(maxlen=2)
    for i in range(4):
        window.append(x * i)
    return sum(window), list(window), window.maxlen, window


def rearranged(x):
    d = collections.deque(range(5))
    d.rotate(2)
    d.extendleft([9, 8])
    d[0] = 7
    del d[1]
    d.insert(2, 5)
    return x + d[0] + d[-1], list(d), d.count(3), d.index(4), 3 in d, bool(d), list(reversed(d))


def removed_reversed_copied(x):
    d = collections.deque([1, 2, 3], maxlen=5)
    d.remove(2)
    d.reverse()
    e = d.copy()
    e.clear()
    return x + 1, d, e, isinstance(d, collections.deque), type(e).__name__


def empty_pop(x):
    try:
        collections.deque().pop()
    except IndexError as e:
        return x + 1, str(e)


def slice_of_a_deque(x):
    return collections.deque([x])[0:1]


def crosses_a_break(x):
    d = collections.deque([x, x + 1], maxlen=3)
    print("graph break")
    d.append(x * 3)
    return d, d.maxlen


@pytest.mark.parametrize("fn", [ends, bounded_window, rearranged, removed_reversed_copied, empty_pop])
def test_traced_in_one_graph(fn):
    assert_parity(fn, lambda: (torch.randn(3, requires_grad=True),), calls=2, fullgraph=True)


@pytest.mark.parametrize("fn", [slice_of_a_deque, crosses_a_break])
def test_errors_and_breaks_as_eager(fn):
    assert_parity(fn, lambda: (torch.randn(3, requires_grad=True),), calls=2)
