"""Regressions found by hand-written parity probes of nn.Module registries, builtins and dynamic shapes (probes nn
A3-A5/B4, std C, dyn 5-7). Each is compared with eager on both backends."""

from __future__ import annotations

import math
import sys

import pytest
import torch
from torch import nn

import stillframe
from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


def _with(make_module):
    def make_args(i=0):
        torch.manual_seed(i)
        return (make_module(), torch.randn(2, 3, requires_grad=True))

    return make_args


# ---------------------------------------------------------------- nn A3: registry writes seen by later reads
# A store into a module's registry dict in traced code (add_module, ModuleList.append/insert, register_parameter
# ...) went to the trace's heap copy of ``_modules`` / ``_parameters``, while len(m), m[i], iter(m), hasattr(m, n),
# m.named_*() and m.<name> read the live module: they gave the old answers. Now m.<name> reads the trace's copy of
# the registry, and the other reads break the graph after such a write (they run after it is replayed).

def _ml_append(ml, x):
    ml.append(nn.Tanh())
    return x * len(ml), type(ml[-1]).__name__, ml[-1](x)


def _ml_insert(ml, x):
    ml.insert(0, nn.Tanh())
    for m in ml:
        x = m(x - 1)
    return x, [type(m).__name__ for m in ml]


def _seq_append(seq, x):
    seq.append(nn.Tanh())
    return seq(x - 1)


def _add_module(seq, x):
    seq.add_module("extra", nn.Tanh())
    return [n for n, _ in seq.named_children()], len(seq), seq.extra(x), hasattr(seq, "extra")


def _register_parameter(m, x):
    m.register_parameter("p2", nn.Parameter(torch.ones(3)))
    return [n for n, _ in m.named_parameters()], m(x * m.p2)


def _md_setitem(md, x):
    md.__setitem__("b", nn.Tanh())
    return len(md), "b" in md, list(md.keys()), md["b"](x)


REGISTRY_CASES = {
    "modulelist_append": (_ml_append, lambda: nn.ModuleList([nn.ReLU()])),
    "modulelist_insert": (_ml_insert, lambda: nn.ModuleList([nn.ReLU()])),
    "sequential_append": (_seq_append, lambda: nn.Sequential(nn.ReLU())),
    "add_module": (_add_module, lambda: nn.Sequential(nn.ReLU())),
    "register_parameter": (_register_parameter, lambda: nn.Linear(3, 2)),
    "moduledict_setitem": (_md_setitem, lambda: nn.ModuleDict({"a": nn.ReLU()})),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(REGISTRY_CASES))
def test_registry_write_then_read(backend, case):
    fn, make_module = REGISTRY_CASES[case]
    assert_parity(fn, _with(make_module), backend=backend, calls=2)


# ---------------------------------------------------------------- nn A5: ml.__delitem__(i) called explicitly
# ModuleList/Sequential.__delitem__, traced: its delattr(self, "0") is a pending attribute deletion, and its next
# read of self._modules (the live dict, still holding "0") rebuilt the registry with the deleted module: the replay
# raised KeyError('0') from stillframe's rebuild and left the module corrupted. Now reading a registry dict after a
# pending attribute write that may change it breaks the graph there.

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["ModuleList", "Sequential"])
def test_explicit_delitem(backend, kind):
    def fn(ml, x):
        ml.__delitem__(0)
        return [type(m).__name__ for m in ml], len(ml), ml[0](x)

    make = (lambda: nn.ModuleList([nn.ReLU(), nn.Tanh()])) if kind == "ModuleList" else \
        (lambda: nn.Sequential(nn.ReLU(), nn.Tanh()))
    assert_parity(fn, _with(make), backend=backend, calls=2)


# ---------------------------------------------------------------- nn A4: remove_duplicate=False
# named_parameters / named_modules / named_buffers(remove_duplicate=False) deduplicated anyway (and named_modules'
# first positional argument, memo, was taken for prefix): a shared weight, or a module reached twice, was yielded
# once. Now the arguments are bound as the method's signature binds them, and remove_duplicate=False keeps them.

def _shared_weight():
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    b.weight = a.weight
    return nn.Sequential(a, b)


def _shared_module():
    a = nn.BatchNorm1d(3)
    return nn.Sequential(a, nn.ReLU(), a)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [_shared_weight, _shared_module], ids=["shared_weight", "shared_module"])
def test_named_members_keep_duplicates(backend, make):
    def fn(m, x):
        params = list(m.named_parameters(remove_duplicate=False))
        buffers = list(m.named_buffers("root", True, False))
        mods = [n for n, _ in m.named_modules(remove_duplicate=False)]
        return [n for n, _ in params], [n for n, _ in buffers], mods, sum(p.sum() for _, p in params) * x

    assert_parity(fn, _with(make), backend=backend, calls=2)


# ---------------------------------------------------------------- nn B4: a with_kwargs pre-hook's wrong result
# A forward pre-hook registered with_kwargs=True that returned something other than (args, kwargs) was unpacked
# as two items: ValueError "not enough values to unpack" from stillframe (or, for a list of two, no error at all).
# Now it is Module._call_impl's RuntimeError, whose message prints the value (run for real where it holds tensors).

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("returns", ["args", "(1, 2, 3)", "[args, kwargs]"])
def test_kwargs_pre_hook_wrong_result(backend, returns):
    def make_args(i=0):
        torch.manual_seed(i)
        m = nn.Linear(3, 2)
        m.register_forward_pre_hook(eval(f"lambda mod, args, kwargs: {returns}"), with_kwargs=True)
        return (m, torch.randn(2, 3, requires_grad=True))

    def fn(m, x):
        try:
            return m(x)
        except RuntimeError as e:
            return x * 2, str(e)[:60]

    assert_parity(fn, make_args, backend=backend, calls=2)


# ---------------------------------------------------------------- std C, dyn 5: builtins' own errors
# sys.version_info as a constant was rebuilt by calling its type ("cannot create 'sys.version_info' instances"),
# and len(5), range(0, 10, 0), range(2.5), sorted([1, "a"]), max(..., key=) of mixed keys and isinstance(1, 5)
# raised Python's error inside stillframe: the whole function ran eagerly with a warning (under fullgraph=True,
# stillframe's InternalError reached the user). Now sys's struct sequences are their one live instance, and those
# errors are the user's, raised as eager raises them (isinstance's message is isinstance's, not issubclass's).

def _sys_version(x):
    if sys.version_info >= (3, 8):
        return x + sys.version_info[0], sys.version_info[:2]
    return x - 1


def _len_of_int(x):
    try:
        return x * len(5)
    except TypeError as e:
        return x, str(e)


def _range_zero_step(x):
    try:
        return list(range(0, 10, 0))
    except ValueError as e:
        return x, str(e)


def _range_of_float(x):
    return [x * i for i in range(x.shape[0] / 2)]


def _sorted_mixed(x):
    try:
        return sorted([1, "a"])
    except TypeError as e:
        return x, str(e)


def _max_mixed_keys(x):
    try:
        return max([1, "a"], key=lambda v: v)
    except TypeError as e:
        return x, str(e)


def _isinstance_not_a_class(x):
    try:
        return isinstance(x, (torch.Tensor, 5)), isinstance(1, (int, 5)), isinstance(x, (int, 5))
    except TypeError as e:
        return x, str(e)


BUILTIN_ERROR_CASES = [_sys_version, _len_of_int, _range_zero_step, _range_of_float, _sorted_mixed, _max_mixed_keys,
                       _isinstance_not_a_class]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("fn", BUILTIN_ERROR_CASES, ids=lambda f: f.__name__.strip("_"))
def test_builtin_errors_are_eager_errors(backend, dynamic, fn):
    assert_parity(fn, lambda i: (torch.randn(4 + i, requires_grad=True),), backend=backend, calls=2,
                  fullgraph=True, compile_kwargs={"dynamic": dynamic})


# ---------------------------------------------------------------- dyn 6/7: len(t) of a symbolic size
# len(t) specialized the tensor's first size (int(shape[0])): with dynamic=True every new size traced a new graph
# until the cache limit, then the function ran eagerly with a warning; with an unbacked size (torch.unique under
# capture_dynamic_output_shape_ops) it was an internal error. sum(x.shape) and math.prod(x.shape) specialized every
# size too. Now len(t) is t.size(0) (a SymInt), and sum / math.prod over symbolic ints stay symbolic.

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [lambda x: x * len(x), lambda x: x * sum(x.shape), lambda x: x * math.prod(x.shape),
                                lambda x: x * sum(x.shape, 3) + len(x[0])],
                         ids=["len", "sum", "prod", "sum_start"])
def test_len_and_sizes_stay_symbolic(backend, fn):
    assert_parity(fn, lambda i: (torch.randn(i + 2, 3, requires_grad=True),), backend=backend, calls=10,
                  compile_kwargs={"dynamic": True})


@pytest.mark.parametrize("backend", BACKENDS)
def test_len_of_unbacked_size(backend, monkeypatch):
    monkeypatch.setattr(stillframe.config, "capture_dynamic_output_shape_ops", True)

    def fn(x):
        u = torch.unique(x)
        return u * 2, len(u)

    assert_parity(fn, lambda i: (torch.tensor([1.0, 2.0, 2.0, 3.0 + i]),), backend=backend, calls=2)


# ---------------------------------------------------------------- following a weak reference (nn.RNNBase)
# Calling a weakref.ref broke the graph: an LSTM's forward checks every ``_flat_weight_refs[i]() is not weight``,
# 15 breaks per call, in a loop over a zip that then ran for real. A followed reference is now its referent, read
# afresh from the reference on every call and guarded like any value read from it.

def _lstm(m, x):
    out, (h, c) = m(x)
    return out.sum() + h.sum() * c.mean()


def _lstm_args(replace_weight):
    def make_args(i=0):
        torch.manual_seed(0)
        m = nn.LSTM(3, 4, num_layers=2, batch_first=True)
        if replace_weight and i:  # the module's ref to it is dead: _update_flat_weights runs
            m.weight_hh_l0 = nn.Parameter(torch.randn(16, 4))
        return m, torch.randn(2, 5 + i, 3, requires_grad=True)

    return make_args


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("replace_weight", [False, True])
def test_lstm_follows_its_weight_refs_in_one_graph(backend, replace_weight):
    assert_parity(_lstm, _lstm_args(replace_weight), backend=backend, calls=3)
    if not replace_weight:
        m, x = _lstm_args(False)()
        stillframe.compile(_lstm, backend=backend, fullgraph=True)(m, x)  # no graph break


class _Box:
    scale = 3.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_followed_weak_reference_is_read_on_every_call(backend):
    import gc
    import weakref

    box, w = _Box(), torch.ones(3)
    box_ref, w_ref = weakref.ref(box), weakref.ref(w)

    def f(x):
        o, t = box_ref(), w_ref()
        y = x * 2 if o is None else x + o.scale
        return y if t is None else y * t

    compiled = stillframe.compile(f, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), f(x), rtol=0, atol=0)
    w.mul_(2)  # the referent's new value
    torch.testing.assert_close(compiled(x), f(x), rtol=0, atol=0)
    del box, w
    gc.collect()
    assert box_ref() is None and w_ref() is None
    torch.testing.assert_close(compiled(x), f(x), rtol=0, atol=0)
