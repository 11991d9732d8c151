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

import functools
import inspect
import os
import sys
import time
import types
import warnings
import weakref
from typing import Any, Callable

import torch

from . import compat
from .config import config
from .errors import InternalError, StillframeWarning, Unsupported, UserError
from .guards.guard import identity_checked, user_names
from .runtime import live, tracebacks
from .rules.disable import ORIGINAL, disable, is_disabled  # noqa: F401  (public: stillframe.disable)
from .rules.frames import make_binder
from .runtime.compiler import compile_frame, compile_retrying, eager_entry, start_resume
from .runtime.entry import CacheEntries, CacheEntry, RunForReal, counters, drop_entry, lookup, watch  # noqa: F401
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
        if isinstance(fn, (types.BuiltinFunctionType, types.MethodDescriptorType)):
            # torch.sin, Tensor.add: a C function; a function that calls it is traced, so it is one graph op
            # (torch.compile accepts these)
            self._func = _calling(fn)
        if not isinstance(self._func, types.FunctionType):
            raise TypeError(f"stillframe.compile expects a Python function or an nn.Module, got {type(fn).__name__}")
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
                                  config.cache_size_limit)
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
        L = self._bind(*args, **kwargs)
        G = fn.__globals__
        entries = self._cache.get(fn.__code__)
        if entries is None:
            entries = self._cache.setdefault(fn.__code__, CacheEntries())
        entry = lookup(entries, L, G, fn)
        if entry is None:
            entry = self._miss(fn, L, G, entries)
        if isinstance(entry, UserError):
            return self._eager_after_user_error(fn, args, kwargs, entry)
        if entry is None or entry.eager:
            return fn(*args, **kwargs)
        result = entry.run(L, G, fn)
        if isinstance(result, RunForReal):  # the graph raised and did nothing else: eager's effects, then its error
            return self._run_for_real_after(result.error, fn, args, kwargs)
        return self._finish(result, G)

    def _run_for_real_after(self, error: BaseException, fn: types.FunctionType, args: tuple, kwargs: dict) -> Any:
        """The call, run for real after its graph raised ``error`` (``CacheEntry.rerun_on_raise``). The real run
        normally raises it again, after eager's side effects; where it returns instead, the graph diverged from
        eager: its result is eager's, with a warning (an eager fallback)."""
        log.event("breaks", "the graph of %s raised %s: running the call for real", fn.__qualname__,
                  type(error).__name__)
        del error  # its traceback holds the graph's frames
        result = fn(*args, **kwargs)
        counters["fallbacks"] += 1
        message = f"stillframe: the graph of {fn.__qualname__} raised where the real call did not; that call ran " \
                  "eagerly (a stillframe or backend divergence from eager: please report it)"
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

    def _finish(self, result: Any, G: dict) -> Any:
        """Carry a plan that ended at a graph break on: one real step, then the resumed plan, until return."""
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
        if cont.handling is not None:  # inside an `except` block of the user's: on for real until POP_EXCEPT
            cont.concrete = True      # (as runtime/live.py runs a handler a real step's exception reached)
            return cont
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
        """Cache ``entry`` under ``key``, to be dropped when an object whose ``id()`` it guards dies."""
        entries.append(entry)
        watch(entry, identity_checked(entry.guards, L, G, F), functools.partial(drop_entry, weakref.ref(self), key))

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
    """An ``nn.Module`` whose ``forward`` runs through stillframe, laid out as torch.compile's ``OptimizedModule``.

    The original module is its one child, ``_orig_mod``: ``state_dict()``, ``named_parameters()`` and
    ``named_modules()`` name everything under ``_orig_mod.`` exactly as torch.compile's wrapper does, so
    checkpoints move between the two in both directions, and a parent holding a compiled child loads its
    own ``state_dict()``. ``load_state_dict`` also takes the original module's own keys (a checkpoint saved
    before compiling), strict or not; torch.compile's wrapper would report them all missing.
    ``train()`` / ``eval()`` and attribute reads pass through to the original module. It pickles, deep-copies
    and ``torch.save`` s as the original module plus the compile arguments; the copy traces afresh.

    >>> import torch, stillframe
    >>> list(stillframe.compile(torch.nn.Linear(2, 2)).state_dict())
    ['_orig_mod.weight', '_orig_mod.bias']
    """

    def __init__(self, module: torch.nn.Module, **kwargs: Any):
        super().__init__()
        self._orig_mod = module
        self.training = module.training
        forward = type(module).forward
        self._compiled_forward = CompiledFunction(forward, **kwargs)
        self.register_load_state_dict_pre_hook(_accept_original_keys)  # a plain function: no cycle through self

    @property
    def original_module(self) -> torch.nn.Module:
        return self._orig_mod

    #: compiled code calling this module calls the original module instead (rules/disable.py)
    __stillframe_original__ = original_module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        module = self._orig_mod
        if module._forward_hooks or module._forward_pre_hooks:
            return self._call_with_hooks(module, args, kwargs)
        return self._compiled_forward(module, *args, **kwargs)

    def _call_with_hooks(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
        for hook in module._forward_pre_hooks.values():
            out = hook(module, args)
            if out is not None:
                args = out if isinstance(out, tuple) else (out,)
        result = self._compiled_forward(module, *args, **kwargs)
        for hook in module._forward_hooks.values():
            out = hook(module, args, result)
            if out is not None:
                result = out
        return result

    def cache_entries(self) -> list[CacheEntry]:
        return self._compiled_forward.cache_entries()

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    def __reduce__(self) -> tuple:
        return _compiled_module, (self._orig_mod, self._compiled_forward._compile_kwargs)

    def train(self, mode: bool = True) -> "CompiledModule":
        self._orig_mod.train(mode)
        self.training = mode
        return self


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
        model: a Python function, a bound method, or an ``nn.Module`` (then a
            :class:`CompiledModule` is returned). ``None`` returns a decorator.
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
        TypeError: if ``model`` is not a function or module.
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
