"""Cache entries: a guard function plus a plan (fetch inputs, run the compiled graph, rebuild the result).

One :class:`CacheEntry` per successful trace; cache entries of one code object
are tried in order on each call (the first whose guards hold runs).

A cache entry holds no strong reference to the caller's objects: its graph's
placeholders carry fake tensors, and the objects whose ``id()`` its guards
compare (modules, functions, classes, hooks) are watched through weak
references (:func:`watch`). When one of them dies the entry is dropped, as
torch.compile drops it: CPython gives a new object the freed one's ``id`` at
once, and the guard would take it for the object it was traced with.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from .. import compat
from ..config import config
from ..guards.guard import compile_guards


@dataclass(slots=True, weakref_slot=True)
class CacheEntry:
    """A guarded plan for one code object.

    ``check(L, G, F) -> bool`` is the compiled guard function (its source is
    ``guard_source``); ``fetch(L, G, F)`` returns the graph inputs (live
    tensors, through their sources); ``compiled`` is what the backend returned
    for ``graph_module`` (``None`` when the graph has no ops);
    ``rebuild(outputs, inputs, L, G, F)`` makes the function's return value
    (an input returned as is is the very object fetched, as in eager), or, when
    the trace ended at a graph break (``graph_break``), the
    :class:`~stillframe.runtime.live.Continuation` the runtime carries on from. An
    ``eager`` entry runs the original function instead (its trace was
    unsupported along the path its guards describe); ``reason`` says why.
    """

    check: Callable[..., bool]
    guard_source: str
    fetch: Callable[..., list] | None = None
    compiled: Callable | None = None
    rebuild: Callable[..., Any] | None = None
    graph_module: torch.fx.GraphModule | None = None
    eager: bool = False
    reason: str = ""
    rebuild_source: str = ""
    graph_break: Any = None
    guards: list = field(default_factory=list)
    used_inputs: tuple | None = None  # positions of the fetched inputs the graph reads (None: all)
    hits: int = field(default=0)
    watched: tuple = ()  # weak references to the objects whose id() the guards compare (see watch())
    held: tuple = ()  # weak references to the caller's objects the rebuild uses (StateCodegen.live): watched too
    rerun_on_raise: bool = False  # the graph has no effect of its own: if it raises, the code runs for real
    reshaped_inputs: tuple = ()  # positions of fetched inputs whose geometry the graph may change (unsqueeze_)
    written_inputs: tuple = ()  # positions of fetched inputs whose data the graph may write (copied each call)
    draws_random: bool = False  # the graph draws random numbers (the generators' states are saved each call)
    versions: Any = None  # the version counters the graph moves, set as eager's after it (runtime/versions.py)

    def failing_guard(self, L: dict, G: dict, F: Any) -> str | None:
        """The text of the first guard that does not hold for this call (``None`` if all hold)."""
        check, _ = compile_guards(self.guards, verbose=True)
        return check(L, G, F)

    def run(self, L: dict, G: dict, F: Any) -> Any:
        """The plan's result (or the Continuation at its graph break); a :class:`RunForReal` where the graph
        raised and ``rerun_on_raise``: the caller then runs the code this plan covers for real."""
        grad_mode = torch.is_grad_enabled()
        inputs = self.fetch(L, G, F)
        outputs = ()
        if self.compiled is not None:
            args = inputs if self.used_inputs is None else [inputs[i] for i in self.used_inputs]
            geometries = [compat.geometry(inputs[i]) for i in self.reshaped_inputs]
            # the data of the inputs it writes, copied where small enough (else a raise is not run again)
            storages = compat.storage_snapshot([inputs[i] for i in self.written_inputs],
                                               config.rerun_snapshot_bytes) \
                if self.written_inputs else []
            rng = _rng_states() if self.draws_random else None
            versions = self.versions
            want = versions.before(inputs) if versions is not None else None
            try:
                outputs = self.compiled(*args)
            except Exception as e:
                compat.leave_inference_modes(e.__traceback__)  # a graph that raised inside an inference_mode block
                compat.set_grad_enabled(grad_mode)  # a graph that raised inside a no_grad block
                # as before the graph, so the real run makes eager's changes once
                if self.rerun_on_raise and storages is not None and \
                        (not storages or compat.restore_storages(storages)):
                    for saved in geometries:
                        compat.restore_geometry(saved)
                    if rng is not None:
                        _set_rng_states(rng)
                    return RunForReal(e)
                raise
            except BaseException as e:
                compat.leave_inference_modes(e.__traceback__)
                compat.set_grad_enabled(grad_mode)
                raise
            if versions is not None:
                versions.settle(inputs, outputs, want)
        return self.rebuild(outputs, inputs, L, G, F)


@dataclass(slots=True)
class RunForReal:
    """What :meth:`CacheEntry.run` returns when its graph raised ``error`` and had no effect of its own (it
    entered no autocast region; an input it reshaped, the storage of an input it wrote, and the random number
    generators it drew from, were put back). The effects the plan replays after the graph (appends to outside
    lists, attribute and global writes) were made by eager *before* the op that raised, so the caller runs the
    code again for real, from where the plan began: the effects come in eager's order, then eager's exception,
    with eager's traceback.
    (Replayed after a graph that raised, they were lost, as torch.compile loses them.)"""

    error: BaseException


#: What the runtime counts, process-wide (``stillframe.counters``): cache hits, traces, graphs, graph breaks,
#: recompiles, fallbacks.
counters: collections.Counter = collections.Counter()


class CacheEntries(list):
    """The cache entries of one code point, in the order they were traced, and the one the last call hit
    (``last_hit``), whose guards are checked first: in a steady state (a decode loop after its prompt) one entry's
    guards are checked per call, as torch.compile's cache moves the entry it hit to the front."""

    __slots__ = ("last_hit",)

    def __init__(self) -> None:
        super().__init__()
        self.last_hit: CacheEntry | None = None


def _rng_states() -> tuple:
    """The state of the CPU generator, and of every CUDA device's where CUDA is in use."""
    return torch.get_rng_state(), torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None


def _set_rng_states(states: tuple) -> None:
    cpu, cuda = states
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _never(L: dict, G: dict, F: Any) -> bool:
    return False


def watch(entry: CacheEntry, objects: list, on_death: Callable[[CacheEntry], None]) -> None:
    """Drop ``entry`` when one of ``objects`` (those whose ``id()`` its guards compare) dies.

    The entry keeps a weak reference to each; the first to die makes
    ``entry.check`` always fail and calls ``on_death(entry)`` (which removes
    it from its cache). Nothing here keeps ``entry`` alive: once the entry is
    gone its weak references and their callbacks go with it. An object that
    does not support weak references is held strongly instead, so its ``id``
    cannot be reused while the entry lives.
    """
    entry_ref = weakref.ref(entry)

    def died(_ref: weakref.ref) -> None:
        dead = entry_ref()
        if dead is not None and dead.check is not _never:
            dead.check = _never
            on_death(dead)

    refs, seen = [], set()
    for obj in objects:
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        try:
            refs.append(weakref.ref(obj, died))
        except TypeError:
            refs.append(obj)
    entry.watched = tuple(refs)


def drop_entry(owner: "weakref.ref", key: Any, entry: CacheEntry) -> None:
    """A weakref callback: an object ``entry`` guards by identity died; forget the entry (its id may be reused)."""
    compiled = owner()
    entries = compiled._cache.get(key) if compiled is not None else None
    if entries:
        for i, e in enumerate(entries):
            if e is entry:
                del entries[i]
                break
        if entries.last_hit is entry:
            entries.last_hit = None


def lookup(entries: CacheEntries, L: dict, G: dict, F: Any) -> CacheEntry | None:
    """A cache entry whose guards hold for this call (counted as a cache hit), or ``None``: the one the last
    call hit if it holds, else the first in trace order.

    Read without the compile lock: another thread may append (under the lock) or a dead object's callback
    drop an entry meanwhile (its guards fail from then on); a miss that comes of it looks again under the lock."""
    last = entries.last_hit
    if last is not None and last.check(L, G, F):
        counters["cache_hits"] += 1
        return last
    for entry in entries:
        if entry is not last and entry.check(L, G, F):
            counters["cache_hits"] += 1
            entries.last_hit = entry
            return entry
    return None
