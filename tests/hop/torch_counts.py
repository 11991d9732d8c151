"""What torch.compile does with a program, for the side-by-side counts of the higher-order-op tests.

:func:`torch_compile_counts` runs ``fn`` under ``torch.compile(backend=...)`` in this process and returns a
:class:`TorchCounts`: the graphs the backend compiled, how many of those hold a given op, the backend
failures (Dynamo turns each into a graph break and runs that code eagerly), or the exception torch.compile
raised to the caller. :func:`stillframe_counts` gives the same numbers for a stillframe parity report.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch
from torch._dynamo.backends.registry import lookup_backend


@dataclass
class TorchCounts:
    graphs: int = 0  # graphs the backend compiled
    ops: int = 0  # nodes of the op asked about, over the compiled graphs and their subgraphs
    failures: list = field(default_factory=list)  # the backend's exceptions (each a graph break in Dynamo)
    raised: str | None = None  # what torch.compile raised to the caller, if anything


def count_ops(gm: torch.fx.GraphModule, op) -> int:
    return sum(1 for m in gm.modules() if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes
               if n.target is op)


def torch_compile_counts(fn, args: tuple, backend: str = "eager", op=None) -> TorchCounts:
    counts = TorchCounts()
    real = lookup_backend(backend)

    def counting(gm, example_inputs):
        try:
            compiled = real(gm, example_inputs)
        except Exception as e:  # noqa: BLE001 (Dynamo turns it into a graph break, or raises it)
            counts.failures.append(type(e).__name__)
            raise
        counts.graphs += 1
        counts.ops += count_ops(gm, op) if op is not None else 0
        return compiled

    torch._dynamo.reset()
    level = logging.getLogger("torch._dynamo").level
    logging.getLogger("torch._dynamo").setLevel(logging.CRITICAL)
    try:
        torch.compile(fn, backend=counting)(*args)
    except Exception as e:  # noqa: BLE001 (torch.compile's own errors are what is counted)
        counts.raised = type(e).__name__
    finally:
        logging.getLogger("torch._dynamo").setLevel(level)
        torch._dynamo.reset()
    return counts


def stillframe_counts(report, op=None) -> TorchCounts:
    """The graphs of a parity report's compiled callable (those with an op or a return), breaks as failures."""
    entries = [e for es in report.compiled.all_cache_entries().values() for e in es]
    graphs = [e.graph_module for e in entries if e.graph_module is not None and e.compiled is not None]
    return TorchCounts(graphs=len(graphs), ops=sum(count_ops(g, op) for g in graphs) if op is not None else 0,
                       failures=[e.graph_break.kind.value for e in entries if e.graph_break is not None])
