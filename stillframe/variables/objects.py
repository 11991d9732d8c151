"""VariableTracker kinds and heap entries for user objects made in the trace, super(), bound container methods."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
import dataclasses
import types
from dataclasses import dataclass
from typing import Any, NamedTuple

from .base import DictEntry, DictVariable, VariableTracker


@dataclass(frozen=True, slots=True)
class ObjectVariable(VariableTracker):
    """A user-class instance created during the trace; its state is ``heap[oid]`` (an ObjectEntry, or for an
    exception an :class:`ExceptionEntry`)."""

    oid: int
    cls: type

    def python_type(self) -> type:
        return self.cls


@dataclass(frozen=True, slots=True)
class ObjectEntry:
    """Heap record of an object made in the trace: its class and its instance attributes, in the order they
    were first set (a ``DictEntry`` of name -> VT, so ``__dict__`` is rebuilt in eager's order)."""

    cls: type
    attrs: DictEntry
    storage: int | None = None  # for an instance of a dict subclass: the heap id of its dict part (a DictEntry)

    def with_attrs(self, attrs: DictEntry) -> "ObjectEntry":
        return ObjectEntry(self.cls, attrs, self.storage)


class TracebackEntry(NamedTuple):
    """One entry of the traceback of an exception raised in the trace: the frame it passed through (its code, the
    ``__name__`` of its globals) and the line and column span of the instruction it was at (``tb_lineno``)."""

    code: types.CodeType
    lineno: int | None
    positions: Any  # a dis.Positions
    module: str | None


@dataclass(frozen=True, slots=True)
class ExceptionEntry:
    """Heap record of an exception made in the trace (``ValueError(x)``, ``raise KeyError``, a user class's
    instance), held by an :class:`ObjectVariable` like any object made in the trace: its instance attributes in
    ``attrs`` (``__notes__`` among them, as CPython keeps it), and the state CPython keeps in C:

    * ``args``: ``BaseException.args``, a TupleVariable of the values it was given (a list stays that list);
    * ``template``: for a class whose builtin base has more C state than ``args`` (``StopIteration.value``,
      ``OSError.errno`` ...), a real instance holding it, made from constants by the C base's own code; never
      mutated (a write makes a new one). ``None`` for the others (the common case);
    * ``context`` / ``cause`` (a VT, or ``None``), ``suppress`` (``__suppress_context__``);
    * ``traceback``: a tuple of :class:`TracebackEntry`, outermost first, for the frames it was raised through
      in the trace (empty: ``__traceback__ is None``);
    * ``group``: for an exception group, ``(message, exceptions)``: a VT and a TupleVariable.

    The plan makes the exception afresh on every call from this record (``runtime/rebuild.py``), as eager makes
    a new one on every call."""

    cls: type
    attrs: DictEntry
    args: Any
    template: BaseException | None = None
    context: Any = None
    cause: Any = None
    suppress: bool = False
    traceback: tuple = ()
    group: tuple | None = None  # an exception group's message and exceptions (VTs), as its __new__ took them
    storage: None = None  # (an ObjectEntry's dict part: no exception class has one)

    def with_attrs(self, attrs: DictEntry) -> "ExceptionEntry":
        return dataclasses.replace(self, attrs=attrs)

    def replace(self, **changes: Any) -> "ExceptionEntry":
        return dataclasses.replace(self, **changes)


#: Builtin bases whose instances' contents stillframe tracks for a user subclass (``class Out(OrderedDict)``).
DICT_BASES = (dict, collections.OrderedDict)


def dict_base(cls: type) -> type | None:
    """The first of :data:`DICT_BASES` in ``cls``'s MRO (whose C methods act on the dict part), or None."""
    for klass in cls.__mro__:
        if klass in DICT_BASES:
            return klass
    return None


def storage_of(tx: Any, var: VariableTracker) -> DictVariable | None:
    """The dict part of a traced instance of a dict subclass, as a DictVariable (None for other values)."""
    if isinstance(var, ObjectVariable):
        storage = tx.heap(var.oid).storage
        return DictVariable(storage) if storage is not None else None
    return None


@dataclass(frozen=True, slots=True)
class SuperVariable(VariableTracker):
    """``super()`` inside a method of ``cls`` bound to ``self_var``."""

    cls: type
    self_var: VariableTracker

    def python_type(self) -> type:
        return super


@dataclass(frozen=True, slots=True)
class ContainerMethodVariable(VariableTracker):
    """A bound method of a traced list, dict or tuple (``xs.append``, ``d.items``). ``owner``: for a C method
    of a dict subclass's instance (``od.move_to_end``), that instance (``obj`` is its dict part): the method is
    rebuilt bound to it. ``via_super``: for ``super().update`` in a dict subclass's method, ``(instance, the
    base's unbound C method)``: rebuilt as that method bound to the instance (not ``getattr``, which would find
    the subclass's override, nor the dict part alone, which would be a copy). ``source``: where a live bound method
    was read from (the rebuild hands on that very object, not a new one from ``getattr``)."""

    obj: VariableTracker
    name: str
    owner: VariableTracker | None = None
    via_super: tuple | None = None
    source: Any = None

    def python_type(self) -> type:
        return types.BuiltinMethodType


@dataclass(frozen=True, slots=True)
class _Deleted(VariableTracker):
    """Marks an attribute deleted by the traced code (replayed as ``delattr``)."""


DELETED = _Deleted()
