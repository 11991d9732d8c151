"""Functions never traced: ``stillframe.disable``, ``torch.compiler.disable`` and ``torch._dynamo.disable``
mark them; a compiled caller graph-breaks at the call and runs them for real. Compiled wrappers (stillframe's or
torch.compile's) called from compiled code are traced through: the function they stand for is inlined.

As under torch.compile, a disabled function's body never enters a graph: it sees
``torch.compiler.is_compiling() == False``, and the globals it reads or bumps are
not guarded (the trace never reads them)::

    >>> import torch, stillframe
    >>> @torch.compiler.disable
    ... def helper(x):
    ...     return x * int(torch.compiler.is_compiling())
    >>> stillframe.compile(lambda x: helper(x + 1), backend="eager")(torch.ones(1))
    tensor([0.])

``recursive=False`` skips only the function's own frame, as torch.compile does: it runs for
real (``is_compiling()`` False there), and the Python functions and modules of the user's
that it calls are compiled (``runtime/shallow.py``; torch's own functions it calls run as
they are, where torch.compile would compile some of them).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import inspect
import types
from typing import Any, Callable

from .. import compat
from ..variables.builder import of_type


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


#: The attribute a stillframe compiled wrapper keeps the function it stands for in (set by ``api``).
ORIGINAL = "__stillframe_original__"


def compiled_original(obj: Any) -> tuple[str, Any] | None:
    """``(attribute, function)`` when ``obj`` is a compiled wrapper that traced code should inline: stillframe's
    own, or ``torch.compile``'s (``_torchdynamo_orig_callable``; a ``torch.compiler.disable`` wrapper is not one).
    Matches torch.compile, which inlines a compiled function called from inside another compiled function rather
    than tracing its wrapper's dispatch code."""
    try:
        # looked up statically: a class's own __getattr__ (which answers anything) must not run, nor make any
        # object look like a wrapper
        target = obj.__func__ if of_type(obj, types.MethodType) else obj
        original = inspect.getattr_static(target, ORIGINAL, None)
        if isinstance(original, property):  # a class's own property (a compiled module's): read through it
            original = getattr(target, ORIGINAL, None)
        if original is not None:
            return ORIGINAL, original
        if type(obj).__name__ == "OptimizedModule" and type(obj).__module__ == "torch._dynamo.eval_frame":
            # torch.compiler.disable(module) is an OptimizedModule too, with a disabled forward: not inlined
            return None if compat.torch_disabled(obj.__dict__.get("forward")) else ("_orig_mod", obj._orig_mod)
        original = obj.__dict__.get("_torchdynamo_orig_callable") if of_type(obj, type(compiled_original)) \
            else None
    except Exception:  # an object whose attribute lookup raises is not a wrapper
        return None
    if original is None or getattr(obj, "_torchdynamo_disable", False):
        return None
    return "_torchdynamo_orig_callable", original
