"""Tensors as dict keys and set members in traced code (issue 16: both broke the graph). ``torch.Tensor`` hashes
by identity, so a key is the tensor object itself: the same tensor finds its entry, an equal-valued other tensor
does not."""

import pytest
import torch

from stillframe.check.parity import assert_parity


def set_of_tensors(x, y):
    s = {x}
    s.add(y)
    s.add(x)
    return len(s), x in s, (x + 1) in s, s


def dedupe_by_identity(x, y):
    seen, out = set(), []
    for t in [x, y, x]:
        if t not in seen:
            seen.add(t)
            out.append(t * 2)
    return out, len(seen)


def dict_keyed_by_tensors(x, y):
    d = {x: 1, y: 2}
    d[x] = 3
    return d[x] + d[y], list(d.keys())[0] is x, d, x in d, d.get(y), d.pop(y), len(d), d.setdefault(y, 5)


def names_of_tensors(x, y):
    names = {t: n for n, t in [("a", x), ("b", y)]}
    return [names[t] for t in (y, x)], [k * 2 for k in names], [(n, v + 1) for v, n in names.items()]


def set_algebra(x, y):
    s, t = {x, y, 1}, {x}
    return s - t, s & t, s | {y}, s.issuperset(t), t.pop() is x, {*s, 2}


def missing_tensor_key(x, y):
    return {x: 1}[y]


def crosses_a_break(x, y):
    d, s = {x: 1}, {y}
    print("graph break")
    d[y] = 2
    s.add(x)
    return d, s, len(d) + len(s)


def frozenset_of_tensors(x, y):
    return frozenset([x, y])


def args():
    return torch.randn(3, requires_grad=True), torch.randn(3)


@pytest.mark.parametrize("fn", [set_of_tensors, dedupe_by_identity, dict_keyed_by_tensors, names_of_tensors,
                                set_algebra])
def test_traced_in_one_graph(fn):
    assert_parity(fn, args, calls=2, fullgraph=True)


@pytest.mark.parametrize("fn", [missing_tensor_key, crosses_a_break, frozenset_of_tensors])
def test_errors_and_breaks_as_eager(fn):
    assert_parity(fn, args, calls=2)
