"""Iterators made by ``map``, ``filter``, ``zip`` and ``enumerate`` in traced code and returned are of the real
types (issue 16: they came back as stillframe's internal ``ResumableIterator``), with what is left in them."""

import pytest
import torch

import stillframe


def half_consumed(x):
    m = map(abs, [1, -2, -3])
    f = filter(lambda v: v == 0, [0, 1, 0])
    z = zip([1, 2, 3], "abc")
    e = enumerate(["p", "q", "r"], 5)
    next(m), next(f), next(z), next(e)
    return x + 1, m, f, z, e, zip(), enumerate([])


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_returned_iterators_have_the_builtin_types_and_the_rest_of_the_items(backend):
    x = torch.randn(2)
    eager = half_consumed(x)
    compiled_fn = stillframe.compile(half_consumed, backend=backend)
    for _ in range(2):
        compiled = compiled_fn(x)
        torch.testing.assert_close(compiled[0], eager[0])
        assert [type(v) for v in compiled[1:]] == [map, filter, zip, enumerate, zip, enumerate]
    eager = half_consumed(x)
    assert [list(v) for v in compiled[1:]] == [list(v) for v in eager[1:]]


LOG = []


def stored_outside(x):
    LOG.append(zip([1, 2], [3, 4]))
    return x * 2


def test_an_iterator_stored_in_an_outside_list_has_its_type():
    LOG.clear()
    stillframe.compile(stored_outside, backend="eager")(torch.ones(1))
    assert type(LOG[0]) is zip and list(LOG[0]) == [(1, 3), (2, 4)]
