"""Which graph inputs a backward reaches, as eager decides it, on backends that make one autograd node of a graph.

AOTAutograd (``aot_eager``, ``inductor``) runs a whole graph as one autograd node, ``CompiledFunctionBackward``.
A backward that reaches that node through one output gives *every* input of the graph that requires grad a
gradient: zeros for the inputs that output is not computed from (AOTAutograd materializes the tangents of the
other outputs as zeros). Eager never reaches those inputs, so their ``.grad`` stays ``None`` (fuzz 2026:10,
37:153: ``t9 = w * 2; t14 = x * 1.0; t9.sum().backward()`` gave ``x`` a zero grad). torch.compile diverges the
same way.

:func:`eager_input_grads` wraps the compiled graph where its outputs are computed from different inputs: each
call puts a hook on the node its outputs share, and a backward through it passes on a gradient only to the
inputs that some output whose gradient is defined is computed from; the others get none (``None``: autograd
accumulates nothing), as in eager. What an output is computed from is read off the FX graph's data flow, which
covers every autograd path; a graph where data flow does not tell (a node writes a tensor in place, or the
graph holds subgraphs) is left as it is.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch
import torch.fx

from .. import compat

#: The in-place operators a node may call (``x += y`` records ``operator.iadd``).
_INPLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                      operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift,
                      operator.irshift, operator.imatmul, operator.setitem}


def _may_write(node: torch.fx.Node) -> bool:
    """Whether ``node`` looks like it writes a tensor in place (by its name or arguments)."""
    if "out" in node.kwargs or node.kwargs.get("inplace") is True or node.target in _INPLACE_OPERATORS:
        return True
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.startswith("_") or name in ("__setitem__", "batch_norm", "instance_norm")


def input_dependencies(gm: torch.fx.GraphModule, root_of: Callable[[torch.fx.Node], Any]) -> list[frozenset] | None:
    """Per output of ``gm`` (its one tuple output), the positions of the placeholders it is computed from.

    Follows FX data flow, and writes: a node that writes in place records, in ``node.meta["writes"]``, the
    autograd roots (base tensors, by the trace's identity) of what it writes (``tensors/ops.py``), and every
    later read of a tensor with one of those roots (``root_of(node)``: the base, or a view of it) is computed
    from what the write was. ``None`` where that may miss a path: a node writes without saying what, or the
    graph calls a submodule or a subgraph (``get_attr``)."""
    placeholders: dict = {}
    flows: dict = {}
    written: dict = {}  # root -> what the writes into it so far were computed from
    outputs = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            placeholders[node] = len(placeholders)
            flows[node] = frozenset((placeholders[node],))
        elif node.op in ("get_attr", "call_module"):
            return None
        elif node.op == "output":
            outputs = node.args[0]
        else:
            flow = frozenset().union(*(flows[arg] | written.get(root_of(arg), frozenset())
                                       for arg in node.all_input_nodes))
            roots = node.meta.get("writes")
            if roots is None and _may_write(node):
                return None
            for root in roots or ():
                written[root] = written.get(root, frozenset()) | flow
            flows[node] = flow
    if not isinstance(outputs, (tuple, list)):
        return None
    return [flows[out] | written.get(root_of(out), frozenset()) if isinstance(out, torch.fx.Node) else frozenset()
            for out in outputs]


def eager_input_grads(gm: torch.fx.GraphModule, compiled: Callable, root_of: Callable[[torch.fx.Node], Any],
                      examples: list) -> Callable:
    """``compiled`` (``gm`` compiled by an AOTAutograd backend), wrapped so that a backward gives a gradient only
    to the inputs eager's would reach (see the module docstring); ``compiled`` itself where every output that
    requires grad is computed from the same inputs, or data flow does not tell (:func:`input_dependencies`;
    ``root_of`` gives a node's autograd root, ``None`` for a node that is no tensor). ``examples``: the graph's
    inputs on this call; where two share memory the trace does not see as one root, nothing is wrapped."""
    flows = input_dependencies(gm, root_of)
    if flows is None:
        return compiled
    outputs = next(node for node in gm.graph.nodes if node.op == "output").args[0]
    differentiable = {flow for out, flow in zip(outputs, flows) if isinstance(out, torch.fx.Node) and
                      isinstance(out.meta.get("val"), torch.Tensor) and out.meta["val"].requires_grad}
    if len(differentiable) < 2:
        return compiled
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    memory: dict = {}
    for node, example in zip(placeholders, examples):
        key = compat.storage_key(example)
        if key is not None and memory.setdefault(key, root_of(node)) != root_of(node):
            return compiled

    every = frozenset().union(*flows)

    def run(*args: Any) -> Any:
        outs = compiled(*args)
        _hook_shared_node(outs, args, flows, every)
        return outs

    return run


def _hook_shared_node(outs: Any, args: tuple, flows: list, every: frozenset) -> None:
    """Hook the ``CompiledFunctionBackward`` node of ``outs``: its output slots whose tensor is one of ``outs``
    map to what that output is computed from, and its input edges to the positions of ``args``. ``every``: the
    positions some output is computed from; a backward that reaches all of them (a training step's loss) drops
    nothing, and pays only for the check."""
    node = None
    slots: dict[int, frozenset] = {}
    for out, flow in zip(outs, flows):
        fn = out.grad_fn if isinstance(out, torch.Tensor) else None
        if fn is None or type(fn).__name__ != "CompiledFunctionBackward":
            continue
        if node is None:
            node = fn
        elif fn is not node:
            return  # outputs of two nodes: nothing to say of either
        slots[out.output_nr] = slots.get(out.output_nr, frozenset()) | flow
    if node is None:
        return

    def restrict(grad_inputs: tuple, grad_outputs: tuple) -> tuple | None:
        reached: frozenset = frozenset()
        for slot, grad in enumerate(grad_outputs):
            if grad is None:
                continue
            if slot not in slots:  # a gradient through an output stillframe does not see (an alias's base)
                return None
            reached |= slots[slot]
        if reached >= every:
            return None
        edges = _edge_positions(node, args)
        if len(grad_inputs) != len(edges):
            return None
        return tuple(None if at is not None and not at & reached else grad for grad, at in zip(grad_inputs, edges))

    node.register_hook(restrict)


def _edge_positions(node: Any, args: tuple) -> list:
    """Per input edge of autograd ``node``, the positions among ``args`` of the tensor it leads to (a leaf's
    ``AccumulateGrad``, or another tensor's ``grad_fn`` and output number); ``None`` for an edge to none of them.
    One tensor passed twice has two positions."""
    positions: dict = {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            key = id(a) if a.grad_fn is None else (id(a.grad_fn), a.output_nr)
            positions[key] = positions.get(key, frozenset()) | {i}
    edges = []
    for fn, nr in node.next_functions:
        if fn is None:
            edges.append(None)
        elif type(fn).__name__ == "AccumulateGrad":
            edges.append(positions.get(id(fn.variable)))
        else:
            edges.append(positions.get((id(fn), nr)))
    return edges
