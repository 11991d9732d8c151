"""A captured ``torch.autograd.Function`` run by the ``eager`` backend, saving what eager saves as eager saves it.

A graph holds a Function's call as torch's ``autograd_function_apply`` higher-order op (forward and backward
subgraphs; ``saved_for_backward_idx`` says which saved values ``ctx.save_for_backward`` named). Run eagerly,
torch's op keeps every saved value in a closure: no version is checked and nothing is freed, so a write in place
to a saved tensor after the graph (``Twice.apply(t); print(); t.add_(1)``), or a second backward through it,
gives gradients where eager raises "one of the variables needed for gradient computation has been modified by an
inplace operation" or "Trying to backward through the graph a second time" (torch.compile's ``eager`` backend
does the same). The ``eager`` backend is handed a graph whose op runs :func:`autograd_function_apply` instead,
which saves those values with ``ctx.save_for_backward``, as the Function itself did; AOTAutograd's backends get
torch's op (they save the graph's tensors themselves, with their versions).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from typing import Any

import torch
import torch.fx

HOP = torch.ops.higher_order.autograd_function_apply


def autograd_function_apply(fwd: torch.fx.GraphModule, bwd: torch.fx.GraphModule, *args: Any, **kwargs: Any) -> Any:
    """``autograd_function_apply(fwd, bwd, *args, non_differentiable_idx=, saved_for_backward_idx=, dirty_idx=)``
    as torch's op computes it, with the values ``saved_for_backward_idx`` names saved through autograd."""
    to_save = set(kwargs["saved_for_backward_idx"])
    non_differentiable = kwargs["non_differentiable_idx"]
    dirty = kwargs.get("dirty_idx", [])

    class Apply(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *inputs: Any) -> Any:
            output, saved = torch.fx.Interpreter(fwd).run(*inputs)
            saved = list(saved)
            ctx.save_for_backward(*(v for i, v in enumerate(saved) if i in to_save))
            ctx.kept = [None if i in to_save else v for i, v in enumerate(saved)]  # stashed on ctx, as in eager
            if dirty:
                ctx.mark_dirty(*_selected(output, dirty))
            if non_differentiable:
                ctx.mark_non_differentiable(*_selected(output, non_differentiable))
            return output

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            # raises as eager does for a changed or freed saved tensor; a Function that saved none is not asked
            # (after a first backward, reading ctx.saved_tensors raises even then, where eager's backward ran)
            checked = iter(ctx.saved_tensors if to_save else ())
            saved = [next(checked) if i in to_save else v for i, v in enumerate(ctx.kept)]
            return torch.fx.Interpreter(bwd).run(*grads, *saved)

    return Apply.apply(*args)


def _selected(output: Any, indices: list) -> list:
    wanted = set(indices)
    if isinstance(output, (tuple, list)):
        return [o for i, o in enumerate(output) if i in wanted]
    return [output] if 0 in wanted else []


def with_checked_function_apply(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of ``gm`` whose ``autograd_function_apply`` nodes call :func:`autograd_function_apply` (``gm``
    itself when it has none; the cache entry keeps showing torch's op)."""
    if not any(n.op == "call_function" and n.target is HOP for n in gm.graph.nodes):
        return gm
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    for node in graph.nodes:
        if node.op == "call_function" and node.target is HOP:
            node.target = autograd_function_apply
    return torch.fx.GraphModule(gm, graph)
