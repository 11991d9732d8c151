"""Sets made in traced code are sets (issue 16: they were frozenset constants, so ``s.add(...)`` raised
AttributeError and a returned set came back as a frozenset)."""

import torch

from stillframe.check.parity import assert_parity
from stillframe.rules.disable import disable


@disable
def graph_break():
    """Runs for real: what follows resumes after a graph break."""


def set_methods_and_operators(x):
    s = set()
    s.add(1)
    s.add(2)
    s.add(2)
    t = {2, 3}
    union = s | t
    alias = s
    s |= {7}
    s.discard(1)
    squares = {i % 3 for i in range(10)}
    queries = (s.union([9]), s.intersection(t), s - t, s.issubset(union), 3 in union, len(union), sorted(union),
               s == {2, 7}, alias is s)
    return x + len(s), s, union, squares, queries, frozenset(s), bool(set()), set("aba") == {"a", "b"}


def test_set_methods_operators_and_identity_match_eager():
    report = assert_parity(set_methods_and_operators, lambda: (torch.ones(2),), calls=2)
    assert report.warnings == []
    assert all(e.graph_break is None for e in report.compiled.cache_entries())


def remove_missing(x):
    s = {1}
    s.remove(5)
    return x


def unhashable_member(x):
    return x, {[1]}


def pop_empty(x):
    return x, set().pop()


def test_set_errors_are_pythons():
    for fn in (remove_missing, unhashable_member, pop_empty):
        assert_parity(fn, lambda: (torch.ones(2),))


def set_across_a_break(x):
    s = {1, 2}
    graph_break()
    s.add(3)
    return x * len(s), s, s


def test_a_set_crosses_a_graph_break_as_one_set():
    assert_parity(set_across_a_break, lambda: (torch.ones(2),), calls=2)
