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
            node = self.nodes.pop()
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
        """A new graph input, inserted after the existing placeholders."""
        name = _sanitize(name)
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
        gm = torch.fx.GraphModule(torch.nn.Module(), self.graph)
        gm.graph.lint()
        return gm

    def num_ops(self) -> int:
        return sum(1 for n in self.nodes if n.op not in ("placeholder", "output"))


def _sanitize(name: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in name).strip("_")
    while "__" in out:
        out = out.replace("__", "_")
    if not out or out[0].isdigit():
        out = "arg_" + out
    return out


