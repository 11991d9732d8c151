"""The persistent trace state: frames, heap, guards, side effects -- all immutable.

``TraceState`` is the whole state of the symbolic interpreter. Every field is
either an immutable value (tuples of frozen dataclasses) or a persistent map
(``immutables.Map``, a HAMT: ``m.set(k, v)`` returns a new map sharing
structure with ``m``). Interpreting an instruction maps one state to the next;
nothing is ever updated in place (DESIGN invariant 2).

Checkpoint and rollback are therefore O(1)::

    token = tracer.checkpoint()   # (state reference, number of FX nodes)
    ...                           # interpret any instructions
    tracer.restore(token)         # state = token.state; erase FX nodes past the mark

The FX graph is the one append-only structure outside the state; it rolls
back by erasing the nodes added after the mark (:mod:`stillframe.graph.builder`).

Strategy, field by field:

* ``frames``: a tuple of :class:`Frame` (innermost last). A frame's value stack
  is a tuple (short: copying it is cheaper than a linked list), its locals and
  cells are ``immutables.Map`` keyed by variable name.
* ``heap``: ``immutables.Map`` from object id to an immutable entry
  (``TensorEntry``, ``ListEntry``, ``DictEntry``, ``CellEntry``). Aliasing is
  sharing an id.
* ``guards``: ``immutables.Map`` keyed by the guard's expression, so a guard
  added twice is one guard and a rollback drops guards added after the mark.
* ``inputs``: :class:`PLog` of ``(source, tid)`` graph inputs, in placeholder order.
* ``memo``: ``immutables.Map`` from a source name / ``id()`` of a live object
  to the VT built for it, so a value read twice is one identity.
* ``fakes``: ``immutables.Map`` from ``id(fake tensor)`` to ``(tid, fake)``, to
  find the tracked base of a view returned by an op (the fake is kept, so its
  id cannot be reused by a newer fake while the entry exists).
* ``side_effects``: ``immutables.Map`` of recorded mutations of outside
  objects, target -> ``(order, payload)`` (:mod:`stillframe.variables.objects`).
* ``prologue``: :class:`PLog` of ``(source, method, args)`` calls applied to live
  inputs before the graph runs (``x.requires_grad_()`` on an input the graph
  has not read yet: autograd metadata a graph cannot carry).
* ``grad_enabled``: the grad mode the traced code runs under.
* ``autocast``: the stack of autocast settings ``(device_type, dtype, enabled,
  cache_enabled)`` in force (fake tensors are propagated under them).
* ``inference_mode``: whether the traced code runs under ``torch.inference_mode()``
  (fake tensors are propagated under it, so they are inference tensors where eager's are).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

import immutables
from ..bytecode.reader import Bytecode


@dataclass(frozen=True, slots=True)
class PLog:
    """A persistent append-only log (a cons list): ``log.append(x)`` is O(1) and returns a new log."""

    head: Any = None
    tail: "PLog | None" = None
    length: int = 0

    def append(self, item: Any) -> "PLog":
        return PLog(item, self, self.length + 1)

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[Any]:
        items = []
        node: PLog | None = self
        while node is not None and node.length:
            items.append(node.head)
            node = node.tail
        return iter(reversed(items))


EMPTY_LOG = PLog()
EMPTY_MAP: immutables.Map = immutables.Map()


# tuple.__new__ without the NamedTuple's generated __new__: for the copies the interpreter makes per instruction
_make = tuple.__new__


class Frame(NamedTuple):
    """One symbolic Python frame: its code, instruction pointer, value stack, locals and cells.

    ``ip`` is the index of the next instruction. ``fn_source`` and ``globals``
    say how this frame's globals and closure are reached from the compiled
    frame (for sources of values it loads). ``kw_names`` holds the names set
    by ``KW_NAMES`` for the next ``CALL``. ``yields`` is ``None`` for a plain
    function and the tuple of values yielded so far for a generator (which is
    run to completion when called, and returns an iterator over them).

    A ``NamedTuple`` rather than a frozen dataclass: it is as immutable, and
    the interpreter makes one per instruction, which a tuple does 2-3x faster.
    """

    code: Bytecode
    ip: int
    stack: tuple
    locals: immutables.Map
    cells: immutables.Map
    globals: dict
    globals_module: str | None
    fn: Any = None
    fn_source: Any = None
    kw_names: tuple = ()
    yields: tuple | None = None
    generator: int | None = None  # heap id of the GeneratorEntry this frame steps (next(gen)), if any

    def _with(self, **changes: Any) -> "Frame":
        return self._replace(**changes)

    def with_stack(self, stack: tuple) -> "Frame":
        return _make(Frame, (self.code, self.ip, stack, self.locals, self.cells, self.globals, self.globals_module,
                             self.fn, self.fn_source, self.kw_names, self.yields, self.generator))

    def with_ip(self, ip: int) -> "Frame":
        return _make(Frame, (self.code, ip, self.stack, self.locals, self.cells, self.globals, self.globals_module,
                             self.fn, self.fn_source, self.kw_names, self.yields, self.generator))

    def with_locals(self, locals: immutables.Map) -> "Frame":
        return self._with(locals=locals)

    def with_cells(self, cells: immutables.Map) -> "Frame":
        return self._with(cells=cells)

    def with_kw_names(self, kw_names: tuple) -> "Frame":
        return self._with(kw_names=kw_names)

    def with_yields(self, yields: tuple) -> "Frame":
        return self._with(yields=yields)


class TraceState(NamedTuple):
    """The complete, immutable state of one trace (see the module docstring for the strategy).

    A ``NamedTuple`` (like :class:`Frame`): a new one is made for nearly every instruction.
    """

    frames: tuple
    heap: immutables.Map = EMPTY_MAP
    guards: immutables.Map = EMPTY_MAP
    inputs: PLog = EMPTY_LOG
    memo: immutables.Map = EMPTY_MAP
    fakes: immutables.Map = EMPTY_MAP
    side_effects: immutables.Map = EMPTY_MAP
    prologue: PLog = EMPTY_LOG
    grad_enabled: bool = True
    next_id: int = 0
    autocast: tuple = ()
    handling: Any = None  # the exception being handled by a traced `except` (a VT), as sys.exception() says
    inference_mode: bool = False

    def replace(self, **changes: Any) -> "TraceState":
        return self._replace(**changes)

    def with_top(self, frame: Frame) -> "TraceState":
        return _make(TraceState, (self.frames[:-1] + (frame,), self.heap, self.guards, self.inputs, self.memo,
                                  self.fakes, self.side_effects, self.prologue, self.grad_enabled, self.next_id,
                                  self.autocast, self.handling, self.inference_mode))


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A token from ``checkpoint()``: the state reference and the FX graph's length at that moment.

    ``last_node`` (the newest node at the mark) lets ``restore`` refuse a token
    whose nodes were already erased by restoring an older one.
    """

    state: TraceState
    graph_mark: int
    last_node: Any = None


def make_frame(code: Bytecode, locals_: dict, globals_: dict, globals_module: str | None,
               fn: Any = None, fn_source: Any = None, cells: Any = EMPTY_MAP) -> Frame:
    """A fresh frame at instruction 0 with ``locals_`` bound."""
    return Frame(code, 0, (), EMPTY_MAP.update(locals_), cells, globals_, globals_module, fn, fn_source, ())
