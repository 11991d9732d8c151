"""``stillframe run SCRIPT.py [ARGS...]``: run an unmodified script with ``torch.compile`` routed to stillframe.

The script runs as ``python SCRIPT.py ARGS...`` would run it -- as
``__main__``, with ``sys.argv == [SCRIPT.py, *ARGS]`` and its directory first
on ``sys.path`` -- except that every ``torch.compile`` (called, as a decorator,
or through ``nn.Module.compile()``) and ``stillframe.compile`` call made while
it runs compiles with stillframe. When it ends -- returns, calls
``sys.exit``, or raises -- a summary of each compiled object goes to stderr::

    $ cat train.py
    import torch

    model = torch.compile(torch.nn.Linear(4, 1))


    @torch.compile(backend="eager")
    def loss_fn(pred, target):
        loss = ((pred - target) ** 2).mean()
        print("loss", round(loss.item(), 3))
        return loss


    for batch in (8, 8, 5):
        loss_fn(model(torch.ones(batch, 4)), torch.zeros(batch, 1)).backward()
    $ stillframe run --backend aot_eager train.py
    loss 0.305
    loss 0.305
    loss 0.305
    ==============================================================================
    stillframe run: train.py exited with status 0 after 6.5 s
    2 compiled objects; stillframe spent 0.15 s tracing, 2.56 s in backend compiles
    counters: cache_hits=8, graph_breaks=9, graphs=4, recompiles=2, traces=7

    [1] Linear.forward (.../torch/nn/modules/linear.py:130)
        1 graph, 0 graph breaks (over 2 plans, 0 breaks taken), 1 recompile, 0 eager fallbacks, 2 traces
        time: tracing 0.07 s, backend compile 2.29 s
        recompiles:
          1. at .../torch/nn/modules/linear.py:130: guard failed: L['input'] is a Tensor(dtype=torch.float32, ...
             device=cpu, shape=(8, 4), ...); got a Tensor(dtype=torch.float32, device=cpu, shape=(5, 4), ...)

    [2] loss_fn (/home/me/train.py:6)
        4 graphs, 1 graph break (over 5 plans, 4 breaks taken), 1 recompile, 0 eager fallbacks, 5 traces
        time: tracing 0.08 s, backend compile 0.27 s
        graph breaks:
          1. data_dependent at /home/me/train.py:9: Tensor.item() reads the tensor's value into Python (x2)
                 print("loss", round(loss.item(), 3))
             hint: the graph so far runs, this step runs for real, tracing resumes
          2. data_dependent at /home/me/train.py:9: a float produced at run time (read from a tensor by ...
             .item() or float(t), or returned by a call that ran for real) is used in Python code (x2)
                 print("loss", round(loss.item(), 3))
             hint: that step runs for real, so the plan does not depend on the value
        recompiles:
          1. at /home/me/train.py:6: guard failed: L['pred'] is a Tensor(dtype=torch.float32, device=cpu, ...
             shape=(8, 1), ...); got a Tensor(dtype=torch.float32, device=cpu, shape=(5, 1), ...)
    ==============================================================================

(Long guard lines are cut here.) Graphs and graph breaks are counted per
source site, as ``torch._dynamo.explain`` counts them (the plans and the
breaks they took follow in brackets); ``(x2)`` marks a break that ends two
plans (here: one per input shape). The counters are ``stillframe.counters`` for
this run; ``graph_breaks`` there counts breaks taken at run time. The backend
compile time is the time spent in the backend's compile call: work a backend
defers to the first run (AOTAutograd-based backends such as inductor compile
the backward graph at the first ``backward()``) is not in it.

The exit status is the script's: 0, its ``sys.exit`` status, or 1 after an
uncaught exception (whose traceback is printed as Python prints it, from the
script's first frame on).

The same routing serves ``stillframe explain SCRIPT.py``
(:mod:`stillframe.diagnostics.explain`), which prints full reports instead.
"""

from __future__ import annotations
from .own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import builtins
import collections
import contextlib
import io
import os
import sys
import time
import traceback
import types
from typing import Any, Callable, Iterator, TextIO

import torch

import stillframe

from . import api, compat
from .api import is_compiled  # noqa: F401  (re-exported for the tools)
from .diagnostics.report import report_for

__all__ = ["is_compiled", "routed_compiles", "run", "run_script", "summarize", "was_called"]

#: ``torch.compile`` keywords stillframe has no equivalent of: dropped, with a note.
_IGNORED = {
    "name": "stillframe names a compiled object after its function",
    "recompile_limit": "stillframe's limit is config.cache_size_limit ({limit}), for every compiled object",
    "isolate_recompiles": "each stillframe.compile call keeps its own cache entries anyway",
    "shapes_spec": "stillframe specializes shapes",
}


@contextlib.contextmanager
def routed_compiles(backend: Any = "eager", notes: list[str] | None = None) -> Iterator[list]:
    """Route every ``torch.compile``, ``nn.Module.compile()`` and ``stillframe.compile`` call to stillframe.

    Yields the list the compiled objects created are appended to, in order;
    everything is restored on exit. ``backend`` replaces each call's own
    backend (``mode`` and ``options``, which only the backend reads, are
    dropped with it); ``None`` keeps each call's own (``torch.compile``'s
    default, ``backend=None``, is ``"inductor"``). What stillframe cannot honour
    -- an argument it has no equivalent of, a callable that is neither a
    function nor an ``nn.Module`` (it runs uncompiled) -- is said once per call
    site in ``notes``, when given.
    """
    created: list = []
    said: set = set()

    def note(text: str) -> None:
        if notes is not None and text not in said:
            said.add(text)
            notes.append(text)

    def routed(model: Any = None, **kwargs: Any) -> Any:
        where = _caller()
        if model is None:
            return lambda m: compile_one(m, where, kwargs)
        return compile_one(model, where, kwargs)

    def compile_one(model: Any, where: str, kwargs: dict) -> Any:
        kwargs = dict(kwargs)
        for key, why in _IGNORED.items():
            if key in kwargs:
                value = kwargs.pop(key)
                if value is not None and value is not False:
                    note(f"{where}: torch.compile({key}={value!r}) ignored: "
                         + why.format(limit=stillframe.config.cache_size_limit))
        if backend is not None:
            dropped = [f"{key}={kwargs[key]!r}" for key in ("mode", "options") if kwargs.get(key) is not None]
            if dropped:
                note(f"{where}: {', '.join(dropped)} dropped: backend {backend!r} replaces the script's own")
            kwargs.pop("mode", None)
            kwargs.pop("options", None)
            kwargs["backend"] = backend
        elif kwargs.get("backend") is None:
            kwargs["backend"] = "inductor"
        if kwargs.get("dynamic"):
            note(f"{where}: dynamic={kwargs['dynamic']!r}: stillframe specializes shapes (a new shape recompiles)")
        if not isinstance(model, torch.nn.Module) and callable(model) and not _is_function(model):
            note(f"{where}: {type(model).__name__} object is neither a function nor an nn.Module: it runs "
                 "uncompiled")
            return model
        compiled = api.compile(model, **kwargs)
        if is_compiled(compiled):
            created.append(compiled)
        return compiled

    def module_compile(self: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        # torch's Module.compile is torch.compile(self._call_impl, ...); compiling the module does the same
        # (CompiledModule.forward runs the hooks), and its bound forward, unlike the CompiledModule itself,
        # does not become a submodule of self when assigned
        self._compiled_call_impl = routed(self, *args, **kwargs).forward

    saved = (torch.compile, stillframe.compile, torch.nn.Module.compile)
    torch.compile = routed
    stillframe.compile = routed
    torch.nn.Module.compile = module_compile
    try:
        with followed_torch_config(note):
            yield created
    finally:
        torch.compile, stillframe.compile, torch.nn.Module.compile = saved


#: ``torch._dynamo.config`` settings a script may write, and the ``stillframe.config`` field each one sets.
FOLLOWED = {"cache_size_limit": "cache_size_limit", "recompile_limit": "cache_size_limit",
            "suppress_errors": "suppress_errors", "capture_scalar_outputs": "capture_scalar_outputs",
            "capture_dynamic_output_shape_ops": "capture_dynamic_output_shape_ops"}
#: ``torch._dynamo.config`` settings stillframe has no equivalent of: a write is noted, and has no effect.
UNFOLLOWED: dict[str, str] = {}


@contextlib.contextmanager
def followed_torch_config(note: Callable[[str], None] = lambda text: None) -> Iterator[None]:
    """Make the script's writes to ``torch._dynamo.config`` and its ``torch._dynamo.reset()`` calls act on
    stillframe, as they would on torch.compile: ``cache_size_limit`` / ``recompile_limit`` set
    ``stillframe.config.cache_size_limit``, ``suppress_errors`` sets ``stillframe.config.suppress_errors``
    (values already set when the run starts, say by ``TORCHDYNAMO_SUPPRESS_ERRORS=1``, are taken too), and
    ``torch._dynamo.reset()`` also runs ``stillframe.reset()``. A write to a setting in ``UNFOLLOWED`` goes
    to ``note``. ``stillframe.config`` and torch's are restored on exit.
    """
    dynamo_config, dynamo = compat.dynamo_config(), compat.dynamo_module()
    config_type, real_reset = type(dynamo_config), dynamo.reset
    real_setattr = config_type.__setattr__
    saved = {field: getattr(stillframe.config, field) for field in set(FOLLOWED.values())}

    def follow(name: str, value: Any) -> None:
        if name in FOLLOWED:
            setattr(stillframe.config, FOLLOWED[name], type(saved[FOLLOWED[name]])(value))
        elif name in UNFOLLOWED:
            note(f"torch._dynamo.config.{name} = {value!r} has no effect: {UNFOLLOWED[name]}")

    def setattr_followed(self: Any, name: str, value: Any) -> None:
        real_setattr(self, name, value)
        if self is dynamo_config:
            follow(name, value)

    def reset_both() -> None:
        real_reset()
        stillframe.reset()
        note("torch._dynamo.reset() ran (the script's, or torch._dynamo.explain's): what is counted above is what "
             "ran after the last one; a function called only before it is listed as never called")

    if dynamo_config.recompile_limit != compat.dynamo_config_default("recompile_limit"):
        follow("recompile_limit", dynamo_config.recompile_limit)
    for name in ("suppress_errors", "capture_scalar_outputs", "capture_dynamic_output_shape_ops"):
        if getattr(dynamo_config, name, False):  # set before the run (TORCHDYNAMO_SUPPRESS_ERRORS=1 ...)
            follow(name, True)
    torch_saved = dynamo_config.get_config_copy()
    config_type.__setattr__, dynamo.reset = setattr_followed, reset_both
    try:
        yield
    finally:
        config_type.__setattr__, dynamo.reset = real_setattr, real_reset
        for field, value in saved.items():
            setattr(stillframe.config, field, value)
        for name in set(FOLLOWED) | set(UNFOLLOWED):
            if name in torch_saved and getattr(dynamo_config, name) != torch_saved[name]:
                setattr(dynamo_config, name, torch_saved[name])


def _is_function(obj: Any) -> bool:
    fn = obj.__func__ if isinstance(obj, types.MethodType) else obj
    return isinstance(fn, types.FunctionType)


def _caller() -> str:
    """``file:line`` of the innermost frame outside this module (the call being routed)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return "?" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def run_script(path: str, argv: list[str]) -> None:
    """Run ``path`` as ``python path ARGS...`` does: as ``__main__``, ``sys.argv = [path, *argv]``.

    As in Python 3.11, ``__file__`` and the code's file name are the absolute
    path while ``sys.argv[0]`` is ``path`` as given, and the script's directory
    comes first on ``sys.path``. Exceptions (``SystemExit`` included)
    propagate; ``sys.argv``, ``sys.path`` and ``sys.modules['__main__']`` are
    restored afterwards.
    """
    filename = os.path.abspath(path)
    with io.open_code(filename) as f:
        code = builtins.compile(f.read(), filename, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=filename, __cached__=None, __loader__=None, __package__=None, __spec__=None,
                         __builtins__=builtins)
    saved = sys.argv, list(sys.path), sys.modules.get("__main__")
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(filename))
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        sys.argv, sys.path[:], sys.modules["__main__"] = saved


# ------------------------------------------------------------------ the command
def run(script: str, argv: list[str], *, backend: Any = None, summary: bool = True, out: TextIO | None = None) -> int:
    """``stillframe run SCRIPT [ARGS...]``: run the script under :func:`routed_compiles`; returns its exit status.

    ``backend`` replaces every compile call's backend (``None``: each keeps
    its own). With ``summary``, :func:`summarize`'s text goes to ``out``
    (default ``sys.stderr``) when the script ends, however it ends.
    Returns 2, running nothing, when ``script`` is not a file.
    """
    if not os.path.isfile(script):
        print(f"stillframe run: error: {'not a file' if os.path.exists(script) else 'no such file'}: {script}",
              file=sys.stderr)
        return 2
    notes: list[str] = []
    counted = collections.Counter(api.counters)
    start = time.perf_counter()
    with routed_compiles(backend, notes) as created:
        status = _run_as_python_would(script, argv)
    seconds = time.perf_counter() - start
    if summary:
        sys.stdout.flush()
        out = sys.stderr if out is None else out
        try:
            text = summarize(created, script=script, status=status, seconds=seconds, notes=notes,
                             counters=api.counters - counted)
        except Exception:  # the script's exit status matters more than our summary
            text = "stillframe run: could not summarize:\n" + traceback.format_exc()
        print(text, file=out, flush=True)
    return status


def _run_as_python_would(script: str, argv: list[str]) -> int:
    """Run the script; print an uncaught exception as the interpreter would; return the exit status."""
    try:
        run_script(script, argv)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException as e:
        sys.stdout.flush()
        traceback.print_exception(type(e), e, _from_script(e.__traceback__, script), file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    return 0


def _from_script(tb: Any, script: str) -> Any:
    """The traceback from the script's own first frame on (runpy's and ours left out, as Python shows it)."""
    path = os.path.abspath(script)
    first = tb
    while first is not None and first.tb_frame.f_code.co_filename != path:
        first = first.tb_next
    return first  # None (no frames) for an error before the script ran, e.g. a SyntaxError in it


# ------------------------------------------------------------------ the summary
RULE = "=" * 78


def summarize(created: list, *, script: str, status: int, seconds: float, notes: list[str] = (),
              counters: collections.Counter | None = None) -> str:
    """The end-of-run summary of the compiled objects ``created`` (see the module docstring for an example).

    Per object: its name and ``file:line``, graphs, graph breaks (each kind,
    ``file:line``, reason and source line; repeats -- the same break in the
    plans of several input shapes -- counted once with ``(xN)``), recompiles
    with the guard that failed, eager fallbacks, and the seconds spent tracing
    and in the backend's compile call. Objects never called are named at the end.
    """
    called = [c for c in created if was_called(c)]
    uncalled = [c for c in created if not was_called(c)]
    timings = [_seconds(c) for c in called]
    lines = [RULE, f"stillframe run: {script} exited with status {status} after {seconds:.1f} s"]
    if not created:
        lines.append("no compiled objects: the script called neither torch.compile nor stillframe.compile")
    else:
        lines.append(f"{_n(len(created), 'compiled object')}; stillframe spent "
                     f"{sum(t for t, _ in timings):.2f} s tracing, {sum(c for _, c in timings):.2f} s in backend "
                     "compiles")
    if counters:
        lines.append("counters: " + ", ".join(f"{key}={value}" for key, value in sorted(counters.items())))
    for i, compiled in enumerate(called, 1):
        report = report_for(compiled)
        trace_s, compile_s = _seconds(compiled)
        lines += ["", f"[{i}] {report.name}",
                  (f"    {report.counts()}, "
                   f"{_n(len(report.recompiles), 'recompile')}, {_n(len(report.fallbacks), 'eager fallback')}, "
                   f"{_n(getattr(_compiled_function(compiled), 'traces', 0), 'trace')}"),
                  f"    time: tracing {trace_s:.2f} s, backend compile {compile_s:.2f} s"]
        lines += _section("graph breaks", [_format_break(br, n) for br, n in _grouped(report.breaks)])
        lines += _section("recompiles", [[f"at {r.where}: guard failed: {r.guard}"] for r in report.recompiles])
        lines += _section("eager fallbacks",
                          [[f"{fb.where}: {(fb.reason or '(no reason given)').splitlines()[0]}"]
                           for fb in report.fallbacks])
    if uncalled:
        lines += ["", "compiled, never called: " + ", ".join(report_for(c).name for c in uncalled)]
    if notes:
        lines += ["", "notes:"] + [f"  - {text}" for text in notes]
    lines.append(RULE)
    return "\n".join(lines)


_SHOWN = 10  # items listed per section; the rest are counted


def _section(title: str, items: list[list[str]]) -> list[str]:
    if not items:
        return []
    lines = [f"    {title}:"]
    for i, item in enumerate(items[:_SHOWN], 1):
        first, *rest = item
        lines.append(f"      {i}. {first}")
        lines.extend(f"         {line}" for line in rest)
    if len(items) > _SHOWN:
        lines.append(f"      ... and {len(items) - _SHOWN} more")
    return lines


def _grouped(breaks: list) -> list[tuple[Any, int]]:
    """Distinct graph breaks, in first-seen order, with how many plans end at each."""
    counts: dict = {}
    for br in breaks:
        key = (br.kind, br.explanation, None if br.location is None else (br.location.filename, br.location.lineno))
        first, n = counts.get(key, (br, 0))
        counts[key] = (first, n + 1)
    return list(counts.values())


def _format_break(br: Any, count: int) -> list[str]:
    where = "unknown location" if br.location is None else f"{br.location.filename}:{br.location.lineno}"
    lines = [f"{br.kind} at {where}: {br.explanation}" + (f" (x{count})" if count > 1 else "")]
    if br.location is not None and br.location.source.strip():
        lines.append(f"    {br.location.source.strip()}")
    lines.extend(f"hint: {hint}" for hint in br.hints)
    return lines


def _compiled_function(compiled: Any) -> Any:
    return getattr(compiled, "_compiled_forward", compiled)


def _seconds(compiled: Any) -> tuple[float, float]:
    cf = _compiled_function(compiled)
    return getattr(cf, "trace_seconds", 0.0), getattr(cf, "compile_seconds", 0.0)


def was_called(compiled: Any) -> bool:
    """Whether a compiled object has traced anything (has cache entries or recorded events)."""
    cf = _compiled_function(compiled)
    return bool(cf.all_cache_entries()) or bool(getattr(cf, "_events", None))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
