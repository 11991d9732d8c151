"""The FX graph being built, append-only with rollback marks.

The graph is the only tensor IR (STYLE habit 6). Nodes are only ever appended;
``mark()`` returns the current length and ``rollback(mark)`` erases every node
added after it, newest first, so a restored checkpoint sees exactly the graph
it saw when it was taken::

    >>> g = GraphBuilder()
    >>> x = g.placeholder("x", example)
    >>> m = g.mark()
    >>> y = g.call_function(torch.neg, (x,), {}, fake)
    >>> g.rollback(m)          # y is gone
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import itertools
from typing import Any

import torch
import torch.fx

from .. import compat
from ..errors import InternalError


class GraphBuilder:
    """Wraps a ``torch.fx.Graph``: placeholders first, then ops, then one tuple output."""

    def __init__(self) -> None:
        self.graph = torch.fx.Graph()
        self.nodes: list[torch.fx.Node] = []
        self._last_placeholder: torch.fx.Node | None = None
        self._names: set[str] = set()
        self.submodules: dict[str, torch.nn.Module] = {}  # subgraphs of higher-order ops, read by get_attr nodes

    def mark(self) -> int:
        return len(self.nodes)

    def rollback(self, mark: int, last_node: torch.fx.Node | None = None) -> None:
        """Erase every node added after ``mark`` (newest first), and give their names back.

        ``last_node`` is the newest node at the mark; if it is no longer there the
        mark is from a rolled-back future and restoring it would corrupt the graph.
        """
        if mark > len(self.nodes) or (mark and self.nodes[mark - 1] is not last_node):
            raise InternalError("restoring a checkpoint whose graph nodes were already rolled back")
        while len(self.nodes) > mark:
            self._erase(self.nodes.pop())

    def _drop(self, node: torch.fx.Node) -> None:
        """Erase ``node`` wherever it stands in this graph (a placeholder a subgraph's rollback removes)."""
        self.nodes.remove(node)
        self._erase(node)

    def _erase(self, node: torch.fx.Node) -> None:
        for user in list(node.users):  # a node of an abandoned speculation's subgraph: it is discarded too
            if user.graph is not self.graph:
                user.args = torch.fx.node.map_arg(user.args, lambda n: None if n is node else n)
                user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda n: None if n is node else n)
        if node is self._last_placeholder:
            self._last_placeholder = self._previous_placeholder(node)
        self.graph.erase_node(node)
        compat.forget_fx_name(self.graph, node)

    def _previous_placeholder(self, node: torch.fx.Node) -> torch.fx.Node | None:
        prev = node.prev
        while prev.op != "root":
            if prev.op == "placeholder":
                return prev
            prev = prev.prev
        return None

    def placeholder(self, name: str, example: Any) -> torch.fx.Node:
        """A new graph input, inserted after the existing placeholders. Its name (the generated code's argument)
        is unique: two sources may sanitize alike (``L['0:x']`` and a local named ``___x``)."""
        name = taken = _sanitize(name)
        targets = {n.target for n in self.graph.find_nodes(op="placeholder")}
        for i in itertools.count(1):
            if name not in targets:
                break
            name = f"{taken}_{i}"
        if self._last_placeholder is not None:
            ctx = self.graph.inserting_after(self._last_placeholder)
        else:
            ctx = self.graph.inserting_before(next(iter(self.graph.nodes), None))
        with ctx:
            node = self.graph.placeholder(name)
        node.meta["val"] = example
        node.meta["example_value"] = example
        self._last_placeholder = node
        self.nodes.append(node)
        return node

    def call_function(self, target: Any, args: tuple, kwargs: dict, val: Any) -> torch.fx.Node:
        node = self.graph.call_function(target, args, kwargs)
        return self._record(node, val)

    def call_method(self, name: str, args: tuple, kwargs: dict, val: Any) -> torch.fx.Node:
        node = self.graph.call_method(name, args, kwargs)
        return self._record(node, val)

    def get_attr(self, prefix: str, module: torch.nn.Module) -> torch.fx.Node:
        """A node reading ``module`` (a higher-order op's subgraph), held as ``self.<prefix>_<n>`` of the graph."""
        name = f"{prefix}_{sum(1 for n in self.submodules if n.rpartition('_')[0] == prefix)}"
        self.submodules[name] = module
        node = self.graph.get_attr(name)
        self.nodes.append(node)
        return node

    def _record(self, node: torch.fx.Node, val: Any) -> torch.fx.Node:
        node.meta["val"] = val
        node.meta["example_value"] = val
        self.nodes.append(node)
        return node

    def erase_input(self, node: torch.fx.Node) -> None:
        """Remove a placeholder (or another node) nothing reads (when finishing the graph; not undoable)."""
        self.nodes.remove(node)
        if node is self._last_placeholder:
            self._last_placeholder = self._previous_placeholder(node)
        self.graph.erase_node(node)

    def finish(self, outputs: tuple) -> torch.fx.GraphModule:
        """Add the tuple output and return a GraphModule (the torch.compile backend convention)."""
        self.graph.output(tuple(outputs))
        return self._module()

    def _module(self) -> torch.fx.GraphModule:
        root = torch.nn.Module()
        for name, module in self.submodules.items():
            root.add_module(name, module)
        gm = torch.fx.GraphModule(root, self.graph)  # copies the submodules its get_attr nodes read
        gm.graph.lint()
        return gm

    def num_ops(self) -> int:
        return sum(1 for n in self.nodes if n.op not in ("placeholder", "output"))


class SubgraphBuilder(GraphBuilder):
    """The graph of one callable traced by speculation (a branch of ``torch.cond``), inside ``parent``'s trace.

    Ops are recorded here; their arguments may be nodes of an enclosing graph (a tensor of the outer trace
    read by the callable: a free variable). A new graph input (a parameter first read inside the callable)
    is a placeholder of the outermost graph, recorded here too so that a rollback of this graph removes it.
    :meth:`finish_subgraph` lifts the free variables into placeholders of this graph::

        sub = SubgraphBuilder(root)            # tracing x.sin() where x is root's placeholder L_x
        sub.call_function(torch.sin, (L_x,), {}, fake)
        sub.finish_subgraph((sin,), [L_x])     # graph(L_x): sin = torch.sin(L_x); return (sin,)
    """

    def __init__(self, parent: GraphBuilder) -> None:
        super().__init__()
        self.parent = parent

    def placeholder(self, name: str, example: Any) -> torch.fx.Node:
        node = self.parent.placeholder(name, example)
        self.nodes.append(node)
        return node

    def _erase(self, node: torch.fx.Node) -> None:
        if node.graph is self.graph:
            return super()._erase(node)
        self.parent._drop(node)  # a graph input this graph's rollback removes from the outermost graph

    def free_variables(self) -> list[torch.fx.Node]:
        """The nodes of enclosing graphs that this graph's nodes read, in the order of first use."""
        found: dict[torch.fx.Node, None] = {}
        for node in self.graph.nodes:
            for arg in node.all_input_nodes:
                if arg.graph is not self.graph:
                    found.setdefault(arg, None)
        return list(found)

    def finish_subgraph(self, outputs: tuple, inputs: list, examples: list) -> torch.fx.GraphModule:
        """This graph as a GraphModule whose placeholders are ``inputs`` (outer nodes, their fakes
        ``examples``), each read of an outer node replaced by its placeholder; it returns ``outputs`` (a
        tuple of nodes, or of tuples of nodes, or ``None``).

        Called once, when the speculation is merged (the graph is not recorded into afterwards).
        """
        lifted: dict[torch.fx.Node, torch.fx.Node] = {}
        with self.graph.inserting_before(next(iter(self.graph.nodes), None)):
            for node, example in zip(inputs, examples):
                lifted[node] = placeholder = self.graph.placeholder(_sanitize(node.name))
                placeholder.meta["val"] = placeholder.meta["example_value"] = example
        for node in list(self.graph.nodes):
            if node.op != "placeholder":
                node.args = torch.fx.node.map_arg(node.args, lambda n: lifted.get(n, n))
                node.kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: lifted.get(n, n))
        self.graph.output(torch.fx.node.map_arg(outputs, lambda n: lifted.get(n, n)))
        return self._module()


def _sanitize(name: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in name).strip("_")
    while "__" in out:
        out = out.replace("__", "_")
    if not out or out[0].isdigit():
        out = "arg_" + out
    return out


