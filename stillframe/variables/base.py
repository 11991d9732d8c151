"""VariableTrackers: the immutable symbolic values on the interpreter's stacks.

A VariableTracker (VT) stands for one Python value during tracing. It is a
frozen, slotted dataclass (DESIGN invariant 1): nothing changes it after it is
built. Values with identity that can change -- tensors, lists, dicts, cells --
are *references* (an int id) into the persistent heap of the trace state, so
two names bound to the same list or tensor see the same contents::

    ConstantVariable(3)                      # a Python constant, folded at trace time
    SymNodeVariable(s0, node)                # a symbolic size (dynamic shapes) and the FX node computing it
    TensorVariable(tid=7)                    # heap[7] is the TensorEntry of its current version
    ListVariable(oid=9)                      # heap[9] is a ListEntry (items: tuple of VTs)
    TupleVariable((TensorVariable(7), ConstantVariable(None)))

``source`` (where present) says where the value lives in the caller's world
(:mod:`stillframe.guards.source`).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
import functools
import types
from dataclasses import dataclass
from typing import Any

from ..guards.source import Source


class VariableTracker:
    """Base class of all VTs."""

    __slots__ = ()
    source: Source | None = None

    def python_type(self) -> type:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class NullVariable(VariableTracker):
    """CPython's NULL stack marker (pushed by ``PUSH_NULL`` / ``LOAD_GLOBAL`` with the NULL bit)."""


NULL = NullVariable()


@dataclass(frozen=True, slots=True)
class ConstantVariable(VariableTracker):
    """A Python value that is fixed for this trace: int, float, bool, str, None, dtype, device, Ellipsis ..."""

    value: Any
    source: Source | None = None

    def python_type(self) -> type:
        return type(self.value)


@dataclass(frozen=True, slots=True)
class TensorVariable(VariableTracker):
    """A tensor identity; its metadata, fake tensor and FX node live in ``heap[tid]``."""

    tid: int

    def python_type(self) -> type:
        import torch

        return torch.Tensor


@dataclass(frozen=True, slots=True, eq=False)
class SymNodeVariable(VariableTracker):
    """A symbolic ``int`` / ``float`` / ``bool`` (a size of a tensor with dynamic shapes, or arithmetic on one).

    ``value`` is the ``torch.SymInt`` (``SymFloat``, ``SymBool``) of the trace's ShapeEnv, ``node`` the FX
    node that computes it in the graph (``sym_size_int = torch.ops.aten.sym_size.int(x, 0)``). Compared by
    identity: ``==`` on two SymInts is itself symbolic.
    """

    value: Any
    node: Any

    def python_type(self) -> type:
        import torch

        return {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}.get(type(self.value), int)


@dataclass(frozen=True, slots=True)
class TupleVariable(VariableTracker):
    """A tuple (or ``torch.Size``, or a named tuple / structseq when ``cls`` says so)."""

    items: tuple
    cls: type = tuple
    source: Source | None = None

    def python_type(self) -> type:
        return self.cls


@dataclass(frozen=True, slots=True)
class SliceVariable(VariableTracker):
    """``slice(start, stop, step)`` whose parts are VTs."""

    start: VariableTracker
    stop: VariableTracker
    step: VariableTracker

    def python_type(self) -> type:
        return slice


@dataclass(frozen=True, slots=True)
class ListVariable(VariableTracker):
    """A reference to a list in the heap (``heap[oid]`` is a ``ListEntry``)."""

    oid: int

    def python_type(self) -> type:
        return list


@dataclass(frozen=True, slots=True)
class SetVariable(VariableTracker):
    """A reference to a set made in the trace (``heap[oid]`` is a ``SetEntry``); its members are constants."""

    oid: int

    def python_type(self) -> type:
        return set


@dataclass(frozen=True, slots=True)
class TensorKey:
    """A tensor as a dict key or set member made in the trace: ``torch.Tensor`` hashes by identity, so two keys
    are the same exactly when they are one tensor identity (``tid``)."""

    tid: int


@dataclass(frozen=True, slots=True)
class DequeVariable(VariableTracker):
    """A reference to a ``collections.deque`` made in the trace: its items are a ``ListEntry`` at ``heap[oid]``
    (any VTs, in order); ``maxlen`` is fixed when the deque is made."""

    oid: int
    maxlen: int | None = None

    def python_type(self) -> type:
        return collections.deque


@dataclass(frozen=True, slots=True)
class SetEntry:
    """Heap record of a set: its members, in the order a set built by the same insertions iterates them."""

    values: tuple


@dataclass(frozen=True, slots=True)
class DictVariable(VariableTracker):
    """A reference to a dict in the heap (``heap[oid]`` is a ``DictEntry``)."""

    oid: int

    def python_type(self) -> type:
        return dict


@dataclass(frozen=True, slots=True)
class NumpyArrayVariable(VariableTracker):
    """A NumPy ndarray whose data is the heap tensor ``tid`` (``t.numpy()``, or a NumPy function's result,
    computed through ``torch._numpy``). ``scalar``: a 0-d result NumPy gives as a scalar (``np.sum(a)``)."""

    tid: int
    scalar: bool = False
    source: Source | None = None  # an ndarray from outside the trace (its tensor is torch.from_numpy of it)

    def python_type(self) -> type:
        import numpy

        return numpy.ndarray


@dataclass(frozen=True, slots=True)
class DictViewVariable(VariableTracker):
    """``d.keys()``, ``d.values()`` or ``d.items()`` of a heap dict: a live view, so it sees every later write to
    ``d`` and can be iterated again, as in eager (``kind`` is ``"keys"``, ``"values"`` or ``"items"``)."""

    mapping: DictVariable
    kind: str

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())


@dataclass(frozen=True, slots=True)
class RangeVariable(VariableTracker):
    """``range(start, stop, step)`` over constants."""

    value: range

    def python_type(self) -> type:
        return range


@dataclass(frozen=True, slots=True)
class RangeItems:
    """The items of ``range_`` as VTs (``ConstantVariable``), made one at a time as they are read: an iterator
    over ``range(10**9)`` that a loop leaves after a few items holds this, never a billion VTs. A sequence for
    :class:`IteratorEntry` (``len``, an index, a slice, which is a ``RangeItems`` again)."""

    range_: range

    def __len__(self) -> int:
        return len(self.range_)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return RangeItems(self.range_[index])
        return ConstantVariable(self.range_[index])

    def __iter__(self) -> Any:
        return (ConstantVariable(i) for i in self.range_)


@dataclass(frozen=True, slots=True)
class IteratorVariable(VariableTracker):
    """An iterator made in the trace (``iter(xs)``, ``zip``, a drained generator ...) over a fixed sequence
    of VTs. Its position is state, ``heap[oid]`` (an :class:`IteratorEntry`): every reference to the
    iterator -- a local, the loop's stack slot, a list -- sees it advance, as in eager."""

    oid: int
    cls: type | None = None  # the type it has where it is not a tuple_iterator (a range's: range_iterator)

    def python_type(self) -> type:
        return self.cls or type(iter(()))


@dataclass(frozen=True, slots=True)
class LiveIteratorVariable(VariableTracker):
    """A loop's iterator that crossed a graph break: its items are read from the live list at ``items_source``.

    Only what the trace consumes is guarded (``len(items) > i`` for each item
    taken, ``len(items) == i`` where it ran out), so one plan serves every
    iteration of a loop whose body breaks; at the next break the remaining
    items are handed on (``items[index:]``).
    """

    items_source: Source
    values: tuple
    index: int = 0
    obj_id: int = 0  # id() of the live iterator: every reference to it is rebuilt as one new iterator
    kind: str | None = None  # the builtin that made it (IteratorEntry.kind)
    # the type of CPython's own iterator it steps (ResumableIterator._real, guarded), or None: taken only for real
    real: type | None = None
    # the type eager's iterator has where the stand-in knows it (over the user's list: list_iterator; over a dict or
    # a set: dict_keyiterator ..., set_iterator; see standins.eager_type), guarded with the stand-in's type
    cls: type | None = None

    def python_type(self) -> type:
        if self.real is None and self.kind is None and type(self.values) is range:
            return type(iter(self.values))  # range_iterator
        return self.real or {"zip": zip, "enumerate": enumerate}.get(self.kind) or self.cls or type(iter(()))


@dataclass(frozen=True, slots=True)
class UserFunctionVariable(VariableTracker):
    """A Python function whose bytecode is inlined when called."""

    fn: Any
    source: Source | None = None

    def python_type(self) -> type:
        return type(self.fn)


@dataclass(frozen=True, slots=True)
class NestedFunctionVariable(VariableTracker):
    """A function made during the trace by ``MAKE_FUNCTION`` (a closure, lambda, comprehension or genexpr).

    ``defaults`` is a tuple of VTs, ``kwdefaults`` a tuple of ``(name, VT)``
    pairs, ``closure`` the cell references of its free variables (heap ids of
    cells made in the trace, or ``("real", cell, source)`` for live cells).
    """

    code: Any
    qualname: str
    defaults: tuple
    kwdefaults: tuple
    closure: tuple
    globals: Any
    globals_module: str | None
    attrs: int | None = None  # heap id of a DictEntry: attributes the trace set (functools.wraps, f.x = ...)

    def python_type(self) -> type:
        return types.FunctionType


@dataclass(frozen=True, slots=True)
class PartialVariable(VariableTracker):
    """``functools.partial(fn, *args, **kwargs)`` made during the trace (``kwargs``: ``(name, VT)`` pairs)."""

    fn: VariableTracker
    args: tuple
    kwargs: tuple

    def python_type(self) -> type:
        return functools.partial


@dataclass(frozen=True, slots=True)
class UserMethodVariable(VariableTracker):
    """A Python function bound to ``self_var`` (a method), inlined when called."""

    fn: Any
    self_var: VariableTracker
    source: Source | None = None

    def python_type(self) -> type:
        return types.MethodType


@dataclass(frozen=True, slots=True)
class TorchFunctionVariable(VariableTracker):
    """A function from torch (``torch.add``, ``F.relu``, ``operator.add`` on tensors ...) that becomes a graph node."""

    fn: Any
    source: Source | None = None

    def python_type(self) -> type:
        return type(self.fn)


@dataclass(frozen=True, slots=True)
class TensorMethodVariable(VariableTracker):
    """``tensor.name`` as a bound method (``x.view``, ``x.add_``); calling it becomes a ``call_method`` node.
    ``source``: where a live bound method was read from (the rebuild hands on that very object)."""

    name: str
    self_var: TensorVariable
    source: Source | None = None

    def python_type(self) -> type:
        return types.BuiltinMethodType


@dataclass(frozen=True, slots=True)
class BuiltinVariable(VariableTracker):
    """A Python builtin (``len``, ``isinstance``, ``getattr`` ...) with a rule in :mod:`stillframe.variables.builtins`."""

    fn: Any
    source: Source | None = None

    def python_type(self) -> type:
        return type(self.fn)


@dataclass(frozen=True, slots=True)
class NNModuleVariable(VariableTracker):
    """A live ``torch.nn.Module`` reached through ``source``; its attributes are read from the real module."""

    module: Any
    source: Source | None = None

    def python_type(self) -> type:
        return type(self.module)


@dataclass(frozen=True, slots=True)
class PythonObjectVariable(VariableTracker):
    """Any other live Python object (a module like ``math``, a class, a user object, a config) read through ``source``.

    Reading its attributes wraps the attribute's live value with an
    ``AttrSource``; calling it needs a rule (builtins table, class
    construction) or it is unsupported.
    """

    value: Any
    source: Source | None = None

    def python_type(self) -> type:
        return type(self.value)


@dataclass(frozen=True, slots=True)
class GradModeVariable(VariableTracker):
    """A grad-mode context manager (``torch.no_grad()``, ``torch.enable_grad()``, ``torch.set_grad_enabled(b)``).

    ``mode`` is the grad mode inside the block. ``set_grad_enabled`` takes
    effect when it is called, so ``applied`` is True and ``previous`` holds the
    mode to restore on exit; the others take effect on ``__enter__``.
    """

    mode: bool
    applied: bool = False
    previous: bool | None = None

    def python_type(self) -> type:
        import torch

        return {False: torch.no_grad, True: torch.enable_grad}[self.mode]


@dataclass(frozen=True, slots=True)
class ContextExitVariable(VariableTracker):
    """The ``__exit__`` that ``BEFORE_WITH`` pushed for a grad-mode block: calling it restores ``restore``."""

    restore: bool

    def python_type(self) -> type:
        return types.MethodType


@dataclass(frozen=True, slots=True)
class AutocastVariable(VariableTracker):
    """``torch.autocast(device_type, dtype, enabled, cache_enabled)`` not entered yet."""

    args: tuple  # (device_type, dtype, enabled, cache_enabled)

    def python_type(self) -> type:
        import torch

        return torch.autocast


@dataclass(frozen=True, slots=True)
class AutocastExitVariable(VariableTracker):
    """The ``__exit__`` of an entered autocast block; ``node`` is the graph's ``_enter_autocast`` result.

    ``node`` is ``None`` for a block entered for real before this trace (it crossed a graph break): exiting
    it is then a real step.
    """

    node: Any
    args: tuple = ()
    source: Source | None = None

    def python_type(self) -> type:
        return types.MethodType


@dataclass(frozen=True, slots=True)
class InferenceModeVariable(VariableTracker):
    """``torch.inference_mode(mode)`` not entered yet (``mode`` True: inference mode on inside the block)."""

    mode: bool

    def python_type(self) -> type:
        import torch

        return torch.inference_mode


@dataclass(frozen=True, slots=True)
class InferenceModeExitVariable(VariableTracker):
    """The ``__exit__`` of an entered ``torch.inference_mode(mode)`` block; ``node`` is the graph's
    ``_enter_inference_mode`` result, and ``previous`` the traced ``(inference_mode, grad_enabled)`` that leaving
    restores (entering sets both: grad mode is ``not mode`` inside).

    ``node`` is ``None`` for a block entered for real before this trace (it crossed a graph break): leaving it is
    then a real step, as for autocast.
    """

    node: Any
    mode: bool = True
    previous: tuple = (False, True)
    source: Source | None = None

    def python_type(self) -> type:
        return types.MethodType


@dataclass(frozen=True, slots=True)
class CellVariable(VariableTracker):
    """A closure cell pushed by ``LOAD_CLOSURE``: a heap id (a cell made in the trace) or ``("real", cell, source)``."""

    ref: Any


@dataclass(frozen=True, slots=True)
class LazyArgument(VariableTracker):
    """An argument of the compiled frame not read yet: wrapped (and guarded) on its first ``LOAD_FAST``.

    Arguments the traced code never reads are therefore never guarded.
    """

    value: Any
    source: Source

    def python_type(self) -> type:
        return type(self.value)


@dataclass(frozen=True, slots=True)
class ListEntry:
    """Heap record of a list: its items, and the source of the real list if it came from the caller.

    A caller's list starts *unread* (``items is None``, ``live`` holds the real
    list): appending to it records ``appended`` without reading or guarding
    its contents (a log the program appends to does not specialize the trace);
    the first read of its contents wraps and guards them.
    """

    items: tuple | None
    source: Source | None = None
    live: Any = None
    appended: tuple = ()


def same_key(stored: Any, key: Any) -> bool:
    """Whether looking up ``key`` in a dict (or set) finds the key ``stored`` there (both as
    ``rules.known.hash_key`` gives them), as CPython's lookup decides: ``stored is key``, or equal hashes and
    ``stored == key``. So ``True`` finds ``1``, ``3`` finds ``3.0`` and ``(3, 2)`` finds ``torch.Size([3, 2])``.
    Only keys whose ``__hash__`` and ``__eq__`` are C code (builtins, ``torch.Size``, ``torch.dtype``; tuples and
    frozensets of them) are hashed and compared so; no user ``__hash__`` runs at trace time: other keys match
    an equal key of their own type only. A tensor key (:class:`TensorKey`) is one tensor identity."""
    if stored is key:
        return True
    cls = type(stored)
    if cls is type(key) and cls in _PLAIN_KEYS:  # (the common case, quickly: equal values hash alike)
        return stored == key
    if cls is TensorKey or type(key) is TensorKey:
        return stored == key
    if not (_c_level_key(stored) and _c_level_key(key)):
        return cls is type(key) and stored == key
    return hash(stored) == hash(key) and bool(stored == key)


_PLAIN_KEYS = frozenset({str, int, float, bool, bytes, complex, type(None)})


def _c_level_key(value: Any) -> bool:
    cls = type(value)
    if cls not in _PLAIN_KEYS and (isinstance(getattr(cls, "__eq__", None), types.FunctionType) or
                                   isinstance(getattr(cls, "__hash__", None), types.FunctionType)):
        return False
    if issubclass(type(value), (tuple, frozenset)):  # (by type: see builder.of_type)
        return all(_c_level_key(v) for v in value)
    return True


HEAPTYPE_FLAG = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type()), not by C


def is_builtin_class(cls: type) -> bool:
    """Whether ``cls`` is one of CPython's own C classes (``int``, ``dict``, ``ValueError`` ...). Not the same as
    ``cls.__module__ == "builtins"``: a class statement run by ``exec`` in a namespace without ``__name__`` makes a
    user class whose ``__module__`` is ``"builtins"`` too (the parity probes of session 33 define classes so)."""
    return cls.__module__ == "builtins" and not cls.__flags__ & HEAPTYPE_FLAG


@dataclass(frozen=True, slots=True)
class DictEntry:
    """Heap record of a dict: ``items`` is a tuple of ``(key, VT)`` pairs in insertion order; keys are Python constants."""

    items: tuple
    source: Source | None = None
    live: Any = None  # the real dict, when it came from outside (for replaying mutations on it)
    # an outside dict whose key set is not guarded yet: lookups guard one key each (Tracer.dict_lookup);
    # anything that sees all keys (Tracer.dict_entry) guards the key set first
    keys_unguarded: bool = False
    # where CPython's table holds each item (a DictLayout), for a dict made in the trace whose every change the
    # trace followed; None where unknown (an outside dict, one made or changed by a call whose sizing it does
    # not follow). Tracer.set_dict_entry keeps it; a dict iterator over it advances as CPython's does
    layout: Any = None
    # how many writes changed its keys or their order (Tracer.set_dict_entry): a value written keeps it, so an
    # iterator watching the dict (IteratorEntry.watch) tells a value written from a key deleted, added or moved
    structure: int = 0

    def get(self, key: Any, default: Any = None) -> Any:
        for k, v in self.items:
            if same_key(k, key):
                return v
        return default

    def _with_live(self, live: Any) -> "DictEntry":
        return DictEntry(self.items, self.source, live)

    def set(self, key: Any, value: Any) -> "DictEntry":
        """The dict after ``d[key] = value``: an equal key already there is kept, with the new value (CPython
        keeps the first key object: ``d = {1: 'a'}; d[True] = 'b'`` leaves ``{1: 'b'}``)."""
        items = list(self.items)
        for i, (k, _) in enumerate(items):
            if same_key(k, key):
                items[i] = (k, value)
                break
        else:
            items.append((key, value))
        return DictEntry(tuple(items), self.source, self.live)

    def without(self, key: Any) -> "DictEntry":
        """The dict after ``del d[key]`` (or ``d.pop(key)``) of a key it holds, as :meth:`get` finds it."""
        return DictEntry(tuple((k, v) for k, v in self.items if not same_key(k, key)), self.source, self.live)


def _log2_keysize(minsize: int) -> int:
    """CPython's ``calculate_log2_keysize``: the log2 of the table size a dict grows to for ``minsize``."""
    return (((minsize | 8) - 1) | 7).bit_length()


@dataclass(frozen=True, slots=True)
class DictLayout:
    """CPython's table of a dict (``PyDictKeysObject``, combined), as far as iteration sees it: ``slots``, the entry
    index of each item (ascending, in insertion order); ``nentries``, the next free entry; ``usable``, the entries
    left before the table is rebuilt; ``log2size``; ``unicode``, whether it is a table of exact ``str`` keys only
    (``None``: the shared empty table). A key deleted leaves its entry dead (``slots`` skips it); a new key takes
    the next entry, after rebuilding the table (entries compacted, in order) where none is usable: a dict
    iterator, which walks entry indexes and counts the items it expects (``dictiter_iternextkey``), then skips
    deleted keys, yields added ones and sees the rebuild. The same in CPython 3.11 to 3.13."""

    slots: tuple = ()
    nentries: int = 0
    usable: int = 0
    log2size: int = 0
    unicode: bool | None = None

    @staticmethod
    def built(keys: tuple, n: int) -> "DictLayout":
        """A dict literal's (``BUILD_MAP``, ``BUILD_CONST_KEY_MAP``: ``_PyDict_FromItems``) of ``n`` items, ``keys``
        the distinct ones: presized beyond 5 items, else the empty table its items are then inserted into."""
        if n <= 5:
            layout = DictLayout()
            for key in keys:
                layout = layout.insert(key)
            return layout
        log2size = _log2_keysize((n * 3 + 1) // 2)
        used = len(keys)
        return DictLayout(tuple(range(used)), used, (2 << log2size) // 3 - used, log2size,
                          all(type(k) is str for k in keys))

    def insert(self, key: Any) -> "DictLayout":
        """After ``insertdict`` of a new ``key``."""
        if self.unicode is None:  # the shared empty table: insert_to_emptydict makes a table of 8
            return DictLayout((0,), 1, 4, 3, type(key) is str)
        layout = self
        if layout.unicode and type(key) is not str:  # a table of str keys is rebuilt general first
            layout = layout._resized(False)
        if layout.usable <= 0:
            layout = layout._resized(layout.unicode)
        return DictLayout(layout.slots + (layout.nentries,), layout.nentries + 1, layout.usable - 1, layout.log2size,
                          layout.unicode)

    def _resized(self, unicode: bool) -> "DictLayout":
        """``insertion_resize``: a table of ``GROWTH_RATE`` (3 per item), the entries compacted in order."""
        used = len(self.slots)
        log2size = _log2_keysize(used * 3)
        return DictLayout(tuple(range(used)), used, (2 << log2size) // 3 - used, log2size, unicode)

    def without(self, index: int) -> "DictLayout":
        """After deleting the item at ``index`` (its entry stays dead)."""
        return DictLayout(self.slots[:index] + self.slots[index + 1:], self.nentries, self.usable, self.log2size,
                          self.unicode)


@dataclass(frozen=True, slots=True)
class IteratorEntry:
    """Heap record of an iterator: its items, the position of the next one, and the builtin that made it
    (``"map"``, ``"filter"``, ``"zip"``, ``"enumerate"``; ``None`` for any other): the type it has when it
    leaves the function.

    An iterator over a heap list, dict or set (``over``: its heap id) holds no items: each ``next`` reads the
    container as it is then (``Tracer.iterator_next``), as CPython's ``listiterator`` (``lst[index]`` while
    ``index < len(lst)``) and ``dictiter`` / ``setiter`` (``size``: the length when made; another length raises,
    and keeps raising: ``size == -1``) do. ``view``: ``"list"``, ``"keys"``, ``"values"``, ``"items"`` or ``"set"``;
    ``keys``: a dict's keys (a set's members) when made; ``start``: ``enumerate``'s first count. Exhausted, it
    drops the container (``over`` is ``None`` again), as CPython's iterators do."""

    items: tuple
    index: int = 0
    kind: str | None = None
    over: int | None = None
    view: str | None = None
    size: int = 0
    keys: tuple = ()
    start: int = 0
    seen: tuple | None = None  # the container's contents when its keys were last found unchanged
    # over a dict whose DictLayout was known when made: the entry index it reads next and the items it still
    # expects (CPython's di_pos and di->len); None: it follows ``keys`` instead
    pos: int | None = None
    left: int = 0
    # ``(container, oid, entry, view, fn)``: an iterator holding the items of a container whose CPython iterator
    # sees its changes (a deque, an OrderedDict, a defaultdict, ``reversed`` of a dict): ``heap[oid]`` was ``entry``
    # when it was made; while it still is (for a dict: while its keys and ``structure`` are), the items held are
    # CPython's (a dict's values read afresh by key: ``keys``), and at a break it is CPython's own
    # ``fn(container<view>)`` advanced ``index`` items; once it is not, the trace cannot follow it
    watch: tuple | None = None

    @property
    def rest(self) -> tuple:
        return self.items[self.index:]


@dataclass(frozen=True, slots=True)
class GeneratorVariable(VariableTracker):
    """A generator object made in the trace (calling a generator function); its state is ``heap[oid]``.
    ``made_by``: the builtin iterator type it stands for (``map``, ``itertools.chain`` ...) when it runs one of
    :mod:`stillframe.rules.polyfills`, reported as its type; ``None`` for the user's own generators."""

    oid: int
    made_by: type | None = None

    def python_type(self) -> type:
        return self.made_by or types.GeneratorType


@dataclass(frozen=True, slots=True)
class GeneratorEntry:
    """Heap record of a generator: its suspended frame (``None`` once it has finished), and the code object of its
    function (a finished generator is rebuilt as a finished generator of that code)."""

    frame: Any
    code: Any = None

    def finished(self) -> GeneratorEntry:
        return GeneratorEntry(None, self.code)


@dataclass(frozen=True)
class AttrsView:
    """The ``live`` of a DictEntry that is a snapshot of a traced object's ``__dict__`` (heap id ``oid``)."""

    oid: int


@dataclass(frozen=True, slots=True)
class CellEntry:
    """Heap record of a cell created in the trace: its contents (``None`` means empty)."""

    contents: VariableTracker | None = None


