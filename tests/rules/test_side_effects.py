"""Side effects replayed on the real objects, in program order: mutations of lists and dicts passed in,
attribute writes on modules, user objects and classes, ``global`` and ``nonlocal`` writes, objects
created inside and returned (identity structure preserved), and aliasing.

The checker compares every argument after each call, so a mutation of a list,
dict or user object passed in must leave it exactly as eager leaves it. State
reachable only through globals or closure cells is compared explicitly: the
same program runs eagerly on one fresh copy of the state and compiled on
another, and the states must agree after every call.
"""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

import stillframe

from py_cases import check, counting_backend, params, rand, case_registry

CASES, case = case_registry()


def tensors(n):
    return [rand(3) for _ in range(n)]


def with_list(n=3):
    return lambda: (rand(3), tensors(n))


def with_ints():
    return lambda: (rand(3), [3, 1, 2, 5])


def with_dict():
    return lambda: (rand(3), {"a": rand(3), "b": rand(3)})


# ---------------------------------------------------------------- lists passed in


@case(with_list())
def list_append(x, xs):
    xs.append(x * 2)
    xs.append(len(xs))
    return xs[0] + xs[-2]


@case(with_list())
def list_extend_and_iadd(x, xs):
    xs.extend([x + 1, x + 2])
    xs += [x * 3]
    return len(xs) * x


@case(with_list())
def list_insert(x, xs):
    xs.insert(0, x)
    xs.insert(-1, x * 2)
    xs.insert(100, "end")
    return xs[1] * 2


@case(with_list())
def list_pop(x, xs):
    last = xs.pop()
    first = xs.pop(0)
    return last + first + x


@case(with_ints())
def list_remove(x, ns):
    ns.remove(1)
    return x * len(ns)


@case(with_list())
def list_clear(x, xs):
    total = xs[0] + xs[1]
    xs.clear()
    return total * x, len(xs)


@case(with_list())
def list_setitem_and_slice_assignment(x, xs):
    xs[0] = x
    xs[-1] = xs[1] * 2
    xs[1:2] = [x + 1, x + 2]
    return xs[2] + xs[3]


@case(with_list(4))
def list_delitem_and_del_slice(x, xs):
    del xs[0]
    del xs[1:]
    return xs[0] * x


@case(with_ints())
def list_sort_and_reverse(x, ns):
    ns.sort()
    top = ns[-1]
    ns.reverse()
    ns.sort(reverse=True)
    return x * top


@case(with_list())
def list_mutation_then_read_back(x, xs):
    xs.append(x)
    xs[0] = xs[0] * 0
    return sum(xs)


@case(lambda: (rand(3), [[rand(3)], [rand(3)]]))
def nested_list_mutation(x, groups):
    groups[0].append(x)
    groups[1][0] = groups[1][0] * 2
    groups.append([])
    return groups[0][0] + groups[1][0]


# ---------------------------------------------------------------- dicts passed in


@case(with_dict())
def dict_setitem(x, d):
    d["c"] = x * 2
    d["a"] = d["a"] + 1
    return d["c"] + d["b"]


@case(with_dict())
def dict_update(x, d):
    d.update({"b": x, "z": x * 3})
    d.update(y=1.0)
    return d["b"] * 2, len(d)


@case(with_dict())
def dict_pop_and_popitem_default(x, d):
    a = d.pop("a")
    missing = d.pop("nope", 5.0)
    return a * missing + x


@case(with_dict())
def dict_del(x, d):
    del d["a"]
    return x * len(d)


@case(with_dict())
def dict_setdefault(x, d):
    a = d.setdefault("a", x)
    n = d.setdefault("n", x * 2)
    return a + n


@case(with_dict())
def dict_order_after_pop_and_reinsert(x, d):
    d["a"] = d.pop("a") * 2
    d["first"] = x
    return list(d), d["a"]


@case(with_dict())
def dict_clear_and_refill(x, d):
    keep = d["b"]
    d.clear()
    d["only"] = keep + x
    return len(d)


@case(lambda: (rand(3), {"hist": [], "n": 0}))
def dict_holding_a_list(x, state):
    state["hist"].append(x.detach())
    state["n"] += 1
    return x * state["n"]


# ---------------------------------------------------------------- user objects and classes passed in


class Box:
    def __init__(self, value):
        self.value = value


class Recorder:
    total = 0

    def __init__(self):
        self.count = 0
        self.last = None
        self.items = []


@case(lambda: (rand(3), Recorder()))
def object_attribute_writes(x, rec):
    rec.count += 1
    rec.last = x.detach() * 2
    rec.items.append(rec.count)
    rec.new_attr = "set"
    return x * rec.count


@case(lambda: (rand(3), Recorder()))
def object_attribute_delete(x, rec):
    rec.tmp = x
    del rec.tmp
    del rec.last
    return x * 2


class Registry:
    entries = []
    version = 0


def class_attribute_writes(x):
    Registry.version += 1
    return x * Registry.version


# ---------------------------------------------------------------- objects created inside and returned


@case(lambda: (rand(3),))
def new_list_returned_twice_is_one_object(x):
    out = [x * 2]
    return out, out


@case(lambda: (rand(3),))
def new_dict_holding_a_new_list(x):
    hist = [x, x * 2]
    return {"hist": hist, "again": hist, "n": len(hist)}


@case(lambda: (rand(3),))
def new_objects_inside_a_new_list(x):
    a = [x]
    b = [a, a]
    b[0].append(x + 1)
    return b


@case(lambda: (rand(3), tensors(2)))
def input_list_returned_after_mutation(x, xs):
    xs.append(x * 2)
    return xs, [xs]


@case(lambda: (rand(3),))
def object_created_inside_returned_in_two_places(x):
    box = Box(x * 2)
    box.value = box.value + 1
    return box, {"box": box}, [box]


# ---------------------------------------------------------------- aliasing


@case(with_list())
def two_names_one_list(x, xs):
    a = xs
    b = xs
    a.append(x)
    return len(b) * x, a is b


@case(lambda: (rand(3),))
def two_names_one_new_list(x):
    a = []
    b = a
    a.append(x)
    b.append(x * 2)
    return a, len(b)


def same_list_twice():
    xs = tensors(2)
    return rand(3), xs, xs


@case(same_list_twice)
def same_list_passed_twice(x, a, b):
    a.append(x)
    b.append(x * 2)
    return len(a) + len(b), a[-1] + b[-2]


def different_lists():
    return rand(3), tensors(2), tensors(2)


@case(different_lists)
def different_lists_same_code(x, a, b):
    a.append(x)
    b.append(x * 2)
    return len(a) + len(b), a[-1] + b[-2]


@case(lambda: (rand(3), Recorder()))
def object_aliased_through_a_list(x, rec):
    holder = [rec, rec]
    holder[0].count = 5
    return x * holder[1].count


# ---------------------------------------------------------------- module attributes


class Caching(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.cache = None
        self.calls = 0
        self.flag = False

    def forward(self, x):
        y = self.lin(x)
        self.cache = y.detach()
        self.calls += 1
        self.flag = not self.flag
        return y


class NoCounterCaching(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.cache = torch.zeros(2, 3)
        self.stats = {"mean": torch.zeros(()), "max": torch.zeros(())}

    def forward(self, x):
        y = self.lin(x)
        self.cache = y.detach()
        self.stats["mean"] = y.detach().mean()
        self.stats["max"] = y.detach().max()
        return y


class SubmoduleAttr(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Caching()

    def forward(self, x):
        out = self.inner(x)
        self.inner.tag = "seen"
        return out


# ---------------------------------------------------------------- globals and closure cells


COUNTER = 0
LAST = None
HISTORY = []


def bump_global(x):
    global COUNTER, LAST
    COUNTER += 1
    LAST = x.detach() * COUNTER
    HISTORY.append(COUNTER)
    return x * COUNTER


def make_counter():
    count = 0
    seen = []

    def step(x):
        nonlocal count
        count += 1
        seen.append(count)
        return x * count

    def state():
        return count, list(seen)

    return step, state


def make_tensor_cell():
    total = torch.zeros(3)

    def accumulate(x):
        nonlocal total
        total = total + x.detach()
        return x * 2

    def state():
        return total

    return accumulate, state


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("name", params(CASES))
def test_side_effects(name):
    fn, make_args, compiles, _ = CASES[name]
    check(fn, make_args, compiles=compiles)


def test_identity_structure_of_new_objects():
    def f(x):
        out = [x * 2]
        d = {"a": out}
        return out, out, d

    report, _ = check(f, lambda: (rand(3),))
    a, b, d = report.compiled_result
    assert a is b is d["a"]


def test_module_attribute_writes_counter_recompiles_cache_is_set():
    eager = Caching()
    report, compiled = check(eager, lambda: (rand(2, 3),), compiles=3)
    twin = compiled.original_module
    assert twin.calls == eager.calls == 3
    assert twin.flag is eager.flag is True
    torch.testing.assert_close(twin.cache, eager.cache)
    assert not twin.cache.requires_grad


def test_module_tensor_caches_without_counter_hit_the_cache():
    eager = NoCounterCaching()
    _, compiled = check(eager, lambda: (rand(2, 3),), compiles=1)
    twin = compiled.original_module
    torch.testing.assert_close(twin.cache, eager.cache)
    torch.testing.assert_close(twin.stats, eager.stats)


def test_attribute_write_on_a_submodule():
    eager = SubmoduleAttr()
    _, compiled = check(eager, lambda: (rand(2, 3),), compiles=3)
    assert compiled.original_module.inner.tag == "seen"
    assert compiled.original_module.inner.calls == 3


def test_class_attribute_writes_are_replayed():
    Registry.version = 0
    try:
        eager = [class_attribute_writes(torch.ones(3)) for _ in range(3)]
        eager_version = Registry.version
        Registry.version = 0
        compiled_fn = stillframe.compile(class_attribute_writes, backend="eager")
        got = [compiled_fn(torch.ones(3)) for _ in range(3)]
        assert Registry.version == eager_version == 3
        torch.testing.assert_close(got, eager)
    finally:
        Registry.version = 0


def _fresh_globals():
    module = sys.modules[__name__]
    module.COUNTER, module.LAST, module.HISTORY = 0, None, []


def _global_state():
    module = sys.modules[__name__]
    return module.COUNTER, module.LAST, list(module.HISTORY)


def test_global_writes_match_an_eager_run():
    _fresh_globals()
    try:
        xs = [torch.randn(3) for _ in range(3)]
        eager_out = [bump_global(x) for x in xs]
        eager_state = _global_state()
        _fresh_globals()
        compiled = stillframe.compile(bump_global, backend="eager")
        for i, x in enumerate(xs):
            torch.testing.assert_close(compiled(x), eager_out[i])
        state = _global_state()
        assert state[0] == eager_state[0] == 3
        torch.testing.assert_close(state[1], eager_state[1])
        assert state[2] == eager_state[2] == [1, 2, 3]
        assert stillframe.counters["fallbacks"] == 0 and stillframe.counters["graph_breaks"] == 0
    finally:
        _fresh_globals()


def test_global_list_mutation_through_a_helper_in_program_order():
    _fresh_globals()

    def f(x):
        HISTORY.append("start")
        y = bump_global(x)
        HISTORY.append(len(HISTORY))
        return y

    try:
        eager = f(torch.ones(3))
        eager_state = _global_state()
        _fresh_globals()
        got = stillframe.compile(f, backend="eager")(torch.ones(3))
        torch.testing.assert_close(got, eager)
        assert _global_state()[2] == eager_state[2] == ["start", 1, 2]
        assert _global_state()[0] == 1
    finally:
        _fresh_globals()


def test_nonlocal_writes_of_an_enclosing_function_match_an_eager_run():
    step, state = make_counter()
    xs = [torch.randn(3) for _ in range(3)]
    eager_out = [step(x) for x in xs]
    eager_state = state()
    step, state = make_counter()
    compiled = stillframe.compile(step, backend="eager")
    got = [compiled(x) for x in xs]
    torch.testing.assert_close(got, eager_out)
    assert state() == eager_state == (3, [1, 2, 3])
    assert stillframe.counters["fallbacks"] == 0 and stillframe.counters["graph_breaks"] == 0


def test_nonlocal_tensor_cell_is_replayed_and_not_rebaked():
    graphs, counting = counting_backend()
    accumulate, state = make_tensor_cell()
    compiled = stillframe.compile(accumulate, backend=counting)
    xs = [torch.randn(3) for _ in range(3)]
    for x in xs:
        compiled(x)
    torch.testing.assert_close(state(), sum(xs))
    assert len(graphs) == 1  # the cell holds a tensor: a graph input, not a constant


def test_mutation_of_a_list_passed_in_is_visible_to_the_caller_between_calls():
    def f(x, xs):
        xs.append(x.sum())
        return torch.stack(xs).sum()

    compiled = stillframe.compile(f, backend="eager")
    eager_list, compiled_list = [], []
    for i in range(3):
        x = torch.full((2,), float(i))
        e = f(x, eager_list)
        c = compiled(x, compiled_list)
        torch.testing.assert_close(c, e)
    assert len(compiled_list) == len(eager_list) == 3
    torch.testing.assert_close(compiled_list, eager_list)
    # the list grows, so its length guard fails on every call: one compile per length
    assert len(compiled.cache_entries()) == 3


def test_side_effects_on_objects_passed_in_replayed_in_program_order():
    class Log:
        def __init__(self):
            self.events = []

    def f(x, log, d):
        log.events.append("a")
        d["k"] = len(log.events)
        log.events.append("b")
        d["j"] = len(log.events)
        del d["k"]
        d["k"] = 0
        return x * len(d)

    check(f, lambda: (rand(3), Log(), {}))
    compiled = stillframe.compile(f, backend="eager")
    log, d = Log(), {}
    compiled(torch.ones(2), log, d)
    assert log.events == ["a", "b"]
    assert list(d.items()) == [("j", 2), ("k", 0)]
