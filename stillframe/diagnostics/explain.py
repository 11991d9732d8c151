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
          L['0:s0'] is None
          L['0:y'] is a Tensor(dtype=torch.float32, device=cpu, shape=(3,), stride=(1,), storage_offset=0, ...)
        code:
          def forward(self, L_0_y):
              l_0_y = L_0_y
              add = l_0_y + 1;  l_0_y = None
              return (add,)

Graph 1 ends where the ``print`` is; the runtime rebuilds the live frame,
runs the print for real, and resumes tracing at the next instruction (still
line 3: the ``POP_TOP`` of the print's result), which is Graph 2. Its guards
read the live values of the resumed frame: ``L['0:y']`` is local ``y`` of
frame 0 (the outermost), ``L['0:s0']`` the first slot of its value stack.
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
  (:func:`stillframe.guards.guard.describe`); ``L['x']`` is the argument ``x``,
  ``L['0:x']`` local ``x`` of the outermost frame of a resumed call stack.
* ``recompiles``: each time a code point that already had plans was traced
  again, where, and the first guard of the newest plan that failed.
* ``fallbacks``: cache entries that run eagerly, and why.
* ``warnings``: the :class:`stillframe.StillframeWarning` texts emitted while
  explaining (they are collected here instead of being shown).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import sys
import traceback
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from ..errors import GraphBreak, StillframeWarning
from ..runner import is_compiled, routed_compiles, run_script, was_called

__all__ = ["EntryGuards", "ExplainReport", "Explainer", "Fallback", "GraphInfo", "Recompile", "explain",
           "report_for", "routed_compiles", "run_cli"]

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
        return len(self.graphs)

    @property
    def break_count(self) -> int:
        return len(self.breaks)

    @property
    def op_count(self) -> int:
        return sum(g.op_count for g in self.graphs)

    def format(self, *, code: bool = True, guards: bool = True) -> str:
        """The whole report as text; ``code=False`` / ``guards=False`` leave out graph code / guards."""
        lines = [f"stillframe.explain: {self.name}",
                 f"{_n(self.graph_count, 'graph')}, {_n(self.break_count, 'graph break')}, "
                 f"{_n(self.op_count, 'op')}, {_n(len(self.recompiles), 'recompile')}, "
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
    from ..guards.guard import describe

    out = []
    for guard in getattr(entry, "guards", None) or ():
        try:
            out.append(describe(guard))
        except Exception as e:  # a report must never fail because one guard is odd
            out.append(f"{guard!r} (describe failed: {type(e).__name__}: {e})")
    return tuple(out)


def _line_of(code: types.CodeType, index: int) -> int | None:
    """The source line of instruction ``index`` of ``code`` (the nearest earlier one with a line)."""
    from ..bytecode import read

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
            name += f" ({func.__code__.co_filename}:{func.__code__.co_firstlineno})"
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
            report.graphs.append(GraphInfo(fname, filename, lineno, resume, stack, ops, gm.code, guards, br, gm))
    for event in getattr(cf, "_events", ()):
        if event.get("kind") == "recompile":
            report.recompiles.append(Recompile(str(event.get("where")), event.get("guard")))
    return report


class Explainer:
    """What :func:`explain` returns: calling it runs the compiled object once and returns its report.

    ``compiled`` is the compiled object (one per explainer: repeated calls
    share its cache); ``report()`` is the report as it stands without a call.
    """

    def __init__(self, fn: Any, backend: Any = "eager", **compile_kwargs: Any):
        from ..api import compile as sf_compile

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


class _BadTarget(Exception):
    """The command line names something that cannot be run (exit status 2)."""


def _import_file(path: str) -> types.ModuleType:
    """Import ``path`` as a module, with its directory first on ``sys.path`` (as ``python path`` would)."""
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)
    stem = os.path.splitext(os.path.basename(path))[0]
    name = stem if stem.isidentifier() and stem not in sys.modules else f"__stillframe_explain_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    if spec is None or spec.loader is None:
        raise _BadTarget(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _split_target(target: str) -> tuple[str, str | None]:
    """``FILE.py:FUNCTION`` -> (FILE.py, FUNCTION); ``SCRIPT.py`` -> (SCRIPT.py, None)."""
    path, sep, name = target.rpartition(":")
    if sep and path and all(part.isidentifier() for part in name.split(".")):
        return path, name
    return target, None


def _check_path(path: str) -> None:
    if not os.path.exists(path):
        raise _BadTarget(f"no such file: {path}")
    if not os.path.isfile(path):
        raise _BadTarget(f"not a file: {path}")


def _lookup(module: types.ModuleType, path: str, name: str) -> Any:
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            defined = sorted(n for n, v in vars(module).items() if not n.startswith("_") and callable(v)
                             and getattr(v, "__module__", None) == module.__name__)
            hint = f" (callables defined there: {', '.join(defined)})" if defined else ""
            raise _BadTarget(f"{path} has no function {name!r}{hint}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise _BadTarget(f"{path}:{name} is not callable (it is a {type(obj).__name__}): name a function or an "
                         "nn.Module")
    return obj


def _check_no_arguments(fn: Any, path: str, name: str) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind()
    except TypeError:
        raise _BadTarget(f"{path}:{name} takes arguments {sig}: define {name}_example_inputs() in {path}, "
                         "returning a tuple of them, or name a function that takes none") from None


def _print_reports(reports: list, uncalled: list, notes: list[str], *, code: bool, guards: bool, out: Any) -> None:
    for report in reports:
        print("=" * 78, file=out)
        print(report.format(code=code, guards=guards), file=out)
    if uncalled:
        print("=" * 78, file=out)
        print("Compiled but never called: " + ", ".join(_name_of(c) for c in uncalled), file=out)
    if notes:
        print("=" * 78, file=out)
        print("StillframeWarnings:", file=out)
        for text in notes:
            first, *rest = text.splitlines() or [""]
            print(f"  - {first}", file=out)
            for line in rest:
                print(f"    {line}", file=out)
    print("=" * 78, file=out)


def _name_of(compiled: Any) -> str:
    return report_for(compiled).name


def run_cli(target: str, argv: list[str], *, backend: Any = "eager", code: bool = True, guards: bool = True,
            out: Any = None) -> int:
    """``stillframe explain TARGET [ARGS...]``: run the target under :func:`routed_compiles` and print reports.

    ``TARGET`` is ``FILE.py:FUNCTION`` or ``SCRIPT.py`` (then ``argv`` are its
    arguments). Returns the exit status: 0 on success, 1 if the program raised
    (the reports of what ran are printed first; a script's own non-zero
    ``sys.exit`` status is returned as is), 2 for a bad target.
    """
    out = out if out is not None else sys.stdout
    path, name = _split_target(target)
    saved_path = list(sys.path)
    try:
        return _run_cli(target, path, name, argv, backend=backend, code=code, guards=guards, out=out)
    except _BadTarget as e:
        print(f"stillframe explain: error: {e}", file=sys.stderr)
        return 2
    finally:
        sys.path[:] = saved_path


def _run_cli(target: str, path: str, name: str | None, argv: list[str], *, backend: Any, code: bool, guards: bool,
             out: Any) -> int:
    _check_path(path)
    if not path.endswith(".py"):
        raise _BadTarget(f"{target} is neither SCRIPT.py nor FILE.py:FUNCTION")
    if name is not None and argv:
        raise _BadTarget(f"extra arguments after {target}: {' '.join(argv)} (only a script takes arguments)")
    notes: list[str] = []
    explained: list = []  # the object explained on FUNCTION_example_inputs(), reported first
    status, failure = 0, None
    with _collect_warnings(notes), routed_compiles(backend) as created:
        try:
            if name is None:
                run_script(path, argv)
            else:
                _run_function(path, name, explained, notes, backend)
        except _BadTarget:
            raise
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if status:
                failure = f"stillframe explain: {target} exited with status {status}"
        except (Exception, KeyboardInterrupt):
            status = 1
            failure = (traceback.format_exc() + f"stillframe explain: {target} raised; the reports above cover what "
                       "ran before that")
    objects = explained + [c for c in created if c not in explained]
    reports = [report_for(c) for c in objects if c in explained or was_called(c)]
    uncalled = [c for c in objects if c not in explained and not was_called(c)]
    if not reports and not uncalled:
        print(f"stillframe explain: {target} created no compiled objects: call torch.compile or "
              "stillframe.compile in it" + ("" if name is None else f", or define {name}_example_inputs()"),
              file=out)
    else:
        _print_reports(reports, uncalled, notes, code=code, guards=guards, out=out)
    if failure is not None:
        out.flush()
        print(failure, file=sys.stderr)
    return status


def _run_function(path: str, name: str, explained: list, notes: list[str], backend: Any) -> None:
    module = _import_file(path)
    fn = _lookup(module, path, name)
    make_inputs = getattr(module, f"{name}_example_inputs", None)
    if make_inputs is None:
        _check_no_arguments(fn, path, name)
        fn()
        return
    if not callable(make_inputs):
        raise _BadTarget(f"{path}:{name}_example_inputs is not a function")
    inputs = make_inputs()
    args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    # an object compiled in the file already is run as it is; anything else is compiled here
    explainer = Explainer(fn, backend="eager" if backend is None else backend)
    explainer._warnings = notes
    explained.append(explainer.compiled)
    explainer(*args)
