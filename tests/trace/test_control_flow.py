"""Python control flow captured whole: every jump kind, every loop kind, comprehensions and generators.

Each case is a function plus ``make_args(i)`` (``i`` is the call index). It
runs eagerly and compiled for three calls (``calls=3``), so the cache is
exercised with fresh tensors, and where ``make_args`` varies a Python value by
call index the guards must recompile exactly when the traced path depends on
it. Every case states how many compiles three calls take; each compile must be
a real graph (no eager entries), and no StillframeWarning may be emitted.
"""

from __future__ import annotations

import copy
import types
from dataclasses import dataclass

import pytest
import torch
from torch import nn

import stillframe
from stillframe.check import assert_parity

from py_cases import check, counting_backend, params, rand, case_registry

CASES, case = case_registry()


DEBUG = False
WEIGHTS = {"a": 1.0, "b": 2.0, "c": 3.0}


@dataclass
class Config:
    use_bias: bool = True
    act: str = "relu"
    scale: float = 1.0
    depth: int = 2


# ---------------------------------------------------------------- if / elif / else


@case(lambda: (rand(3), [1, 2, 3, 4, 5, 6]))
def next_on_the_iterator_a_for_loop_walks(x, xs):
    it = iter(xs)  # one iterator, advanced by the loop and by next(): pairs (1, 2), (3, 4), (5, 6)
    out = []
    for a in it:
        b = next(it)
        out.append(a * b)
    return x * sum(out), out


@case(lambda: (rand(3), [1, 2, 3, 4]))
def an_iterator_is_consumed_once_wherever_it_is_read(x, xs):
    it = iter(xs)
    first = next(it)
    rest = list(it)
    return x * first, rest, list(it), iter(it) is it, next(it, "done")


@case(lambda: (rand(3),))
def if_on_constants(x):
    if DEBUG:
        x = x * 100
    else:
        x = x + 1
    if 3 > 2:
        x = x * 2
    if "":
        x = x - 7
    if (1, 2):
        x = x - 1
    return x


@case(lambda i: (rand(3), i), compiles=3)
def if_elif_else_on_int(x, mode):
    if mode == 0:
        return x.sin()
    elif mode == 1:
        return x.cos()
    else:
        return x.tanh()


@case(lambda i: (rand(3), ["relu", "gelu", "tanh"][i]), compiles=3)
def if_elif_on_string(x, act):
    if act == "relu":
        y = torch.relu(x)
    elif act == "gelu":
        y = torch.nn.functional.gelu(x)
    else:
        y = torch.tanh(x)
    return y


@case(lambda i: (rand(3), None if i % 2 == 0 else rand(3)), compiles=2)
def is_none_check(x, y):
    if y is None:
        return x * 2
    return x + y


@case(lambda i: (rand(3), rand(3) if i % 2 == 0 else None), compiles=2)
def is_not_none_check(x, bias):
    out = x * 2
    if bias is not None:
        out = out + bias
    return out


@case(lambda i: (rand(3), rand(3) if i % 2 else 0.5), compiles=2)
def isinstance_tensor_or_float(x, other):
    if isinstance(other, torch.Tensor):
        return x * other.sum()
    return x * other


@case(lambda i: (rand(3), [(1, 2), [3], 4][i]), compiles=3)
def isinstance_tuple_of_types(x, spec):
    if isinstance(spec, (tuple, list)):
        n = len(spec)
    else:
        n = spec
    return x * n


@case(lambda i: (rand(i + 2, 3),), compiles=3)
def branch_on_shape(x):
    if x.shape[0] > 3:
        return x[:3]
    elif x.size(0) == 3:
        return x.flip(0)
    return x * 2


@case(lambda i: (rand(2, 3) if i % 2 == 0 else rand(2, 3, 4),), compiles=2)
def branch_on_ndim(x):
    if x.dim() == 2:
        return x.sum(1)
    if x.ndim == 3:
        return x.sum((1, 2))
    return x


@case(lambda i: (torch.randn(3, dtype=torch.float64 if i == 1 else torch.float32),), compiles=2)
def branch_on_dtype(x):
    if x.dtype == torch.float64:
        return x.float() * 3
    return x * 2


@case(lambda i: (torch.randn(3, requires_grad=i % 2 == 0),), compiles=2)
def branch_on_requires_grad(x):
    if x.requires_grad:
        return x * 2
    return x - 1


@case(lambda i: (torch.arange(4) if i % 2 else rand(4),), compiles=2)
def branch_on_is_floating_point(x):
    if x.is_floating_point():
        return x.sigmoid()
    return x * 2


@case(lambda: (rand(3, 4),))
def branch_on_numel_and_size(x):
    if x.numel() > 10 and x.size(-1) == 4:
        x = x.reshape(2, 6)
    if len(x) == 2:
        x = x.t()
    return x


@case(lambda i: (rand(3), Config(use_bias=i % 2 == 0)), compiles=2)
def config_dataclass_flag(x, cfg):
    if cfg.use_bias:
        x = x + 1
    return x * cfg.scale


@case(lambda i: (rand(3), types.SimpleNamespace(act=["relu", "tanh", "relu"][i], depth=2)), compiles=2)
def config_namespace_attributes(x, cfg):
    for _ in range(cfg.depth):
        x = torch.relu(x) if cfg.act == "relu" else torch.tanh(x)
    return x


@case(lambda i: (rand(3), [None, 0.0, 3.0][i]), compiles=3)
def or_gives_a_default(x, scale):
    s = scale or 2.0
    return x * s


@case(lambda i: (rand(3), i % 2 == 0, [1, 2, 3][i]), compiles=3)
def and_or_give_values(x, flag, n):
    k = flag and n
    m = flag or n
    return x * (k + 1) + m


@case(lambda i: (rand(3), None if i % 2 else rand(3)), compiles=2)
def or_picks_a_tensor_or_none(x, y):
    tag = y is None and "missing" or "given"
    picked = x if tag == "missing" else y
    return picked * 2, tag


@case(lambda i: (rand(3), i % 2 == 0), compiles=2)
def conditional_expression(x, neg):
    y = -x if neg else x
    z = y.relu() if y.dim() == 1 else y
    return z * (2 if neg else 3)


@case(lambda i: (rand(3), [0, 3, 7][i]), compiles=3)
def chained_comparison(x, n):
    if 0 < n < 5:
        return x * n
    return x - 1


@case(lambda i: (rand(3), ["a", "b", "z"][i]), compiles=3)
def membership_tests(x, key):
    if key in ("a", "b"):
        x = x + 1
    if key not in {"a": 1}:
        x = x * 2
    if key in "abc":
        x = x - 1
    return x


@case(lambda i: (rand(3), i % 2 == 1, [[], [1]][i % 2]), compiles=2)
def not_on_bools_and_containers(x, flag, items):
    if not flag:
        x = x + 1
    if not items:
        x = x * 3
    return x * 0.5


@case(lambda i: (rand(3), [1.5, 1.5, -2.0][i]), compiles=2)
def compare_floats(x, alpha):
    if alpha >= 0.0:
        return x * alpha
    return x / -alpha


# ---------------------------------------------------------------- for loops


@case(lambda i: (rand(3), 2 + i % 2), compiles=2)
def for_range(x, n):
    for k in range(n):
        x = x * 0.5 + k
    return x


@case(lambda: (rand(3),))
def for_range_start_stop_negative_step(x):
    for k in range(10, 0, -3):
        x = x + k
    for k in range(2, 5):
        x = x * k
    return x


@case(lambda: ([rand(3) for _ in range(3)],))
def for_over_list_argument(xs):
    total = 0
    for t in xs:
        total = total + t
    return total


@case(lambda: (tuple(rand(2) for _ in range(4)),))
def for_over_tuple_argument(xs):
    out = xs[0]
    for t in xs[1:]:
        out = out * t
    return out


@case(lambda: ({"a": rand(3), "b": rand(3), "c": rand(3)},))
def for_over_dict_keys(d):
    out = 0
    for k in d:
        out = out + d[k] * WEIGHTS[k]
    for k in d.keys():
        out = out - d[k]
    return out


@case(lambda: ({"a": rand(3), "b": rand(3)},))
def for_over_dict_values(d):
    acc = []
    for v in d.values():
        acc.append(v.exp())
    return acc


@case(lambda: ({"x": rand(3), "y": rand(3)},))
def for_over_dict_items(d):
    out = {}
    for k, v in d.items():
        out[k + "_2"] = v * 2
    return out


@case(lambda: ([rand(3) for _ in range(3)], [rand(3) for _ in range(3)]))
def for_over_zip(xs, ys):
    return [a * b for a, b in zip(xs, ys)], sum(a - b for a, b in zip(xs, ys))


@case(lambda: ([rand(3) for _ in range(3)],))
def for_over_enumerate(xs):
    acc = 0
    for i, t in enumerate(xs, start=1):
        acc = acc + i * t
    for i, t in enumerate(xs):
        acc = acc - i
    return acc


@case(lambda: ([rand(3) for _ in range(3)],))
def for_over_reversed(xs):
    out = []
    for t in reversed(xs):
        out.append(t * len(out))
    for k in reversed(range(3)):
        out.append(xs[k] + k)
    return out


@case(lambda: (rand(3),))
def for_over_string(x):
    for ch in "abc":
        x = x * WEIGHTS[ch]
    for ch in "ba":
        x = x + (1 if ch == "a" else 2)
    return x


@case(lambda i: (rand(3), [[0.5, 2.0], [0.5, 2.0], [1.0, 3.0, 4.0]][i]), compiles=2)
def for_over_list_of_floats(x, scales):
    for s in scales:
        x = x * s
    return x


@case(lambda: (rand(2, 3, 4),))
def for_over_shape(x):
    n = 1
    for d in x.shape:
        n = n * d
    dims = [d for d in x.size()]
    return x.reshape(n), dims


@case(lambda: ([((rand(2), rand(2)), 1.5), ((rand(2), rand(2)), -1.0)],))
def for_with_nested_unpacking(items):
    out = 0
    for (a, b), c in items:
        out = out + a * b * c
    return out


@case(lambda: (rand(4, 3),))
def for_over_tensor_rows(x):
    rows = []
    for row in x:
        rows.append(row.sum())
    return torch.stack(rows)


# ---------------------------------------------------------------- while, break, continue, else


@case(lambda i: (rand(3), 3 - i % 2), compiles=2)
def while_python_condition(x, n):
    while n > 0:
        x = x * 2
        n -= 1
    return x, n


@case(lambda: (rand(3),))
def while_true_with_break(x):
    k = 0
    while True:
        k += 1
        x = x + k
        if k >= 3:
            break
    return x, k


@case(lambda i: (rand([8, 4, 8][i]),), compiles=2)
def while_on_shape(x):
    steps = 0
    while x.shape[0] > 1:
        half = x.shape[0] // 2
        x = x[:half] + x[half:]
        steps += 1
    return x, steps


@case(lambda: ([rand(3) for _ in range(5)],))
def for_break(xs):
    out = 0
    for i, t in enumerate(xs):
        if i == 3:
            break
        out = out + t
    return out


@case(lambda: ([rand(3) for _ in range(5)],))
def for_continue(xs):
    out = 0
    for i, t in enumerate(xs):
        if i % 2:
            continue
        out = out + t
    return out


@case(lambda i: (rand(3), [[1, 2, 3], [1, -2, 3], [1, 2, 3]][i]), compiles=2)
def for_else(x, ns):
    for n in ns:
        if n < 0:
            x = x * -1
            break
        x = x + n
    else:
        x = x * 10
    return x


@case(lambda i: (rand(3), 4 + i % 2), compiles=2)
def while_else(x, n):
    k = 0
    while k < n:
        if k == 4:
            break
        x = x + k
        k += 1
    else:
        x = x - 100
    return x


@case(lambda: (rand(3),))
def nested_loops(x):
    for i in range(3):
        for j in range(i):
            x = x + i * j
        x = x * 0.5
    return x


@case(lambda: (rand(3),))
def nested_loops_break_inner(x):
    hits = []
    for i in range(3):
        for j in range(3):
            if j > i:
                break
            hits.append((i, j))
            x = x + j
    return x, hits


@case(lambda: (rand(3),))
def while_inside_for(x):
    for i in range(1, 4):
        k = i
        while k:
            x = x * 0.9
            k -= 1
    return x


# ---------------------------------------------------------------- comprehensions and generator expressions


@case(lambda: ([rand(3) for _ in range(3)],))
def list_comprehension(xs):
    return [t * 2 for t in xs]


@case(lambda: ([rand(3) for _ in range(4)],))
def list_comprehension_with_filter(xs):
    return [t * i for i, t in enumerate(xs) if i % 2 == 0]


@case(lambda: ([rand(3) for _ in range(3)],))
def dict_comprehension(xs):
    return {f"k{i}": t.relu() for i, t in enumerate(xs)}


@case(lambda: (rand(3),))
def set_comprehension(x):
    s = {d % 3 for d in range(7)}
    return x * len(s) + (2 in s) - (5 in s)


@case(lambda: (rand(3),))
def iterate_over_set(x):
    s = {d % 3 for d in range(7)}
    for v in {4, 5}:
        x = x + v
    return x * sorted(s)[-1], sorted(s)


@case(lambda: (rand(3),))
def nested_list_comprehension(x):
    return [[x * i + j for j in range(2)] for i in range(3)]


@case(lambda: ([rand(3) for _ in range(3)],))
def genexpr_consumed_by_sum(xs):
    return sum(t.sum() for t in xs), sum(t for t in xs)


@case(lambda i: (rand(3), [[1, 2], [1, 0], [1, 2]][i]), compiles=2)
def genexpr_consumed_by_all(x, ns):
    if all(n > 0 for n in ns):
        return x * 2
    return x / 2


@case(lambda i: (rand(3), [[0, 0], [0, 5], [0, 0]][i]), compiles=2)
def genexpr_consumed_by_any(x, ns):
    if any(n > 3 for n in ns):
        return x + 1
    return x - 1


@case(lambda: ([rand(3) for _ in range(3)],))
def genexpr_consumed_by_tuple_and_list(xs):
    return tuple(t + 1 for t in xs), list(t - 1 for t in xs)


@case(lambda: (rand(3), [3, 1, 2]))
def genexpr_consumed_by_min_max(x, ns):
    return x * min(n for n in ns) + max(n * 2 for n in ns)


@case(lambda: (rand(3), [3, 1, 2]))
def genexpr_consumed_by_sorted(x, ns):
    order = sorted((n * 10 for n in ns), reverse=True)
    return x * order[0], order


@case(lambda: ([rand(i + 1) for i in range(3)],))
def max_over_shapes(xs):
    longest = max(t.shape[0] for t in xs)
    return [torch.nn.functional.pad(t, (0, longest - t.shape[0])) for t in xs]


@case(lambda: ({"a": rand(3), "b": rand(3)}, 0.5))
def comprehension_over_items_with_closure_variable(d, scale):
    return {k: v * scale for k, v in d.items() if k != "z"}


@case(lambda: (rand(3),))
def any_all_over_constant_lists(x):
    if any([False, True]) and not all([True, False]):
        x = x * 2
    return x


# ---------------------------------------------------------------- loops over module containers


class LoopOverModuleList(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        for i, layer in enumerate(self.layers):
            x = x + layer(x) * i
        return x + self.layers[-1](x) + self.layers[0](x)


class SliceModuleList(LoopOverModuleList):
    def forward(self, x):
        for layer in self.layers[:2]:
            x = layer(x)
        return x


class LoopOverSequential(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, x):
        out = self.seq(x)
        for module in self.seq:
            x = module(x)
        return out, x, len(self.seq)


class LoopOverModuleDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})

    def forward(self, x):
        outs = {}
        for name, head in self.heads.items():
            outs[name] = head(x)
        for name in self.heads:
            outs[name] = outs[name] * 2
        for head in self.heads.values():
            x = x + head.weight.sum()
        return outs, x


class LoopOverParameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        penalty = sum(p.pow(2).sum() for p in self.parameters())
        names = [name for name, _ in self.named_parameters()]
        return self.b(self.a(x)), penalty, names


class LoopOverNamedModules(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.out = nn.Linear(4, 4)

    def forward(self, x):
        linears = 0
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                x = module(x)
                linears += 1
        kids = [isinstance(m, nn.Sequential) for m in self.children()]
        names = [name for name, _ in self.named_modules()]
        return x, linears, kids, names


MODULE_LOOPS = [LoopOverModuleList, LoopOverSequential, LoopOverModuleDict, LoopOverParameters,
                LoopOverNamedModules,
                SliceModuleList]


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("name", params(CASES))
def test_control_flow(name):
    fn, make_args, compiles, _ = CASES[name]
    check(fn, make_args, compiles=compiles)


@pytest.mark.parametrize("cls", MODULE_LOOPS, ids=lambda c: c.__name__)
def test_loops_over_module_containers(cls):
    check(cls(), lambda: (rand(2, 4, grad=False),))


def test_self_training_branch_recompiles_on_eval_and_train():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            if self.training:
                return self.lin(x) * 2
            return self.lin(x) - 1

    graphs, counting = counting_backend()
    eager = Branchy()
    compiled = stillframe.compile(copy.deepcopy(eager), backend=counting)
    for mode, expected in [(True, 1), (False, 2), (True, 2), (False, 2)]:
        eager.train(mode)
        compiled.train(mode)
        assert_parity(eager, lambda: (rand(2, 3),), compiled=compiled, calls=2)
        assert len(graphs) == expected


def test_module_flag_attribute_branch():
    class Gated(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.gate = True
            self.cfg = Config(depth=2)

        def forward(self, x):
            for _ in range(self.cfg.depth):
                x = self.lin(x)
            return x.sigmoid() if self.gate else x

    graphs, counting = counting_backend()
    eager = Gated()
    compiled = stillframe.compile(copy.deepcopy(eager), backend=counting)
    steps = [(True, 2, 1), (False, 2, 2), (False, 3, 3), (True, 2, 3)]
    for gate, depth, expected in steps:
        for model in (eager, compiled.original_module):
            model.gate = gate
            model.cfg.depth = depth
        assert_parity(eager, lambda: (rand(2, 3),), compiled=compiled, calls=2)
        assert len(graphs) == expected, (gate, depth)


def test_loop_trip_count_is_guarded_and_result_matches_each_time():
    def f(x, n):
        for _ in range(n):
            x = x + 1
        return x

    _, compiled = check(f, lambda i: (rand(3), [1, 2, 1, 2, 3][i]), compiles=3, calls=5)
    assert stillframe.counters["cache_hits"] == 2


def test_whole_program_is_one_graph_with_fullgraph():
    def f(xs, flags, cfg):
        out = []
        for t, flag in zip(xs, flags):
            if flag and cfg.use_bias:
                t = t + 1
            elif not flag:
                t = t * cfg.scale
            out.append(t)
        k = 0
        while k < len(out):
            out[k] = out[k].relu()
            k += 1
        return sum(o.sum() for o in out), [o.shape[0] for o in out]

    graphs, counting = counting_backend()
    compiled = stillframe.compile(f, backend=counting, fullgraph=True)
    assert_parity(f, lambda: ([rand(3) for _ in range(3)], [True, False, True], Config(scale=0.5)),
                  compiled=compiled, calls=3)
    assert len(graphs) == 1
