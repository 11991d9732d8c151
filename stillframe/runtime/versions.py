"""Version counters after a compiled graph: every tensor the graph wrote has eager's ``_version``.

Eager moves a tensor's version counter once per in-place op on it or on any alias sharing the counter (its views,
its ``detach()``): ``x.add_(1); x.view(3).mul_(2)`` leaves ``x._version`` 2 above where it was. A backend that
functionalizes the graph (AOTAutograd: ``"aot_eager"``, ``"inductor"``) writes a graph input once, by one ``copy_``
of its new value after the graph (inductor may fuse it further, leaving 1), and returns tensors the graph made and
wrote in place as new tensors at version 0. The trace knows eager's count (``TensorMeta.counter``, the moves of the
fakes' counters), so the plan sets what the backend left otherwise::

    plan = version_plan(tracer, gm)        # None where the graph writes nothing
    want = plan.before(inputs)             # each written input's counter now, plus eager's moves
    outputs = compiled(*args)
    plan.settle(inputs, outputs, want)     # each written input at what eager leaves, each output too

A counter already right is not set (the ``"eager"`` backend runs the in-place ops themselves); an input or output
that is an inference tensor has no counter and is left out. Outputs are set only where none requires grad: an
AOTAutograd Function may have saved one for backward, and autograd refuses a saved tensor whose counter moved
since (a known difference: ``y = x * 1; y.relu_(); return y`` with ``x`` requiring grad leaves ``y._version`` 0
where eager's is 1). An input written in the graph is never one AOTAutograd saves (``tensors/saved.py`` runs such
writes for real).
"""

from __future__ import annotations

from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from dataclasses import dataclass
from typing import Any

import torch

from .. import compat
from ..tensors.meta import TensorEntry
from ..tensors.saved import root, sharing_version


@dataclass(frozen=True, slots=True)
class VersionPlan:
    """What the graph moves: ``inputs``, pairs (position among the fetched inputs, moves of its counter) for each
    input the graph writes (moves 0 where eager's write moves none: ``F.batch_norm``'s running statistics);
    ``outputs``, pairs (position among the graph's outputs, its counter as eager leaves it) for tensors the graph
    made, which share no counter with an input. ``shared``: groups of indices into ``inputs`` whose tensors share a
    storage without the trace knowing whether they share a counter (``x`` and ``x.detach()`` do, ``x`` and
    ``x.data`` do not), asked on each call."""

    inputs: tuple[tuple[int, int], ...]
    outputs: tuple[tuple[int, int], ...]
    shared: tuple[tuple[int, ...], ...] = ()
    groups: tuple[int, ...] = ()  # per entry of ``inputs``: its alias group in the trace (one counter each)

    def before(self, inputs: list) -> list[int]:
        """What each written input's counter must read after the graph: its value now plus eager's moves (those
        of the inputs sharing it, too)."""
        want = [inputs[i]._version + moved for i, moved in self.inputs]
        for cluster in self.shared:
            for a in cluster:
                counted = {self.groups[a]}
                for b in cluster:
                    if self.groups[b] not in counted and \
                            _same_counter(inputs[self.inputs[a][0]], inputs[self.inputs[b][0]]):
                        counted.add(self.groups[b])
                        want[a] += self.inputs[b][1]
        return want

    def settle(self, inputs: list, outputs: Any, want: list[int]) -> None:
        """Set each counter the graph left other than eager's (``want``: what :meth:`before` said)."""
        tensors, versions = [], []
        for (i, _), version in zip(self.inputs, want):
            t = inputs[i]
            if t._version != version:
                tensors.append(t)
                versions.append(version)
        for i, version in self.outputs:
            t = outputs[i]
            if isinstance(t, torch.Tensor) and not t.is_inference() and t._version != version:
                tensors.append(t)
                versions.append(version)
        if tensors:
            compat.set_version_counters(tensors, versions)


def version_plan(tracer: Any, gm: torch.fx.GraphModule) -> VersionPlan | None:
    """The :class:`VersionPlan` of the graph ``tracer`` traced into ``gm``; ``None`` where it moves no counter."""
    heap = tracer.state.heap
    input_groups = {root(tracer, tid) for _, tid in tracer.state.inputs if isinstance(heap.get(tid), TensorEntry)}
    inputs, groups_of = [], []
    for position, (_, tid) in enumerate(tracer.state.inputs):
        entry = heap.get(tid)
        if isinstance(entry, TensorEntry) and not entry.meta.inference:
            groups = sharing_version(tracer, {root(tracer, tid)})
            moved = _moves(tracer, groups)
            if moved is None:  # (a custom op wrote it: its counter is left as the backend leaves it)
                continue
            if any(heap[g].meta.version for g in groups):
                inputs.append((position, moved))
                groups_of.append((groups, compat.storage_key(tracer.input_values.get(tid))))
    ids = [min(groups) for groups, _ in groups_of]
    clusters: dict = {}
    for a, (_, key) in enumerate(groups_of):
        if key is not None:
            clusters.setdefault(key, []).append(a)
    shared = [tuple(c) for c in clusters.values() if len({ids[a] for a in c}) > 1]
    outputs = []
    output = next(node for node in gm.graph.nodes if node.op == "output")
    results = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    if any(isinstance(v, torch.Tensor) and v.requires_grad for v in (
            node.meta.get("val") if isinstance(node, torch.fx.Node) else None for node in results)):
        # a backend's autograd Function may save an output for backward (relu_'s result), and a counter set since
        # would fail autograd's check of it: the outputs keep the counters the backend gave them
        results = ()
    for position, node in enumerate(results):
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        tid = tracer.tid_of_fake(val) if isinstance(val, torch.Tensor) else None
        if tid is None or heap[tid].meta.inference:
            continue
        groups = sharing_version(tracer, {root(tracer, tid)})
        moved = _moves(tracer, groups)
        if moved is not None and moved and not groups & input_groups:  # (an input's alias: its counter is the input's)
            outputs.append((position, moved))
    return VersionPlan(tuple(inputs), tuple(outputs), tuple(shared), tuple(ids)) if inputs or outputs else None


def _moves(tracer: Any, groups: set) -> int | None:
    """How far the writes to alias groups ``groups`` (roots sharing one version counter) moved it in the trace
    (``None``: by what the trace cannot know, a custom op's write)."""
    counters = [tracer.state.heap[tid].meta.counter for tid in groups]
    return None if None in counters else sum(counters)


def _same_counter(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether live tensors ``a`` and ``b`` share one version counter: moving ``a``'s moves ``b``'s (``a``'s is
    set back at once)."""
    version = a._version
    if b._version != version:
        return False
    compat.increment_version([a])
    same = b._version != version
    compat.set_version_counters((a,), (version,))
    return same
