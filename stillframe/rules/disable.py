"""Functions never traced (``stillframe.disable`` marks them; a compiled caller graph-breaks at the call), and
compiled wrappers traced through (a compiled function called from compiled code is inlined)."""

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


#: The attribute a stillframe compiled wrapper keeps the function it stands for in (set by ``api``).
ORIGINAL = "__stillframe_original__"


def compiled_original(obj: Any) -> tuple[str, Any] | None:
    """``(attribute, function)`` when ``obj`` is a compiled wrapper that traced code should inline: stillframe's
    own, or ``torch.compile``'s (``_torchdynamo_orig_callable``; a ``torch.compiler.disable`` wrapper is not one).
    Matches torch.compile, which inlines a compiled function called from inside another compiled function rather
    than tracing its wrapper's dispatch code."""
    try:
        original = getattr(obj, ORIGINAL, None)
        if original is not None:
            return ORIGINAL, original
        if type(obj).__name__ == "OptimizedModule" and type(obj).__module__ == "torch._dynamo.eval_frame":
            return "_orig_mod", obj._orig_mod
        original = obj.__dict__.get("_torchdynamo_orig_callable") if isinstance(obj, type(compiled_original)) \
            else None
    except Exception:  # an object whose attribute lookup raises is not a wrapper
        return None
    if original is None or getattr(obj, "_torchdynamo_disable", False):
        return None
    return "_torchdynamo_orig_callable", original
