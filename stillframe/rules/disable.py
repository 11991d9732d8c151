"""Functions never traced: ``stillframe.disable``, ``torch.compiler.disable`` and ``torch._dynamo.disable``
mark them; a compiled caller graph-breaks at the call and runs them for real.

As under torch.compile, a disabled function's body never enters a graph: it sees
``torch.compiler.is_compiling() == False``, and the globals it reads or bumps are
not guarded (the trace never reads them)::

    >>> import torch, stillframe
    >>> @torch.compiler.disable
    ... def helper(x):
    ...     return x * int(torch.compiler.is_compiling())
    >>> stillframe.compile(lambda x: helper(x + 1), backend="eager")(torch.ones(1))
    tensor([0.])

``recursive=False`` (torch: the function's own frame is skipped, what it calls is
compiled) runs here as ``recursive=True`` does: the whole call runs for real.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import compat


def disable(fn: Callable) -> Callable:
    """Mark ``fn`` as never traced (like ``torch._dynamo.disable``): a compiled caller graph-breaks at the call
    and runs ``fn`` for real. Returns ``fn`` itself, unchanged otherwise."""
    try:
        fn.__stillframe_disable__ = True
    except AttributeError:  # a builtin or other object without a __dict__
        _DISABLED.add(id(fn))
    return fn


_DISABLED: set[int] = set()


def is_disabled(fn: Any) -> bool:
    """Whether a call of ``fn`` must never be traced (``stillframe.disable`` or torch's disable marked it)."""
    return getattr(fn, "__stillframe_disable__", False) is True or id(fn) in _DISABLED or compat.torch_disabled(fn)
