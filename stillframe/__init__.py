"""stillframe: a mutation-safe graph-capture JIT for PyTorch.

``stillframe.compile(fn_or_module, backend=..., fullgraph=..., dynamic=...)``
captures a PyTorch program into ``torch.fx`` graphs by symbolically
interpreting its CPython bytecode, hands each graph to any torch.compile
backend, guards the result, and runs it::

    >>> import torch, stillframe
    >>> @stillframe.compile(backend="eager")
    ... def skew(vec):
    ...     m = torch.zeros(2, 5, 5)
    ...     rows, cols = torch.triu_indices(5, 5, 1)
    ...     m[:, rows, cols] = vec
    ...     return m - m.transpose(-2, -1)
    >>> skew(torch.randn(2, 10, requires_grad=True)).requires_grad   # as in eager
    True
"""

from .api import (CompiledFunction, CompiledModule, compile, counters, disable, mark_dynamic, mark_static,
                  maybe_mark_dynamic, reset)
from .config import config
from .errors import GraphBreak, InternalError, StillframeWarning, Unsupported
from .diagnostics.report import explain

__all__ = [
    "CompiledFunction",
    "CompiledModule",
    "GraphBreak",
    "InternalError",
    "StillframeWarning",
    "Unsupported",
    "compile",
    "config",
    "counters",
    "disable",
    "explain",
    "mark_dynamic",
    "mark_static",
    "maybe_mark_dynamic",
    "reset",
]
__version__ = "0.1.0"
