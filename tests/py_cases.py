"""Shared helpers of the Python-coverage parity tests (``test_py_*.py``): case tables and the capture check.

A test module registers module-level functions as cases with ``@case(make_args, ...)`` and turns its
table into pytest parameters with ``params(CASES)``; ``check`` runs one case through the eager-parity
checker and then asserts how it was captured (cache entries, backend calls, graph breaks).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import stillframe
from stillframe.check import assert_parity


def rand(*shape, grad=True):
    return torch.randn(*shape, requires_grad=grad)


def one(*shape):
    return lambda: (rand(*shape),)


def two(*shape):
    return lambda: (rand(*shape), rand(*shape))


def counting_backend():
    """A backend that records each graph it is handed and runs it as FX generated it."""
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return graphs, counting


def check(fn, make_args, *, compiles=1, calls=3, breaks=0, graphs=None, **kwargs):
    """Parity over ``calls`` calls, then exactly ``compiles`` graph entries (and as many backend calls).

    ``breaks``: graph breaks expected (a ``raise`` that propagates out runs its one step for real, which
    counts as a break); ``None`` skips the count. ``graphs``: backend calls, when fewer than ``compiles``
    (a path that raises before any tensor op has an empty graph, which is not handed to the backend).
    """
    expected_graphs = compiles if graphs is None else graphs
    graphs, counting = counting_backend()
    target = copy.deepcopy(fn) if isinstance(fn, nn.Module) else fn
    compiled = stillframe.compile(target, backend=counting)
    report = assert_parity(fn, make_args, compiled=compiled, calls=calls, **kwargs)
    entries = compiled.cache_entries()
    assert [e.eager for e in entries] == [False] * len(entries), [e.reason for e in entries]
    if breaks is not None:
        assert stillframe.counters["graph_breaks"] == breaks, "a graph break: the program was not captured whole"
    assert len(entries) == compiles, f"{len(entries)} cache entries, expected {compiles}"
    assert len(graphs) == expected_graphs
    return report, compiled


def case_registry(with_kwargs=False):
    """A fresh case table and its ``@case`` decorator (``xfail``: a one-line diagnosis of a stillframe gap).

    Entries are ``(fn, make_args, compiles, xfail)``, or ``(fn, make_args, compiles, kwargs, xfail)`` with
    ``with_kwargs`` (extra keyword arguments for ``check``).
    """
    cases: dict[str, tuple] = {}

    def case(make_args, compiles=1, name=None, xfail=None, **kwargs):
        def register(fn):
            entry = (fn, make_args, compiles, kwargs, xfail) if with_kwargs else (fn, make_args, compiles, xfail)
            cases[name or fn.__name__] = entry
            return fn

        return register

    return cases, case


def params(cases):
    """pytest params for a case table; an ``xfail`` diagnosis becomes a strict xfail mark."""
    return [pytest.param(name, id=name, marks=() if entry[-1] is None else
                         pytest.mark.xfail(strict=True, reason=entry[-1]))
            for name, entry in cases.items()]
