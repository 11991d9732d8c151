"""More divergences found by running PyTorch's own Dynamo tests through stillframe (issue 16)."""

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity


def storage_class_checks(x):
    s = torch.BoolStorage.from_buffer(bytearray([0, 1, 2, 3]), "big")
    return x + 1, isinstance(s, torch.BoolStorage), isinstance(s, torch.FloatStorage), isinstance(s, torch.TypedStorage)


def test_isinstance_of_a_storage_made_in_the_function():
    # was False: the class relation (TypedStorage is no subclass of BoolStorage) answered instead of the
    # metaclass, which compares the storage's dtype and device
    assert_parity(storage_class_checks, lambda: (torch.ones(2),), calls=2)


def storage_argument_checks(s, x):
    return x + 1, isinstance(s, torch.BoolStorage), isinstance(s, (torch.LongStorage, torch.FloatStorage))


@pytest.mark.parametrize("make_storage", [
    lambda: torch.BoolStorage(3),
    lambda: torch.TypedStorage(3, dtype=torch.bool),
    lambda: torch.TypedStorage(3, dtype=torch.float32),
    lambda: torch.TypedStorage(3, dtype=torch.int64),
    lambda: torch.ones(2).untyped_storage(),
])
def test_isinstance_of_a_storage_argument(make_storage):
    assert_parity(storage_argument_checks, lambda: (make_storage(), torch.ones(2)), calls=2, fullgraph=True)


def test_a_storage_of_another_dtype_is_checked_again():
    # the plan for a bool TypedStorage must not answer for a float one (its dtype is guarded)
    compiled = stillframe.compile(storage_argument_checks, backend="eager", fullgraph=True)
    for dtype in (torch.bool, torch.float32, torch.bool, torch.int64):
        s = torch.TypedStorage(3, dtype=dtype)
        assert compiled(s, torch.ones(2))[1:] == storage_argument_checks(s, torch.ones(2))[1:]


GLOBAL_TABLE = {"a": 1, "b": 2}


def dict_view_uses(x):
    e = {"a": x, "c": 3}
    k, v, it = e.keys(), e.values(), e.items()
    e["z"] = x * 2  # a view sees later writes
    total = x
    for _ in range(2):  # and is iterated again from the start
        for key in k:
            total = total + len(key)
    g = {"a": 1, "c": 3}
    return (total + len(k), list(v), sorted(k - GLOBAL_TABLE.keys()), sorted(k & {"a", "q"}),
            sorted(GLOBAL_TABLE.keys() | k), sorted(GLOBAL_TABLE.keys() ^ ["a", "x"]), ("c", 3) in g.items(),
            "z" in k, [a for a, _ in it], bool(k), bool({}.keys()), 3 in g.values(), tuple(reversed(k)),
            list(zip(GLOBAL_TABLE.keys(), GLOBAL_TABLE.values())))


def test_dict_views_are_live_sets_of_their_dict():
    # keys()/values()/items() were one-shot iterators: a second loop saw nothing, a later write was missed,
    # len() and `|` raised an internal error
    assert_parity(dict_view_uses, lambda: (torch.ones(2),), calls=2, fullgraph=True)


def returns_views(x):
    e = {"k": x + 1}
    return x + 1, e.keys(), GLOBAL_TABLE.items(), e.values()


def test_a_returned_dict_view_is_a_real_view_of_the_real_dict():
    compiled = stillframe.compile(returns_views, backend="eager", fullgraph=True)
    for fn in (returns_views, compiled):
        _, keys, items, values = fn(torch.ones(2))
        assert (type(keys), type(items), type(values)) == (type({}.keys()), type({}.items()), type({}.values()))
        assert list(keys) == ["k"] and list(items) == list(GLOBAL_TABLE.items())
        GLOBAL_TABLE["new"] = 3
        try:
            assert ("new", 3) in items  # a view of the global dict itself, not of a copy
        finally:
            del GLOBAL_TABLE["new"]


def view_across_a_break(x):
    e = {"a": x}
    k = e.keys()
    print("graph break")
    e["b"] = 2
    return x + len(k), sorted(k)


def test_a_dict_view_across_a_graph_break():
    assert_parity(view_across_a_break, lambda: (torch.ones(2),), calls=2)
