"""Functions never traced: ``stillframe.disable`` marks them; a compiled caller graph-breaks at the call."""

from __future__ import annotations

from typing import Any, Callable


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
    return getattr(fn, "__stillframe_disable__", False) is True or id(fn) in _DISABLED
