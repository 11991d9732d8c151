"""Memory: nothing stillframe keeps (cache entries, guards, graphs, registries) keeps a module or tensor alive.

Each test compiles and calls something, takes ``weakref`` s to the model, a
parameter, the inputs and the output, deletes the user's references and
checks that every weakref is dead. As with ``torch.compile``:

* deleting a compiled module (or function) frees the module it wraps or
  closes over, its parameters, the inputs and the outputs;
* a compiled function that is *kept* does not keep a module it was called
  with: its guards hold no strong reference, and a cache entry that guards on
  the identity of an object that died is dropped (a new object may be given
  the same ``id``), so a later model is traced afresh and matches eager.

Most checks run twice: after ``gc.collect()``, and with the collector off
(reference counting only), which shows that no reference cycle holds a user
object either. On failure the message names the reference path from
stillframe's state to the object still alive.
"""

from __future__ import annotations

import collections
import gc
import types
import weakref

import pytest
import torch
from torch import nn

import stillframe
from stillframe import api


# ------------------------------------------------------------------ helpers
def _roots() -> list:
    """Where stillframe keeps state: its modules and every live compiled function."""
    import sys

    mods = [m for name, m in sys.modules.items() if name == "stillframe" or name.startswith("stillframe.")]
    return mods + list(api._LIVE)


def _path_to(target: object, roots: list, limit: int = 200_000) -> str | None:
    """The shortest chain of references from one of ``roots`` to ``target`` (``gc.get_referents``), as text."""
    parent: dict[int, tuple[int | None, object]] = {}
    queue = collections.deque()
    root_ids = {id(r) for r in roots}
    for r in roots:
        parent[id(r)] = (None, r)
        queue.append(r)
    while queue and len(parent) < limit:
        obj = queue.popleft()
        if obj is target:
            chain = []
            key: int | None = id(obj)
            while key is not None:
                up, o = parent[key]
                chain.append(o)
                key = up
            return " -> ".join(_label(a, b) for a, b in zip(chain[::-1], chain[::-1][1:] + [None]))
        if isinstance(obj, (type, types.ModuleType)) and id(obj) not in root_ids:
            continue  # do not wander through the whole interpreter
        for ref in gc.get_referents(obj):
            if id(ref) not in parent:
                parent[id(ref)] = (id(obj), ref)
                queue.append(ref)
    return None


def _label(obj: object, nxt: object) -> str:
    text = type(obj).__name__
    if isinstance(obj, types.ModuleType):
        text = f"module {obj.__name__}"
    elif isinstance(obj, types.FunctionType):
        text = f"function {obj.__qualname__}"
    if nxt is not None and isinstance(obj, dict):
        keys = [k for k, v in obj.items() if v is nxt]
        text += f"[{keys[0]!r}]" if keys else " (a key)"
    elif nxt is not None and isinstance(obj, (list, tuple)):
        idx = [i for i, v in enumerate(obj) if v is nxt]
        text += f"[{idx[0]}]" if idx else ""
    return text


def assert_freed(refs: dict[str, weakref.ref], *, collect: bool = True) -> None:
    """Every weakref in ``refs`` is dead (after ``gc.collect()`` if ``collect``); else say who holds what."""
    if collect:
        gc.collect()
    alive = {name: r() for name, r in refs.items() if r() is not None}
    if not alive:
        return
    lines = []
    for name, obj in alive.items():
        path = _path_to(obj, _roots())
        lines.append(f"{name} ({type(obj).__name__}) is alive: "
                     + (path or "no path from stillframe's state (held by a cycle or by the test)"))
    del obj
    alive.clear()
    how = "after gc.collect()" if collect else "by reference counting alone (gc disabled)"
    raise AssertionError(f"not freed {how}:\n  " + "\n  ".join(lines))


class gc_disabled:
    """Run a block with the cyclic collector off (after collecting what earlier tests left)."""

    def __enter__(self):
        gc.collect()
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self.was_enabled:
            gc.enable()


def assert_same_as_eager(got, want):
    assert type(got) is type(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.requires_grad == want.requires_grad
    torch.testing.assert_close(got, want)


def live_entries(compiled) -> int:
    return sum(len(entries) for entries in compiled.all_cache_entries().values())


# ------------------------------------------------------------------- models
class Net(nn.Module):
    def __init__(self, pause: bool = False):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("shift", torch.ones(4))
        self.pause = pause

    def forward(self, x):
        y = torch.relu(self.lin(x)) + self.shift
        if self.pause:
            print("graph break")  # runs for real between two graphs
        return y * 2


def _hook(module, args, out):
    return out + 1


def _make(case: str) -> Net:
    model = Net(pause=case == "graph_break")
    if case == "forward_hook":
        model.register_forward_hook(_hook)
    return model


CASES = ["graphs", "graph_break", "forward_hook"]
BACKENDS = ["eager", "aot_eager"]


def _compile_call_and_drop(case: str, backend: str, collect: bool) -> None:
    model = _make(case)
    compiled = stillframe.compile(model, backend=backend)
    x = torch.randn(2, 4, requires_grad=True)
    for _ in range(2):  # a trace, then a cache hit
        out = compiled(x)
    out.sum().backward()
    assert stillframe.counters["graphs"] >= 1
    assert (stillframe.counters["graph_breaks"] > 0) == (case == "graph_break")
    refs = {"model": weakref.ref(model), "parameter": weakref.ref(model.lin.weight),
            "buffer": weakref.ref(model.shift), "input": weakref.ref(x), "output": weakref.ref(out),
            "compiled module": weakref.ref(compiled)}
    del model, compiled, x, out
    assert_freed(refs, collect=collect)


# -------------------------------------------------------- compiled modules
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_deleting_a_compiled_module_frees_it(case, backend):
    _compile_call_and_drop(case, backend, collect=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_deleting_a_compiled_module_frees_it_without_gc(case, backend):
    """No reference cycle holds the model: reference counting alone frees it."""
    with gc_disabled():
        _compile_call_and_drop(case, backend, collect=False)


@pytest.mark.slow
def test_deleting_a_compiled_module_frees_it_inductor():
    model = Net()
    compiled = stillframe.compile(model, backend="inductor")
    x = torch.randn(2, 4)
    out = compiled(x)
    refs = {"model": weakref.ref(model), "parameter": weakref.ref(model.lin.weight), "input": weakref.ref(x),
            "output": weakref.ref(out)}
    del model, compiled, x, out
    assert_freed(refs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "t5"])  # t5: graph breaks
def test_a_transformers_model_is_freed_while_its_compiled_forward_lives(name):
    models = pytest.importorskip("stillframe.check.models")
    if not models.available():
        pytest.skip("needs transformers")
    model = models.build(name)
    compiled = stillframe.compile(model, backend="eager")
    kwargs = models.example_inputs(name, mask=True)
    for _ in range(2):
        out = compiled(**kwargs)
    forward = compiled._compiled_forward  # kept: its cache entries must let the model go
    assert live_entries(forward) >= 1
    refs = {"model": weakref.ref(model), "parameter": weakref.ref(next(model.parameters())),
            "input_ids": weakref.ref(kwargs["input_ids"]), "logits": weakref.ref(out[0])}
    with gc_disabled():
        del model, compiled, kwargs, out
        assert_freed(refs, collect=False)
    assert live_entries(forward) == 0


# ------------------------------------------- a compiled function that lives on
def run_model(model, x):
    return model(x) - 1


def run_model_with_break(model, x):
    y = model(x)
    print("graph break")
    return model(y) - 1


@pytest.mark.parametrize("collect", [True, False], ids=["gc", "refcount"])
@pytest.mark.parametrize("fn", [run_model, run_model_with_break], ids=["graphs", "graph_break"])
def test_kept_function_frees_a_model_it_was_called_with(fn, collect):
    f = stillframe.compile(fn, backend="eager")
    model = Net()
    x = torch.randn(2, 4)
    out = f(model, x)
    assert_same_as_eager(out, fn(model, x))
    assert live_entries(f) >= 1
    refs = {"model": weakref.ref(model), "parameter": weakref.ref(model.lin.weight), "input": weakref.ref(x),
            "output": weakref.ref(out)}
    with gc_disabled():
        del model, x, out
        assert_freed(refs, collect=collect)
    # every entry guarded the dead model's id: all are dropped (a new object may be given that id)
    assert live_entries(f) == 0
    traces = stillframe.counters["traces"]
    model = Net()
    x = torch.randn(2, 4, requires_grad=True)
    assert_same_as_eager(f(model, x), fn(model, x))
    assert stillframe.counters["traces"] > traces  # traced afresh
    traces, hits = stillframe.counters["traces"], stillframe.counters["cache_hits"]
    assert_same_as_eager(f(model, x), fn(model, x))  # and then a cache hit
    assert stillframe.counters["traces"] == traces and stillframe.counters["cache_hits"] > hits


def test_an_entry_for_a_dead_model_is_dropped_and_others_stay():
    f = stillframe.compile(run_model, backend="eager")
    keep, drop = Net(), Net()
    x = torch.randn(2, 4)
    f(keep, x)
    f(drop, x)
    assert live_entries(f) == 2
    ref = weakref.ref(drop)
    del drop
    assert_freed({"model": ref})
    assert live_entries(f) == 1
    traces = stillframe.counters["traces"]
    assert_same_as_eager(f(keep, x), run_model(keep, x))
    assert stillframe.counters["traces"] == traces  # the surviving entry still hits


class Double(nn.Module):
    """No submodule: the model's own ``id`` is the only identity its guards compare."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return x * self.weight * 2


class Triple(Double):
    def forward(self, x):
        return x * self.weight * 3


class _Slot:
    """A plain object the size of a module instance (a ``__dict__`` and a ``__weakref__``), to probe the allocator."""


def _object_at_freed_address(old_id: int, make):
    """``make()``, built where a dead object lived: fill the allocator's free blocks of that size until one lands
    on ``old_id``, free that one, and build the new object into it (``None`` if the address never comes back)."""
    fillers = []
    while len(fillers) < 500_000:
        slot = _Slot()
        if id(slot) == old_id:
            del slot
            new = make()
            return new if id(new) == old_id else None
        fillers.append(slot)
    return None


def test_a_new_model_at_a_dead_models_address_is_not_mistaken_for_it():
    """CPython gives a new object the memory (hence the ``id``) of a freed one; a stale entry must not match it."""
    f = stillframe.compile(run_model, backend="eager")
    x = torch.randn(2, 4)
    model = Double()
    assert_same_as_eager(f(model, x), run_model(model, x))
    old_id = id(model)
    del model
    model = _object_at_freed_address(old_id, Triple)
    if model is None:
        pytest.skip("the allocator did not hand the dead model's address to a new one")
    assert_same_as_eager(f(model, x), run_model(model, x))  # Triple's forward, not Double's graph


@pytest.mark.parametrize("captures", ["float", "tensor"])
def test_a_removed_hook_is_freed_and_the_entry_that_inlined_it_dropped(captures):
    f = stillframe.compile(run_model, backend="eager")
    model = Net()
    scale = 3.0 if captures == "float" else torch.full((4,), 3.0)  # a tensor closed over: a graph break
    hook = lambda module, args, out: out * scale  # noqa: E731
    handle = model.register_forward_hook(hook)
    x = torch.randn(2, 4)
    assert_same_as_eager(f(model, x), run_model(model, x))
    refs = {"hook": weakref.ref(hook)}
    if captures == "tensor":
        refs["tensor the hook closes over"] = weakref.ref(scale)
    handle.remove()
    del hook, scale, handle
    assert_freed(refs)
    if captures == "float":  # the hook was inlined: its entry compared the dead hook's id, and is dropped
        assert live_entries(f) == 0
    assert_same_as_eager(f(model, x), run_model(model, x))


# ------------------------------------------------ closures and global modules
def _compile_closure():
    model = Net()

    def fn(x):
        return model(x) + 1

    return stillframe.compile(fn, backend="eager"), model


@pytest.mark.parametrize("collect", [True, False], ids=["gc", "refcount"])
def test_deleting_a_function_that_closes_over_a_module_frees_it(collect):
    f, model = _compile_closure()
    x = torch.randn(2, 4)
    out = f(x)
    assert_same_as_eager(out, model(x) + 1)
    refs = {"model": weakref.ref(model), "parameter": weakref.ref(model.lin.weight), "input": weakref.ref(x),
            "output": weakref.ref(out), "compiled": weakref.ref(f)}
    with gc_disabled():
        del f, model, x, out
        assert_freed(refs, collect=collect)


def _function_reading_a_global_model():
    """``fn`` reads the global ``model`` of its own namespace (which does not hold ``fn``: no cycle)."""
    ns = {"torch": torch, "model": Net()}
    exec("def fn(x):\n    return model(x) + 1\n", ns)
    return ns.pop("fn")


@pytest.mark.parametrize("collect", [True, False], ids=["gc", "refcount"])
def test_deleting_a_function_that_reads_a_global_module_frees_it(collect):
    fn = _function_reading_a_global_model()
    f = stillframe.compile(fn, backend="eager")
    x = torch.randn(2, 4)
    out = f(x)
    model = fn.__globals__["model"]
    refs = {"model": weakref.ref(model), "parameter": weakref.ref(model.lin.weight),
            "input": weakref.ref(x), "output": weakref.ref(out), "compiled": weakref.ref(f)}
    with gc_disabled():
        del f, fn, model, x, out
        assert_freed(refs, collect=collect)


def test_replacing_a_global_module_frees_the_old_one_while_the_function_lives():
    fn = _function_reading_a_global_model()
    f = stillframe.compile(fn, backend="eager")
    x = torch.randn(2, 4)
    f(x)
    ref = weakref.ref(fn.__globals__["model"])
    fn.__globals__["model"] = Net()
    assert_freed({"model": ref})
    assert live_entries(f) == 0
    assert_same_as_eager(f(x), fn(x))


def _default_model_function():
    ns = {"torch": torch}
    exec("def fn(x, model=None):\n    return model(x) * 2\n", ns)
    fn = ns.pop("fn")
    fn.__defaults__ = (Net(),)
    return fn


@pytest.mark.parametrize("collect", [True, False], ids=["gc", "refcount"])
def test_deleting_a_function_with_a_module_default_frees_it(collect):
    fn = _default_model_function()
    f = stillframe.compile(fn, backend="eager")
    x = torch.randn(2, 4)
    out = f(x)
    assert_same_as_eager(out, fn(x))
    refs = {"model": weakref.ref(fn.__defaults__[0]), "input": weakref.ref(x), "output": weakref.ref(out),
            "compiled": weakref.ref(f)}
    with gc_disabled():
        del f, fn, x, out
        assert_freed(refs, collect=collect)


# ------------------------------------------------- registries and counters
def test_reset_and_the_registry_keep_nothing_alive():
    model = Net()
    compiled = stillframe.compile(model, backend="eager")
    f = stillframe.compile(run_model, backend="eager")
    x = torch.randn(2, 4)
    compiled(x)
    f(model, x)
    assert len(api._LIVE) >= 2
    assert all(type(v) is int for v in stillframe.counters.values())
    stillframe.reset()
    assert live_entries(f) == 0 and live_entries(compiled._compiled_forward) == 0
    refs = {"model": weakref.ref(model), "compiled module": weakref.ref(compiled), "compiled": weakref.ref(f),
            "input": weakref.ref(x)}
    del model, compiled, f, x
    assert_freed(refs)  # the registry of compiled functions is a WeakSet
    assert all(type(v) is int for v in stillframe.counters.values())
