"""Passes over a finished FX graph, read or rewritten before it goes to the backend.

Each takes the ``torch.fx.GraphModule`` the trace produced and looks only at its nodes (no tracer state):
which higher-order ops it holds, which nodes may raise on data the fake tensors did not see, and where its
grad-mode switches put the mode it is called in.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import torch
import torch.fx

from .. import compat


def higher_order_ops(gm: torch.fx.GraphModule) -> frozenset:
    """The names of the higher-order ops in ``gm`` and its subgraphs."""
    return frozenset(n.target.name() for m in gm.modules() if isinstance(m, torch.fx.GraphModule)
                     for n in m.graph.nodes if isinstance(n.target, compat.HigherOrderOperator))


def may_raise_at_run_time(node: torch.fx.Node) -> bool:
    """Whether ``node`` may raise on the data of its inputs, which fake tensors do not see: it reads an integer or
    boolean tensor (an index out of range, a mask whose count differs from the values', an integer division by
    zero) or is a linear-algebra routine (a singular matrix). Shapes, dtypes and devices were checked by the
    trace."""
    if node.op not in ("call_function", "call_method"):
        return False
    name = (node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")).lower()
    if any(word in name for word in _RAISES_ON_VALUES):
        return True
    found = []
    torch.fx.node.map_arg((node.args, node.kwargs), found.append)
    return any(isinstance(arg.meta.get("val"), torch.Tensor) and not arg.meta["val"].is_floating_point() and
               not arg.meta["val"].is_complex() for arg in found)


_RAISES_ON_VALUES = ("linalg", "cholesky", "inverse", "solve", "lu", "assert", "det")


def end_in_call_mode(gm: torch.fx.GraphModule, call_mode: bool) -> None:
    """Make a graph that switches grad mode end in the mode it is called in (``call_mode``), by a switch before
    its output. AOTAutograd remakes an output that is a view of an input after the graph has run, in the grad
    mode the graph left: ``t = x.diagonal()`` then a break inside a ``no_grad`` block came back without a
    grad_fn (``x.grad`` None where eager's is a tensor; fuzz 58:112). The mode the traced code is left in is set
    by the rebuild, after the graph (``compiler``)."""
    mode = call_mode
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is compat.set_grad_enabled and not node.users:
            mode = node.args[0]
    if mode is call_mode:
        return
    output = next(node for node in reversed(gm.graph.nodes) if node.op == "output")
    with gm.graph.inserting_before(output):
        gm.graph.call_function(compat.set_grad_enabled, (call_mode,))
    gm.recompile()


def hoist_grad_mode(gm: torch.fx.GraphModule, start_mode: bool) -> bool | None:
    """The grad mode a graph is called (and compiled) in, where it switches grad mode (``start_mode``: the mode
    the traced code started in). A backend decides at call time whether the whole call is differentiable
    (AOTAutograd, called with grad off, runs it all as inference), so the call is made with grad on wherever any
    of the graph runs with grad on.

    A switch the graph starts with (a segment resumed inside ``no_grad`` that leaves it at once) is taken out of
    the graph and made before the call (AOTAutograd had left an in-place op on an input out of autograd). A graph
    that starts with grad off and turns it on later (it enters ``no_grad`` first, or it was resumed inside a
    ``no_grad`` block that it leaves) is called with grad on and starts by turning it off itself (called with grad
    off, AOTAutograd made the view ``w.view(-1)`` after the block without a grad_fn: fuzz 34:320). ``None``: the
    graph is called in the mode the code is in."""
    switches = [node for node in gm.graph.nodes if node.op == "call_function" and
                node.target is compat.set_grad_enabled and not node.users]
    first = next((node for node in gm.graph.nodes if node.op != "placeholder"), None)
    if first is None or not switches:
        return None
    leading = first is switches[0]
    mode = first.args[0] if leading else start_mode
    later = switches[1:] if leading else switches
    if mode is False and any(node.args[0] is True for node in later):
        if not leading:
            with gm.graph.inserting_before(first):
                gm.graph.call_function(compat.set_grad_enabled, (False,))
            gm.recompile()
        return True
    if not leading:
        return None
    gm.graph.erase_node(first)
    gm.recompile()
    return mode
