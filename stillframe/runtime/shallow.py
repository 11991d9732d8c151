"""``torch.compiler.disable(fn, recursive=False)`` called from compiled code: ``fn``'s own frame runs for real, the
Python functions and modules it calls are compiled.

torch.compile skips that one frame and catches the frames it calls, so inside ``fn``
``torch.compiler.is_compiling()`` is False and its tensor operations are in no graph,
while a helper ``fn`` calls is compiled (``is_compiling()`` True there, its own graph).
stillframe has no frame hook: :class:`ShallowCall` runs ``fn``'s frame instruction by
instruction with the real steps of :mod:`stillframe.runtime.live`, and each call the frame
makes goes through :class:`CalleeRouter`, which hands back a compiled function for a
function of the user's::

    >>> import torch, stillframe
    >>> def helper(x):
    ...     return x * int(torch.compiler.is_compiling())
    >>> @torch.compiler.disable(recursive=False)
    ... def shallow(x):
    ...     return helper(x) + int(torch.compiler.is_compiling())
    >>> stillframe.compile(lambda x: shallow(x + 1), backend="eager")(torch.ones(1))
    tensor([2.])
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import functools
import inspect
import sys
import threading
import types
import weakref
from typing import Any, Callable

import torch

from .. import compat
from ..bytecode.reader import read, unsteppable
from ..rules.disable import compiled_original, is_disabled
from ..rules.frames import make_binder
from . import live

_MAKES_GENERATOR = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | \
    inspect.CO_ITERABLE_COROUTINE


def shallow_target(fn: Any) -> Any:
    """The function a ``torch.compiler.disable(fn, recursive=False)`` wrapper stands for (a bound method of one:
    the method of that function), or ``None`` where ``fn`` is no such wrapper."""
    bound = fn.__self__ if isinstance(fn, types.MethodType) else None
    wrapper = fn.__func__ if bound is not None else fn
    target = compat.nonrecursive_disabled(wrapper)
    if target is None or not isinstance(target, types.FunctionType):
        return None
    return types.MethodType(target, bound) if bound is not None else target


class ShallowCall:
    """Calls ``fn`` (a plain function or a bound method of one) with its own frame run for real, one instruction at a
    time, and every call it makes routed through ``router``. A generator function, or code with an instruction that
    has no real step (``except*``), is called as it is: its frame and its callees run for real."""

    def __init__(self, fn: Any, router: Callable[[Any], Any]):
        self.fn = fn
        self.router = router
        func = fn.__func__ if isinstance(fn, types.MethodType) else fn
        self._func = func
        self._self = fn.__self__ if isinstance(fn, types.MethodType) else None
        self._code = read(func.__code__)
        self._steppable = not func.__code__.co_flags & _MAKES_GENERATOR and unsteppable(self._code) is None
        self._bind = make_binder(func) if self._steppable else None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._steppable:
            return self.fn(*args, **kwargs)
        func = self._func
        if self._self is not None:
            args = (self._self, *args)
        locals_ = self._bind(*args, **kwargs)  # (a wrong call raises Python's TypeError naming the function)
        code = func.__code__
        cells = dict(zip(code.co_freevars, func.__closure__ or ()))
        module = func.__globals__.get("__name__")
        frame = live.LiveFrame(self._code, 0, [], locals_, cells, func.__globals__,
                               module if isinstance(module, str) else None)
        cont = live.Continuation([frame], concrete=True, reroute=self.router)
        del frame, locals_, args, kwargs  # the frame's values are the continuation's alone, as in eager's frame
        while not cont.step():
            pass
        return cont.returned


class CalleeRouter:
    """What a call made in a :class:`ShallowCall` frame calls: a compiled function (made by ``compile_fn``, kept
    per function) for a Python function or method of the user's (a ``functools.partial`` of one included), a
    compiled module for a module of the user's; anything else as it is (torch's and the standard library's
    functions, builtins, classes, disabled and compiled functions)."""

    def __init__(self, compile_fn: Callable[[Any], Any], limit: int = 256):
        self.compile_fn = compile_fn
        self.limit = limit
        self._compiled: dict[int, tuple[weakref.ref, Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, fn: Any) -> Any:
        if type(fn) is types.FunctionType:
            return self._compiled_for(fn, fn) or fn
        if type(fn) is types.MethodType and type(fn.__func__) is types.FunctionType:
            compiled = self._compiled_for(fn.__func__, fn.__func__)
            return fn if compiled is None else functools.partial(compiled, fn.__self__)
        if isinstance(fn, torch.nn.Module):
            return self._compiled_for(fn, type(fn).forward) or fn
        if type(fn) is functools.partial:  # the C partial calls its function: that frame is caught in torch too
            routed = self(fn.func)
            return fn if routed is fn.func else functools.partial(routed, *fn.args, **fn.keywords)
        return fn

    def _compiled_for(self, fn: Any, code_owner: Any) -> Any:
        """The compiled ``fn`` where ``code_owner`` (``fn``, or a module's forward) is the user's, else ``None``;
        decided once per ``fn`` (its verdict kept while ``fn`` lives)."""
        held = self._compiled.get(id(fn))
        if held is not None and held[0]() is fn:
            return held[1]
        with self._lock:
            if len(self._compiled) >= self.limit:
                self._compiled = {k: v for k, v in self._compiled.items() if v[0]() is not None}
                if len(self._compiled) >= self.limit:
                    return None
            try:
                ref = weakref.ref(fn)
            except TypeError:  # (no weak reference to it: not kept, run as it is)
                return None
            compiled = self.compile_fn(fn) if _users(code_owner) else None
            self._compiled[id(fn)] = (ref, compiled)
            return compiled


def _users(fn: Any) -> bool:
    """Whether torch.compile would catch a frame of ``fn`` called from a skipped frame: a Python function of the
    user's, neither torch's, stillframe's nor the standard library's, not disabled, not a compiled wrapper."""
    if not isinstance(fn, types.FunctionType) or is_disabled(fn) or compiled_original(fn) is not None:
        return False
    if fn.__code__.co_flags & _MAKES_GENERATOR:
        return False
    package = (getattr(fn, "__module__", None) or "").split(".")[0]
    return package not in ("torch", "stillframe", "") and package not in sys.stdlib_module_names
