"""Tests of the persistent trace state (DESIGN invariant 2): O(1) checkpoint, exact restore.

The main test is a property: for a random straight-line program (in-place
tensor ops, out-of-place ops, views, lists and dicts built and mutated inside
the function), interpret ``k`` instructions, take a checkpoint, interpret ``m``
more, restore, and check that

* the state is the checkpointed state (the same object, ``==``, and the same
  deep projection: nothing reachable from it was mutated behind its back),
* the FX graph is the checkpointed graph (printed code and node count),
* no fake tensor held by a ``TensorEntry`` of the restored heap was mutated
  (same object, shape, stride, ``requires_grad``, version counter),
* a trace resumed from the restored state equals a trace from scratch with
  equal inputs (graph, result, heap, guards, graph inputs).

Programs are checked eagerly while they are generated (a line that raises in
eager is not kept), so every program is valid Python; programs the tracer
does not support (``Unsupported``, or a ``UserError``) are skipped with
``assume(False)``.

Then unit tests of the pieces: ``Checkpoint`` tokens, ``PLog``, frozen
dataclasses, and the seed-000 scenario (an in-place op after a checkpoint
leaves the checkpoint's tensor metadata and fake tensor untouched).
"""

from __future__ import annotations

import builtins
import dataclasses
import itertools
import linecache
import re
import warnings
from typing import Any

import immutables
import pytest
import torch
import torch.fx
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from stillframe import compat
from stillframe import Unsupported
from stillframe.runtime.compiler import start_trace
from stillframe.tensors.meta import TensorEntry
from stillframe.errors import UserError
from stillframe.trace.interpreter import Tracer
from stillframe.trace.state import EMPTY_LOG, Checkpoint, Frame, PLog, TraceState
from stillframe.variables.base import (
    CellEntry,
    DictEntry,
    DictVariable,
    LazyArgument,
    ListEntry,
    ListVariable,
    TensorVariable,
    TupleVariable,
)

# ------------------------------------------------------------------ building functions from source text

_counter = itertools.count()


def make_function(body: list[str], params: tuple[str, ...] = ("x", "y", "z"), name: str = "f") -> Any:
    """Exec ``def name(params): body`` under a unique filename registered in linecache (for tracer locations)."""
    src = f"def {name}({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body)
    filename = f"<test_trace_state generated {next(_counter)}>"
    # mtime None: linecache.checkcache() leaves the entry alone (no file on disk to compare with).
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace = {"torch": torch, "__builtins__": builtins}
    exec(compile(src, filename, "exec"), namespace)
    return namespace[name]


# Set to True to keep every state a test's tracers pass through alive until the next test (it once
# hid a bug where a freed fake's id was reused: see test_fake_ids_are_not_reused).
KEEP_STATES_ALIVE = False
_alive: list = []


@pytest.fixture(autouse=True)
def _release_states():
    yield
    _alive.clear()


def step(tracer: Tracer) -> None:
    tracer.step()
    if KEEP_STATES_ALIVE:
        _alive.append(tracer.state)


def step_n(tracer: Tracer, n: int) -> None:
    for _ in range(n):
        if tracer.result is not None:
            return
        step(tracer)


def run(tracer: Tracer) -> Any:
    while tracer.result is None:
        step(tracer)
    return tracer.result


def trace_steps(fn: Any, L: dict) -> tuple[Tracer, int]:
    """Trace ``fn`` from scratch to the end: (tracer, instructions interpreted)."""
    tracer = start_trace(fn, L)
    run(tracer)
    return tracer, tracer.steps


# ------------------------------------------------------------------ comparing traces structurally


def graph_code(tracer: Tracer) -> str:
    return tracer.graph.graph.python_code("self").src


def normalized_graph_code(tracer: Tracer) -> str:
    """The printed graph with every node's name replaced by its position (``_n0``, ``_n1`` ...).

    FX hands out node names from a namespace that ``erase_node`` does not give
    back, so a trace resumed after a rollback may call a node ``add_1`` where a
    fresh trace says ``add`` (see ``test_resumed_graph_code_is_textually_equal``).
    Everything else in the printed code (ops, arguments, the ``= None`` frees)
    must be the same.
    """
    src = graph_code(tracer)
    names = [node.name for node in tracer.graph.graph.nodes]
    index = {name: i for i, name in enumerate(names)}
    if not names:
        return src
    pattern = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b")
    return pattern.sub(lambda m: f"_n{index[m.group(1)]}", src)


def node_structure(tracer: Tracer) -> list:
    """The graph as data, names left out: op, target, arguments (nodes as positions) and the fake's metadata."""
    nodes = list(tracer.graph.graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}

    def arg(a: Any) -> Any:
        return torch.fx.node.map_arg(a, lambda n: ("node", position[n]))

    rows = []
    for node in nodes:
        val = node.meta.get("val")
        val_desc = fake_desc(val) if isinstance(val, torch.Tensor) else repr(val)
        target = node.target
        if not isinstance(target, str):
            target = getattr(target, "__qualname__", repr(target))
        rows.append((node.op, target, arg(node.args), arg(node.kwargs), val_desc))
    return rows


def fake_desc(t: torch.Tensor) -> tuple:
    """Metadata of a fake for comparing two traces. Not ``_version``: a fake that shares a version counter
    with an input (``x.detach()``) shows how often the *input's* fake was converted or bumped, which differs
    between two traces of equal inputs (the no-mutation check, ``fake_record``, does compare versions)."""
    try:  # read as stillframe reads it: asking a view for its grad_fn may make one (compat.is_stale_view)
        flags = compat.autograd_flags(t)
    except RuntimeError:  # a view made under no_grad whose base was written since
        flags = (t.requires_grad, None, None)
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, *flags)


def fake_record(state: TraceState) -> dict:
    """``(id, shape, stride, requires_grad, version)`` of the fake of every TensorEntry in the heap."""
    return {
        tid: (id(e.fake), tuple(e.fake.shape), tuple(e.fake.stride()), e.fake.requires_grad, e.fake._version)
        for tid, e in state.heap.items()
        if isinstance(e, TensorEntry)
    }


def node_index(tracer: Tracer) -> dict:
    return {id(node): i for i, node in enumerate(tracer.graph.nodes)}


def heap_view(tracer: Tracer) -> dict:
    """The heap with fake tensors and FX nodes replaced by values comparable across two traces."""
    index = node_index(tracer)
    out = {}
    for oid, entry in tracer.state.heap.items():
        if isinstance(entry, TensorEntry):
            node = None if entry.node is None else index.get(id(entry.node), "not in graph")
            out[oid] = ("tensor", entry.meta, fake_desc(entry.fake), node, entry.source)
        else:
            out[oid] = (type(entry).__name__, vt_view(tracer, entry))
    return out


def vt_view(tracer: Tracer, v: Any) -> Any:
    """A VT (or heap entry) as plain data; tensors, lists and dicts are resolved through the heap."""
    if isinstance(v, TensorVariable):
        entry = tracer.state.heap[v.tid]
        return ("T", v.tid, entry.meta)
    if isinstance(v, ListVariable):
        return ("L", v.oid, tuple(vt_view(tracer, x) for x in tracer.state.heap[v.oid].items))
    if isinstance(v, DictVariable):
        return ("D", v.oid, tuple((k, vt_view(tracer, x)) for k, x in tracer.state.heap[v.oid].items))
    if isinstance(v, TupleVariable):
        return ("tuple", v.cls, tuple(vt_view(tracer, x) for x in v.items), v.source)
    if isinstance(v, LazyArgument):
        return ("lazy", v.source)
    if isinstance(v, ListEntry):
        return (tuple(_shallow(x) for x in v.items), v.source)
    if isinstance(v, DictEntry):
        return (tuple((k, _shallow(x)) for k, x in v.items), v.source)
    if isinstance(v, CellEntry):
        return _shallow(v.contents)
    return v


def _shallow(v: Any) -> Any:
    return ("lazy", v.source) if isinstance(v, LazyArgument) else v


def deep_projection(obj: Any, seen: dict | None = None) -> Any:
    """Everything reachable from ``obj`` as nested tuples of plain values, re-read from the objects now.

    Fake tensors become their metadata (with their identity); real tensors their
    metadata and data; FX nodes their name and whether they were erased; other
    live objects (functions, modules, globals dicts, code) their identity. Taken
    at checkpoint time and again after restore, it shows any in-place change to
    any object the checkpointed state reaches.
    """
    if seen is None:
        seen = {}
    key = id(obj)
    if key in seen:
        return ("seen", seen[key])
    if isinstance(obj, (int, float, bool, str, bytes, type(None), torch.dtype, torch.device, torch.layout, type)):
        return obj
    seen[key] = len(seen)
    if isinstance(obj, torch.Tensor):
        if isinstance(obj, torch._subclasses.fake_tensor.FakeTensor):
            return ("fake", key, fake_desc(obj))
        return ("tensor", key, fake_desc(obj), obj.detach().flatten().tolist())
    if isinstance(obj, torch.fx.Node):
        return ("node", obj.name, obj._erased)
    if isinstance(obj, immutables.Map):
        return ("map", tuple((deep_projection(k, seen), deep_projection(v, seen)) for k, v in obj.items()))
    if isinstance(obj, PLog):
        return ("log", tuple(deep_projection(x, seen) for x in obj))
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):  # Frame, TraceState (NamedTuples)
        return (type(obj).__name__, tuple((name, ("dict", id(value)) if isinstance(value, dict) else
                                           deep_projection(value, seen)) for name, value in zip(obj._fields, obj)))
    if dataclasses.is_dataclass(obj):
        fields = []
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, dict):  # Frame.globals: the live module globals
                fields.append((f.name, ("dict", id(value))))
            else:
                fields.append((f.name, deep_projection(value, seen)))
        return (type(obj).__name__, tuple(fields))
    if isinstance(obj, (tuple, list, frozenset, set)):
        items = sorted(obj, key=repr) if isinstance(obj, (set, frozenset)) else obj
        return (type(obj).__name__, tuple(deep_projection(x, seen) for x in items))
    if isinstance(obj, dict):
        return ("dict", tuple((deep_projection(k, seen), deep_projection(v, seen)) for k, v in obj.items()))
    if isinstance(obj, slice):
        return ("slice", obj.start, obj.stop, obj.step)
    return ("object", type(obj).__qualname__, key)


# ------------------------------------------------------------------ random straight-line programs

# Slots: {t} {u} an existing tensor name; {n} a tensor name to bind (new or existing);
# {l} an existing list, {nl} a new list name; {d} an existing dict, {nd} a new dict name.
INPLACE = [
    "{t}.add_(1)", "{t}.mul_({u})", "{t}.add_({u})", "{t}.t_()", "{t}.unsqueeze_(0)", "{t}.squeeze_(0)",
    "{t}.transpose_(0, -1)", "{t}[0] = {u}[0]", "{t}[0] = 1.5", "{t}[...] = {u}", "{t} += {u}", "{t} *= 2",
    "{t}.copy_({u})", "{t}.zero_()", "{t}.requires_grad_()", "{t}.sin_()", "{t}.clamp_(min=0)",
]
OUT_OF_PLACE = [
    "{n} = {t} + {u}", "{n} = {t} * 2", "{n} = torch.sin({t})", "{n} = {t}.sum(0)", "{n} = {t}.clone()",
    "{n} = torch.cat([{t}, {u}])", "{n} = {t}.detach()", "{n} = -{t}", "{n} = {t} @ {u}",
]
VIEWS = [
    "{n} = {t}[0]", "{n} = {t}.view(-1)", "{n} = {t}.t()", "{n} = {t}.unsqueeze(0)", "{n} = {t}.transpose(0, -1)",
    "{n} = {t}[:, 1:]", "{n} = {t}[1:]", "{n} = {t}.squeeze(0)", "{n} = {t}.reshape(-1)", "{n} = {t}.expand(2, -1)",
]
CONTAINERS = [
    "{nl} = [{t}]", "{nl} = [{t}, {u}]", "{l} += [{t}]", "{l}[0] = {t}", "{l}[-1] = {t}", "{nl} = {l} + [{t}]",
    "{nl} = {l}", "{nd} = {{'a': {t}}}", "{d}['b'] = {t}", "{d}['a'] = {t}", "{nd} = {d}",
    "{n} = {l}[-1]", "{n} = {l}[0]", "{n} = {d}['a']", "{l}[0].add_(1)", "{d}['a'].mul_(2)", "{l}[-1].t_()",
]


def _list_append_supported() -> bool:
    """``list.append`` in the op mix only once the tracer supports it (it is unsupported when this was written)."""
    fn = make_function(["l = [x]", "l.append(x)", "return l"], ("x",))
    try:
        start_trace(fn, {"x": torch.zeros(1)}).run()
    except Unsupported:
        return False
    return True


if _list_append_supported():
    CONTAINERS.append("{l}.append({t})")

TEMPLATES = INPLACE + OUT_OF_PLACE + VIEWS + CONTAINERS
SHAPES = [(2, 3), (3, 3), (3,), (1, 3), (2, 1, 3)]


def make_inputs(spec: tuple) -> dict:
    """Fresh input tensors from a spec: ((shape, requires_grad) for x, y, z; alias mode)."""
    shapes, alias = spec
    gen = torch.Generator().manual_seed(1234)
    L = {}
    for name, (shape, grad) in zip("xyz", shapes):
        L[name] = torch.randn(shape, generator=gen).requires_grad_(grad)
    if alias == "y_is_x":
        L["y"] = L["x"]
    elif alias == "y_view_of_x":
        with torch.no_grad():
            base = L["x"].detach().clone()
        L["x"] = base
        L["y"] = base[0]
    return L


def runs_eagerly(body: list[str], spec: tuple) -> bool:
    src = "def g(x, y, z):\n" + "".join(f"    {line}\n" for line in body) + "    return None\n"
    namespace = {"torch": torch}
    try:
        exec(compile(src, "<candidate>", "exec"), namespace)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            namespace["g"](**make_inputs(spec))
    except Exception:
        return False
    return True


@st.composite
def programs(draw: Any) -> tuple[list[str], tuple]:
    """A straight-line body (ending in a return of every live name) and the input spec; valid in eager."""
    shapes = tuple((draw(st.sampled_from(SHAPES)), draw(st.booleans())) for _ in range(3))
    alias = draw(st.sampled_from(["none", "none", "none", "y_is_x", "y_view_of_x"]))
    spec = (shapes, alias)
    tensors, lists, dicts = ["x", "y", "z"], [], []
    body: list[str] = []
    n_lines = draw(st.integers(1, 10))
    for _ in range(3 * n_lines):
        if len(body) >= n_lines:
            break
        template = draw(st.sampled_from(TEMPLATES))
        if ("{l}" in template and not lists) or ("{d}" in template and not dicts):
            continue
        new_tensor = draw(st.sampled_from(tensors + [f"t{len(tensors)}"]))
        slots = {
            "t": draw(st.sampled_from(tensors)),
            "u": draw(st.sampled_from(tensors)),
            "n": new_tensor,
            "l": draw(st.sampled_from(lists)) if lists else None,
            "d": draw(st.sampled_from(dicts)) if dicts else None,
            "nl": f"l{len(lists)}",
            "nd": f"d{len(dicts)}",
        }
        line = template.format(**slots)
        if not runs_eagerly(body + [line], spec):
            continue
        body.append(line)
        if "{n}" in template and new_tensor not in tensors:
            tensors.append(new_tensor)
        if "{nl}" in template:
            lists.append(slots["nl"])
        if "{nd}" in template:
            dicts.append(slots["nd"])
    body.append("return (" + "".join(f"{name}, " for name in tensors + lists + dicts) + ")")
    return body, spec


# ------------------------------------------------------------------ the property


@settings(max_examples=300, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(program=programs(), data=st.data())
def test_restore_is_exact_and_resuming_equals_tracing_from_scratch(program, data):
    body, spec = program
    fn = make_function(body)

    # The trace from scratch (also: how many instructions the program takes, and whether it is supported).
    L2 = make_inputs(spec)
    try:
        fresh, total = trace_steps(fn, L2)
    except (Unsupported, UserError):
        assume(False)

    L = make_inputs(spec)
    pristine = {name: (t.detach().clone(), t.requires_grad) for name, t in L.items()}
    tracer = start_trace(fn, L)
    k = data.draw(st.integers(0, total - 1), label="k (steps before the checkpoint)")
    for _ in range(k):
        step(tracer)  # catching nothing: the program is supported
    assert tracer.result is None

    token = tracer.checkpoint()
    state = tracer.state
    code = graph_code(tracer)
    n_nodes = len(tracer.graph.nodes)
    fx_nodes = list(tracer.graph.graph.nodes)  # graph order: placeholders first
    created = list(tracer.graph.nodes)  # creation order (what rollback pops)
    fakes = fake_record(state)
    projection = deep_projection(state)

    m = data.draw(st.integers(0, total - k), label="m (steps after the checkpoint)")
    step_n(tracer, m)
    assert (tracer.result is not None) == (k + m == total)

    tracer.restore(token)
    assert tracer.state is state
    assert tracer.state == state
    assert deep_projection(tracer.state) == projection
    assert graph_code(tracer) == code
    assert len(tracer.graph.nodes) == n_nodes == token.graph_mark
    assert list(tracer.graph.graph.nodes) == fx_nodes and tracer.graph.nodes == created
    assert fake_record(tracer.state) == fakes
    for entry in tracer.state.heap.values():
        if isinstance(entry, TensorEntry) and entry.node is not None:
            assert not entry.node._erased, "the restored state refers to an FX node the rollback erased"

    # Resume: a trace continued from the restored state equals a trace from scratch.
    tracer.result = None  # restore() leaves a finished trace's result set: see test_restore_clears_the_result
    result = run(tracer)
    assert tracer.steps == k + m + (total - k)
    assert normalized_graph_code(tracer) == normalized_graph_code(fresh)
    assert node_structure(tracer) == node_structure(fresh)
    assert len(tracer.graph.nodes) == len(fresh.graph.nodes)
    assert result == fresh.result
    assert vt_view(tracer, result) == vt_view(fresh, fresh.result)
    assert heap_view(tracer) == heap_view(fresh)
    assert tracer.guards() == fresh.guards()
    assert list(tracer.state.inputs) == list(fresh.state.inputs)
    assert tracer.state.next_id == fresh.state.next_id
    # Tracing never touches the caller's tensors.
    for name, t in L.items():
        assert torch.equal(t.detach(), pristine[name][0]) and t.requires_grad == pristine[name][1]


# ------------------------------------------------------------------ unit tests: tokens

CHAIN = make_function([f"x = x + {i}" for i in range(40)] + ["return x"], ("x",))


def test_checkpoint_holds_the_state_by_reference():
    tracer = start_trace(CHAIN, {"x": torch.randn(3)})
    step_n(tracer, 30)
    token = tracer.checkpoint()
    assert isinstance(token, Checkpoint)
    assert token.state is tracer.state  # O(1): no copy of anything
    assert token.graph_mark == len(tracer.graph.nodes)
    assert [f.name for f in dataclasses.fields(Checkpoint)] == ["state", "graph_mark", "last_node"]  # O(1) fields only
    again = tracer.checkpoint()
    assert again.state is token.state and again == token  # no step between them: the same state


def test_restore_an_older_token_after_many_steps():
    tracer = start_trace(CHAIN, {"x": torch.randn(3)})
    step_n(tracer, 9)
    token = tracer.checkpoint()
    code, nodes = graph_code(tracer), list(tracer.graph.nodes)
    step_n(tracer, 140)  # dozens of nodes later, not finished
    assert tracer.result is None and len(tracer.graph.nodes) > len(nodes) + 30
    tracer.restore(token)
    assert tracer.state is token.state
    assert graph_code(tracer) == code
    assert tracer.graph.nodes == nodes and list(tracer.graph.graph.nodes) == nodes
    run(tracer)
    fresh, _ = trace_steps(CHAIN, {"x": torch.randn(3)})
    assert normalized_graph_code(tracer) == normalized_graph_code(fresh)
    assert heap_view(tracer) == heap_view(fresh)


def test_restore_twice_and_newest_first():
    tracer = start_trace(CHAIN, {"x": torch.randn(3)})
    step_n(tracer, 5)
    early = tracer.checkpoint()
    step_n(tracer, 20)
    late = tracer.checkpoint()
    late_code = graph_code(tracer)
    step_n(tracer, 20)
    tracer.restore(late)  # newest first, then an older one
    assert tracer.state is late.state and graph_code(tracer) == late_code
    tracer.restore(early)
    early_code = graph_code(tracer)
    assert tracer.state is early.state and len(tracer.graph.nodes) == early.graph_mark
    tracer.restore(early)  # restoring twice in a row changes nothing
    assert tracer.state is early.state and graph_code(tracer) == early_code
    step_n(tracer, 30)
    tracer.restore(early)  # and again after stepping on
    assert tracer.state is early.state and graph_code(tracer) == early_code
    assert len(tracer.graph.nodes) == early.graph_mark


def test_restore_clears_the_result():
    fn = make_function(["a = x + 1", "return a"], ("x",))
    tracer = start_trace(fn, {"x": torch.randn(3)})
    token = tracer.checkpoint()
    run(tracer)
    tracer.restore(token)
    assert tracer.result is None


def test_resumed_graph_code_is_textually_equal():
    fn = make_function(["a = x + 1", "b = a * 2", "return b"], ("x",))
    tracer = start_trace(fn, {"x": torch.randn(3)})
    token = tracer.checkpoint()
    step_n(tracer, 6)
    tracer.restore(token)
    run(tracer)
    fresh, _ = trace_steps(fn, {"x": torch.randn(3)})
    assert normalized_graph_code(tracer) == normalized_graph_code(fresh)  # holds
    assert graph_code(tracer) == graph_code(fresh)  # fails: l_x_1, add_1, mul_1


def test_fake_ids_are_not_reused():
    fn = make_function(["x.add_(1)", "return x + y"], ("x", "y"))
    confused = 0
    for _ in range(300):
        tracer = start_trace(fn, {"x": torch.zeros(2, 3), "y": torch.zeros(2, 3)})
        tracer.run()  # no states kept alive here: x's first fake is freed after x.add_(1)
        tids = [tid for _source, tid in tracer.state.inputs]
        confused += len(set(tids)) != 2
    assert confused == 0, f"{confused}/300 traces bound y to the tid of x"


# ------------------------------------------------------------------ unit tests: PLog


def test_plog_append_is_persistent():
    empty = PLog()
    assert len(empty) == 0 and list(empty) == [] and len(EMPTY_LOG) == 0
    a = empty.append("a")
    ab = a.append("b")
    ac = a.append("c")  # a branch from the same log
    assert list(empty) == [] and list(a) == ["a"]
    assert list(ab) == ["a", "b"] and list(ac) == ["a", "c"]
    assert len(a) == 1 and len(ab) == 2 and len(ac) == 2
    assert ab.tail is a and ac.tail is a  # O(1) append: shares the old log
    assert ab.head == "b"


def test_plog_holds_none_and_iterates_oldest_first():
    log = EMPTY_LOG
    items = [None, 0, (), "", None, False]
    for item in items:
        log = log.append(item)
    assert list(log) == items and len(log) == len(items)
    assert list(log) == list(log)  # iterating does not consume
    assert log == EMPTY_LOG.append(None).append(0).append(()).append("").append(None).append(False)


def test_plog_long_log_iterates_without_recursion():
    log = EMPTY_LOG
    for i in range(20_000):
        log = log.append(i)
    assert len(log) == 20_000 and list(log) == list(range(20_000))


# ------------------------------------------------------------------ unit tests: frozen values


def _started_tracer() -> Tracer:
    tracer = start_trace(CHAIN, {"x": torch.randn(3)})
    step_n(tracer, 12)
    return tracer


@pytest.mark.parametrize("field", TraceState._fields)
def test_trace_state_is_frozen(field):
    state = _started_tracer().state
    with pytest.raises(AttributeError):
        setattr(state, field, getattr(state, field))
    assert not hasattr(state, "__dict__")  # no attribute can be added either


@pytest.mark.parametrize("field", Frame._fields)
def test_frame_is_frozen(field):
    frame = _started_tracer().frame
    with pytest.raises(AttributeError):
        setattr(frame, field, getattr(frame, field))
    assert not hasattr(frame, "__dict__")


def test_checkpoint_plog_and_heap_entries_are_frozen():
    tracer = _started_tracer()
    token = tracer.checkpoint()
    entry = next(e for e in tracer.state.heap.values() if isinstance(e, TensorEntry))
    for obj, field in [(token, "state"), (token, "graph_mark"), (EMPTY_LOG.append(1), "head"),
                       (EMPTY_LOG.append(1), "length"), (entry, "meta"), (entry, "fake"), (entry, "node"),
                       (entry.meta, "shape"), (entry.meta, "version")]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, getattr(obj, field))
    assert isinstance(tracer.state.heap, immutables.Map)
    assert all(isinstance(getattr(tracer.state, f), immutables.Map) for f in ("heap", "guards", "memo", "fakes"))
    assert isinstance(tracer.frame.stack, tuple) and isinstance(tracer.frame.locals, immutables.Map)


def test_a_step_builds_a_new_state():
    tracer = start_trace(CHAIN, {"x": torch.randn(3)})
    seen = [tracer.state]
    projections = [deep_projection(tracer.state)]
    for _ in range(20):
        step(tracer)
        assert tracer.state is not seen[-1]
        seen.append(tracer.state)
        projections.append(deep_projection(tracer.state))
    # No step changed any earlier state.
    assert [deep_projection(s) for s in seen] == projections


# ------------------------------------------------------------------ unit tests: seed 000 (in-place after checkpoint)

SEED_000 = {  # name: (body, x's shape before the in-place op, after it)
    "t_": (["x.t_()", "return x"], (2, 3), (3, 2)),
    "squeeze_": (["x.squeeze_(0)", "return x"], (1, 3), (3,)),
    "unsqueeze_": (["x.unsqueeze_(0)", "return x"], (2, 3), (1, 2, 3)),
    "transpose_": (["x.transpose_(0, 1)", "return x"], (2, 3), (3, 2)),
    "setitem": (["x[0] = y[0]", "return x"], (2, 3), (2, 3)),
    "add_": (["x.add_(1)", "return x"], (2, 3), (2, 3)),
    "requires_grad_": (["x.requires_grad_()", "return x"], (2, 3), (2, 3)),
    "view then t_": (["v = x[0]", "x.t_()", "return x, v"], (2, 3), (3, 2)),
}


def _input_tid(state: TraceState, name: str) -> int | None:
    return next((tid for source, tid in state.inputs if source.name == f"L[{name!r}]"), None)


@pytest.mark.parametrize("case", list(SEED_000))
def test_inplace_op_after_checkpoint_leaves_the_checkpoint_untouched(case):
    body, shape, shape_after = SEED_000[case]
    fn = make_function(body, ("x", "y"))
    L = {"x": torch.randn(shape), "y": torch.randn(shape)}
    tracer = start_trace(fn, L)
    # Checkpoint just before the instruction that applies the in-place op to x (bumps x's version).
    while True:
        token = tracer.checkpoint()
        step(tracer)
        x_tid = _input_tid(token.state, "x")
        if x_tid is not None and tracer.state.heap[x_tid].meta.version > token.state.heap[x_tid].meta.version:
            break
    x_entry = token.state.heap[x_tid]
    x_fake, x_meta = x_entry.fake, x_entry.meta
    recorded = fake_record(token.state)
    projection = deep_projection(token.state)
    run(tracer)
    # The op took effect in the later state: a new version with a fresh fake.
    after = tracer.state.heap[x_tid]
    assert after.meta.shape == shape_after and after.meta.version == x_meta.version + 1
    assert after.fake is not x_fake
    assert after.meta.requires_grad == (case == "requires_grad_")

    tracer.result = None  # see test_restore_clears_the_result
    tracer.restore(token)
    entry = tracer.state.heap[x_tid]
    assert entry is x_entry and entry.meta is x_meta
    assert entry.meta.shape == shape and entry.meta.version == 0 and not entry.meta.requires_grad
    assert entry.fake is x_fake and tuple(entry.fake.shape) == shape and entry.fake._version == 0
    assert not entry.fake.requires_grad
    assert fake_record(tracer.state) == recorded
    assert deep_projection(tracer.state) == projection
    # The guard of x still describes x as it entered the trace (DESIGN invariant 5).
    (x_guard,) = [g for g in tracer.guards() if g.kind == "TENSOR" and g.source is not None
                  and g.source.name == "L['x']"]
    assert x_guard.expected[3] == shape
    # And the trace resumes to the same end as before.
    run(tracer)
    assert tracer.state.heap[x_tid].meta.shape == shape_after
