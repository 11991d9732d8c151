"""``stillframe.compile``: wrappers for functions and ``nn.Module`` s, and the per-call runtime.

On each call the wrapper binds the arguments to the function's parameters
(``L``), tries the cache entries of the code object (the one the last call hit first, then the rest in
trace order; the first whose guard function holds runs its plan), and on a miss traces a new entry::

    >>> import torch, stillframe
    >>> @stillframe.compile(backend="eager")
    ... def f(x):
    ...     return torch.relu(x) + 1
    >>> f(torch.tensor([-1.0, 2.0]))
    tensor([1., 3.])
    >>> len(f.cache_entries())
    1
"""

from __future__ import annotations
from .own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections.abc
import functools
import inspect
import os
import sys
import threading
import time
import types
import warnings
import weakref
from typing import Any, Callable

import torch

from . import compat
from .config import config
from .errors import GraphBreak, GraphBreakKind, InternalError, StillframeWarning, Unsupported, UserError
from .guards.guard import identity_checked, user_names
from .runtime import live, tracebacks
from .rules.disable import ORIGINAL, disable, is_disabled  # noqa: F401  (public: stillframe.disable)
from .rules.frames import make_binder
from .runtime.compiler import compile_frame, compile_retrying, eager_entry, start_resume
from .runtime.entry import CacheEntries, CacheEntry, RunForReal, counters, drop_entry, lookup, watch  # noqa: F401
from .runtime.stack import stack_room
from .runtime.shallow import CalleeRouter, ShallowCall, shallow_target
from .runtime.step_router import StepRouter
from .runtime.shapes import ShapePolicy, mark_dynamic, mark_static, maybe_mark_dynamic  # noqa: F401  (public)
from .diagnostics import log

_LIVE: "weakref.WeakSet[CompiledFunction]" = weakref.WeakSet()


def reset() -> None:
    """Clear every cache entry of every compiled function and zero ``counters`` (like ``torch._dynamo.reset``)."""
    for compiled in list(_LIVE):
        compiled._cache.clear()
        compiled._warned.clear()
        compiled._events.clear()
        compiled._faults.clear()
        compiled._shapes.clear()
        compiled.trace_seconds = compiled.compile_seconds = 0.0
        compiled.traces = 0
    counters.clear()


def _calling(fn: Callable) -> Callable:
    """A Python function whose one step is ``fn(*args, **kwargs)``: what compiling a C function traces."""
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    functools.update_wrapper(call, fn)
    return call


class CompiledFunction:
    """A function compiled by :func:`compile`; calling it runs a guarded plan or traces a new one.

    ``cache_entries()`` lists the cache entries of the function's code object
    (each with ``guard_source``, ``graph_module``, ``eager``). ``trace_seconds``
    and ``compile_seconds`` add up the time spent tracing (failed traces
    included) and in the backend's compile call; ``traces`` counts the traces.
    """

    def __init__(self, fn: Callable, *, backend: Any, fullgraph: bool, dynamic: bool | None, mode: Any,
                 options: Any, disable: bool, self_obj: Any = None, routed: bool = False):
        self._fn = fn
        # made by a StepRouter for an opt.step() a real step of a compiled function calls: a refused step is one
        # more graph break there (torch.compile's are silent), not a fallback the user must hear of
        self._routed = routed
        self._self = self_obj
        self._func = fn.__func__ if isinstance(fn, types.MethodType) else fn
        if not isinstance(self._func, types.FunctionType) and callable(fn) and not isinstance(fn, type):
            # torch.sin, Tensor.add (C functions), a functools.partial, an object with __call__: a function that
            # calls it is traced (the call is inlined, or one graph op), as torch.compile accepts any callable
            self._func = _calling(fn)
        if not isinstance(self._func, types.FunctionType):
            raise TypeError(f"stillframe.compile expects a callable or an nn.Module, got {type(fn).__name__}")
        self._backend_arg = backend
        self._compile_kwargs = dict(backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                    options=options, disable=disable)
        self._backend = compat.resolve_backend(backend, mode, options, dynamic)
        self._fullgraph = fullgraph
        self._dynamic = dynamic
        self._disable = disable
        self._cache: dict[Any, CacheEntries] = {}
        self._shapes: dict[Any, ShapePolicy] = {}  # per cache key: which input dimensions are symbolic
        self._warned: set = set()
        self._events: list[dict] = []
        self._faults: dict[Any, int] = {}  # internal errors met while tracing, by cache key
        self.trace_seconds = self.compile_seconds = 0.0
        self.traces = 0  # traces of this object (a first trace, a recompile, or code after a new graph break)
        self._bind = make_binder(self._func)
        self._method_self = fn.__self__ if isinstance(fn, types.MethodType) else None
        # a real step calling opt.step() calls a compiled opt.step (runtime/optimizer_step.py)
        self._router = StepRouter(functools.partial(CompiledFunction, **{**self._compile_kwargs, "fullgraph": False,
                                                                          "routed": True}),
                                  config.cache_size_limit,
                                  # what a torch.compiler.disable(f, recursive=False) frame calls (runtime/shallow.py)
                                  functools.partial(compile, **{**self._compile_kwargs, "fullgraph": False}))
        functools.update_wrapper(self, self._func)
        if not disable:  # compiled code calling this wrapper inlines the function instead (rules/disable.py)
            setattr(self, ORIGINAL, fn)
        # as torch.compile's wrapper: torch.compiler.disable(compiled) and torch.compile(compiled) unwrap to fn
        self._torchdynamo_orig_callable, self._torchdynamo_wrapper_id = fn, id(self)
        _LIVE.add(self)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __reduce__(self) -> Any:
        """Pickled by name where a module-level name holds it (``@stillframe.compile`` on a function), as
        torch.compile's wrapper is; otherwise as the function plus the compile arguments (traced afresh)."""
        module = sys.modules.get(getattr(self, "__module__", None) or "")
        found: Any = module
        for part in getattr(self, "__qualname__", "<>").split("."):
            found = getattr(found, part, None)
        if found is self:
            return self.__qualname__
        return _compiled_function, (self._fn, self._compile_kwargs)

    def cache_entries(self) -> list[CacheEntry]:
        """The cache entries of the function's own code object (its first graph on each path)."""
        return list(self._cache.get(self._func.__code__, []))

    def all_cache_entries(self) -> dict:
        """Every cache entry, by key: the code object, or for code after a graph break the call stack
        ``((code, instruction index), ...)`` at which it resumes."""
        return {key: list(entries) for key, entries in self._cache.items()}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._disable:
            return self._fn(*args, **kwargs)
        try:
            return self._call(args, kwargs)
        except BaseException as e:
            if not config.verbose_tracebacks:  # the user's frames, as eager shows them, not ours
                e.__traceback__ = tracebacks.user_traceback(e.__traceback__)
            raise

    def _call(self, args: tuple, kwargs: dict) -> Any:
        fn = self._func
        if self._method_self is not None:
            args = (self._method_self, *args)
        if fn.__code__.co_flags & _MAKES_GENERATOR:
            # calling it only makes the generator (or coroutine) object: its body runs as the caller iterates,
            # outside this call, as under torch.compile, which does not compile such a frame either
            return fn(*args, **kwargs)
        observer = compat.user_interposer()
        if observer is not None:
            return self._run_observed(fn, args, kwargs, observer)
        L = self._bind(*args, **kwargs)
        G = fn.__globals__
        entries = self._cache.get(fn.__code__)
        if entries is None:
            entries = self._cache.setdefault(fn.__code__, CacheEntries())
        try:
            entry = lookup(entries, L, G, fn)
        except RecursionError:  # called just under the user's recursion limit: the guards again, with room
            with stack_room():
                entry = lookup(entries, L, G, fn)
        if entry is None:
            with stack_room():  # (the user's code runs outside such blocks, under the user's recursion limit)
                entry = self._miss(fn, L, G, entries)
        if isinstance(entry, UserError):
            return self._eager_after_user_error(fn, args, kwargs, entry)
        if entry is None or entry.eager:
            return fn(*args, **kwargs)
        result = entry.run(L, G, fn)
        if isinstance(result, RunForReal):  # the graph raised and did nothing else: eager's effects, then its error
            return self._run_for_real_after(result.error, fn, args, kwargs)
        if not isinstance(result, live.Continuation):
            return result
        # handed on in a box this frame lets go of: a continuation it kept would keep every value of the call
        # stack at that break alive to the end of the call (a generator dropped later would close too late)
        box = [result]
        del result
        return self._finish(box, G)

    def _run_observed(self, fn: types.FunctionType, args: tuple, kwargs: dict, observer: str) -> Any:
        """The call, run for real while the user's saved-tensor hooks or torch modes are active (``observer``
        says which): they see every torch call of eager's and no other (not the guards' and the runtime's), and
        every tensor eager's autograd saves (not what an AOTAutograd graph saves). Under ``fullgraph=True``,
        :class:`Unsupported`."""
        if self._fullgraph:
            raise Unsupported(GraphBreak(GraphBreakKind.GLOBAL_STATE, f"{fn.__qualname__} was called while {observer}",
                                         ("a compiled call runs for real while they are active",)))
        log.event("breaks", "%s runs for real: %s", fn.__qualname__, observer)
        return fn(*args, **kwargs)

    def _run_for_real_after(self, error: BaseException, fn: types.FunctionType, args: tuple, kwargs: dict) -> Any:
        """The call, run for real after its graph raised ``error`` (``CacheEntry.rerun_on_raise``). The real run
        normally raises it again, after eager's side effects; where it returns instead, the graph diverged from
        eager: its result is eager's, with a warning (an eager fallback)."""
        log.event("breaks", "the graph of %s raised %s: running the call for real", fn.__qualname__,
                  type(error).__name__)
        lines = str(error).splitlines()
        raised = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
        del error  # its traceback holds the graph's frames
        result = fn(*args, **kwargs)
        counters["fallbacks"] += 1
        message = f"stillframe: the graph of {fn.__qualname__} raised {raised} where the real call did not; that " \
                  "call ran eagerly (a stillframe or backend divergence from eager: please report it)"
        if self._fullgraph:  # a fallback is an error under fullgraph (DESIGN invariant 8)
            raise InternalError(message)
        self._warn_once(("graph_raised", fn.__code__), message)
        return result

    def _record_recompile(self, where: str, entries: list[CacheEntry], L: dict, G: dict, F: Any,
                          dynamic: list[str] = ()) -> None:
        """Note why a code point that already has plans is traced again (the first failing guard of the newest)
        and what automatic dynamic shapes makes symbolic because of it (``dynamic``)."""
        if not entries:
            return
        reason = entries[-1].failing_guard(L, G, F)
        if dynamic and reason is not None:
            reason += f"; symbolic from now on: {user_names(', '.join(dynamic))}"
        self._events.append({"kind": "recompile", "where": where, "guard": reason})
        counters["recompiles"] += 1
        log.event("recompiles", "recompiling %s at %s: guard failed: %s", self._func.__qualname__, where, reason)

    def _miss(self, fn: types.FunctionType, L: dict, G: dict, entries: list[CacheEntry]) -> Any:
        """The entry to run for a call no cache entry took: traced now, under the compile lock (or one another
        thread traced meanwhile). ``None``: run eagerly, nothing cached; a ``UserError``: tracing raised it."""
        with compat.compile_lock():
            entry = lookup(entries, L, G, fn)  # another thread may have traced this call while we waited
            if entry is not None:
                return entry
            if len(entries) >= config.cache_size_limit:
                self._cache_limit_hit("cache_size_limit", _where(fn), "runs eagerly from then on")
                self._warn_once("cache_size_limit", f"stillframe: {fn.__qualname__} ({log.defined_at(fn)}) hit "
                                f"config.cache_size_limit ({config.cache_size_limit}) cache entries; running it "
                                "eagerly from now on. Inputs that change shape, dtype or Python values on every "
                                "call cause this.")
                return None
            counters["traces"] += 1
            self.traces += 1
            shapes = self._shape_policy(fn.__code__)
            self._record_recompile(_where(fn), entries, L, G, fn, shapes.prepare(L, G, fn))
            try:
                with compat.global_state_kept():
                    outcome = self._timed(time.perf_counter(), compile_frame, fn, L, G, fn, self._backend,
                                          self._fullgraph, shapes)
            except Unsupported as e:
                if self._fullgraph:
                    raise Unsupported(e.graph_break) from None
                entry = eager_entry(_tracer_of(e), str(e))
                self._add_entry(fn.__code__, entries, entry, L, G, fn)
                if compat.torch_internal_disable(fn):  # compile(opt.zero_grad): torch.compile is silent there too
                    log.event("breaks", "%s runs for real: %s", fn.__qualname__, e)
                    return entry
                counters["fallbacks"] += 1
                self._warn_once(str(e), f"stillframe: running {fn.__qualname__} eagerly: {e}")
                return entry
            except UserError as traced:
                return traced
            except Exception as e:  # ours never surfaces as a crash (DESIGN invariant 8); a backend's may
                if compat.is_backend_compiler_failed(e) and (self._fullgraph or not config.suppress_errors):
                    raise
                if self._fullgraph:
                    raise InternalError(f"stillframe failed while tracing {fn.__qualname__}: "
                                        f"{type(e).__name__}: {e}") from e
                counters["fallbacks"] += 1
                self._warn_once(repr(e), f"stillframe: running {fn.__qualname__} eagerly after {_fault(e)} at "
                                f"{_where(fn)}")
                return self._internal_error_entry(fn.__code__, entries, e, L, G, fn)
            self._add_entry(fn.__code__, entries, outcome.entry, L, G, fn)
            counters["graphs"] += outcome.entry.compiled is not None
            if getattr(outcome.entry, "warn", False) and self._routed:  # an opt.step that runs for real
                log.event("breaks", "%s runs for real: %s", fn.__qualname__, outcome.entry.reason)
            elif getattr(outcome.entry, "warn", False):
                self._warn_once(outcome.entry.reason, f"stillframe: running {fn.__qualname__} eagerly: "
                                f"{outcome.entry.reason}")
            return outcome.entry

    def _cache_limit_hit(self, key: Any, where: str, then: str) -> None:
        """Count a code point whose cache is full as an eager fallback, once (the run summary lists it)."""
        if key in self._warned:
            return
        counters["fallbacks"] += 1
        self._events.append({"kind": "cache_limit", "where": where,
                             "reason": f"hit config.cache_size_limit ({config.cache_size_limit}): {then}"})

    def _internal_error_entry(self, key: Any, entries: list[CacheEntry], e: Exception, L: dict, G: dict,
                              F: Any) -> CacheEntry | None:
        """After a fault of ours: nothing cached the first time (the next call traces again); from the second
        fault at the same point on, an eager entry guarded by the path the trace had taken, or nothing where
        the fault came after the trace (no guards say which calls it covers). Never an eager entry that
        holds for every call."""
        self._faults[key] = faults = self._faults.get(key, 0) + 1
        tracer = _tracer_of(e)
        if tracer is None or faults < 2:  # a one-off fault is retried on the next call
            return None
        entry = eager_entry(tracer, repr(e))
        self._add_entry(key, entries, entry, L, G, F)
        return entry

    def _eager_after_user_error(self, fn: types.FunctionType, args: tuple, kwargs: dict, traced: UserError) -> Any:
        """The user's program raises here (or fake tensors think so): run it for real, so the user sees
        eager's exception with eager's traceback."""
        result = fn(*args, **kwargs)
        counters["fallbacks"] += 1
        where = f" at {traced.location.filename}:{traced.location.lineno}" if traced.location else ""
        message = f"stillframe: {fn.__qualname__} ran eagerly: tracing raised {traced}{where}, which the real " \
                  "call did not"
        if self._fullgraph:  # a fallback is an error under fullgraph (DESIGN invariant 8)
            raise InternalError(message + " (a stillframe divergence from eager: please report it)")
        self._warn_once("fake", message)
        return result

    def _finish(self, box: list, G: dict) -> Any:
        """Carry a plan that ended at a graph break on (``box`` holds its continuation, which is taken out): one
        real step, then the resumed plan, until return. Only the continuation of the current point is kept: the
        values of an earlier one go when the real code lets go of them (eager's order of finalizers)."""
        result = box.pop()
        while isinstance(result, live.Continuation):
            result = self._resume(result, G)
        return result

    def _resume(self, cont: live.Continuation, G: dict) -> Any:
        """One real instruction, then the plan cached for where that leaves the call stack (traced if new).

        Where no plan can be had -- the point cannot be traced, or its cache is
        full -- the call goes on one real instruction at a time until it reaches
        a point with a plan, or returns.
        """
        if not cont.concrete:
            counters["graph_breaks"] += 1
        cont.reroute = self._router
        if cont.step():
            return cont.returned
        with stack_room():  # (the real step above runs under the user's recursion limit)
            return self._after_step(cont, G)

    def _after_step(self, cont: live.Continuation, G: dict) -> Any:
        """What comes after a real step of ``cont``: ``cont`` itself, to run on for real, or the result of the
        plan cached (traced if new) for where it leaves the call stack (:meth:`_resume`)."""
        if cont.handling is not None:  # inside an `except` block of the user's: on for real until POP_EXCEPT
            cont.concrete = True      # (as runtime/live.py runs a handler a real step's exception reached)
            return cont
        if compat.user_interposer() is not None:  # a real step entered the user's saved-tensor hooks or torch mode:
            cont.concrete = cont.observed = True  # on for real (no guard or graph may run) until one leaves it
            return cont
        if cont.observed:  # and this one left it: plans again from here
            cont.concrete = cont.observed = False
        key = cont.key()
        entries = self._cache.get(key)
        if entries is None:
            if cont.concrete:
                return cont
            entries = self._cache.setdefault(key, CacheEntries())
        L = live.flatten(cont.frames)
        entry = lookup(entries, L, G, None)
        if entry is None and not cont.concrete:
            entry = self._trace_resume(cont, key, entries, L, G)
        if entry is None or entry.eager:  # this point cannot be traced: run one more instruction for real
            cont.concrete = True
            return cont
        cont.concrete = False
        result = entry.run(L, G, None)
        if isinstance(result, RunForReal):  # the graph raised and did nothing else: the segment runs for real
            log.event("breaks", "the graph after a break in %s raised %s: running on for real",
                      self._func.__qualname__, type(result.error).__name__)
            cont.concrete = True
            return cont
        return result

    def _trace_resume(self, cont: live.Continuation, key: Any, entries: list[CacheEntry], L: dict,
                      G: dict) -> CacheEntry | None:
        """The entry for the code after a graph break, traced now under the compile lock (or one another thread
        traced meanwhile); ``None`` where the cache of that point is full."""
        with compat.compile_lock():
            entry = lookup(entries, L, G, None)
            if entry is not None:
                return entry
            where = "%s:%s" % cont.frames[-1].code.location(cont.frames[-1].ip)
            shapes = self._shape_policy(key)
            shapes.inherit(cont.dynamic)
            self._record_recompile(where, entries, L, G, None, shapes.prepare(L, G, None))
            if len(entries) >= config.cache_size_limit:
                self._cache_limit_hit(("cache_size_limit", key), where, "runs on instruction by instruction")
                self._warn_once(("cache_size_limit", key), f"stillframe: {self._func.__qualname__} hit "
                                f"config.cache_size_limit ({config.cache_size_limit}) plans for the code after a "
                                f"graph break at {where}; running on from there instruction by instruction")
                return None
            counters["traces"] += 1
            self.traces += 1
            try:
                with compat.global_state_kept():
                    outcome = self._timed(time.perf_counter(), compile_retrying, lambda: start_resume(cont, L, shapes),
                                          L, G, None, self._backend, False, self._func, shapes)
            except Exception as e:  # Unsupported with no real step to fall back on, or a fault of ours
                if compat.is_backend_compiler_failed(e) and not config.suppress_errors:
                    raise
                counters["fallbacks"] += 1
                self._warn_once(str(e), f"stillframe: running part of {self._func.__qualname__} instruction by "
                                f"instruction: {e}")
                if isinstance(e, Unsupported):
                    entry = eager_entry(_tracer_of(e), str(e))
                    self._add_entry(key, entries, entry, L, G, None)
                    return entry
                return self._internal_error_entry(key, entries, e, L, G, None)
            self._add_entry(key, entries, outcome.entry, L, G, None)
            counters["graphs"] += outcome.entry.compiled is not None
            return outcome.entry

    def _shape_policy(self, key: Any) -> ShapePolicy:
        policy = self._shapes.get(key)
        if policy is None:
            policy = self._shapes[key] = ShapePolicy(self._dynamic)
        return policy

    def _add_entry(self, key: Any, entries: list[CacheEntry], entry: CacheEntry, L: dict, G: dict, F: Any) -> None:
        """Cache ``entry`` under ``key``, to be dropped when an object whose ``id()`` it guards, or one of the
        caller's objects its rebuild uses, dies."""
        entries.append(entry)
        held = [obj for obj in (ref() for ref in entry.held) if obj is not None]
        watch(entry, identity_checked(entry.guards, L, G, F) + held,
              functools.partial(drop_entry, weakref.ref(self), key))

    def _timed(self, start: float, trace: Callable, *args: Any) -> Any:
        """``trace(*args)``, its time since ``start`` added to ``trace_seconds`` less the backend's share.

        The grad mode is the caller's again afterwards, however tracing ended: a fault inside a traced
        ``no_grad`` left it off, and the eager fallback then ran the user's function without autograd."""
        grad_mode = torch.is_grad_enabled()
        try:
            outcome = trace(*args)
        except BaseException:
            compat.set_grad_enabled(grad_mode)
            self.trace_seconds += time.perf_counter() - start
            raise
        compat.set_grad_enabled(grad_mode)
        self.trace_seconds += time.perf_counter() - start - outcome.compile_seconds
        self.compile_seconds += outcome.compile_seconds
        return outcome

    def _warn_once(self, key: str, message: str) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        warnings.warn(message, StillframeWarning, stacklevel=_user_stacklevel())


_MAKES_GENERATOR = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | \
    inspect.CO_ITERABLE_COROUTINE


def _user_stacklevel() -> int:
    """The ``stacklevel`` at which a warning names the user's call of the compiled object: the first frame
    outside stillframe's package (``warnings.warn``'s ``skip_file_prefixes`` is Python 3.12's)."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _fault(e: Exception) -> str:
    """How a warning names a failure that made code run eagerly: the backend's (suppressed by
    ``config.suppress_errors``), or ours."""
    if compat.is_backend_compiler_failed(e):
        return f"the backend failed (config.suppress_errors is set): {e}"
    return f"an internal error ({type(e).__name__}: {e})"


def _tracer_of(e: Unsupported) -> Any:
    return getattr(e, "tracer", None)


def _where(fn: types.FunctionType) -> str:
    return f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}"


class CompiledModule(torch.nn.Module):
    """An ``nn.Module`` whose calls run the original module's forward through stillframe, laid out as torch.compile's
    ``OptimizedModule``.

    Calling it calls the original module as eager does: its class's ``__call__`` (a subclass's own included) and
    ``nn.Module._call_impl``, which runs every hook for real, once each, in eager's order and with eager's
    arguments (forward pre-hooks and forward hooks with or without kwargs, ``always_call`` hooks, full backward
    hooks and backward pre-hooks, the global ``register_module_*`` hooks, a lazy module's initialization). Only
    the forward that ``_call_impl`` calls is compiled: the one the module has at that moment (an instance's own
    ``module.forward = fn``, as accelerate and peft patch it, or its class's). The module's own forward
    pre-hooks and forward hooks (with or without kwargs) that are functions of the user's are compiled too, each
    on its own, as torch.compile's wrapper (2.13) does: it runs ``_call_impl`` for real and catches the hooks'
    frames, so a hook sees ``torch.compiler.is_compiling()`` True (:meth:`_call_with_hooks`). Where the call
    runs more of ``_call_impl``'s hook machinery (``always_call`` or backward hooks, global hooks) the hooks run
    for real and see False, unlike there. A forward marked by ``torch.compiler.disable`` or
    ``stillframe.disable`` runs uncompiled, as there.

    The original module is its one child, ``_orig_mod``: ``state_dict()``, ``named_parameters()`` and
    ``named_modules()`` name everything under ``_orig_mod.`` exactly as torch.compile's wrapper does, so
    checkpoints move between the two in both directions, and a parent holding a compiled child loads its
    own ``state_dict()``. ``load_state_dict`` also takes the original module's own keys (a checkpoint saved
    before compiling), strict or not; torch.compile's wrapper would report them all missing.
    As on torch.compile's wrapper, attribute reads, writes (``compiled.flag = v``) and deletions pass through to
    the original module, except those of names the wrapper itself has (its class's, ``nn.Module``'s own state);
    ``training`` is the original module's, and ``len()`` is the original module's (``iter()`` and indexing are
    not, there either: ``TypeError``). ``bool()`` is the original module's (torch.compile's wrapper of a module
    without ``__len__`` raises ``TypeError`` there). It pickles, deep-copies and ``torch.save`` s as the
    original module plus the compile arguments; the copy traces afresh.

    >>> import torch, stillframe
    >>> list(stillframe.compile(torch.nn.Linear(2, 2)).state_dict())
    ['_orig_mod.weight', '_orig_mod.bias']
    """

    #: attributes of the wrapper's own that do not exist before its ``__init__`` writes them
    _WRAPPER_ATTRIBUTES = frozenset({"_orig_mod", "_compiled_forward", "_other_forwards", "_callee_router"})

    def __init__(self, module: torch.nn.Module, **kwargs: Any):
        super().__init__()
        self._orig_mod = module
        self._compiled_forward = CompiledFunction(type(module).forward, **kwargs)  # the class's: the usual one
        # any other forward a call met (an instance's own, a class's replaced one), compiled:
        # {id(forward): (forward, compiled, whether it is called with the module)}
        self._other_forwards: dict[int, tuple[Any, Callable, bool]] = {}
        # what the module's forward hooks and pre-hooks, and the callees of a forward marked
        # torch.compiler.disable(recursive=False), are called through: compiled where they are the user's (made when
        # first needed)
        self._callee_router: CalleeRouter | None = None
        self.register_load_state_dict_pre_hook(_accept_original_keys)  # a plain function: no cycle through self

    @property
    def original_module(self) -> torch.nn.Module:
        return self._orig_mod

    #: compiled code calling this module calls the original module instead (rules/disable.py)
    __stillframe_original__ = original_module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``self.forward(*args, **kwargs)``: the wrapper is no module call of its own, so a global module hook
        runs once, for the original module, as in eager (torch.compile's wrapper runs it a second time, with the
        wrapper, and warns). Hooks registered on the wrapper itself make it one: ``nn.Module.__call__``, as there.
        An exception leaves with the user's frames (and torch's), not the wrapper's, as from a compiled function."""
        try:
            if self._forward_pre_hooks or self._forward_hooks or self._backward_pre_hooks or self._backward_hooks \
                    or self._compiled_call_impl is not None:
                return super().__call__(*args, **kwargs)
            return self.forward(*args, **kwargs)
        except BaseException as e:
            if not config.verbose_tracebacks:  # the user's frames, as eager shows them, not ours
                e.__traceback__ = tracebacks.user_traceback(e.__traceback__)
            raise

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Call the original module as eager does, the compiled forward standing in for its ``forward``.

        ``nn.Module._call_impl`` reads ``module.forward`` once, first, and calls what it read after the forward
        pre-hooks: for the duration of the call the module's ``forward`` is a :class:`_ForwardStandIn`, which
        runs the compiled forward; the module's own ``forward`` is back when the call returns or raises.
        """
        module = self._orig_mod
        if "forward" not in module.__dict__ and module.__dict__.get("_compiled_call_impl") is None and \
                type(module).__call__ is torch.nn.Module.__call__ and \
                _class_forward(module) is self._compiled_forward._fn and not is_disabled(self._compiled_forward._fn):
            # the class's own forward, called by nn.Module's own __call__
            if compat.calls_forward_alone(module):
                return self._compiled_forward(module, *args, **kwargs)  # what module(...) would call, nothing else
            pre_hooks = compat.plain_forward_hooks(module)
            if pre_hooks is not None:
                return self._call_with_hooks(module, pre_hooks, args, kwargs)
        stand_in = _stand_in(module)
        try:
            stack = _calls_in_progress()
            stack.append((stand_in, self._runner(module, stand_in.own)))
            try:
                own_call = module.__dict__.get("_compiled_call_impl")
                if getattr(own_call, "__func__", None) is CompiledModule.forward and own_call.__self__ is self:
                    # nn.Module.compile() made this its compiled call (stillframe's runner): __call__ would come back
                    return module._call_impl(*args, **kwargs)
                return module(*args, **kwargs)
            finally:
                stack.pop()
        finally:
            _stand_down(module, stand_in)

    def _call_with_hooks(self, module: torch.nn.Module, pre_hooks: list, args: tuple, kwargs: dict) -> Any:
        """``module(*args, **kwargs)`` for a module whose call runs only its own forward pre-hooks and forward hooks
        (``compat.plain_forward_hooks``): each hook that is a function of the user's is called compiled (its own
        graphs, ``torch.compiler.is_compiling()`` True inside), as under torch.compile's wrapper, whose compiled
        ``Module.__call__`` runs torch's frames for real and catches the hooks' frames. Eager's order, arguments
        and error: the pre-hooks (a result replaces the arguments, a non-tuple made a 1-tuple; a kwargs hook's
        replaces ``(args, kwargs)``), the forward, then the forward hooks as the module has them after the forward
        (a result replaces the output)."""
        route = self._callees()
        for hook, takes_kwargs in pre_hooks:
            if takes_kwargs:
                result = route(hook)(module, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
                    args, kwargs = result
                continue
            result = route(hook)(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self._compiled_forward(module, *args, **kwargs)
        with_kwargs = module._forward_hooks_with_kwargs
        for hook_id, hook in tuple(module._forward_hooks.items()):
            result = route(hook)(module, args, kwargs, output) if hook_id in with_kwargs else \
                route(hook)(module, args, output)
            if result is not None:
                output = result
        return output

    def _callees(self) -> CalleeRouter:
        if self._callee_router is None:
            self._callee_router = CalleeRouter(functools.partial(
                compile, **{**self._compiled_forward._compile_kwargs, "fullgraph": False}))
        return self._callee_router

    def _runner(self, module: torch.nn.Module, own: Any) -> Callable:
        """What runs ``module``'s forward, compiled: ``own`` (an instance's own forward) or else its class's."""
        key = _class_forward(module) if own is _NO_FORWARD else own
        if key is self._compiled_forward._fn and not is_disabled(key):
            return functools.partial(self._compiled_forward, module)
        with _STAND_IN_LOCK:
            held = self._other_forwards.get(id(key))
            if held is None or held[0] is not key:
                # a function of the class is called with the module, as the class forward compiled above is
                bound = own is _NO_FORWARD and isinstance(key, types.FunctionType)
                forward = key if own is not _NO_FORWARD or bound else _ForwardStandIn.own_forward(module, key)
                target = forward.__func__ if isinstance(forward, types.MethodType) else forward
                if is_disabled(forward):  # torch.compile's wrapper does not trace a disabled forward's frame either
                    # (recursive=False: what that frame calls is compiled, runtime/shallow.py)
                    shallow = shallow_target(forward)
                    compiled = forward if shallow is None else ShallowCall(shallow, self._callees())
                else:
                    compiled = CompiledFunction(forward if isinstance(target, types.FunctionType) else
                                                _calling(forward), **self._compiled_forward._compile_kwargs)
                if len(self._other_forwards) >= _OTHER_FORWARDS_KEPT:
                    del self._other_forwards[next(iter(self._other_forwards))]
                held = self._other_forwards[id(key)] = (key, compiled, bound)
        return functools.partial(held[1], module) if held[2] else held[1]

    def cache_entries(self) -> list[CacheEntry]:
        """The cache entries of the forward a call runs now (see :meth:`CompiledFunction.cache_entries`)."""
        module = self._orig_mod
        key = module.__dict__.get("forward", _NO_FORWARD)
        if key is _NO_FORWARD:
            key = _class_forward(module)
            if key is self._compiled_forward._fn:
                return self._compiled_forward.cache_entries()
        held = self._other_forwards.get(id(key))
        compiled = held[1] if held is not None and held[0] is key else None
        return compiled.cache_entries() if isinstance(compiled, CompiledFunction) else []

    @property
    def training(self) -> bool:  # type: ignore[override]
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        module = self.__dict__.get("_modules", {}).get("_orig_mod")
        if module is not None:  # (nn.Module.__init__ writes the default before the original module is ours)
            module.training = value

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            module = self.__dict__.get("_modules", {}).get("_orig_mod")
            if module is None or name == "_orig_mod":
                raise
            return getattr(module, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._is_wrapper_attribute(name):
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if self._is_wrapper_attribute(name):
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def _is_wrapper_attribute(self, name: str) -> bool:
        """Whether ``compiled.name = v`` writes the wrapper: a name its class has (``forward``, ``training``), one of
        ``nn.Module``'s own state it holds (``_forward_hooks`` ...), or one of its own; any other is the original's.
        torch.compile's wrapper lists the names it keeps; it sends ``_is_full_backward_hook`` to the original."""
        return name in CompiledModule._WRAPPER_ATTRIBUTES or name in self.__dict__ or hasattr(type(self), name)

    def __len__(self) -> int:
        """The original module's ``len()``, as on torch.compile's wrapper; ``TypeError`` where it has none."""
        module = self._orig_mod
        if isinstance(module, collections.abc.Sized):
            return len(module)
        raise TypeError(f"{type(module).__name__} does not support len()")

    def __bool__(self) -> bool:
        """The original module's truth: an empty ``nn.Sequential`` is false, any module without ``__len__`` true."""
        return bool(self._orig_mod)

    def __dir__(self) -> list[str]:
        """The original module's attributes, then the wrapper's own, as torch.compile's wrapper lists them (what
        ``hasattr`` and ``getattr`` reach through it; tab completion and ``inspect`` read this)."""
        names = self._orig_mod.__dir__()
        seen = set(names)
        return names + [name for name in super().__dir__() if name not in seen]

    def __reduce__(self) -> tuple:
        return _compiled_module, (self._orig_mod, self._compiled_forward._compile_kwargs)


#: how many forwards other than its class's one compiled module keeps compiled (the oldest is dropped first)
_OTHER_FORWARDS_KEPT = 8

#: ``module.__dict__`` has no ``forward`` of its own
_NO_FORWARD = object()

_STAND_IN_LOCK = threading.Lock()
_THREAD = threading.local()


class _ForwardStandIn:
    """``module.forward`` while compiled modules call ``module``: on a thread inside such a call, the compiled forward
    of the innermost one; read on a thread that is not (another thread's eager call, meanwhile), the module's own.

    ``own`` is what the module's ``__dict__`` had under ``forward`` (``_NO_FORWARD``: nothing; its class's forward
    runs); ``calls`` counts the calls in progress, on every thread. Any other attribute (``__name__``,
    ``__self__``, ``__func__``, ``__wrapped__`` and with it ``inspect.signature``) is the module's own forward's.
    """

    __slots__ = ("module", "own", "calls")

    def __init__(self, module: torch.nn.Module, own: Any):
        self.module, self.own, self.calls = module, own, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for stand_in, runner in reversed(_calls_in_progress()):
            if stand_in is self:
                return runner(*args, **kwargs)
        return self._forward()(*args, **kwargs)

    @property
    def __wrapped__(self) -> Any:
        return self._forward()

    def __getattr__(self, name: str) -> Any:
        if name in _ForwardStandIn.__slots__:  # (not set yet)
            raise AttributeError(name)
        return getattr(self._forward(), name)

    def _forward(self) -> Any:
        """The module's own forward, as ``module.forward`` reads without the stand-in (a bound method)."""
        if self.own is not _NO_FORWARD:
            return self.own
        return _ForwardStandIn.own_forward(self.module, _class_forward(self.module))

    @staticmethod
    def own_forward(module: torch.nn.Module, forward: Any) -> Any:
        """``forward`` (as ``module``'s class holds it) as ``module.forward`` reads it: bound by its ``__get__``."""
        get = getattr(type(forward), "__get__", None)
        return forward if get is None else get(forward, module, type(module))


def _class_forward(module: torch.nn.Module) -> Any:
    """``forward`` as ``module``'s class holds it (a function; a ``staticmethod`` object), not bound."""
    for klass in type(module).__mro__:
        if "forward" in klass.__dict__:
            return klass.__dict__["forward"]
    raise InternalError(f"{type(module).__name__} has no forward")  # nn.Module itself has one


def _calls_in_progress() -> list:
    """This thread's compiled module calls in progress, innermost last: ``(stand-in, compiled forward)`` pairs."""
    stack = getattr(_THREAD, "stack", None)
    if stack is None:
        stack = _THREAD.stack = []
    return stack


def _stand_in(module: torch.nn.Module) -> _ForwardStandIn:
    """Put a :class:`_ForwardStandIn` in ``module.__dict__["forward"]`` (or join the one there) for one more call."""
    with _STAND_IN_LOCK:
        current = module.__dict__.get("forward", _NO_FORWARD)
        if isinstance(current, _ForwardStandIn) and current.module is module and current.calls:
            stand_in = current
        else:  # the first call in progress, or the forward was replaced during one: the new one is the module's own
            stand_in = _ForwardStandIn(module, current)
            module.__dict__["forward"] = stand_in  # not nn.Module.__setattr__: nothing of the user's sees it
        stand_in.calls += 1
    return stand_in


def _stand_down(module: torch.nn.Module, stand_in: _ForwardStandIn) -> None:
    """One call that :func:`_stand_in` joined has ended: after the last, ``module.forward`` is its own again, unless
    something replaced the stand-in meanwhile (the replacement stays, as it would in eager)."""
    with _STAND_IN_LOCK:
        stand_in.calls -= 1
        if stand_in.calls or module.__dict__.get("forward") is not stand_in:
            return
        if stand_in.own is _NO_FORWARD:
            del module.__dict__["forward"]
        else:
            module.__dict__["forward"] = stand_in.own


def _accept_original_keys(module: CompiledModule, state_dict: dict, prefix: str, *_: Any) -> None:
    """A load_state_dict pre-hook: a checkpoint of the original module (keys without ``_orig_mod.``) is read
    as this wrapper's. A state dict with any ``_orig_mod.`` key under ``prefix`` is left as it is."""
    ours = prefix + "_orig_mod."
    keys = [k for k in state_dict if k.startswith(prefix)]
    if not keys or any(k.startswith(ours) for k in keys):
        return
    for key in keys:
        state_dict[ours + key[len(prefix):]] = state_dict.pop(key)


def _compiled_module(module: torch.nn.Module, kwargs: dict) -> CompiledModule:
    """Unpickling a CompiledModule: the same compile of the unpickled module (no cache entries)."""
    return CompiledModule(module, **kwargs)


def _compiled_function(fn: Callable, kwargs: dict) -> "CompiledFunction":
    """Unpickling a CompiledFunction: the same compile of the unpickled function (no cache entries)."""
    return CompiledFunction(fn, **kwargs)


def compile(model: Any = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: Any = "inductor", mode: str | None = None, options: dict | None = None,
            disable: bool = False) -> Any:
    """Compile a function or ``nn.Module`` with stillframe (same arguments and forms as ``torch.compile``).

    Usable as ``@stillframe.compile``, ``@stillframe.compile(backend="eager")`` or
    ``stillframe.compile(module)``.

    Args:
        model: a Python function, a bound method, any other callable (a C function, a
            ``functools.partial``, an object with ``__call__``: a function calling it is compiled), or an
            ``nn.Module`` (then a :class:`CompiledModule` is returned). ``None`` returns a decorator.
        fullgraph: raise :class:`stillframe.Unsupported` instead of running
            eagerly when something cannot be captured (torch.compile's ``fullgraph``).
        dynamic: as torch.compile's: ``None`` (automatic dynamic shapes: static first, then symbolic in the
            dimensions whose size changed), ``True`` (every dimension symbolic from the first call, sizes
            0 and 1 specialized), ``False`` (always specialized). See :mod:`stillframe.runtime.shapes`.
        backend: any name torch.compile accepts (``"inductor"``, ``"aot_eager"``,
            ``"eager"``, ...) or a callable ``(gm, example_inputs) -> callable``.
        mode, options: passed to the backend as torch.compile does.
        disable: return a wrapper that always runs eagerly.

    Raises:
        torch._dynamo.exc.InvalidBackend: for an unknown backend name (as torch.compile does).
        RuntimeError: if both ``mode`` and ``options`` are given.
        TypeError: if ``model`` is not callable, or is a class.
    """
    kwargs = dict(backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options,
                  disable=disable)
    if model is None:
        return lambda m: compile(m, **kwargs)
    if isinstance(model, torch.nn.Module):
        return CompiledModule(model, **kwargs)
    # torch.compile(torch.compiler.disable(f)) compiles f: the wrappers of disable and compile are looked through
    return CompiledFunction(compat.innermost_fn(model), **kwargs)


def is_compiled(obj: Any) -> bool:
    """Whether ``obj`` is what ``stillframe.compile`` returns (a ``CompiledFunction`` or ``CompiledModule``)."""
    return isinstance(obj, (CompiledFunction, CompiledModule))
