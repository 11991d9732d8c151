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
covers every autograd path (a higher-order op's output counts as computed from all its operands); a graph
where data flow does not tell (a node writes in place without saying what) gets only the weaker hook of
:func:`eager_input_grads`.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import itertools
import operator
from typing import Any, Callable

import torch
import torch.fx

from .. import compat

#: The in-place operators a node may call (``x += y`` records ``operator.iadd``).
_INPLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                      operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift,
                      operator.irshift, operator.imatmul, operator.setitem}


def may_write(node: torch.fx.Node) -> bool:
    """Whether ``node`` looks like it writes a tensor in place (by its name or arguments)."""
    if "out" in node.kwargs or node.kwargs.get("inplace") is True or node.target in _INPLACE_OPERATORS:
        return True
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.startswith("_") or name in ("__setitem__", "batch_norm", "instance_norm")


def written_operands(node: torch.fx.Node) -> list:
    """The operands writer ``node`` may write in place: its ``out=`` tensors, or the tensor an in-place method,
    operator or ``inplace=True`` function writes (its first argument); every operand where the name does not say
    (``batch_norm``'s running statistics, a write only the trace recorded)."""
    out = node.kwargs.get("out")
    if out is not None:
        return [arg for arg in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(arg, torch.fx.Node)]
    first = node.args[0] if node.args else None
    if isinstance(first, torch.fx.Node) and (writes_first_argument(node) or node.target is operator.setitem or
                                             node.target == "__setitem__"):
        return [first]
    return list(node.all_input_nodes)


def writes_first_argument(node: torch.fx.Node) -> bool:
    """Whether ``node`` is an in-place op that writes its first argument and returns it (``t.sub_(1)``,
    ``torch.relu_(t)``, ``operator.iadd``, ``inplace=True``), as :func:`may_write` reads its name and arguments;
    not an ``out=`` write, a ``setitem`` (it returns nothing) or a norm that writes its running statistics."""
    if not node.args or "out" in node.kwargs or node.target is operator.setitem or node.target == "__setitem__":
        return False
    if node.kwargs.get("inplace") is True or node.target in _INPLACE_OPERATORS:
        return True
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.startswith("_")


def subgraph_may_write(sub: Any) -> bool:
    """Whether subgraph ``sub`` (a ``GraphModule``, else it may) or one it calls looks like it writes a tensor in
    place: its op's call would then write what its data flow does not show."""
    if not isinstance(sub, torch.fx.GraphModule):
        return True
    for node in sub.graph.nodes:
        if node.op == "call_module" or may_write(node) or node.kwargs.get("dirty_idx") or \
                node.op == "get_attr" and subgraph_may_write(getattr(sub, node.target, None)):
            return True
    return False


def input_dependencies(gm: torch.fx.GraphModule,
                       root_of: Callable[[torch.fx.Node], Any]) -> tuple[list[frozenset], dict] | None:
    """Per output of ``gm`` (its one tuple output), the positions of the placeholders it is computed from; and
    per placeholder the graph writes into (its root is written), what it is computed from after the graph.

    Follows FX data flow, and writes: a node that writes in place records, in ``node.meta["writes"]``, the
    autograd roots (base tensors, by the trace's identity) of what it writes (``tensors/ops.py``), and every
    later read of a tensor with one of those roots (``root_of(node)``: the base, or a view of it) is computed
    from what the write was. A higher-order op (its subgraphs are ``get_attr`` nodes) counts as computed from
    all its operands, a superset. ``None`` where that may miss a path: a node writes without saying what (an
    ``autograd.Function`` that marks an input dirty, a subgraph that looks like it writes), or the graph calls a
    submodule."""
    placeholders: dict = {}
    flows: dict = {}
    written: dict = {}  # root -> what the writes into it so far were computed from
    outputs = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            placeholders[node] = len(placeholders)
            flows[node] = frozenset((placeholders[node],))
        elif node.op == "call_module":
            return None
        elif node.op == "get_attr":  # a higher-order op's subgraph: its call reads the op's operands only
            if subgraph_may_write(getattr(gm, node.target, None)):
                return None
            flows[node] = frozenset()
        elif node.op == "output":
            outputs = node.args[0]
        else:
            flow = frozenset().union(*(flows[arg] | written.get(root_of(arg), frozenset())
                                       for arg in node.all_input_nodes))
            roots = node.meta.get("writes")
            if roots is None and (may_write(node) or node.kwargs.get("dirty_idx")):  # (a Function's mark_dirty)
                return None
            for root in roots or ():
                written[root] = written.get(root, frozenset()) | flow
            flows[node] = flow
    if not isinstance(outputs, (tuple, list)):
        return None
    after = [flows[out] | written.get(root_of(out), frozenset()) if isinstance(out, torch.fx.Node) else frozenset()
             for out in outputs]
    inputs = {i: flows[node] | written[root_of(node)] for node, i in placeholders.items() if root_of(node) in written}
    return after, inputs


def eager_input_grads(gm: torch.fx.GraphModule, compiled: Callable, root_of: Callable[[torch.fx.Node], Any],
                      examples: list) -> Callable:
    """``compiled`` (``gm`` compiled by an AOTAutograd backend), wrapped so that a backward gives a gradient only
    to the inputs eager's would reach (see the module docstring); ``compiled`` itself where no input requires
    grad. ``root_of`` gives a node's autograd root (``None`` for a node that is no tensor); ``examples`` are the
    graph's inputs on this call.

    Where the outputs are computed from different inputs (:func:`input_dependencies`), each input gets a
    gradient only from the outputs computed from it. Elsewhere (one set of inputs, data flow that does not tell,
    or two inputs that share memory the trace does not see as one root), a backward that brings the node no
    gradient at all passes none on: eager's own nodes pass an undefined gradient on as undefined, where
    AOTAutograd's node would make it zeros (a backward through another wrapped graph that drops this one's
    gradient, fuzz 37:447)."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    requiring = {i for i, node in enumerate(placeholders) if getattr(node.meta.get("val"), "requires_grad", False)}
    if not requiring:
        return compiled
    found = input_dependencies(gm, root_of)
    flows, written = found if found is not None else (None, {})
    if flows is not None:
        outputs = next(node for node in gm.graph.nodes if node.op == "output").args[0]
        differentiable = {flow for out, flow in zip(outputs, flows) if isinstance(out, torch.fx.Node) and
                          isinstance(out.meta.get("val"), torch.Tensor) and out.meta["val"].requires_grad}
        differentiable |= {flow for flow in written.values() if flow & requiring}  # (written with w)
        memory: dict = {}
        for node, example in zip(placeholders, examples):
            key = compat.storage_key(example)
            if key is not None and memory.setdefault(key, root_of(node)) != root_of(node):
                differentiable = set()
        if len(differentiable) < 2:
            flows, written = None, {}
    every = frozenset().union(*flows, *written.values()) if flows is not None else frozenset()

    def run(*args: Any) -> Any:
        # a written input's grad_fn before the call: the node's edge for it leads there (AOTAutograd's copy_
        # gives the input a new one)
        before = {i: (args[i].grad_fn, args[i].output_nr) for i in written if isinstance(args[i], torch.Tensor)}
        outs = compiled(*args)
        _hook_shared_node(outs, args, flows, written, every, before)
        return outs

    return run


def _hook_shared_node(outs: Any, args: tuple, flows: list | None, written: dict, every: frozenset,
                      before: dict) -> None:
    """Hook the ``CompiledFunctionBackward`` node of ``outs``: its output slots whose tensor is one of ``outs``
    map to what that output is computed from, the slots AOTAutograd copies a written input's new value from
    (``written``: position -> what it is computed from) to what that input is, and its input edges to the
    positions of ``args`` (``before``: a written input's grad_fn and output number before the call). ``every``:
    the positions some output is computed from; a backward that reaches all of them (a training step's loss)
    drops nothing, and pays only for the check. ``flows`` ``None``: only :func:`_nothing_from_nothing`."""
    node = None
    slots: dict[int, frozenset] = {}
    for out, flow in zip(outs, flows if flows is not None else itertools.repeat(None)):
        fn = out.grad_fn if isinstance(out, torch.Tensor) else None
        if fn is None or type(fn).__name__ != "CompiledFunctionBackward":
            continue
        if node is None:
            node = fn
        elif fn is not node:
            return  # outputs of two nodes: nothing to say of either
        if flow is not None:
            slots[out.output_nr] = slots.get(out.output_nr, frozenset()) | flow
    if node is None:  # no output comes straight out of the node (each is a view): a written input's copy_ does
        # (its other edge leads to the input's grad_fn before the call, which may be another graph's node: that
        # one is not this graph's, fuzz 63:205)
        earlier = [fn for fn, _nr in before.values()]
        node = next((fn for i in written if isinstance(args[i], torch.Tensor) and args[i].grad_fn is not None
                     for fn, _nr in args[i].grad_fn.next_functions
                     if type(fn).__name__ == "CompiledFunctionBackward" and not any(fn is e for e in earlier)),
                    None)
    if node is None:
        return
    if flows is None:
        node.register_hook(_nothing_from_nothing)
        return
    for i, flow in written.items():  # the input's copy_ from the graph's output slot that holds its new value
        fn = args[i].grad_fn if isinstance(args[i], torch.Tensor) else None
        for next_fn, nr in fn.next_functions if fn is not None else ():
            if next_fn is node:
                slots[nr] = slots.get(nr, frozenset()) | flow

    def restrict(grad_inputs: tuple, grad_outputs: tuple) -> tuple | None:
        reached: frozenset = frozenset()
        for slot, grad in enumerate(grad_outputs):
            if grad is None:
                continue
            if slot not in slots:  # a gradient through an output stillframe does not see (an alias's base)
                return None
            reached |= slots[slot]
        if not reached:
            return (None,) * len(grad_inputs)
        if reached >= every:
            return None
        edges = _edge_positions(node, args, before)
        if len(grad_inputs) != len(edges):
            return None
        return tuple(None if at is not None and not at & reached else grad for grad, at in zip(grad_inputs, edges))

    node.register_hook(restrict)


def _nothing_from_nothing(grad_inputs: tuple, grad_outputs: tuple) -> tuple | None:
    """A node hook: no gradient on (all ``None``) where none came in (every ``grad_outputs`` is ``None``)."""
    if any(grad is not None for grad in grad_outputs):
        return None
    return (None,) * len(grad_inputs)


def _edge_positions(node: Any, args: tuple, before: dict) -> list:
    """Per input edge of autograd ``node``, the positions among ``args`` of the tensor it leads to (a leaf's
    ``AccumulateGrad``, or another tensor's ``grad_fn`` and output number, as it was before the call where
    ``before`` has it); ``None`` for an edge to none of them. One tensor passed twice has two positions."""
    positions: dict = {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            grad_fn, nr = before.get(i, (a.grad_fn, a.output_nr))
            key = id(a) if grad_fn is None else (id(grad_fn), nr)
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
