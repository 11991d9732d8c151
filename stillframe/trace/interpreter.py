"""The symbolic interpreter: a step loop over persistent state, one handler per opcode.

``Tracer.run()`` interprets the compiled function's bytecode over
VariableTrackers. Each step reads the instruction at the top frame's ``ip``,
advances ``ip`` and calls the handler registered for its opname
(:mod:`stillframe.trace.ops`). Handlers read like the ``dis`` documentation::

    @handler("BINARY_OP")
    def BINARY_OP(tx, inst):
        b = tx.pop(); a = tx.pop()
        tx.push(binary_op(tx, inst.argval, a, b))

Calls of user Python functions push a child :class:`Frame`; ``RETURN_VALUE``
pops it and pushes the value on the caller's stack, so the whole symbolic call
stack is data in :class:`TraceState` (what a graph break resumes).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import dataclasses
import linecache
import logging
from typing import Any, Callable, Container, Iterator

import torch
from .. import compat
from ..bytecode.reader import Instruction
from ..config import config
from ..errors import GraphBreak, GraphBreakKind, StillframeError, Unsupported, UserLocation
from ..graph.builder import GraphBuilder
from ..guards.guard import Guard
from ..guards.source import AttrSource
from ..tensors.meta import TensorEntry, TensorMeta
from .state import Checkpoint, Frame, TraceState
from ..variables.base import (
    AttrsView,
    CellEntry,
    ConstantVariable,
    DictEntry,
    DictLayout,
    DictVariable,
    IteratorEntry,
    RangeItems,
    IteratorVariable,
    LazyArgument,
    ListEntry,
    ListVariable,
    SetEntry,
    SetVariable,
    TensorKey,
    TensorVariable,
    TupleVariable,
    VariableTracker,
    same_key,
)
from ..variables.builder import read_list, wrap
from ..variables import standins
from ..variables.reach import held
from ..rules import exceptions
from ..rules.objects import record_side_effect
from typing import NoReturn
from ..errors import UserError


HANDLERS: dict[str, Callable[["Tracer", Instruction], None]] = {}

# Opcodes that only move values (or decide their own realization, like CALL): lazy scalars on the stack
# stay unguarded through them. Every other opcode first wraps and guards them (Tracer.realize_stack).
MOVES_VALUES_ONLY = frozenset({
    "LOAD_FAST", "LOAD_FAST_CHECK", "STORE_FAST", "LOAD_CONST", "LOAD_GLOBAL", "LOAD_DEREF", "POP_TOP", "COPY",
    "SWAP", "PUSH_NULL", "NOP", "RESUME", "PRECALL", "KW_NAMES", "JUMP_FORWARD", "JUMP_BACKWARD", "FOR_ITER",
    "RETURN_VALUE", "CALL",
})


def handler(opname: str) -> Callable:
    """Register the handler of one version-neutral opname (its name must match, as Thunder's registry asserts)."""

    def register(fn: Callable) -> Callable:
        assert fn.__name__ == opname, f"handler {fn.__name__} registered for {opname}"
        assert opname not in HANDLERS, f"two handlers for {opname}"
        HANDLERS[opname] = fn
        return fn

    return register


class Tracer:
    """Owns one trace: the persistent state, the FX graph, and the fake-tensor mode.

    The tracer object itself is mutable only in that ``self.state`` is
    re-bound to each next state; ``checkpoint()`` / ``restore()`` are O(1)
    plus erasing FX nodes after the mark (see :mod:`stillframe.trace.state`).
    """

    def __init__(self, root: Frame | None, fake_mode: Any, grad_enabled: bool, real_steps: Container[str] = ()):
        self.state = TraceState(frames=(root,) if root is not None else (), grad_enabled=grad_enabled,
                                inference_mode=torch.is_inference_mode_enabled())  # (guarded: runtime/compiler)
        self.entry_grad_enabled = grad_enabled  # the grad mode the graph is called in
        self.real_steps = real_steps  # opnames the runtime can execute for real: where a graph break may stop
        self.fullgraph = False
        self.graph_break: GraphBreak | None = None  # set when run() stopped at a graph break
        self.graph = GraphBuilder()
        self.fake_mode = fake_mode
        self.result: VariableTracker | None = None
        self.steps = 0
        self.lazy_generators = True  # next(gen) steps a generator; False: every generator is drained at once
        self.floor = 0  # frames below this index belong to a handler mid-call (see run_until_return, catch)
        self.input_values: dict[int, Any] = {}  # tid -> live value (example inputs), not part of the state
        # inputs an in-place op wrote, on any path traced (not rolled back: it only makes rerun_on_raise rarer):
        # their data, or only their shape (unsqueeze_); see runtime/compiler._without_effects
        self.inputs_written: set[int] = set()
        self.inputs_reshaped: set[int] = set()
        # on a functional backend, the inputs an in-place op wrote through themselves or a view the graph made of
        # them, as AOTAutograd counts an input mutated (tensors/aot_writes._writes_two_aliased_inputs)
        self.inputs_written_directly: set[int] = set()
        # on a functional backend, tid -> where an in-place op of this trace wrote the input: its shape, its data
        self.input_reshapes: dict[int, set] = {}
        self.input_writes: dict[int, set] = {}
        # on a functional backend, (base tid, node of the view written, where) per in-place write through a view of
        # a tensor the graph made (tensors/aot_writes.refuse_bases_remade_as_views); not rolled back either
        self.view_writes: list[tuple[int, Any, tuple]] = []
        self.keepalive: list[Any] = []  # objects whose id() a guard checks stay alive while tracing
        self.stand_ins: dict[int, Any] = {}  # id(live leaf) -> the tensor fakeified in its place (builder._fakeified)
        self.input_nodes: dict[int, Any] = {}  # tid -> placeholder node (for finishing the graph)
        self.uncaptured_ops: frozenset = frozenset()  # higher-order ops the backend failed on: graph breaks
        # tensors saved for backward (tensors/saved.py): the calls that run for real ((code, instruction index)),
        # (fakes saved, call) per traced call that saved some, (fake, fake) pairs sharing a version counter
        # the backend functionalizes the graph (AOTAutograd; runtime.compiler sets it): a write into an input becomes
        # a copy_ back into it after the graph, and what calls save for backward is checked (tensors/saved.py; the
        # eager backend's real ops save and check for themselves)
        self.functional_backend = False
        self.transform_depth = 0  # how many torch.func transforms' bodies are being speculated (func_transforms)
        self.run_for_real: frozenset = frozenset()
        self.run_for_real_why: dict = {}  # location -> why it runs for real (errors.RetraceRunForReal)
        self.saved_for_backward: list[tuple[tuple, tuple]] = []
        # (graph inputs an op read, its location, how many saved_for_backward entries came before it): tensors/saved
        self.input_reads: list[tuple[frozenset, tuple, int]] = []
        self.shared_versions: list[tuple[Any, Any]] = []
        self.shapes: Any = None  # which input dimensions are symbolic (runtime.shapes.ShapePolicy); None: static
        # (source, fake or SymInt) of each symbolic graph input as it entered, rolled-back ones included: the
        # ShapeEnv's guards may name their symbols (DESIGN invariant 5: never the fake an in-place op changed)
        self.entry_fakes: list[tuple[Any, Any]] = []
        self.symbol_nodes: dict[Any, Any] = {}  # sympy symbol -> the placeholder passing it in (see SizeSource)
        # id() of the live values of a resumed frame that run code when collected (guards.has_finalizer): an
        # instruction that drops the trace's last reference to one runs for real (see watch_finalizers)
        self.finalizers: frozenset = frozenset()

    # ---------------------------------------------------------------- state
    def checkpoint(self) -> Checkpoint:
        mark = self.graph.mark()
        return Checkpoint(self.state, mark, self.graph.nodes[mark - 1] if mark else None)

    def restore(self, token: Checkpoint) -> None:
        self.graph.rollback(token.graph_mark, token.last_node)
        self.state = token.state
        self.result = None

    @property
    def frame(self) -> Frame:
        return self.state.frames[-1]

    def set_frame(self, frame: Frame) -> None:
        self.state = self.state.with_top(frame)

    def push(self, *values: VariableTracker) -> None:
        f = self.frame
        self.set_frame(f.with_stack(f.stack + values))

    def pop(self) -> VariableTracker:
        f = self.frame
        self.set_frame(f.with_stack(f.stack[:-1]))
        return f.stack[-1]

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        f = self.frame
        self.set_frame(f.with_stack(f.stack[:-n]))
        return list(f.stack[-n:])

    def peek(self, depth: int = 0) -> VariableTracker:
        return self.frame.stack[-1 - depth]

    def jump(self, inst: Instruction) -> None:
        self.set_frame(self.frame.with_ip(inst.target))

    # ----------------------------------------------------------------- heap
    def new_id(self) -> int:
        oid = self.state.next_id
        self.state = self.state.replace(next_id=oid + 1)
        return oid

    def heap(self, oid: int) -> Any:
        return self.state.heap[oid]

    def heap_set(self, oid: int, entry: Any) -> None:
        self.state = self.state.replace(heap=self.state.heap.set(oid, entry))

    def new_list(self, items: tuple, source: Any = None) -> ListVariable:
        oid = self.new_id()
        self.heap_set(oid, ListEntry(tuple(items), source))
        return ListVariable(oid)

    def new_set(self, values: Any = ()) -> SetVariable:
        """A fresh set of the constants ``values`` (any iterable of hashables)."""
        oid = self.new_id()
        self.heap_set(oid, SetEntry(tuple(set(values))))
        return SetVariable(oid)

    def set_values(self, var: SetVariable) -> set:
        """A real set equal to ``var``'s members (a fresh object: mutating it changes nothing)."""
        return set(self.heap(var.oid).values)

    def set_set_values(self, var: SetVariable, values: set) -> None:
        self.heap_set(var.oid, SetEntry(tuple(values)))

    def new_iterator(self, items: tuple, kind: str | None = None, cls: type | None = None) -> "IteratorVariable":
        """A fresh iterator over ``items`` (VTs), at its first item; ``kind``: the builtin that made it; ``cls``: the
        type eager's iterator has (``type(it)``), default the one ``kind`` makes, else ``tuple_iterator``."""
        oid = self.new_id()
        if isinstance(items, RangeItems):
            self.heap_set(oid, IteratorEntry(items, 0, kind))
            return IteratorVariable(oid, _RANGE_ITERATOR)
        self.heap_set(oid, IteratorEntry(tuple(items), 0, kind))
        return IteratorVariable(oid, cls or _KIND_TYPES.get(kind))

    def new_watched_iterator(self, items: tuple, container: VariableTracker, oid: int, view: str = "",
                             fn: str = "iter") -> "IteratorVariable":
        """A fresh iterator over ``items`` (VTs), the items of ``container`` (whose contents are ``heap[oid]``) as
        CPython's ``fn(container<view>)`` yields them (``view``: ``""``, ``".keys()"``, ``".values()"`` or
        ``".items()"``; ``fn``: ``"iter"`` or ``"reversed"``) while nothing changes ``heap[oid]``: see
        ``IteratorEntry.watch``."""
        iterator = self.new_iterator(items, cls=_watched_type(container.python_type(), view, fn))
        entry, watched = self.heap(iterator.oid), self.heap(oid)
        keys = ()
        if isinstance(watched, DictEntry):
            keys = tuple(k for k, _ in watched.items)[::-1 if fn == "reversed" else 1]
        self.heap_set(iterator.oid, dataclasses.replace(entry, watch=(container, oid, watched, view, fn), keys=keys))
        return iterator

    def watched_changed(self, entry: IteratorEntry) -> bool:
        """Whether the container a watched iterator (``IteratorEntry.watch``) is over changed since it was made, as
        its CPython iterator sees it: any change of a deque; a key deleted, added or moved in a dict (not a value)."""
        if entry.watch is None:
            return False
        now, then = self.heap(entry.watch[1]), entry.watch[2]
        if now is then:
            return False
        if not isinstance(then, DictEntry):
            return True
        return now.structure != then.structure or len(now.items) != len(then.items) or \
            any(k is not j and k != j for (k, _), (j, _) in zip(now.items, then.items))

    def _watched_items(self, entry: IteratorEntry) -> tuple:
        """A watched iterator's items, a dict's values read now (its keys are those it began with)."""
        if entry.watch is None or entry.watch[3] not in (".values()", ".items()") or \
                self.heap(entry.watch[1]) is entry.watch[2]:
            return entry.items
        dict_entry = self.heap(entry.watch[1])
        values = [dict_entry.get(k) for k in entry.keys]
        if entry.watch[3] == ".values()":
            return tuple(values)
        return tuple(TupleVariable((k_var, v)) for (k_var, _), v in
                     zip((item.items for item in entry.items), values))

    def new_container_iterator(self, container: VariableTracker, view: str, kind: str | None = None,
                               start: int = 0) -> "IteratorVariable":
        """A fresh iterator over the heap list, dict or set ``container`` that reads it at each ``next`` (see
        :class:`IteratorEntry`); ``view``: ``"list"``, ``"keys"``, ``"values"``, ``"items"`` or ``"set"``."""
        if view == "list":
            size, keys = 0, ()
        elif view == "set":
            keys = self.heap(container.oid).values
            size = len(keys)
        else:
            dict_entry = self.dict_entry(container)
            keys = tuple(k for k, _ in dict_entry.items)
            size = len(keys)
            if dict_entry.layout is not None:  # CPython's dictiter: from entry 0, expecting `size` items
                oid = self.new_id()
                self.heap_set(oid, IteratorEntry((), 0, kind, container.oid, view, size, keys, start, pos=0,
                                                 left=size))
                return IteratorVariable(oid, _KIND_TYPES.get(kind) or _VIEW_TYPES[view])
        oid = self.new_id()
        self.heap_set(oid, IteratorEntry((), 0, kind, container.oid, view, size, keys, start))  # seen: not yet
        return IteratorVariable(oid, _KIND_TYPES.get(kind) or _VIEW_TYPES[view])

    def iterator_next(self, var: "IteratorVariable") -> VariableTracker | None:
        """Advance ``var``: its next item, or ``None`` when it is exhausted. Over a list, dict or set it reads the
        container now: CPython's ``listiter_next`` / ``dictiter_iternextkey`` / ``setiter_iternext``."""
        entry = self.heap(var.oid)
        if entry.over is not None:
            return self._container_next(var.oid, entry)
        if self.watched_changed(entry):
            self.unsupported("unsupported_iteration", "the container being iterated changed: CPython's iterator over "
                             "it raises, the loop runs for real")
        if entry.index >= len(entry.items):
            return None
        self.heap_set(var.oid, dataclasses.replace(entry, index=entry.index + 1))
        return self._watched_items(entry)[entry.index]

    def _container_next(self, oid: int, entry: IteratorEntry) -> VariableTracker | None:
        if entry.view == "list":
            items = self.list_items(ListVariable(entry.over))
            if entry.index >= len(items):  # exhausted for good: listiterator drops its list
                self.heap_set(oid, IteratorEntry((), 0, entry.kind))
                return None
            self.heap_set(oid, dataclasses.replace(entry, index=entry.index + 1))
            item = items[entry.index]
            if entry.kind == "enumerate":
                return TupleVariable((ConstantVariable(entry.start + entry.index), item))
            return item
        raw = self.heap(entry.over).values if entry.view == "set" else self.dict_entry(DictVariable(entry.over)).items
        if len(raw) != entry.size:  # sticky, as CPython sets di_used / si_used to -1
            self.heap_set(oid, dataclasses.replace(entry, size=-1))
            what = "Set" if entry.view == "set" else "dictionary"
            self.user_error(RuntimeError(f"{what} changed size during iteration"))
        if entry.pos is not None and self.heap(entry.over).layout is not None:
            return self._dict_next(oid, entry)
        if raw is not entry.seen:  # changed since the last next: same keys (a value overwritten) iterate on
            if not self.same_keys(entry):  # where CPython's iterator stands depends on its hash table
                self.unsupported("unsupported_iteration", f"the {'set' if entry.view == 'set' else 'dict'} being "
                                 "iterated changed its keys (same size): CPython's result depends on its hash table")
            entry = dataclasses.replace(entry, seen=raw)
        if entry.index >= entry.size:  # exhausted for good: the iterator drops the container
            self.heap_set(oid, IteratorEntry((), 0, entry.kind))
            return None
        self.heap_set(oid, dataclasses.replace(entry, index=entry.index + 1))
        value = None if entry.view == "set" else raw[entry.index][1]
        return self._view_item(entry.view, entry.keys[entry.index], value)

    def _dict_next(self, oid: int, entry: IteratorEntry) -> VariableTracker | None:
        """CPython's ``dictiter_iternext*`` over a dict whose table the trace follows (``DictLayout``): the first
        live entry from ``pos`` on; past the last one, exhausted; one found when it expects no more items raises
        ``RuntimeError: dictionary keys changed during iteration`` and ends it (a key added since it began is
        yielded where its entry lies, one deleted is skipped, a table rebuilt moves every entry)."""
        dict_entry = self.heap(entry.over)
        slots = dict_entry.layout.slots
        found = next((j for j, slot in enumerate(slots) if slot >= entry.pos), None)
        if found is None or entry.left == 0:
            self.heap_set(oid, IteratorEntry((), 0, entry.kind))  # it drops the dict
            if found is None:
                return None
            self.user_error(RuntimeError("dictionary keys changed during iteration"))
        self.heap_set(oid, dataclasses.replace(entry, pos=slots[found] + 1, left=entry.left - 1,
                                               index=entry.index + 1))
        key, value = dict_entry.items[found]
        return self._view_item(entry.view, key, value)

    def _dict_rest(self, entry: IteratorEntry) -> tuple | None:
        """What a dict iterator following the table (:meth:`_dict_next`) yields from here if nothing changes the
        dict: ``None`` where it would raise instead."""
        dict_entry = self.heap(entry.over)
        rest = [(k, v) for slot, (k, v) in zip(dict_entry.layout.slots, dict_entry.items) if slot >= entry.pos]
        if len(rest) > entry.left:
            return None
        return tuple(self._view_item(entry.view, k, v) for k, v in rest)

    def same_keys(self, entry: IteratorEntry) -> bool:
        """Whether the dict (set) a container iterator is over has the keys (members) it had when the iterator
        was made, in the same order (a set's: the same members; its table is unchanged)."""
        if entry.view == "set":
            values = self.heap(entry.over).values
            return values == entry.keys or set(values) == set(entry.keys)
        return tuple(k for k, _ in self.dict_entry(DictVariable(entry.over)).items) == entry.keys

    @staticmethod
    def _view_item(view: str, key: Any, value: VariableTracker | None) -> VariableTracker:
        k = TensorVariable(key.tid) if type(key) is TensorKey else ConstantVariable(key)
        if view == "values":
            return value
        return TupleVariable((k, value)) if view == "items" else k

    def iterator_rest(self, var: "IteratorVariable") -> tuple:
        """The items ``var`` has left, without consuming them (what a container iterator would yield if nothing
        changes the container from now on; an iterator that would raise has none)."""
        entry = self.heap(var.oid)
        if entry.over is None:
            return self._watched_items(entry)[entry.index:]
        if entry.view == "list":
            items = self.list_items(ListVariable(entry.over))[entry.index:]
            if entry.kind == "enumerate":
                return tuple(TupleVariable((ConstantVariable(entry.start + entry.index + i), v))
                             for i, v in enumerate(items))
            return items
        raw = self.heap(entry.over).values if entry.view == "set" else self.dict_entry(DictVariable(entry.over)).items
        if len(raw) == entry.size and entry.pos is not None and self.heap(entry.over).layout is not None:
            return self._dict_rest(entry) or ()
        if len(raw) != entry.size or not self.same_keys(entry):
            return ()
        return tuple(self._view_item(entry.view, entry.keys[i], None if entry.view == "set" else raw[i][1])
                     for i in range(entry.index, entry.size))

    def iterator_drain(self, var: "IteratorVariable") -> tuple:
        """The items ``var`` has left, consuming them (``list(it)``, ``for``-unrolling, unpacking)."""
        entry = self.heap(var.oid)
        if entry.over is not None:  # step by step: the error a changed dict or set raises comes at its next
            items = []
            while (item := self.iterator_next(var)) is not None:
                items.append(item)
            return tuple(items)
        if self.watched_changed(entry):
            self.unsupported("unsupported_iteration", "the container being iterated changed: CPython's iterator over "
                             "it raises, the iteration runs for real")
        self.heap_set(var.oid, dataclasses.replace(entry, index=len(entry.items)))
        return self._watched_items(entry)[entry.index:]

    def new_dict(self, items: tuple, source: Any = None, layout: Any = None) -> DictVariable:
        """A fresh dict; ``layout``: its CPython table (a ``DictLayout``) where the way it is made fixes it."""
        oid = self.new_id()
        self.heap_set(oid, DictEntry(tuple(items), source, layout=layout))
        return DictVariable(oid)

    def new_cell(self, contents: VariableTracker | None) -> int:
        oid = self.new_id()
        self.heap_set(oid, CellEntry(contents))
        return oid

    def list_items(self, var: ListVariable) -> tuple:
        return read_list(self, var.oid)

    def append_to_list(self, var: ListVariable, values: tuple) -> None:
        """``list.append`` / ``extend``: a caller's list not read yet records the values without reading it."""
        entry: ListEntry = self.heap(var.oid)
        if entry.items is not None:
            return self.set_list_items(var, entry.items + tuple(values))
        record_side_effect(self, ("list", var.oid), var)  # an unread list is always a live one
        self.heap_set(var.oid, ListEntry(None, entry.source, entry.live, entry.appended + tuple(values)))

    def set_list_items(self, var: ListVariable, items: tuple) -> None:
        entry: ListEntry = self.heap(var.oid)
        if entry.live is not None:  # an outside list: replayed on it after the graph runs
            record_side_effect(self, ("list", var.oid), var)
        self.heap_set(var.oid, ListEntry(tuple(items), entry.source, entry.live))

    def dict_entry(self, var: DictVariable) -> DictEntry:
        """The dict's whole contents (an outside dict's key set is guarded now, if it was not yet)."""
        entry = self.heap(var.oid)
        if entry.keys_unguarded:
            self.add_guard(Guard(entry.source, "KEYS", tuple(k for k, _ in entry.items)))
            entry = DictEntry(entry.items, entry.source, entry.live)
            self.heap_set(var.oid, entry)
        return entry

    def dict_lookup(self, var: DictVariable, key: Any, missing: Any = None) -> Any:
        """``var[key]`` as a VT, or ``missing``; on an outside dict only that key's presence is guarded."""
        entry = self.heap(var.oid)
        found = entry.get(key, missing)
        if entry.keys_unguarded:
            self.add_guard(Guard(entry.source, "HAS_KEY", (key, found is not missing)))
        return found

    def set_dict_entry(self, var: DictVariable, entry: DictEntry, op: str | None = None) -> None:
        """Bind the dict's new contents. ``op``: ``"clear"`` (CPython gives it the empty table), ``"merge"`` or
        ``"popitem"`` (calls whose effect on CPython's table is not followed); ``None``: a change made by single
        insertions and deletions (``d[k] = v``, ``del d[k]``, ``pop``, ``setdefault``)."""
        old = self.dict_entry(var)
        if isinstance(old.live, AttrsView):
            self.unsupported("side_effect", "writing through the __dict__ of an object made in the trace")
        if isinstance(old.source, AttrSource) and old.source.attr == "__dict__":
            # the object's attributes, which the trace reads and writes by name apart from this dict: the write
            # runs for real, and what comes after reads the attributes afresh (found by a probe: `del o.a` then
            # `o.__dict__["z"] = 5` replayed the two in the wrong order, and a KeyError of ours reached the user)
            self.unsupported("side_effect", "writing through the __dict__ of an object from outside the trace")
        if old.live is not None:  # an outside dict: replayed on it after the graph runs
            if [k for k, _ in entry.items] != [k for k, _ in old.items]:
                # a loop iterating it with CPython's own iterator: the replay (clear, update) would rebuild its table
                # under it, so the change runs for real, as eager makes it (each next then stands where eager's does)
                iterated = standins.is_iterated(old.live)
                if old.source is not None:
                    self.add_guard(Guard(old.source, "ITERATED", iterated))
                if iterated:
                    self.unsupported("side_effect", "changing the keys of a dict a loop iterates for real")
            record_side_effect(self, ("dict", var.oid), var)
        layout = DictLayout() if op == "clear" else None if op is not None else _changed_layout(old, entry.items)
        reshaped = len(entry.items) != len(old.items) or \
            any(k is not j for (k, _), (j, _) in zip(entry.items, old.items))
        self.heap_set(var.oid, DictEntry(entry.items, old.source, old.live, layout=layout,
                                         structure=old.structure + (reshaped or op == "clear")))

    # -------------------------------------------------------------- tensors
    def tensor(self, var: TensorVariable) -> TensorEntry:
        return self.state.heap[var.tid]

    def new_tensor(self, fake: Any, node: Any, source: Any = None) -> TensorVariable:
        """Bind a new tensor identity for ``fake`` (a fresh result or a graph input)."""
        base_tid = None
        base = fake._base
        if base is not None:
            base_tid = self.tid_of_fake(base)
            if base_tid is None:  # the base of an input view: tracked, never read by the graph
                base_tid = self.new_tensor(base, None).tid
        tid = self.new_id()
        # a view records how autograd saw it made (under no_grad, as one of several outputs of split, ...), which
        # decides the in-place ops it allows: a view passed in, or made by the traced code (whose fake was made
        # under the traced grad mode, or by autograd.grad's engine under no_grad), as its fake says
        creation = compat.CreationMeta.DEFAULT
        if base_tid is not None:
            creation = compat.view_creation(fake)
            if source is None and not self.state.grad_enabled:
                creation = compat.CreationMeta.NO_GRAD_MODE
        meta = TensorMeta.of(fake, base_tid, creation)
        self.heap_set(tid, TensorEntry(meta, fake, node, source))
        self.state = self.state.replace(fakes=self.state.fakes.set(id(fake), (tid, fake)))
        return TensorVariable(tid)

    def tid_of_fake(self, fake: Any) -> int | None:
        """The tensor identity whose (current or earlier) version is ``fake``, if any."""
        hit = self.state.fakes.get(id(fake))
        return hit[0] if hit is not None and hit[1] is fake else None

    def tensor_node_of_input(self, tid: int) -> Any:
        """The placeholder of graph input ``tid`` (its first version's node)."""
        return self.input_nodes.get(tid)

    def bind_tensor(self, tid: int, entry: TensorEntry) -> None:
        """Bind a new version of ``tid`` (after an in-place op)."""
        self.heap_set(tid, entry)
        self.state = self.state.replace(fakes=self.state.fakes.set(id(entry.fake), (tid, entry.fake)))

    def alias_group(self, tids: set[int]) -> tuple[list[int], list[int]]:
        """The autograd alias group of ``tids``: (roots, views) currently in the heap."""
        roots = []
        for tid in tids:
            base = self.state.heap[tid].meta.base
            root = tid if base is None else base
            if root not in roots:
                roots.append(root)
        views = [
            oid
            for oid, entry in self.state.heap.items()
            if isinstance(entry, TensorEntry) and entry.meta.base is not None and entry.meta.base in roots
        ]
        return roots, sorted(views)

    @contextlib.contextmanager
    def fake_context(self) -> Iterator[None]:
        """Fake mode plus the traced grad mode and autocast settings, for propagating an op.

        A fake kernel that raises is the user's error (re-raised as eager's at
        the real step): torch's own error log of it is silenced meanwhile.
        """
        with contextlib.ExitStack() as stack:
            stack.enter_context(_quiet_fake_tensor_log())
            stack.enter_context(self.fake_mode)
            if self.fake_mode.shape_env is not None:  # symbolic sizes stay symbolic, as under torch.compile
                stack.enter_context(compat.python_dispatcher())
            stack.enter_context(compat.user_saved_tensors_hooks_shadowed())
            if self.state.inference_mode != torch.is_inference_mode_enabled():  # (entering it sets grad mode too)
                stack.enter_context(torch.inference_mode(self.state.inference_mode))
            stack.enter_context(torch.set_grad_enabled(self.state.grad_enabled))
            for device_type, dtype, enabled, cache_enabled in self.state.autocast:
                stack.enter_context(torch.autocast(device_type, dtype=dtype, enabled=enabled,
                                                   cache_enabled=cache_enabled))
            yield

    # --------------------------------------------------------------- guards
    def add_guard(self, guard: Guard) -> None:
        """Install ``guard`` (once per condition), recording the user's line being traced as its origin."""
        key = guard.key
        if key not in self.state.guards:
            if guard.origin is None and self.state.frames and self.frame.ip > 0:  # not the entry's own guards
                frame = self.frame
                inst = frame.code.instructions[frame.ip - 1]
                guard = dataclasses.replace(guard, origin=f"{frame.code.code.co_filename}:{inst.lineno}")
            self.state = self.state.replace(guards=self.state.guards.set(key, (len(self.state.guards), guard)))

    def restore_keeping_guards(self, token: Checkpoint) -> None:
        """:meth:`restore`, keeping the guards added since ``token``: what a rolled-back attempt learned about the
        inputs still decides its outcome (``getattr(obj, name, default)`` found no attribute: that must hold)."""
        learned = sorted(self.state.guards.values(), key=lambda pair: pair[0])
        self.restore(token)
        for _index, guard in learned:
            if guard.key not in self.state.guards:
                self.state = self.state.replace(guards=self.state.guards.set(guard.key,
                                                                             (len(self.state.guards), guard)))

    def leave_frames(self, token: Checkpoint) -> None:
        """Back in the frames as they were at ``token`` (the caller's stack, the exception it handles), keeping
        everything else done since: an exception raised inside a call a rule made was caught by the rule
        (``hasattr``), and what ran before the raise stays done, as :meth:`catch` keeps it."""
        self.state = self.state.replace(frames=token.state.frames, handling=token.state.handling)
        self.result = None

    def guards(self) -> list[Guard]:
        return [g for _, g in sorted(self.state.guards.values(), key=lambda pair: pair[0])]

    # ------------------------------------------------------------- messages
    def location(self, frame: Frame | None = None) -> UserLocation:
        frame = frame or self.frame
        index = max(frame.ip - 1, 0)
        inst = frame.code.instructions[index]
        filename = frame.code.code.co_filename
        line = inst.lineno
        source = linecache.getline(filename, line) if line else ""
        return UserLocation(filename, line, source.rstrip("\n"))

    def unsupported(self, kind: str, explanation: str, hints: tuple = ()) -> "NoReturn":  # noqa: F821
        """Stop tracing here: a graph break of ``kind`` (a :class:`GraphBreakKind` value; another is a bug)."""
        raise Unsupported(GraphBreak(GraphBreakKind(kind), explanation, tuple(hints), self.location()))

    def raise_observer(self) -> str | None:
        """What would see an exception the current instruction raises before the call returns, or ``None``: an
        enclosing ``try`` of the user's in any frame (a ``with`` block's exit handler alone is not: the exception
        passes through it, and so does a ``finally``: its re-raise is followed to the handler around it).

        Side effects recorded before it are not counted (transformers records attribute writes on a global
        context object before its masks' indexing, so counting them broke every model's graph at its mask).
        They are replayed after the graph; a graph that raises runs its code again for real instead where it
        has no effect of its own (``CacheEntry.rerun_on_raise``), and loses them otherwise, as under
        torch.compile (a strict xfail in tests/regressions/test_fuzz_found.py keeps that gap in view)."""
        for frame in self.state.frames:
            if _caught_in_frame(frame.code, frame.ip - 1):
                return "the user's except block around it would not see its error"
        return None

    def user_error(self, exc: BaseException, traceable: bool = True, var: VariableTracker | None = None,
                   reraised: bool = False) -> "NoReturn":  # noqa: F821
        """The one way an exception becomes the user's (a traced ``except`` may catch it). stillframe's own
        errors never do: they propagate as they are (issue 10's choke point).

        ``exc`` made by a rule of ours (``KeyError(k)`` of ``d[k]``) becomes a value of the trace where a traced
        ``except`` catches it, chained to the exception being handled as CPython chains it
        (:func:`~stillframe.rules.exceptions.caught`). ``var``: the user's exception already a value of the trace
        (``raise e``; ``exc`` then stands for it in our checks and messages); ``reraised``: raised again as it is
        (a bare ``raise``, ``RERAISE``)."""
        if isinstance(exc, StillframeError):
            raise exc
        raise UserError(exc, self.location(), traceable, var, reraised)

    # ----------------------------------------------------------------- loop
    def step(self) -> None:
        frame = self.frame
        inst = frame.code.instructions[frame.ip]
        self.set_frame(frame.with_ip(frame.ip + 1))
        fn = HANDLERS.get(inst.opname)
        if fn is None:
            self.unsupported("unsupported_opcode", f"the opcode {inst.opname} is not supported",
                             ("rewrite the construct or move it out of the compiled function",))
        self.steps += 1
        if self.steps > config.max_trace_steps:
            self.unsupported("trace_too_long", f"the trace exceeded {config.max_trace_steps} instructions")
        depth = len(self.state.frames)
        try:
            if inst.opname not in MOVES_VALUES_ONLY:
                self.realize_stack()
            fn(self, inst)
        except UserError as e:
            self.catch(e, depth, inst.index)
        if self.finalizers and self.floor == 0:
            self.watch_finalizers()

    def watch_finalizers(self) -> None:
        """Break at the instruction just traced if it dropped the trace's last reference to a live value that runs
        code when collected (a generator suspended in a ``try``/``with``, an object with ``__del__``): eager
        collects it right there, before whatever comes next (``for ... break``, ``del it``, ``it = None``, a
        temporary popped), so the instruction runs for real and the real reference goes then. Checked between
        top-level instructions: a drop inside a call traced inline makes the whole call run for real."""
        dropped = self.finalizers - held(self.state, self.result, self.finalizers)
        if dropped:
            self.unsupported("side_effect", "the last reference to a value that runs code when collected (a "
                             "generator's finally or __exit__, a __del__) goes here: eager runs that code now, so the "
                             "step runs for real")

    def catch(self, error: UserError, depth: int, index: int) -> None:
        """Send the user's exception, raised by instruction ``index`` of the frame at ``depth - 1``, to the
        innermost traced ``except`` / ``finally`` (the frames' exception tables, as CPython does); re-raise
        it when no frame above the innermost nested run (``self.floor``) handles it.

        What ran before the raise stays done, as in eager (side effects, appended items); frames the
        exception left are dropped, and the handler's frame keeps its stack up to the table entry's depth.
        """
        if not error.traceable:
            raise error
        frames = list(self.state.frames[:depth])
        passed = []  # a traceback entry for each frame it passes through (not the one re-raising it as it is)
        here = not error.reraised
        while len(frames) > self.floor:
            frame = frames[-1]
            if here:
                passed.append(exceptions.traceback_entry(frame, index))
            here = True
            entry = frame.code.exception_handler(index)
            if entry is not None:
                stack = frame.stack[:entry.depth]
                if entry.lasti:
                    stack += (ConstantVariable(frame.code.instructions[index].offset),)
                stack += (exceptions.caught(self, error, passed),)
                frames[-1] = frame.with_stack(stack).with_ip(entry.target)
                self.state = self.state.replace(frames=tuple(frames))
                return
            frames.pop()
            if frames:
                index = frames[-1].ip - 1  # the CALL that made the frame
        exceptions.caught(self, error, passed)
        error.reraised = False  # the caller of the nested run adds its own frame's entry as it goes on
        raise error

    def realize_stack(self, depth: int | None = None) -> None:
        """Wrap (and guard) the lazy scalars among the top ``depth`` stack values (all if ``None``)."""
        frame = self.frame
        start = 0 if depth is None else max(len(frame.stack) - depth, 0)
        if not any(isinstance(v, LazyArgument) for v in frame.stack[start:]):
            return
        stack = list(frame.stack)
        for i in range(start, len(stack)):
            if isinstance(stack[i], LazyArgument):
                stack[i] = wrap(self, stack[i].value, stack[i].source)
        self.set_frame(self.frame.with_stack(tuple(stack)))

    def run(self) -> VariableTracker | None:
        """Interpret until the root frame returns (its VT) or a graph break (``None``; see ``graph_break``).

        A graph break restores the checkpoint taken before the instruction that
        could not be captured, so the state is exactly what it was before it:
        the plan executes that one instruction for real (DESIGN invariant 6).
        """
        while self.result is None:
            token = self.checkpoint()
            try:
                self.step()
            except (Unsupported, UserError) as e:
                frame = token.state.frames[-1]
                inst = frame.code.instructions[frame.ip]
                if self.fullgraph or inst.opname not in self.real_steps:
                    raise
                self.restore(token)
                self.graph_break = _as_break(e, self.location(frame.with_ip(frame.ip + 1)))
                return None
        return self.result

    def run_until_return(self, depth: int) -> VariableTracker:
        """Run a frame pushed at stack depth ``depth`` until it returns; pops and returns its value.

        A graph break inside such a nested run propagates to the instruction
        that started it, which then breaks as a whole.
        """
        floor, self.floor = self.floor, depth  # an exception leaving the nested frames propagates to our caller
        try:
            while len(self.state.frames) > depth:
                self.step()
        finally:
            self.floor = floor
        return self.pop()

    def push_frame(self, frame: Frame) -> None:
        if len(self.state.frames) >= config.inline_depth_limit:
            self.unsupported("inline_depth", f"inlining nested deeper than {config.inline_depth_limit} calls",
                             ("raise stillframe.config.inline_depth_limit, or avoid deep recursion",))
        self.state = self.state.replace(frames=self.state.frames + (frame,))

    def return_value(self, value: VariableTracker) -> None:
        frames = self.state.frames
        if frames[-1].generator is not None:  # next(gen) reached the generator's return: it has finished
            self.heap_set(frames[-1].generator, self.heap(frames[-1].generator).finished())
        if frames[-1].yields is not None:  # a generator ran to completion: its caller gets the yielded values
            value = self.new_iterator(frames[-1].yields)
        if len(frames) == 1:
            self.result = value
            return
        self.state = self.state.replace(frames=frames[:-1])
        self.push(value)


_FAKE_LOG = logging.getLogger("torch._subclasses.fake_tensor")


@contextlib.contextmanager
def _quiet_fake_tensor_log() -> Iterator[None]:
    previous = _FAKE_LOG.disabled
    _FAKE_LOG.disabled = True
    try:
        yield
    finally:
        _FAKE_LOG.disabled = previous


def _as_break(e: Exception, location: UserLocation) -> GraphBreak:
    if isinstance(e, Unsupported):
        return e.graph_break
    return GraphBreak(GraphBreakKind.USER_EXCEPTION, f"the traced code raises {e}: the step runs for real, so the exception "
                      "(if it happens) is eager's own", (), location)




def _changed_layout(old: DictEntry, items: tuple) -> Any:
    """The ``DictLayout`` of a dict whose items went from ``old``'s to ``items`` by deleting keys and inserting new
    ones at the end (``None`` where ``old``'s is unknown, or the change is not of that form: a reordering)."""
    layout = old.layout
    if layout is None:
        return None
    new_keys = [k for k, _ in items]
    # One walk (linear: a loop filling or draining a dict of n keys costs O(n) per change, not O(n^2)): each old key
    # is kept when it is the next new key, else deleted; the new keys left over were inserted at the end. Where a
    # deleted old key is among those (it moved: a reordering), the change is not of that form.
    kept, deleted = 0, []
    for i, (k, _) in enumerate(old.items):
        if kept < len(new_keys) and same_key(k, new_keys[kept]):
            kept += 1
        else:
            deleted.append(i)
    inserted = new_keys[kept:]
    if any(same_key(old.items[i][0], n) for i in deleted for n in inserted):
        return None
    for i in reversed(deleted):
        layout = layout.without(i)
    for key in inserted:
        layout = layout.insert(key)
    return layout


_RANGE_ITERATOR = type(iter(range(0)))

#: The type of the iterator each builtin (``IteratorEntry.kind``) makes.
_KIND_TYPES = {"zip": zip, "enumerate": enumerate}

#: The type of CPython's iterator over a container the trace reads at each next (``IteratorEntry.view``).
_VIEW_TYPES = {"list": type(iter([])), "keys": type(iter({})), "values": type(iter({}.values())),
               "items": type(iter({}.items())), "set": type(iter(set()))}


def _watched_type(cls: type, view: str, fn: str) -> type | None:
    """The type of ``fn(container<view>)`` for a container of type ``cls`` (``iter(deque)``: ``_deque_iterator``,
    ``reversed(od.items())``: ``odict_iterator``): CPython's, asked of an empty instance of the builtin base that
    defines it; None where none can be made."""
    base = next((c for c in cls.__mro__ if c.__module__ in ("builtins", "collections")), None)
    try:
        empty = base()
        made = {"iter": iter, "reversed": reversed}[fn](getattr(empty, view[1:-2])() if view else empty)
    except Exception:
        return None
    return type(made)


def _caught_in_frame(code: Any, index: int) -> bool:
    """Whether an exception raised at instruction ``index`` of ``code`` reaches an ``except`` of this frame.
    A ``finally`` block or a ``with`` block's exit handler re-raises it (``RERAISE``): the handler around that
    re-raise decides, and so on outward."""
    entry = code.exception_handler(index)
    for _ in range(64):  # handlers nest; a bound against a malformed table
        if entry is None:
            return False
        reraise = None
        instructions = code.instructions
        for position in range(entry.target, len(instructions)):
            opname = instructions[position].opname
            if opname == "POP_EXCEPT" and position + 1 < len(instructions) \
                    and instructions[position + 1].opname == "RERAISE":
                continue  # the cleanup every handler has (COPY 3, POP_EXCEPT, RERAISE 1): it passes it on
            if opname in ("CHECK_EXC_MATCH", "CHECK_EG_MATCH", "POP_EXCEPT"):
                return True  # an except clause (a bare one swallows it: POP_EXCEPT before any re-raise)
            if opname == "RERAISE":
                reraise = position
                break
        if reraise is None:
            return True
        entry = code.exception_handler(reraise)
    return True
