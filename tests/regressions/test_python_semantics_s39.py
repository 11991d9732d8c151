"""Python semantics the trace answered wrongly, found and fixed by the lead in session 39 (issue 11)."""

import types

import torch

from stillframe.check.parity import assert_parity


def _view_across_a_break(kind):
    def f(x):
        mapping = {}
        view = getattr(mapping, kind)()
        print("break")  # the dict and its view are live objects from here on; the trace models the dict
        mapping["key"] = 1  # a write into the model, replayed on the live dict only after the graph
        out = [list(view), tuple(view), [v for v in view], len(view)]
        for v in view:
            out.append(v)
        mapping["b"] = 2
        out.append(list(view))
        return x + 1, out
    return f


def _view_of_an_argument(x, mapping, view):
    before = list(view)
    mapping["k2"] = 3
    return x + 1, before, list(view), len(view)


def _mappingproxy_views(x):
    # CPython's test_types MappingProxyTests.test_views: MappingProxyType(...) and .keys() run for real
    mapping = {}
    view = types.MappingProxyType(mapping)
    keys, values, items = view.keys(), view.values(), view.items()
    before = (list(keys), list(values), list(items))
    mapping["key"] = "value"
    return x + 1, before, list(keys), list(values), list(items)


def test_a_live_view_of_a_dict_the_trace_writes_into_sees_the_writes():
    # silent: list(view) was [] (the live view of the still-empty live dict, guarded LEN 0) where eager has the key
    for kind in ("keys", "values", "items"):
        assert_parity(_view_across_a_break(kind), lambda: (torch.ones(1),), calls=2)


def test_a_view_passed_with_its_dict_sees_the_trace_s_writes_into_the_dict():
    for kind in ("keys", "values", "items"):
        def make(kind=kind):
            mapping = {}
            return torch.ones(1), mapping, getattr(mapping, kind)()
        assert_parity(_view_of_an_argument, make, calls=2)


def test_mappingproxy_views_see_later_writes():
    assert_parity(_mappingproxy_views, lambda: (torch.ones(1),), calls=2)

