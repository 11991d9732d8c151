"""Speculation: trace a callable into its own FX subgraph from one checkpoint, then roll back.

Higher-order operators (``torch.cond``'s branches, ...) take Python callables that must become graphs
of their own (DESIGN invariant 11). :func:`speculate` is the primitive they share::

    spec = speculate(tx, true_fn, [x], "the true branch")
    spec.output      # the VT the callable returned (tensors in it live in spec.builder's graph)
    spec.effects     # what it did outside itself: ("appends to the list L['log']", ...)
    spec.builder     # a SubgraphBuilder: finish_subgraph(outputs, free_variables) -> GraphModule

It takes a checkpoint, records the callable's ops into a fresh :class:`SubgraphBuilder` (tensors of
the outer trace that it reads are free variables, lifted into subgraph inputs when it is finished),
then restores the checkpoint, *keeping what the callable learned about the inputs*: its guards, the
graph inputs it read first (a module parameter becomes an input of the outer graph, and a free
variable of the subgraph) and the objects it made (so its output can still be read). Everything it
changed is gone: frames, side effects, in-place updates of outer tensors (a fake tensor is never
mutated: the branch bound new versions in a heap that is restored). :func:`diff` names how two
speculations differ, for error messages.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported, UserError
from ..graph.builder import SubgraphBuilder
from ..tensors.meta import TensorEntry, fresh_base
from ..trace.state import TraceState
from ..variables.base import (
    ConstantVariable,
    DictEntry,
    ListEntry,
    ListVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
)
from . import calls

if TYPE_CHECKING:
    import torch.fx

    from ..trace.interpreter import Tracer


@dataclass(frozen=True)
class Speculation:
    """What :func:`speculate` found: the output, the subgraph, the effects, the state the callable left.

    ``first_id`` is the heap id of the first object the callable made: ids below it are the outer
    trace's (an output tensor with such an id, or a view of one, aliases something outside).
    """

    name: str
    output: VariableTracker
    builder: SubgraphBuilder
    effects: tuple
    state: TraceState
    first_id: int


def speculate(tx: Tracer, fn: VariableTracker, args: list, name: str, kwargs: dict | None = None) -> Speculation:
    """Trace ``fn(*args, **kwargs)`` into a subgraph from a checkpoint and restore it (see the module docstring).

    A graph break or an exception inside ``fn`` is a graph break of the whole higher-order call
    (``Unsupported``): it then runs for real, and eager decides what happens.
    """
    token = tx.checkpoint()
    outer = tx.graph
    builder = SubgraphBuilder(outer)
    tx.graph = builder
    try:
        output = calls.call_sync(tx, fn, list(args), dict(kwargs or {}))
    except UserError as e:
        tx.graph = outer
        tx.restore(token)
        tx.unsupported("higher_order", f"{name} raises {type(e.exc).__name__}: {e.exc}",
                       ("the call runs for real, so the exception (if it happens) is eager's own",))
    except Unsupported as e:
        tx.graph = outer
        tx.restore(token)
        tx.unsupported("higher_order", f"{name} cannot be traced into a subgraph: {e.graph_break.explanation}",
                       ("the call runs for real",))
    finally:
        tx.graph = outer
    end = tx.state
    effects = side_effects_between(token.state, end)
    tx.state = learned(token.state, end)
    tx.result = None
    return Speculation(name, output, builder, effects, end, token.state.next_id)


def learned(before: TraceState, after: TraceState) -> TraceState:
    """``before``, plus what a speculation that ended in ``after`` learned: guards, graph inputs, the memo
    of wrapped values, fake tensors, and the objects it made (heap ids from ``before.next_id`` on)."""
    heap = before.heap
    if after.next_id > before.next_id:
        with heap.mutate() as evolver:
            for oid, entry in after.heap.items():
                if oid >= before.next_id:
                    evolver[oid] = entry
            heap = evolver.finish()
    return before.replace(heap=heap, guards=after.guards, inputs=after.inputs, memo=after.memo, fakes=after.fakes,
                          next_id=after.next_id)


def speculate_transformed(tx: Tracer, fn: VariableTracker, args: list, name: str,
                          kwargs: dict | None = None) -> Speculation:
    """:func:`speculate` for the function a ``torch.func`` transform is given: while it is traced,
    ``tx.transform_depth`` counts it (an ``autograd.Function`` applied there breaks: functorch calls the
    Function's own ``backward``, ``jvp`` and ``vmap`` rules, where the graph would transform its forward's ops)."""
    tx.transform_depth += 1
    try:
        return speculate(tx, fn, args, name, kwargs)
    finally:
        tx.transform_depth -= 1


def side_effects_between(before: TraceState, after: TraceState) -> tuple:
    """What the trace from ``before`` to ``after`` did to objects that existed at ``before``, in words."""
    found = []
    for key, (order, payload) in after.side_effects.items():
        if before.side_effects.get(key) != (order, payload):
            found.append((order, _describe_effect(key, payload, after)))
    effects = [text for _, text in sorted(found, key=lambda pair: pair[0])]
    # (a list or dict whose pending mutation was recorded before keeps its key and payload when it changes again:
    # its heap entry tells; skipped only where its entry in the log changed, already described above)
    recorded = {key[1] for key, value in after.side_effects.items()
                if isinstance(key[1], int) and before.side_effects.get(key) != value}
    for oid, entry in before.heap.items():
        now = after.heap.get(oid)
        if now is entry or oid in recorded:
            continue
        if isinstance(entry, TensorEntry):
            if now.meta.version != entry.meta.version:
                effects.append(f"mutates {_tensor_name(entry)} in place")
        elif not _only_read(entry, now):
            effects.append(f"changes a {_kind(entry)} made before it")
    if len(after.prologue) != len(before.prologue):
        effects.append("changes the autograd metadata of an input (requires_grad_)")
    if after.grad_enabled != before.grad_enabled:
        effects.append(f"leaves grad mode {'enabled' if after.grad_enabled else 'disabled'}")
    if after.autocast != before.autocast:
        effects.append("leaves the autocast state changed")
    return tuple(effects)


def _only_read(entry: Any, now: Any) -> bool:
    """An outside list or dict whose first read was guarded (a lazy read, not a change)."""
    if isinstance(entry, ListEntry) and isinstance(now, ListEntry):
        return entry.items is None and now.appended == entry.appended
    if isinstance(entry, DictEntry) and isinstance(now, DictEntry):
        return entry.items == now.items
    return False


def _kind(entry: Any) -> str:
    return type(entry).__name__.removesuffix("Entry").lower() or "value"


def _tensor_name(entry: TensorEntry) -> str:
    return entry.source.name if entry.source is not None else "a tensor computed before it"


def _describe_effect(key: tuple, payload: Any, state: TraceState) -> str:
    kind = key[0]
    if kind == "attr":
        return f"sets the attribute {key[2]!r} of an outside object"
    if kind == "attr_del":
        return f"deletes the attribute {key[2]!r} of an outside object"
    if kind == "call":
        return f"calls {getattr(payload[0], 'fn', payload[0])!r}, which only runs after the graph"
    entry = state.heap.get(key[1])
    source = getattr(entry, "source", None)
    where = source.name if source is not None else "made before it"
    return f"mutates the {kind} {where}"


# ------------------------------------------------------------------------------------------- outputs
@dataclass(frozen=True)
class Leaf:
    """One leaf of an output's structure: a tensor (``tid``) or a constant (``value``)."""

    tid: int | None = None
    value: Any = None


def flatten(tx: Tracer, var: VariableTracker) -> tuple[Any, list[Leaf]] | None:
    """``var``'s structure (nested ``("tuple"|"list", n, children)``, ``"tensor"``, ``("const", v)``) and
    its leaves, or ``None`` for a value that is not a tree of tensors, tuples, lists and constants."""
    leaves: list[Leaf] = []

    def visit(v: VariableTracker) -> Any:
        if isinstance(v, TensorVariable):
            leaves.append(Leaf(tid=v.tid))
            return "tensor"
        if isinstance(v, ConstantVariable) and (v.value is None or isinstance(v.value, (bool, int, float))):
            leaves.append(Leaf(value=v.value))
            return ("const", type(v.value).__name__)
        if isinstance(v, TupleVariable) and v.cls is tuple:
            return ("tuple", tuple(visit(i) for i in v.items))
        if isinstance(v, ListVariable):
            return ("list", tuple(visit(i) for i in tx.list_items(v)))
        raise _NotATree(v)

    try:
        return visit(var), leaves
    except _NotATree:
        return None


class _NotATree(Exception):
    pass


def unflatten(tx: Tracer, spec: Any, leaves: list) -> VariableTracker:
    """The inverse of :func:`flatten`: ``leaves`` (VTs, in order) placed back into ``spec``'s structure."""
    it = iter(leaves)

    def build(s: Any) -> VariableTracker:
        if s == "tensor" or s[0] == "const":
            return next(it)
        items = tuple(build(c) for c in s[1])
        return TupleVariable(items) if s[0] == "tuple" else tx.new_list(items)

    return build(spec)


def describe_spec(spec: Any) -> str:
    """``spec`` as Python would show its shape: ``(Tensor, [Tensor, int])``."""
    if spec == "tensor":
        return "Tensor"
    if spec[0] == "const":
        return spec[1]
    inner = ", ".join(describe_spec(c) for c in spec[1])
    return f"({inner}{',' if len(spec[1]) == 1 else ''})" if spec[0] == "tuple" else f"[{inner}]"


def diff(tx: Tracer, a: Speculation, b: Speculation,
         fields: tuple = ("dtype", "shape", "device", "requires_grad")) -> list[str]:
    """How the outputs and effects of two speculations differ, one sentence each (empty: they agree).

    Compared: the output's structure, each output tensor's metadata ``fields``, each constant's value,
    and the effects each had outside itself::

        >>> diff(tx, true, false)
        ["output 1 has dtype torch.float64 in the true branch but torch.float32 in the false branch"]
    """
    out: list[str] = []
    fa, fb = flatten(tx, a.output), flatten(tx, b.output)
    if fa is None or fb is None:
        for spec, flat in ((a, fa), (b, fb)):
            if flat is None:
                out.append(f"{spec.name} returns a {spec.output.python_type().__name__}, not tensors, tuples, "
                           "lists or numbers")
    elif fa[0] != fb[0]:
        out.append(f"{a.name} returns {describe_spec(fa[0])} but {b.name} returns {describe_spec(fb[0])}")
    else:
        for i, (la, lb) in enumerate(zip(fa[1], fb[1])):
            where = f"output {i}" if len(fa[1]) > 1 else "the output"
            if la.tid is None:
                if la.value != lb.value:
                    out.append(f"{where} is {la.value!r} in {a.name} but {lb.value!r} in {b.name}")
                continue
            ma, mb = a.state.heap[la.tid].meta, b.state.heap[lb.tid].meta
            for field in fields:
                va, vb = getattr(ma, field), getattr(mb, field)
                show = (lambda s: str(tuple(s))) if field == "shape" else str
                if va != vb:
                    out.append(f"{where} has {field} {show(va)} in {a.name} but {show(vb)} in {b.name}")
    for spec in (a, b):
        for effect in spec.effects:
            out.append(f"{spec.name} {effect}")
    return out


def output_tensors(tx: Tracer, spec: Speculation, leaves: list[Leaf]) -> tuple[list, str | None]:
    """The subgraph nodes of the output's tensors, or why they cannot be outputs of a higher-order op
    (torch's rule: an output may not be, or be a view of, an input or another output)."""
    nodes, roots = [], set()
    for i, leaf in enumerate(leaves):
        if leaf.tid is None:
            continue
        entry = spec.state.heap[leaf.tid]
        root = entry.meta.base if entry.meta.base is not None else leaf.tid
        if root < spec.first_id or entry.node is None or entry.node.graph is not spec.builder.graph:
            return [], f"{spec.name} returns a tensor that is (or is a view of) one from outside it (output {i})"
        if root in roots:
            return [], f"{spec.name} returns two outputs that share memory (output {i})"
        roots.add(root)
        nodes.append(entry.node)
    return nodes, None


#: Ops that draw random numbers: a subgraph run twice (a recomputed checkpoint region, the body of a vjp run
#: again by its vjp_fn) would draw different ones, so such a call runs for real.
RANDOM_NAMES = ("dropout", "rand", "bernoulli", "normal", "multinomial", "uniform", "rrelu", "gumbel", "poisson",
                "exponential", "cauchy", "geometric")


def draws_random_numbers(node: torch.fx.Node) -> bool:
    """Whether ``node`` draws random numbers (a dropout with ``p=0`` or ``training=False`` does not)."""
    if node.op not in ("call_function", "call_method"):
        return False
    name = (node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")).lower()
    if not any(r in name for r in RANDOM_NAMES):
        return False
    if "dropout" in name and node.op == "call_function":
        p = node.kwargs.get("p", node.args[1] if len(node.args) > 1 else 0.5)
        training = node.kwargs.get("training", node.args[2] if len(node.args) > 2 else True)
        return not (p == 0 or training is False)
    return True


def fake_of_nodes(tx: Tracer, nodes: list) -> list:
    """The current fake tensor of each outer-graph node (the heap's, which an in-place op may have
    re-bound since the node's own ``meta['val']`` was recorded)."""
    wanted = set(nodes)
    current = {e.node: e.fake for e in tx.state.heap.values()
               if isinstance(e, TensorEntry) and e.node in wanted}
    return [current.get(n, n.meta.get("val")) for n in nodes]


def result_fakes(tx: Tracer, metas: list, differentiable_inputs: bool | None) -> tuple:
    """Fresh fakes for the outputs of a higher-order op, shaped as ``metas`` (TensorMeta of the subgraph's
    outputs), not views. An op wrapped in an autograd Function (cond, while_loop) makes them require grad
    (non-leaves) when grad mode is on, ``differentiable_inputs`` and the dtype is differentiable; ``None``
    keeps each meta's own (a checkpointed region computes as if inlined). What running the op on fakes
    would give, without running its subgraphs again (nested ops would run theirs once per level)."""
    fakes = []
    for meta in metas:
        rg = meta.requires_grad if differentiable_inputs is None else \
            differentiable_inputs and tx.state.grad_enabled and (meta.dtype.is_floating_point or meta.dtype.is_complex)
        meta = dataclasses.replace(meta, base=None, storage_offset=0, version=0, requires_grad=rg, is_leaf=not rg,
                                   has_grad_fn=rg)
        with tx.fake_mode:
            fakes.append(fresh_base(meta))
    return tuple(fakes)
