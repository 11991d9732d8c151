"""``stillframe.explain``: what stillframe did with a program -- its graphs, graph breaks, guards, recompiles.

``stillframe.explain(fn)`` returns a callable. Calling it with ``fn``'s
arguments compiles ``fn`` (a function or an ``nn.Module``) with a fresh
:func:`stillframe.compile`, runs it once, and returns an :class:`ExplainReport`
of everything that compiled object has done so far (like
``torch._dynamo.explain``). Calling it again runs the same compiled object
again, so a second call with another input shape shows the recompile::

    >>> import torch, stillframe
    >>> def f(x):
    ...     y = x.sin()
    ...     print("y computed")   # a graph break: print runs for real, tracing resumes after it
    ...     return y + 1
    >>> explained = stillframe.explain(f)
    >>> report = explained(torch.ones(3))
    y computed
    >>> report.graph_count, report.break_count
    (2, 1)
    >>> print(report)               # doctest: +SKIP
    stillframe.explain: f (example.py:1)
    2 graphs, 1 graph break, 2 ops, 0 recompiles, 0 eager fallbacks
    <BLANKLINE>
    Graph breaks:
      1. unsupported_builtin at example.py:3
           print("y computed")   # a graph break: print runs for real, tracing resumes after it
         the builtin print is not supported here
    <BLANKLINE>
    Graphs:
      Graph 1: starts at f (example.py:1); 1 op; ends at graph break 1 (example.py:3)
        guards:
          torch.is_grad_enabled() == True
          torch.get_default_dtype() == torch.float32
          (torch.is_autocast_enabled('cpu'), torch.get_autocast_dtype('cpu')) == (False, torch.bfloat16)
          L['x'] is a Tensor(dtype=torch.float32, device=cpu, shape=(3,), stride=(1,), storage_offset=0, ...)
        code:
          def forward(self, L_x):
              l_x = L_x
              sin = l_x.sin();  l_x = None
              return (sin,)
    <BLANKLINE>
      Graph 2: resumes f at example.py:3; 1 op; returns
        guards:
          ...
          L['___stack0'] is None
          L['y'] is a Tensor(dtype=torch.float32, device=cpu, shape=(3,), stride=(1,), storage_offset=0, ...)
        code:
          def forward(self, L_0_y):
              l_0_y = L_0_y
              add = l_0_y + 1;  l_0_y = None
              return (add,)

Graph 1 ends where the ``print`` is; the runtime rebuilds the live frame,
runs the print for real, and resumes tracing at the next instruction (still
line 3: the ``POP_TOP`` of the print's result), which is Graph 2. Its guards
read the live values of the resumed frame: ``L['y']`` is its local ``y``,
``L['___stack0']`` the first slot of its value stack (named as torch.compile
names them in its resume functions; the guard code itself says ``L['0:y']``,
local ``y`` of frame 0, the outermost).
Calling ``explained(torch.ones(5))`` next adds two graphs and two recompiles,
each naming the guard that failed (``L['x'] is a Tensor(... shape=(3,) ...)``).

The same report for a whole program, from the command line (every
``torch.compile`` and ``stillframe.compile`` call is routed to stillframe)::

    $ stillframe explain train.py:main         # call main() and report every compiled object
    $ stillframe explain model.py:Net          # explain Net on Net_example_inputs()
    $ stillframe explain train.py --epochs 1   # run a script as __main__

What each part means:

* ``graphs``: one :class:`GraphInfo` per cache entry that captured a graph:
  where it starts (the function, or -- after a graph break -- the resume point
  and the call stack it resumes), its op count, its FX code, its guards, and
  the graph break that ends it (``None`` when it runs to the return).
* ``breaks``: the :class:`~stillframe.errors.GraphBreak` values, one per graph
  that ends at a break: ``kind``, a one-line ``explanation``, ``hints`` and the
  user's ``location`` (file, line, source text).
* ``guards``: per cache entry, its guards as readable expressions
  (:func:`stillframe.guards.guard.describe`); ``L['x']`` is the argument ``x``, or
  local ``x`` of a resumed call stack, ``L['___stack0']`` a slot of its value stack.
* ``recompiles``: each time a code point that already had plans was traced
  again, where, and the first guard of the newest plan that failed.
* ``fallbacks``: cache entries that run eagerly, and why.
* ``warnings``: the :class:`stillframe.StillframeWarning` texts emitted while
  explaining (they are collected here instead of being shown).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from ..bytecode.reader import read
from ..errors import GraphBreak, StillframeWarning
from ..guards.guard import describe
from ..api import compile as sf_compile
from ..api import is_compiled
from . import log


__all__ = ["EntryGuards", "ExplainReport", "Explainer", "Fallback", "GraphInfo", "Recompile", "explain", "report_for"]

_OPS = ("call_function", "call_method", "call_module")


@dataclass(frozen=True)
class GraphInfo:
    """One captured graph (one cache entry with a ``graph_module``).

    ``name``/``filename``/``lineno`` say where the graph starts: the function
    itself (``resume`` false, ``lineno`` its ``def`` line) or the instruction a
    resumed trace starts at after a graph break (``resume`` true; ``stack`` is
    the resumed call stack, outermost first, each ``"name (file:line)"``).
    ``ends_with`` is the graph break that ends it, ``None`` if it returns.
    """

    name: str
    filename: str
    lineno: int | None
    resume: bool
    stack: tuple[str, ...]
    op_count: int
    code: str
    guards: tuple[str, ...]
    ends_with: GraphBreak | None = None
    graph_module: Any = field(default=None, repr=False, compare=False)
    site: Any = field(default=None, repr=False)  # the cache key it was traced for: the same for every plan there

    @property
    def where(self) -> str:
        return f"{self.filename}:{self.lineno}"

    @property
    def start(self) -> str:
        """Where the graph starts, in words."""
        if self.resume:
            return f"resumes {self.name} at {self.where}"
        return f"starts at {self.name} ({self.where})"


@dataclass(frozen=True)
class EntryGuards:
    """The guards of one cache entry, readable: ``entry`` names the entry (as :attr:`GraphInfo.start`)."""

    entry: str
    eager: bool
    guards: tuple[str, ...]


@dataclass(frozen=True)
class Recompile:
    """A code point traced again because the guards of its newest plan failed: ``guard`` is the first that did."""

    where: str
    guard: str | None


@dataclass(frozen=True)
class Fallback:
    """A cache entry that runs eagerly: ``where`` names the entry, ``reason`` says why."""

    where: str
    reason: str
    guards: tuple[str, ...] = ()


@dataclass
class ExplainReport:
    """What one compiled object has done: graphs, graph breaks, guards, recompiles, eager fallbacks.

    ``format()`` (and ``str()``) renders all of it; the fields are documented
    in :mod:`stillframe.diagnostics.explain`. ``result`` holds the value the
    explained call returned (``None`` for a report not made by a call).
    """

    name: str
    graphs: list[GraphInfo] = field(default_factory=list)
    breaks: list[GraphBreak] = field(default_factory=list)
    guards: list[EntryGuards] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    result: Any = field(default=None, repr=False)

    @property
    def graph_count(self) -> int:
        """Graphs counted per source site, as ``torch._dynamo.explain`` counts them: the plans that start at
        the same place (one per input shape, say) are one graph. ``plan_count`` counts them all."""
        return len({g.site if g.site is not None else (g.filename, g.lineno, g.stack) for g in self.graphs})

    @property
    def plan_count(self) -> int:
        return len(self.graphs)

    @property
    def break_count(self) -> int:
        """Graph breaks counted per source site (kind, file, line), as ``torch._dynamo.explain`` counts them:
        the same break ending several plans is one. ``breaks`` lists one per plan."""
        return len({(br.kind, br.location.filename if br.location else None,
                     br.location.lineno if br.location else None) for br in self.breaks})

    def counts(self) -> str:
        """``"2 graphs, 1 graph break"`` per source site, with the plans behind them where they differ."""
        text = f"{_n(self.graph_count, 'graph')}, {_n(self.break_count, 'graph break')}"
        if self.plan_count != self.graph_count or len(self.breaks) != self.break_count:
            text += f" (over {_n(self.plan_count, 'plan')}, {_n(len(self.breaks), 'break')} taken)"
        return text

    @property
    def op_count(self) -> int:
        return sum(g.op_count for g in self.graphs)

    def format(self, *, code: bool = True, guards: bool = True) -> str:
        """The whole report as text; ``code=False`` / ``guards=False`` leave out graph code / guards."""
        lines = [f"stillframe.explain: {self.name}",
                 f"{self.counts()}, {_n(self.op_count, 'op')}, {_n(len(self.recompiles), 'recompile')}, "
                 f"{_n(len(self.fallbacks), 'eager fallback')}"]
        if self.breaks:
            lines += ["", "Graph breaks:"]
            for i, br in enumerate(self.breaks, 1):
                lines.extend(_format_break(i, br))
        if self.graphs:
            lines += ["", "Graphs:"]
            for i, g in enumerate(self.graphs, 1):
                if i > 1 and (code or guards):
                    lines.append("")
                lines.extend(self._format_graph(i, g, code=code, guards=guards))
        if self.recompiles:
            lines += ["", "Recompiles:"]
            for i, r in enumerate(self.recompiles, 1):
                lines.append(f"  {i}. at {r.where}: guard failed: {r.guard}")
        if self.fallbacks:
            lines += ["", "Eager fallbacks:"]
            for i, fb in enumerate(self.fallbacks, 1):
                lines.append(f"  {i}. {fb.where}")
                lines.extend(f"       {line}" for line in (fb.reason or "(no reason given)").splitlines())
                if guards and fb.guards:
                    lines.append("     guards:")
                    lines.extend(f"       {text}" for text in fb.guards)
        if self.warnings:
            lines += ["", "Warnings:"]
            for text in self.warnings:
                first, *rest = text.splitlines() or [""]
                lines.append(f"  - {first}")
                lines.extend(f"    {line}" for line in rest)
        return "\n".join(lines)

    def _format_graph(self, index: int, g: GraphInfo, *, code: bool, guards: bool) -> list[str]:
        head = f"  Graph {index}: {g.start}"
        if g.resume and len(g.stack) > 1:
            head += f" (call stack: {' -> '.join(g.stack)})"
        head += f"; {_n(g.op_count, 'op')}; "
        if g.ends_with is None:
            head += "returns"
        else:
            number = next((i for i, br in enumerate(self.breaks, 1) if br is g.ends_with), None)
            head += f"ends at graph break {number} ({_loc(g.ends_with)})"
        lines = [head]
        if guards:
            lines.append("    guards:")
            lines.extend(f"      {text}" for text in g.guards or ("(none)",))
        if code:
            lines.append("    code:")
            lines.extend(f"      {line}" for line in g.code.strip().splitlines())
        return lines

    def __str__(self) -> str:
        return self.format()


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _loc(br: GraphBreak) -> str:
    loc = br.location
    return "unknown location" if loc is None else f"{loc.filename}:{loc.lineno}"


def _format_break(index: int, br: GraphBreak) -> list[str]:
    lines = [f"  {index}. {br.kind} at {_loc(br)}"]
    if br.location is not None and br.location.source.strip():
        lines.append(f"       {br.location.source.strip()}")
    lines.append(f"     {br.explanation}")
    lines.extend(f"     hint: {hint}" for hint in br.hints)
    return lines


# ------------------------------------------------------------------ building a report
def _compiled_function(compiled: Any) -> Any:
    """The ``CompiledFunction`` behind a compiled function or ``CompiledModule``."""
    return getattr(compiled, "_compiled_forward", compiled)


def _describe_guards(entry: Any) -> tuple[str, ...]:
    lines = getattr(entry, "guard_lines", None)  # an entry checked without Guard values (a compiled opt.step)
    if lines is not None:
        return tuple(lines)
    out = []
    for guard in getattr(entry, "guards", None) or ():
        try:
            out.append(describe(guard))
        except Exception as e:  # a report must never fail because one guard is odd
            out.append(f"{guard!r} (describe failed: {type(e).__name__}: {e})")
    return tuple(out)


def _line_of(code: types.CodeType, index: int) -> int | None:
    """The source line of instruction ``index`` of ``code`` (the nearest earlier one with a line)."""
    try:
        instructions = read(code).instructions
    except Exception:
        return code.co_firstlineno
    for i in range(min(index, len(instructions) - 1), -1, -1):
        if instructions[i].lineno is not None:
            return instructions[i].lineno
    return code.co_firstlineno


def _start(key: Any) -> tuple[str, str, int | None, bool, tuple[str, ...]]:
    """(name, filename, lineno, resume, stack) of a cache key: a code object or a resumed call stack."""
    if isinstance(key, types.CodeType):
        return key.co_qualname, key.co_filename, key.co_firstlineno, False, ()
    if isinstance(key, tuple) and key and all(isinstance(k, tuple) and len(k) == 2 for k in key):
        stack = []
        for code, index in key:
            stack.append(f"{code.co_qualname} ({code.co_filename}:{_line_of(code, index)})")
        code, index = key[-1]
        return code.co_qualname, code.co_filename, _line_of(code, index), True, tuple(stack)
    return repr(key), "?", None, False, ()


def _site(key: Any) -> Any:
    """A cache key as a hashable site: the code object, or the resumed stack's (code, instruction) pairs."""
    try:
        hash(key)
        return key
    except TypeError:
        return repr(key)


def _label(name: str, filename: str, lineno: int | None, resume: bool) -> str:
    return f"resumes {name} at {filename}:{lineno}" if resume else f"starts at {name} ({filename}:{lineno})"


def report_for(compiled: Any, *, name: str | None = None, warnings_: list[str] | None = None) -> ExplainReport:
    """The :class:`ExplainReport` of a compiled object (``stillframe.compile``'s result) as it stands now."""
    cf = _compiled_function(compiled)
    func = getattr(cf, "_func", None)
    if name is None:
        if isinstance(compiled, torch.nn.Module) and hasattr(compiled, "_orig_mod"):
            name = f"{type(compiled._orig_mod).__qualname__}.forward"
        else:
            name = getattr(func, "__qualname__", repr(compiled))
        if func is not None:
            name += f" ({log.defined_at(func)})"
    report = ExplainReport(name=name, warnings=list(warnings_ or ()))
    cache = cf.all_cache_entries() if hasattr(cf, "all_cache_entries") else {}
    for key, entries in cache.items():
        fname, filename, lineno, resume, stack = _start(key)
        for entry in entries:
            guards = _describe_guards(entry)
            label = _label(fname, filename, lineno, resume)
            report.guards.append(EntryGuards(label, bool(entry.eager), guards))
            if entry.eager:
                report.fallbacks.append(Fallback(label, entry.reason, guards))
                continue
            br = entry.graph_break
            if br is not None:
                report.breaks.append(br)
            gm = entry.graph_module
            if gm is None:
                continue
            ops = sum(1 for node in gm.graph.nodes if node.op in _OPS)
            report.graphs.append(GraphInfo(fname, filename, lineno, resume, stack, ops, _code(gm), guards, br, gm,
                                           _site(key)))
    for event in getattr(cf, "_events", ()):
        if event.get("kind") == "recompile":
            report.recompiles.append(Recompile(str(event.get("where")), event.get("guard")))
        elif event.get("kind") == "cache_limit":  # no entry: the code past the limit runs eagerly
            report.fallbacks.append(Fallback(f"at {event.get('where')}", str(event.get("reason"))))
    return report


class Explainer:
    """What :func:`explain` returns: calling it runs the compiled object once and returns its report.

    ``compiled`` is the compiled object (one per explainer: repeated calls
    share its cache); ``report()`` is the report as it stands without a call.
    """

    def __init__(self, fn: Any, backend: Any = "eager", **compile_kwargs: Any):
        self.fn = fn
        # an object stillframe already compiled is explained as it is (with what it has done so far)
        self.compiled = fn if is_compiled(fn) else sf_compile(fn, backend=backend, **compile_kwargs)
        self._warnings: list[str] = []

    def __call__(self, *args: Any, **kwargs: Any) -> ExplainReport:
        with _collect_warnings(self._warnings):
            result = self.compiled(*args, **kwargs)
        report = self.report()
        report.result = result
        return report

    def report(self) -> ExplainReport:
        return report_for(self.compiled, warnings_=self._warnings)


def explain(fn: Callable, *, backend: Any = "eager", **compile_kwargs: Any) -> Explainer:
    """Compile ``fn`` (a function or ``nn.Module``) for explaining; call the result to get an :class:`ExplainReport`.

    ``backend`` defaults to ``"eager"`` (the report is about capture, not code
    generation); other keyword arguments go to :func:`stillframe.compile`
    (``fullgraph=True`` makes the first graph break raise, as in compile).
    An object ``stillframe.compile`` already returned is explained as it is,
    its earlier calls included. Each call of the result runs the compiled
    object once and returns the report of everything it has done so far;
    ``.report()`` returns that report without a call.
    See :mod:`stillframe.diagnostics.explain` for an example and its output.
    """
    return Explainer(fn, backend=backend, **compile_kwargs)


# ------------------------------------------------------------------ the CLI


@contextlib.contextmanager
def _collect_warnings(sink: list) -> Iterator[None]:
    """Collect :class:`StillframeWarning` texts into ``sink``; pass every other warning on as usual."""
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StillframeWarning)
            yield
    finally:
        for record in caught:
            if issubclass(record.category, StillframeWarning):
                sink.append(str(record.message))
            else:  # filters were applied when it was raised: show it as it would have been shown
                warnings.showwarning(record.message, record.category, record.filename, record.lineno,
                                     record.file, record.line)


def _code(gm: Any) -> str:
    """``gm``'s code, then the code of each subgraph it holds (a branch of torch.cond ...), by attribute name."""
    parts = [gm.code]
    for name, sub in gm.named_modules():
        if name and isinstance(sub, torch.fx.GraphModule):
            parts.append(f"\n# self.{name}:" + sub.code)
    return "".join(parts)
