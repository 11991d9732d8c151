"""``stillframe explain TARGET``: run a script or one function of it with torch.compile routed to stillframe,
and print the :class:`~stillframe.diagnostics.report.ExplainReport` of everything it compiled."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import importlib.util
import inspect
import os
import sys
import traceback
import types
from typing import Any

from ..runner import routed_compiles, run_script, was_called
from .report import ExplainReport, Explainer, _collect_warnings, explain, report_for  # noqa: F401  (ExplainReport, explain: re-exported)

__all__ = ["run_cli", "routed_compiles"]


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
