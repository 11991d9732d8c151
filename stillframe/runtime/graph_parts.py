"""One autograd node per independent part of a graph, on backends that make one autograd node of a graph.

AOTAutograd (``aot_eager``, ``inductor``) runs a whole graph as one autograd node, ``CompiledFunctionBackward``,
which frees everything it saved on the first backward through it. Eager makes a node per op. So where a graph
computes two results that share no op, each differentiable (``t = x * 2`` and the ``loss = (w * w).sum()`` a
``loss.backward()`` after the graph reads), a backward through one frees the other's saved tensors, and a later
backward through the other raises "Trying to backward through the graph a second time", where eager runs both
(fuzz 43:66, 43:83, 43:107, 43:126). torch.compile raises there too.

:func:`independent_parts` cuts such a graph into its parts, which share only graph inputs, and each part is
compiled by the backend as a graph of its own (:func:`run_parts` runs them): one autograd node per part, as
eager's nodes would be. A graph is cut only where running its parts one after another is exactly running it:
every op that reads a graph input some op writes in place (or a view of one) is in the part of that write, the
graph calls no submodule (a higher-order op goes whole into one part, with its subgraphs, where they write
nothing), and it draws random numbers in at most one part (the stream's order, in subgraphs too). A switch of
grad mode or autocast is copied into every part, among its ops as in the graph. A part none of whose outputs and
writes is differentiable joins the first part: it needs no node of its own. Every part takes the graph's symbolic
sizes, as the whole graph would.

Where two outputs share an op (``h = x @ w`` read by both), they stay one node, as torch.compile's do; the
gradients it passes on are still eager's (``runtime/input_grads.py``). A second backward through that node raises
where eager's nodes that saved nothing (``AddBackward``) would run again: so the differentiable outputs made from
the graph's inputs by ops that save nothing are made apart, as eager ops, before the rest of the graph
(:func:`saving_free_prefix`); a second backward through an op that saved something raises in eager too.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from typing import Any, Callable

import torch
import torch.fx

from .. import compat
from ..graph import passes
from ..rules.speculation import draws_random_numbers
from .input_grads import may_write, subgraph_may_write, writes_first_argument, written_operands

_GLOBAL_STATE = (compat.set_grad_enabled, torch.amp.autocast_mode._enter_autocast,
                 torch.amp.autocast_mode._exit_autocast)


class Part:
    """One part of a graph: its own ``GraphModule``, the positions of the graph's inputs it takes, and the
    positions in the graph's tuple output of the values it computes."""

    def __init__(self, gm: torch.fx.GraphModule, inputs: tuple[int, ...], outputs: tuple[int, ...]) -> None:
        self.gm = gm
        self.inputs = inputs
        self.outputs = outputs


def independent_parts(gm: torch.fx.GraphModule) -> list[Part] | None:
    """The parts of ``gm`` (a graph with one tuple output) that share no node but placeholders, in graph order,
    where cutting it there is exact and gives two or more parts with a differentiable output (see the module
    docstring); ``None`` elsewhere."""
    nodes = list(gm.graph.nodes)
    placeholders = [node for node in nodes if node.op == "placeholder"]
    output = nodes[-1]
    if output.op != "output" or not isinstance(output.args[0], (tuple, list)):
        return None
    parent: dict = {}

    def find(node: torch.fx.Node) -> torch.fx.Node:
        while parent[node] is not node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    # a switch of grad mode or autocast goes into every part, where it stands among the part's ops: each op runs
    # in the mode it runs in in the whole graph (an autocast exit reads its entry's state: both are switches)
    switches = [node for node in nodes if node.op == "call_function" and node.target in _GLOBAL_STATE]
    body = [node for node in nodes if node.op not in ("placeholder", "output") and node not in switches]
    if any(arg in switches for node in body for arg in node.all_input_nodes) or \
            any(out in switches for out in output.args[0] if isinstance(out, torch.fx.Node)):
        return None  # (an op or the output reads a switch's state: an autocast block open at a break)
    reads: dict = {node: frozenset((node,)) for node in placeholders}  # node -> the placeholders it is made from
    written: set = set()  # placeholders some node may write (through a view of them, too)
    for node in body:
        if node.op == "call_module" or node.op == "get_attr" and not all(map(_is_higher_order, node.users)) or \
                _is_higher_order(node) and (node.kwargs.get("dirty_idx") or any(
                    subgraph_may_write(getattr(gm, arg.target, None)) for arg in node.all_input_nodes
                    if arg.op == "get_attr")):
            return None  # (a higher-order op is cut as one op, with its subgraphs: where they write nothing)
        reads[node] = frozenset().union(*(reads[arg] for arg in node.all_input_nodes))
    writers = [node for node in body if node.meta.get("writes") or may_write(node)]
    for node in writers:  # (what it writes: ``t[:, 0] = w`` writes t, not w, whose readers stay apart)
        written = written.union(*(reads[arg] for arg in written_operands(node)))
    for node in placeholders:
        parent[node] = node
    for node in body:
        parent[node] = node
        for arg in node.all_input_nodes:
            if arg.op != "placeholder" or arg in written:  # a written input: its readers run in one part, in order
                parent[find(arg)] = find(node)
    groups: dict = {}  # root -> the part's nodes, in graph order
    for node in body:
        groups.setdefault(find(node), []).append(node)
    differentiable = []  # roots of the parts with a differentiable output or write, in graph order
    for out in (*output.args[0], *writers):  # (a written input's new value comes out of the part's node)
        if isinstance(out, torch.fx.Node) and out.op != "placeholder" and find(out) not in differentiable and \
                (_requires_grad(out) or out in writers and any(map(_requires_grad, out.all_input_nodes))):
            differentiable.append(find(out))  # (a write requires grad where what it reads does: ``setitem``'s
            # node has no value)
    if len(differentiable) < 2:
        return None
    differentiable.sort(key=lambda root: nodes.index(groups[root][0]))
    members: dict = {root: [] for root in differentiable}
    for root, group in groups.items():
        members[root if root in members else differentiable[0]].extend(group)
    drawing = [root for root, group in members.items() if any(_draws(gm, node) for node in group)]
    if len(drawing) > 1:
        return None
    order = {node: i for i, node in enumerate(nodes)}
    return [_part(gm, sorted(members[root] + switches, key=order.__getitem__), placeholders, output.args[0])
            for root in differentiable]


def _part(gm: torch.fx.GraphModule, group: list, placeholders: list, outputs: Any) -> Part:
    """The ``Part`` computing ``group`` (nodes in graph order) and the outputs among them."""
    inside = set(group)
    used = {arg for node in group for arg in node.all_input_nodes if arg.op == "placeholder"}
    used |= {node for node in placeholders if isinstance(node.meta.get("val"), torch.SymInt)}  # (every part's sizes)
    graph = torch.fx.Graph()
    env: dict = {}
    inputs = []
    for i, node in enumerate(placeholders):
        if node in used:
            env[node] = graph.node_copy(node)
            inputs.append(i)
    for node in group:
        env[node] = graph.node_copy(node, env.__getitem__)
    positions = tuple(i for i, out in enumerate(outputs) if isinstance(out, torch.fx.Node) and out in inside)
    graph.output(tuple(env[outputs[i]] for i in positions))
    return Part(torch.fx.GraphModule(gm, graph), tuple(inputs), positions)


def run_parts(parts: list[Part], compiled: list[Callable], gm: torch.fx.GraphModule) -> Callable:
    """The compiled callable of ``gm`` made of its parts' (``compiled``, one per part, in order): the parts run in
    graph order, and an output no part computes (a graph input returned as it is, a constant) is taken as the
    graph returns it."""
    placeholders = {node: i for i, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    outputs = next(node for node in gm.graph.nodes if node.op == "output").args[0]
    computed = {i for part in parts for i in part.outputs}
    given = tuple((i, placeholders[out]) for i, out in enumerate(outputs) if i not in computed and out in placeholders)
    constants = tuple((i, out) for i, out in enumerate(outputs) if i not in computed and out not in placeholders)
    plan = tuple((fn, part.inputs, part.outputs) for fn, part in zip(compiled, parts))
    count = len(outputs)

    def run(*args: Any) -> list:
        results: list = [None] * count
        for fn, inputs, positions in plan:
            values = fn(*[args[i] for i in inputs])
            for i, value in zip(positions, values):
                results[i] = value
        for i, position in given:
            results[i] = args[position]
        for i, value in constants:
            results[i] = value
        return results

    return run


class Prefix:
    """The ops of a graph that eager would let a backward pass through any number of times, run apart from the
    rest (see :func:`saving_free_prefix`): ``part`` computes them from the graph's inputs, as eager ops;
    ``rest`` is the graph's other ops (``None``: there are none), taking the graph's inputs and the first
    ``handed`` of ``part``'s outputs it reads (``rest_args``); ``outputs`` says where
    each of the graph's outputs comes from: ``("prefix", i)``, ``("rest", i)`` or ``("input", i)``."""

    def __init__(self, part: Part, rest: torch.fx.GraphModule | None, outputs: tuple, handed: int,
                 rest_inputs: tuple) -> None:
        self.part = part
        self.rest = rest
        self.outputs = outputs
        self.handed = handed  # how many of part's outputs (its first) are handed on to the rest
        self.rest_inputs = rest_inputs  # positions among (graph inputs, handed values) of the rest's inputs

    def rest_args(self, args: Any, made: Any) -> list:
        """The rest's arguments, from the graph's ``args`` and what ``part`` ``made``."""
        combined = [*args, *made[:self.handed]]
        return [combined[i] for i in self.rest_inputs]


def saving_free_prefix(gm: torch.fx.GraphModule, saving: frozenset, grad_enabled: bool) -> Prefix | None:
    """The differentiable outputs of ``gm`` made from its inputs by ops that save nothing for backward in eager
    (none of their instructions, ``node.meta["location"]``, is in ``saving``), with those ops, cut out of the
    graph: ``None`` where there are none.

    AOTAutograd's one node frees itself on the first backward through it, and a second backward through it raises
    "Trying to backward through the graph a second time" even where it saved nothing. Eager's ``SubBackward`` or
    ``ViewBackward`` that saved nothing can be passed again: ``t = w - w`` returned beside a ``(t * t).sum()`` a
    ``.backward()`` after the graph reads, then a backward through ``t`` (fuzz 48:65, 48:133, 48:163, 43:116;
    torch.compile raises too). Those ops run as eager ops, a node each, before the rest of the graph, which takes
    their results as inputs. Only pure ops qualify (no random draw, no submodule or higher-order op, and none
    after the graph's first switch of grad mode or autocast: fuzz 68:63, ``t = w - w`` before a ``no_grad``
    block), and writes that save nothing into a tensor only they read, made by such an op with memory of its own
    (``t = w + 1; t.sub_(1)``, fuzz 68:302: no other op sees the write, so it runs as early as the op that made
    the tensor); typical models' outputs (a loss made by ops that save) have no such ops, so nothing changes for
    them.

    A symbolic graph is cut too (a size or int argument that changed: fuzz 61:72, 63:151). Arithmetic on its
    symbolic sizes and ints (``x * (0 - k)``'s ``0 - k``) saves nothing, and counts as such an op where it is made
    from the graph's inputs only (no unbacked symbol: no ``.item()``); one the rest reads too is computed again
    there, from the same inputs, rather than handed on. The part takes every symbolic size, as each part does, and
    so does the rest.

    An op may read a graph input that an op after it writes (``t6 = t2.t() * 1.0`` before ``t2[1:] = t1``): run
    before the rest, it reads what it reads in the graph. Cut apart so, a backward through ``t6`` no longer passes
    through a node with an edge to ``t1``, whose history eager never reaches there and that may raise (the engine
    runs the node behind every edge, even one given no gradient: fuzz 63:545, 65:17). A graph whose ops all save
    nothing and that writes with history in grad mode (``grad_enabled``: the mode it is called in) runs whole as
    eager ops (:func:`_all_saving_free`)."""
    nodes = list(gm.graph.nodes)
    output = nodes[-1]
    if output.op != "output" or not isinstance(output.args[0], (tuple, list)):
        return None
    body = [node for node in nodes if node.op not in ("placeholder", "output")]
    if any(node.op not in ("call_function", "call_method") or
           isinstance(node.target, compat.HigherOrderOperator) for node in body):
        return None
    prefix = _all_saving_free(gm, saving, body, output, grad_enabled)
    if prefix is None:
        prefix = _saving_free_prefix(gm, saving, body, output, before_writes=True)
    return prefix if prefix is not None else _saving_free_prefix(gm, saving, body, output, before_writes=False)


def _all_saving_free(gm: torch.fx.GraphModule, saving: frozenset, body: list, output: torch.fx.Node,
                     grad_enabled: bool) -> Prefix | None:
    """The whole of ``gm`` as the part run as eager ops (no rest), where an in-place write in it makes autograd
    history (its result requires grad, in grad mode) and none of its ops saves anything for backward; ``None``
    elsewhere, or where it draws random numbers or switches grad mode or autocast, or an op after its first write
    may raise at run time (a write made as an eager op gives its input a history that putting back the input's
    data for a run for real does not undo).

    A write that saves nothing (``y.sub_(x, alpha=0.5)``: eager's ``SubBackward`` keeps no tensor) made inside
    AOTAutograd's one node could be passed by a single backward: ``(y * y).sum().backward()``, then a backward
    through ``y`` again raised "Trying to backward through the graph a second time" where eager's runs (fuzz
    63:570; torch.compile raises too). Run as the graph's own ops, in graph order, it is eager's."""
    writers = [node for node in body if node.meta.get("writes") or may_write(node)]
    if not grad_enabled or not any(map(_requires_grad, writers)) or any(node.target in _GLOBAL_STATE for node in body):
        return None  # (a write in no_grad, an optimizer's step, makes no history: its graph is compiled whole)
    for node in body:  # (an op without a location counts as saving)
        if draws_random_numbers(node) or not _is_symbolic_scalar(node) and node.meta.get("location", None) in {
                None, *saving}:
            return None
    first = body.index(writers[0])
    if any(passes.may_raise_at_run_time(node) for node in body[first + 1:]):
        return None
    outputs = output.args[0]
    if not all(isinstance(out, torch.fx.Node) for out in outputs):
        return None
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    returned = list(dict.fromkeys(out for out in outputs if out.op != "placeholder"))
    part = _part(gm, body, placeholders, tuple(returned))
    where = tuple(("input", placeholders.index(out)) if out.op == "placeholder" else ("prefix", returned.index(out))
                  for out in outputs)
    return Prefix(part, None, where, 0, ())


def _saving_free_prefix(gm: torch.fx.GraphModule, saving: frozenset, body: list, output: torch.fx.Node,
                        before_writes: bool) -> Prefix | None:
    """:func:`saving_free_prefix`, where ``before_writes`` lets an op read a graph input that an op after it
    writes; ``None`` also where such an op's result, returned or handed on, shares memory with that input."""
    nodes = list(gm.graph.nodes)
    writers = [node for node in body if node.meta.get("writes") or may_write(node)]
    order = {node: i for i, node in enumerate(nodes)}
    # a write that saves nothing into a tensor only it reads, made in the graph with memory of its own
    # (``t = w + 1; t.sub_(1)``), can join the ops made apart: nothing else sees the tensor before the write.
    # Candidates whose operands turn out not to be made apart are writers again, and the rest is recomputed
    candidates = {node for node in writers if _writes_own_tensor(node, saving)}
    # only ops before the graph's first switch of grad mode or autocast are made apart: they run there in the mode
    # the graph starts in, the one it is called in, where the part runs
    switch = next((i for i, node in enumerate(body) if node.target in _GLOBAL_STATE), len(body))
    while True:
        free, taint = _saving_free(body[:switch], [node for node in writers if node not in candidates], saving, order,
                                   before_writes)
        if candidates <= free:
            break
        candidates &= free
    needed: set = set()
    stack = [out for out in output.args[0] if isinstance(out, torch.fx.Node) and out in free and
             getattr(out.meta.get("val"), "requires_grad", False)]
    while stack:
        node = stack.pop()
        if node not in needed:
            needed.add(node)
            stack.extend(arg for arg in node.all_input_nodes if arg in free)
    if not needed:
        return None
    placeholders = [node for node in nodes if node.op == "placeholder"]
    group = [node for node in body if node in needed]
    # a symbolic scalar of the part the rest reads is computed again there, from the graph's inputs it is made
    # from: it is no tensor to hand on, and the rest's backend sees it as the graph has it (an expression in the
    # inputs' symbols, not a new input)
    again: set = set()
    stack = [arg for node in body if node not in needed for arg in node.all_input_nodes if arg in needed]
    while stack:
        node = stack.pop()
        if node not in again and _is_symbolic_scalar(node):
            again.add(node)
            stack.extend(arg for arg in node.all_input_nodes if arg in needed)
    rest = [node for node in body if node not in needed or node in again]
    handed = [node for node in group if node not in again and
              any(user not in needed and user.op != "output" for user in node.users)]
    returned = [out for out in output.args[0] if out in needed and out not in handed]
    if any(compat.shares_memory(node.meta.get("val"), p.meta.get("val")) for node in handed + returned
           for p in taint[node]):  # (a view of an input the rest writes: it would come out of the rest as such)
        return None
    carried = handed + list(dict.fromkeys(returned))
    part = _part(gm, group, placeholders, tuple(carried))
    where: list = []
    rest_outputs: list = []
    for out in output.args[0]:
        if isinstance(out, torch.fx.Node) and out in needed:
            where.append(("prefix", carried.index(out)))
        elif isinstance(out, torch.fx.Node) and out.op == "placeholder":
            where.append(("input", placeholders.index(out)))
        else:
            where.append(("rest", len(rest_outputs)))
            rest_outputs.append(out)
    if not rest:
        return Prefix(part, None, tuple(where), 0, ())
    read = {arg for node in rest for arg in node.all_input_nodes} | \
        {out for out in rest_outputs if isinstance(out, torch.fx.Node)} | \
        {node for node in placeholders if isinstance(node.meta.get("val"), torch.SymInt)}  # (the sizes, as _part)
    graph = torch.fx.Graph()
    env: dict = {}
    taken = []  # the rest's inputs: positions among the graph's inputs, then among the values handed on
    for i, node in enumerate(placeholders + handed):
        if node in read:
            env[node] = graph.node_copy(node) if node.op == "placeholder" else graph.placeholder(f"prefix_{node.name}")
            env[node].meta["val"] = node.meta.get("val")
            taken.append(i)
    for node in rest:
        env[node] = graph.node_copy(node, env.__getitem__)
    graph.output(tuple(env[out] if isinstance(out, torch.fx.Node) else out for out in rest_outputs))
    return Prefix(part, torch.fx.GraphModule(gm, graph), tuple(where), len(handed), tuple(taken))


def _saving_free(body: list, writers: list, saving: frozenset, order: dict, before_writes: bool) -> tuple:
    """The nodes of ``body`` made by ops that save nothing from inputs no op of ``writers`` writes before them
    (``before_writes``: else from inputs none writes), and never written by ``writers`` (a write not among them is
    such a node where its operands are), and for each the written graph inputs it is made from (read before their
    first write)."""
    first_write: dict = {}  # what a write may reach (what it writes and all that is made from: a view's base) ->
    for writer in writers:  # the position of the first op that may write it
        stack = list(written_operands(writer))
        while stack:
            node = stack.pop()
            if node not in first_write:
                first_write[node] = order[writer]
                stack.extend(node.all_input_nodes)
    written = set(first_write)
    free: set = set()
    taint: dict = {}

    def readable(node: torch.fx.Node, arg: torch.fx.Node) -> bool:
        if arg.op == "placeholder":
            return arg not in written or before_writes and order[node] < first_write[arg]
        return arg in free and all(order[node] < first_write[p] for p in taint[arg])

    for node in body:
        if node in writers or node in written or draws_random_numbers(node):
            continue
        if _is_symbolic_scalar(node):  # (``0 - k``, a symbolic int's arithmetic: it saves nothing)
            if all(arg.op == "placeholder" and arg not in written or arg in free and _is_symbolic_scalar(arg)
                   for arg in node.all_input_nodes):
                free.add(node)
                taint[node] = frozenset()
            continue
        if node.meta.get("location", saving) in saving or not isinstance(node.meta.get("val"), torch.Tensor):
            continue
        if all(readable(node, arg) for arg in node.all_input_nodes):
            free.add(node)
            taint[node] = frozenset().union(*(taint[arg] if arg in free else {arg} & written
                                              for arg in node.all_input_nodes))
    return free, taint


def _writes_own_tensor(node: torch.fx.Node, saving: frozenset) -> bool:
    """Whether write ``node`` saves nothing for backward (its instruction is not in ``saving``), writes its first
    argument and returns it, and that tensor is read by it alone, made by an op of the graph, no view, and shares
    no memory with that op's arguments (not a ``detach()`` of an input): no other op sees the write."""
    if node.meta.get("location", saving) in saving or not writes_first_argument(node) or \
            not isinstance(node.args[0], torch.fx.Node):
        return False
    written, val = node.args[0], node.meta.get("val")
    before = written.meta.get("val")
    if written.op not in ("call_function", "call_method") or len(written.users) != 1 or \
            not isinstance(val, torch.Tensor) or not isinstance(before, torch.Tensor) or before._is_view():
        return False
    return not any(compat.shares_memory(before, arg.meta.get("val")) for arg in written.all_input_nodes)


def _is_higher_order(node: torch.fx.Node) -> bool:
    """Whether ``node`` calls a higher-order op (its subgraphs are ``get_attr`` operands)."""
    return node.op == "call_function" and isinstance(node.target, compat.HigherOrderOperator)


def _draws(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    """Whether ``node`` of ``gm`` draws random numbers, in a higher-order op's subgraphs (and theirs) too."""
    if draws_random_numbers(node):
        return True
    subgraphs = [getattr(gm, arg.target, None) for arg in node.all_input_nodes if arg.op == "get_attr"] \
        if _is_higher_order(node) else []
    return any(not isinstance(sub, torch.fx.GraphModule) or any(_draws(sub, inner) for inner in sub.graph.nodes)
               for sub in subgraphs)


def _requires_grad(node: torch.fx.Node) -> bool:
    """Whether ``node``'s value (``node.meta["val"]``) is a tensor that requires grad."""
    return bool(getattr(node.meta.get("val"), "requires_grad", False))


def _is_symbolic_scalar(node: torch.fx.Node) -> bool:
    """Whether ``node`` computes a symbolic int, float or bool that is no tensor's data (no unbacked symbol: not an
    ``.item()``): arithmetic on sizes and on symbolic int arguments, which saves nothing for backward."""
    val = node.meta.get("val")
    return isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) and not compat.has_unbacked(val)


def run_prefix(prefix: Prefix, rest: Callable | None) -> Callable:
    """The compiled callable of a graph cut by :func:`saving_free_prefix`: ``prefix.part``'s graph run as it is
    (eager ops), then ``rest`` (the backend's compiled rest of the graph) on the graph's inputs and the values it
    handed on; the outputs put back in the graph's order."""
    part_fn, inputs, where = prefix.part.gm.forward, prefix.part.inputs, prefix.outputs  # (no module hooks: a global
    # forward pre-hook of the user's would see the GraphModule called)

    def run(*args: Any) -> list:
        made = part_fn(*[args[i] for i in inputs])
        rest_out = rest(*prefix.rest_args(args, made)) if rest is not None else ()
        sources = {"prefix": made, "rest": rest_out, "input": args}
        return [sources[kind][i] for kind, i in where]

    return run
