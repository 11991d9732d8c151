"""Stand-in objects: live values that hold traced state between graphs (NULL, loop iterators, grad-mode and
autocast exits).

A plan rebuilds them at a graph break; the builder recognises them when tracing resumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from .. import compat


class _Null:
    """CPython's NULL stack marker, as a live value between graphs."""

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()


class ResumableIterator:
    """An iterator over a fixed list of values at position ``index`` (what ``FOR_ITER`` loops over); ``kind``:
    the builtin that made it (``"zip"``, ``"enumerate"``) or ``None``, so it leaves the function as that type
    (:func:`as_builtin`)."""

    # underscored: user code duck-types iterators (C OrderedDict.update calls an ``items`` attribute)
    __slots__ = ("_items", "_index", "_kind")

    def __init__(self, items: list, index: int = 0, kind: str | None = None):
        self._items = items
        self._index = index
        self._kind = kind

    def __iter__(self) -> "ResumableIterator":
        return self

    def __next__(self) -> Any:
        if self._index >= len(self._items):
            raise StopIteration
        self._index += 1
        return self._items[self._index - 1]


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


class AutocastExit:
    """An autocast block that crosses a graph break: the plan re-enters it for real; calling this leaves it."""

    def __init__(self, args: tuple):
        device_type, dtype, enabled, cache_enabled = args
        self.args = args
        self.context = torch.autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        self.context.__enter__()

    def __call__(self, *exc_info: Any) -> None:
        self.context.__exit__(None, None, None)
