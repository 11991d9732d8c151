"""Stand-in objects: live values that hold traced state between graphs (NULL, loop iterators, grad-mode and
autocast exits).

A plan rebuilds them at a graph break; the builder recognises them when tracing resumes.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import operator
import types
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from .. import compat
from ..guards.guard import ITERATED, is_iterated  # noqa: F401 (is_iterated: the stand-ins' question)


class _Null:
    """CPython's NULL stack marker, as a live value between graphs."""

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()


class ResumableIterator:
    """An iterator over a list of values at position ``index`` (what ``FOR_ITER`` loops over); ``kind``: the
    builtin that made it (``"zip"``, ``"enumerate"``) or ``None``, so it leaves the function as that type
    (:func:`as_builtin`).

    ``items`` may be the tail of the user's own list (:class:`ListTail`): then it is CPython's ``listiterator``
    (``items[index]`` while ``index < len(items)``, read at each ``next``). ``over``: a dict or set whose ``len``
    was ``size`` when the iterator was made; each ``next`` raises, as ``dictiter`` / ``setiter`` do, once the
    length differs (``size`` becomes -1: it keeps raising). Exhausted, it drops its list and container, as
    CPython's iterators do.

    Over a dict (``view``: ``"keys"``, ``"values"`` or ``"items"``), ``keys`` are the keys still to come, in the
    dict's entry order; ``known``: every key the dict had when the iteration began, default its keys now; ``left``:
    how many entries it still expects, default as many as ``keys`` has from ``index`` on. Each
    ``next`` is CPython's ``dictiter_iternext*``: the next entry still in the dict (a key deleted meanwhile is
    skipped; keys added meanwhile come after all the known ones, in insertion order), its value read now; one
    found after as many entries as the dict had left when the iterator was made raises ``RuntimeError:
    dictionary keys changed during iteration``, which ends it. (Exact while the dict's table is not rebuilt,
    which keeping the size does not force.)

    ``real``: CPython's own iterator over ``over`` (a dict, deque or ``OrderedDict`` rebuilt as eager's), standing
    where eager's stands (:func:`real_iterator`): then each ``next`` is its ``next``, so CPython itself raises when
    the container changes ("deque mutated during iteration", "dictionary keys changed during iteration"), and
    ``over`` counts as iterated (:func:`is_iterated`) until it is exhausted."""

    # underscored: user code duck-types iterators (C OrderedDict.update calls an ``items`` attribute)
    __slots__ = ("_items", "_index", "_kind", "_over", "_size", "_keys", "_view", "_known", "_left", "_real",
                 "_release", "_cls", "__weakref__")

    def __init__(self, items: list, index: int = 0, kind: str | None = None, over: Any = None, size: int = 0,
                 keys: list | None = None, view: str | None = None, known: Any = None, left: int | None = None,
                 real: Any = None, cls: type | None = None):
        self._cls = cls  # the type of eager's iterator where the trace knew it (IteratorVariable.cls)
        self._items = items
        self._index = index
        self._kind = kind
        self._over = over
        self._size = size
        self._view = view
        self._keys = keys
        self._known = self._left = None
        # CPython's own iterator over the container, standing where eager's stands (see :func:`real_iterator`):
        # each next is its next, so CPython itself sees the container change ("deque mutated during iteration")
        self._real = self._release = None
        self._cls = eager_type(self)  # kept when it drops its items, exhausted
        if real is not None:
            self._real = real
            _ITERATED[id(over)] = _ITERATED.get(id(over), 0) + 1
            self._release = weakref.finalize(self, _release, id(over))
            return
        if isinstance(over, dict) and view in ("keys", "values", "items"):
            self._keys = list(items) if keys is None else list(keys)
            self._known = set(over) if known is None else known
            # CPython's di_len: the entries it still expects
            self._left = len(self._keys) - index if left is None else left

    def __iter__(self) -> "ResumableIterator":
        return self

    def __next__(self) -> Any:
        if self._real is not None:
            try:
                item = next(self._real)
            except StopIteration:  # exhausted: it stays CPython's (which decides what comes next, after an error too)
                self._items, self._index = [], 0
                self._release()
                raise
            self._index += 1
            return item
        if self._over is not None and len(self._over) != self._size:
            self._size = -1
            raise RuntimeError(("Set" if isinstance(self._over, (set, frozenset)) else "dictionary")
                               + " changed size during iteration")
        if self._left is not None:
            return self._dict_next()
        if self._index >= len(self._items):
            self._items, self._index, self._over, self._keys = [], 0, None, None
            raise StopIteration
        self._index += 1
        return self._items[self._index - 1]

    def _eager(self) -> Any:
        """A new iterator of eager's type standing where this one stands (CPython's own where it steps one; a
        ``listiterator`` over the user's list; over a dict or set, an iterator over the items still to come, as
        ``dictiter_reduce`` makes its list: a copy is drained, this one does not move), for the protocols a
        stand-in cannot follow as itself: pickling and copying reduce the iterator, and the result must be
        eager's (the stand-in itself never reaches user code). Raises RuntimeError where the dict or set changed
        size, as CPython's reduce does when it drains its copy."""
        if self._real is not None:
            return self._real
        made = as_builtin_at(self, self._index)
        if not isinstance(made, ResumableIterator):
            return made
        made._known = set(made._known) if made._known is not None else None
        rest = [item for item in made]  # (no list(made): it asks __length_hint__, which asks this)
        if self._cls is reversed:  # reversed(tuple): eager's reduces to reversed over the sequence
            return reversed(tuple(rest[::-1]))
        return iter(rest) if self._over is not None or self._cls is type(iter([])) else iter(tuple(rest))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self._eager().__reduce_ex__(protocol)

    def __reduce__(self) -> Any:
        return self._eager().__reduce__()

    def __length_hint__(self) -> int:
        return operator.length_hint(self._eager())

    # stillframe's own code: a compiled caller (copy.copy traced) runs them for real (rules.disable.is_disabled)
    __reduce_ex__.__stillframe_disable__ = __reduce__.__stillframe_disable__ = True  # type: ignore[attr-defined]
    __length_hint__.__stillframe_disable__ = True  # type: ignore[attr-defined]

    def _dict_next(self) -> Any:
        d, keys = self._over, self._keys
        found = self._next_present()
        if found is None:  # past every known entry: keys added since come next
            added = [k for k in d if k not in self._known]
            self._known.update(added)
            keys.extend(added)
            found = self._next_present()
        if found is None or self._left == 0:
            self._items, self._index, self._over, self._keys, self._left = [], 0, None, None, None
            if found is None:
                raise StopIteration
            raise RuntimeError("dictionary keys changed during iteration")
        self._index, self._left = found + 1, self._left - 1
        key = keys[found]
        return key if self._view == "keys" else d[key] if self._view == "values" else (key, d[key])

    def _next_present(self) -> int | None:
        """The position of the first key from ``index`` on that the dict still has."""
        return next((i for i in range(self._index, len(self._keys)) if self._keys[i] in self._over), None)


#: ``id`` of each container a ``ResumableIterator`` iterates with CPython's own iterator (``_real``), and how many do:
#: a trace changing such a container's keys runs that change for real (:func:`is_iterated`), as eager makes it.
_ITERATED = ITERATED


def _release(key: int) -> None:
    count = _ITERATED.get(key, 0) - 1
    if count > 0:
        _ITERATED[key] = count
    else:
        _ITERATED.pop(key, None)


def eager_type(it: ResumableIterator) -> type | None:
    """The type of eager's iterator that ``it`` stands for, where it says: over the user's list, ``list_iterator``
    (or ``enumerate``); over a dict, its view's (``dict_keyiterator`` ...); over a set, ``set_iterator``."""
    if it._cls is not None:
        return it._cls
    if type(it._items) is EnumerateTail or it._kind == "enumerate":
        return enumerate
    if type(it._items) is ListTail:
        return type(iter([]))
    if isinstance(it._over, (set, frozenset)):
        return type(iter(set()))
    if isinstance(it._over, dict) and it._view in ("keys", "values", "items"):
        return type(iter(getattr({}, it._view)()))
    return None


def finished_generator(code: types.CodeType) -> types.GeneratorType:
    """A generator of ``code`` (a generator function's) that has finished, as one the trace ran to its end:
    ``next`` raises StopIteration, ``close()`` returns None, ``gi_frame`` is None. Made by calling a function of
    that code on stand-in arguments and closing it before it starts, so none of its body runs."""
    cells = tuple(types.CellType() for _ in code.co_freevars)
    fn = types.FunctionType(code, {}, code.co_name, None, cells or None)
    kwonly = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    generator = fn(*[None] * code.co_argcount, **dict.fromkeys(kwonly))
    generator.close()
    return generator


def has_keys(d: dict, keys: list) -> bool:
    """Whether the dict ``d`` has exactly ``keys``, in that order (each the same object, or an equal str, int,
    float, bool or bytes: no user ``__eq__`` runs, no tensor is compared by value)."""
    return len(d) == len(keys) and all(a is b or (type(a) is type(b) and type(a) in (str, int, float, bool, bytes)
                                                  and a == b) for a, b in zip(d, keys))


def real_iterator(made: Any, count: int) -> Any:
    """CPython's iterator ``made`` (``iter(d.items())``, ``reversed(od)``, ``iter(q)`` over the rebuilt container)
    after ``count`` items: where eager's stands when the container is as eager's (its state, a dict's table)."""
    for _ in range(count):
        next(made)
    return made


class ListTail:
    """The items of the list ``items`` from ``start`` on, read when asked (a ``ResumableIterator``'s items over the
    user's list: its position stays 0 at every graph break, so one plan serves every iteration of a loop)."""

    __slots__ = ("_list", "_start")

    def __init__(self, items: list, start: int):
        self._list = items
        self._start = start

    def __len__(self) -> int:
        return max(0, len(self._list) - self._start)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(self)[i]
        if not 0 <= i < len(self):
            raise IndexError("list index out of range")
        return self._list[self._start + i]

    def __iter__(self) -> Any:
        return iter(self._list[self._start:])

    def shifted(self, index: int) -> "ListTail":
        """The same tail ``index`` items further on."""
        return ListTail(self._list, self._start + index)


class EnumerateTail(ListTail):
    """``enumerate`` over the list ``items`` from ``start`` on, counting from ``count``: ``(count + i, items[start +
    i])``, read when asked (as :class:`ListTail`, for ``enumerate(lst)`` whose loop breaks the graph)."""

    __slots__ = ("_count",)

    def __init__(self, items: list, start: int, count: int):
        super().__init__(items, start)
        self._count = count

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(self)[i]
        return self._count + i, super().__getitem__(i)

    def __iter__(self) -> Any:
        return iter(list(enumerate(self._list[self._start:], self._count)))

    def shifted(self, index: int) -> "EnumerateTail":
        return EnumerateTail(self._list, self._start + index, self._count + index)


def resume_at(it: ResumableIterator, index: int) -> ResumableIterator:
    """A ``ResumableIterator`` at position 0 over what ``it`` has left from ``index`` on (where a trace that read
    it left it): still over the same list, dict or set."""
    items = it._items
    rest = items.shifted(index) if isinstance(items, ListTail) else items[index:]
    keys = None if it._keys is None else it._keys[index:]
    return ResumableIterator(rest, 0, it._kind, it._over, it._size, keys, it._view, it._known, it._left,
                             cls=it._cls)


def resume_in_place(it: ResumableIterator, index: int) -> ResumableIterator:
    """``it`` itself, moved to position 0 over what it has left from ``index`` on (as :func:`resume_at` makes a new
    one): a real object that holds it already (a generator or ``map`` made for real over it, a ``tee``) sees the
    position every other reference sees, and a trace that wraps it next finds it at index 0, as before."""
    fresh = resume_at(it, index)
    it._items, it._index, it._keys, it._left = fresh._items, 0, fresh._keys, fresh._left
    return it


def list_iterator(items: list, index: int) -> Any:
    """CPython's iterator over the list ``items`` standing at ``index`` (``listiterator.__setstate__``)."""
    it = iter(items)
    it.__setstate__(index)
    return it


def as_builtin_at(it: ResumableIterator, index: int) -> Any:
    """What the live iterator ``it`` is where it leaves the function, standing at ``index``: CPython's
    ``listiterator`` (or ``enumerate`` over one) still over the user's list, an iterator of the type the builtin
    that made it gives (:func:`as_builtin`), else a ``ResumableIterator`` (:func:`resume_at`)."""
    items = it._items
    if type(items) is EnumerateTail:
        return enumerate(list_iterator(items._list, items._start + index), items._count + index)
    if type(items) is ListTail and it._kind is None:
        return list_iterator(items._list, items._start + index)
    if type(items) is range and it._kind is None:  # CPython's range_iterator
        return iter(items[index:])
    if it._kind is not None:
        return as_builtin(it._kind, items[index:])
    return resume_at(it, index)


def as_builtin(kind: str | None, rest: list) -> Any:
    """An iterator of the type the builtin ``kind`` makes, yielding ``rest`` (the items a heap iterator made by it
    has left: tuples for ``zip``, ``(index, item)`` pairs for ``enumerate``); a ``ResumableIterator`` otherwise."""
    if kind == "zip" and all(type(v) is tuple for v in rest):
        return zip(*zip(*rest)) if rest else zip()
    if kind == "enumerate" and all(type(v) is tuple and len(v) == 2 for v in rest):
        return enumerate([v for _, v in rest], rest[0][0] if rest else 0)
    return ResumableIterator(rest, 0, kind)


@dataclass(frozen=True)
class GradModeExit:
    """The ``__exit__`` of a grad-mode block entered in traced code: calling it restores ``restore``."""

    restore: bool

    def __call__(self, *exc_info: Any) -> None:
        compat.set_grad_enabled(self.restore)


class InferenceModeExit:
    """An inference-mode block that crosses a graph break: the plan re-enters it for real (the graph closed it),
    so the real step and the resumed segment run under the mode; calling this leaves it, restoring the grad and
    inference modes as they were before the block."""

    def __init__(self, mode: bool):
        self.mode = mode
        self.context = compat.enter_inference_mode(mode)

    def __call__(self, *exc_info: Any) -> None:
        compat.exit_inference_mode(self.context)


class AutocastExit:
    """An autocast block that crosses a graph break: the plan re-enters it for real; calling this leaves it."""

    def __init__(self, args: tuple):
        device_type, dtype, enabled, cache_enabled = args
        self.args = args
        self.context = torch.autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        self.context.__enter__()

    def __call__(self, *exc_info: Any) -> None:
        self.context.__exit__(None, None, None)
