"""The recompile policy for shapes: which tensor dimensions a trace makes symbolic (``compile(dynamic=)``).

One :class:`ShapePolicy` per compiled function and cache key (a code object,
or the call stack a graph break resumes at), the policy torch.compile users
know:

* ``dynamic=False``: every size is specialized (only explicit
  ``mark_dynamic`` markings are symbolic);
* ``dynamic=True``: every dimension of every tensor argument is symbolic from
  the first trace (parameters and buffers stay static; sizes 0 and 1 are
  specialized by the ShapeEnv, as torch.compile does);
* ``dynamic=None`` (default), *automatic dynamic shapes*: the first trace is
  static; when a later trace of the same code sees a tensor (by its Source)
  whose size changed in some dimension, that dimension is symbolic from then
  on, so the function is compiled at most once more for new sizes::

      f(torch.randn(3, 4))   # trace 1: static, L['x'] seen as (3, 4)
      f(torch.randn(5, 4))   # guard fails; trace 2: L['x'].size()[0] symbolic
      f(torch.randn(9, 4))   # cache hit

Markings torch.compile reads on a tensor are honoured in every mode:
``torch._dynamo.mark_dynamic`` / :func:`stillframe.mark_dynamic`
(``_dynamo_dynamic_indices``), ``maybe_mark_dynamic``
(``_dynamo_weak_dynamic_indices``) and ``mark_static``
(``_dynamo_static_indices``, which wins).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import dataclasses
import math
from typing import Any

import torch

from ..diagnostics import log
from ..guards.guard import source_values
from ..guards.source import ModuleMemberSource, Source

#: The markings torch.compile's mark_dynamic, maybe_mark_dynamic and mark_static leave on a tensor.
_ABSENT = object()
_MARKS = ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices", "_dynamo_static_indices")


def _mark(t: torch.Tensor, attr: str, index: Any) -> None:
    marks = t.__dict__.get(attr)
    if marks is None:
        marks = set()
        setattr(t, attr, marks)
    marks.update([index] if isinstance(index, int) else index)


@dataclasses.dataclass(frozen=True)
class DimRange:
    """The range ``mark_dynamic(t, dim, min=, max=)`` gives one dimension (torch.compile's marking has the same
    fields)."""

    dim: int
    min: int | None
    max: int | None


def mark_dynamic(t: torch.Tensor, index: int | list | tuple, *, min: int | None = None,
                 max: int | None = None) -> None:
    """Make dimension ``index`` (an int or a list of them) of ``t`` symbolic whenever ``t`` enters a trace, even
    on the first call and with ``dynamic=False``; ``min`` / ``max`` bound its value (guarded).

    The marking is torch.compile's own (``torch._dynamo.mark_dynamic`` leaves the same one), so code written for
    either works with both::

        x = torch.randn(8, 16)
        stillframe.mark_dynamic(x, 0)
        f(x)    # traced with L['x'].size()[0] symbolic: later batch sizes reuse the plan
    """
    _mark(t, "_dynamo_dynamic_indices", index)
    if min is not None or max is not None:
        ranges = t.__dict__.get("_dynamo_dynamic_range")
        if ranges is None:
            ranges = t._dynamo_dynamic_range = set()
        ranges.update(DimRange(i, min, max) for i in ([index] if isinstance(index, int) else index))


def maybe_mark_dynamic(t: torch.Tensor, index: int | list | tuple) -> None:
    """Like :func:`mark_dynamic`, a hint (as ``torch._dynamo.maybe_mark_dynamic``): the dimension starts
    symbolic, and the trace may still specialize it where the code needs its value."""
    _mark(t, "_dynamo_weak_dynamic_indices", index)


def mark_static(t: torch.Tensor, index: int | list | tuple) -> None:
    """Keep dimension ``index`` of ``t`` specialized in every mode (as ``torch._dynamo.mark_static``; it wins
    over the markings above and over ``dynamic=True``)."""
    _mark(t, "_dynamo_static_indices", index)


class ShapePolicy:
    """Decides, for each tensor entering a trace, which of its dimensions are symbolic.

    ``symbolic``: whether the next trace needs a ShapeEnv (set when a static
    trace met a dynamic dimension and must be traced again). ``events`` lists
    ``(source name, dim, old size, new size)`` for each dimension automatic
    dynamic made symbolic (for the recompile log).
    """

    def __init__(self, dynamic: bool | None):
        self.dynamic = dynamic
        self.symbolic = dynamic is True
        self.seen: dict[str, tuple] = {}  # source name -> sizes at the last trace, None where already dynamic
        self.sources: dict[str, Source] = {}  # source name -> the source (to read the sizes of a new call)
        self.ints: dict[str, int | float | None] = {}  # int / float -> its value at the last trace, None once dynamic
        self.static: set[str] = set()  # floats a backend's tensorify pass had to specialize: static from then on
        self.hints: dict[str, Any] = {}  # source name -> what was symbolic there before a graph break
        self.events: list[tuple] = []

    def inherit(self, hints: dict) -> None:
        """The code after a graph break stays dynamic where the code before it was (``Continuation.dynamic``):
        those tensors' dimensions and ints are symbolic from this segment's first trace."""
        if hints:
            self.hints.update(hints)
            self.symbolic = True

    def prepare(self, L: dict, G: dict, F: Any) -> list[str]:
        """Before a trace of the call ``L, G, F``: whether it needs a ShapeEnv (``symbolic``), so that a size
        change is not found half-way through a static trace (which would then be traced again). Returns what
        automatic dynamic shapes will make symbolic in this trace, and why (``"L['x'].size()[0]: 3 -> 5"``)."""
        # (issubclass of the type: isinstance reads __class__, user code, and of a dead weakref.proxy raises)
        if any(issubclass(type(v), torch.Tensor) and any(hasattr(v, a) for a in _MARKS) for v in L.values()):
            self.symbolic = True
        if self.dynamic is not None or not self.sources:
            return []
        changes = []
        names = list(self.sources)
        for name, value in zip(names, source_values([self.sources[n] for n in names], L, G, F)):
            if name in self.ints:
                before = self.ints[name]
                number = type(value) in (int, float) and name not in self.static
                if number and before is not None and before != value:
                    changes.append(f"{name}: {before} -> {value}")
                self.symbolic |= number and before != value
                continue
            before = self.seen[name]
            if isinstance(value, torch.Tensor) and value.dim() == len(before):
                changes += [f"{name}.size()[{i}]: {old} -> {new}" for i, (old, new) in enumerate(zip(before, value.shape))
                            if old is not None and old != new]
                self.symbolic |= any(old is None or old != new for old, new in zip(before, value.shape))
        return changes

    def scalar_dynamic(self, source: Source, value: int | float, unspecializable: bool) -> bool:
        """Whether the int (or float) at ``source`` is a symbolic graph input in this trace. ``unspecializable``:
        an int reached from the frame's locals, not through a module, a global or a default (those stay static,
        as torch.compile keeps them); any float (torch.compile unspecializes floats from every source), but
        NaN and infinities, and the floats a backend could not turn into tensor ops (``static``)."""
        if type(value) is float and (source.name in self.static or math.isnan(value) or math.isinf(value)):
            return False
        hint = self.hints.get(source.name)
        if hint in ("int", "float") or (hint == "loop" and self.dynamic is not False):
            return True
        if self.dynamic is False or not unspecializable:
            return False
        if self.dynamic is True:
            return True
        name = source.name
        before = self.ints.get(name, _ABSENT)
        if before is _ABSENT:
            self.ints[name] = value
            self.sources[name] = source
            return False
        if before is not None and before != value:
            self.events.append((name, None, before, value))
            log.event("dynamic", "%s is a symbolic %s from now on: it was %r when last traced, now %r",
                      name, type(value).__name__, before, value)
            self.ints[name] = None
        return self.ints[name] is None

    def data_dynamic(self, source: Source, value: Any) -> bool:
        """Whether a float a real step read out of a tensor (``t.item()`` at a graph break: a
        ``ScalarOutputSource``) is a symbolic float input from the first trace that reads it, as torch.compile
        passes the float its resumed frame receives: its value is data, never guarded (a branch on it or a
        Python use of its exact value breaks the graph instead, :func:`stillframe.tensors.symbolic.specialize`).
        Not under ``dynamic=False``, for NaN and infinities, or where the backend had it static: there every
        use breaks."""
        return type(value) is float and self.dynamic is not False and math.isfinite(value) and \
            source.name not in self.static

    def dims(self, source: Source, value: torch.Tensor) -> tuple[bool, ...]:
        """Per dimension of ``value`` (read from ``source``), whether it is symbolic in this trace."""
        ndim = value.dim()
        if ndim == 0:
            return ()
        static = getattr(value, _MARKS[2], ())
        marked = set(getattr(value, _MARKS[0], ())) | set(getattr(value, _MARKS[1], ()))
        module_state = isinstance(source, ModuleMemberSource) or isinstance(value, torch.nn.Parameter)
        if self.dynamic is True and not module_state:
            auto = (True,) * ndim
        elif self.dynamic is None:
            auto = self._automatic(source, tuple(value.shape))
        else:
            auto = (False,) * ndim
        hinted = self.hints.get(source.name)
        if isinstance(hinted, tuple) and len(hinted) == ndim:
            auto = tuple(a or h for a, h in zip(auto, hinted))
        return tuple((auto[i] or i in marked) and i not in static for i in range(ndim))

    @staticmethod
    def ranges(value: torch.Tensor) -> dict:
        """dim -> (min, max) of the dimensions ``mark_dynamic(t, dim, min=, max=)`` gave a range (ours or
        torch's: the same ``_dynamo_dynamic_range`` marking). A size outside its range gets a plan of its own,
        symbolic without the range (where torch.compile raises)."""
        return {r.dim: (r.min, r.max) for r in getattr(value, "_dynamo_dynamic_range", ())
                if (r.min is not None or r.max is not None) and r.dim < value.dim()
                and (r.min is None or r.min <= value.shape[r.dim]) and (r.max is None or value.shape[r.dim] <= r.max)}

    def _automatic(self, source: Source, shape: tuple) -> tuple[bool, ...]:
        """Automatic dynamic shapes: the dimensions of ``source``'s tensor whose size differs from an earlier trace."""
        name = source.name
        before = self.seen.get(name)
        if before is None or len(before) != len(shape):
            self.seen[name] = shape
            self.sources[name] = source
            return (False,) * len(shape)
        now = tuple(None if old is None or old != new else new for old, new in zip(before, shape))
        for i, (old, new) in enumerate(zip(before, shape)):
            if old is not None and old != new:
                self.events.append((name, i, old, new))
                log.event("dynamic", "%s.size()[%d] is dynamic from now on: it was %d when last traced, now %d",
                          name, i, old, new)
        self.seen[name] = now
        return tuple(n is None for n in now)

