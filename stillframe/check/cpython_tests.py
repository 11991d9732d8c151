"""CPython's own unit tests, each test method run eagerly and compiled, outcomes compared (issue 11).

CPython's test suite (the ``test`` package of the standard library, ``Lib/test``) pins down the language's
semantics: generators, exceptions and their chaining, ``with``, scopes, containers, classes. torch.compile runs a
part of it under Dynamo (``test/dynamo/cpython`` in PyTorch); this module does the same for any compiler of
:data:`stillframe.check.fuzz.COMPILERS`. For each test method of a ``unittest.TestCase`` in the named modules it
runs ``setUp``, the method and ``tearDown`` twice on fresh instances: once eagerly, once with the method's function
compiled (``compile(type(case).method)`` called with the instance, so the method's body and everything it calls is
traced; ``setUp`` and ``tearDown`` run eagerly). A test whose eager outcome is a pass and whose compiled outcome is
not is a finding:

- ``internal``: the exception that failed it is the compiler's own (its type's module, or the frame that raised it,
  is the compiler's), the worst kind;
- ``hang``: the compiled method ran past 5 times ``--timeout`` seconds (eager passed within ``--timeout``): a
  real hang, or a body that runs instruction by instruction far slower than eager;
- ``divergence``: any other failure or error (an assertion of the test saw another value, or a user-level
  exception eager did not raise).

Doctests and tests eager itself fails or skips are not compared. Usage::

    python -m stillframe.check.cpython_tests test.test_generators test.test_raise --compiler stillframe
    python -m stillframe.check.cpython_tests test.test_with -k test_exit --show

Prints one line per finding (module, test, kind, the exception's first line) and a summary per module; with
``--show`` the compiled run's traceback too. The exit status is 1 when any finding was printed. Each module runs in
this process, one after another; a test that changes process-wide state can affect the tests after it (both sides
see the same order). Times are wall seconds.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import argparse
import doctest
import importlib
import signal
import sys
import time
import traceback
import unittest
import warnings
from dataclasses import dataclass
from typing import Callable, Iterator

from .fuzz import COMPILERS, _is_internal

__all__ = ["Outcome", "TestFinding", "main", "run_module", "test_cases"]


class _Timeout(BaseException):
    """Raised by the alarm in the method that ran past the timeout (a BaseException: ``except Exception`` of the
    test's own does not swallow it)."""


@dataclass
class Outcome:
    """One run of one test: ``kind`` is ``pass``, ``fail``, ``error``, ``skip`` or ``hang``; ``error`` is the
    exception that failed it (None for a pass or a skip)."""

    kind: str
    error: BaseException | None = None
    seconds: float = 0.0


@dataclass
class TestFinding:
    """A test eager passes and the compiled method does not (``kind``: ``internal``, ``hang``, ``divergence``)."""

    module: str
    test: str
    kind: str
    compiled: Outcome

    def line(self) -> str:
        first = ""
        if self.compiled.error is not None:
            text = f"{type(self.compiled.error).__name__}: {self.compiled.error}"
            first = text.splitlines()[0][:160] if text else ""
        return f"{self.module}::{self.test}: {self.kind}: {first}"


def test_cases(module_name: str, pattern: str | None = None) -> Iterator[unittest.TestCase]:
    """The test methods of ``module_name``'s ``TestCase`` classes (loaded as ``unittest`` loads them, the module's
    ``load_tests`` included), doctests and other non-method tests left out; ``pattern`` keeps the names holding it."""
    module = importlib.import_module(module_name)
    stack = [unittest.defaultTestLoader.loadTestsFromModule(module)]
    while stack:
        suite = stack.pop(0)
        for test in suite:
            if isinstance(test, unittest.TestSuite):
                stack.append(test)
            elif isinstance(test, unittest.TestCase) \
                    and not isinstance(test, (unittest.FunctionTestCase, doctest.DocTestCase)) \
                    and callable(getattr(type(test), test._testMethodName, None)) \
                    and getattr(getattr(type(test), test._testMethodName), "__code__", None) is not None:
                if pattern is None or pattern in test.id():
                    yield test


def _run(case: unittest.TestCase, compile_fn: Callable | None, timeout: float) -> Outcome:
    """Run one fresh copy of ``case`` (its method compiled by ``compile_fn`` when given)."""
    name = case._testMethodName
    fresh = type(case)(name)
    if compile_fn is not None:
        method = getattr(type(case), name)
        compiled = compile_fn(method)
        run_compiled = lambda: compiled(fresh)  # noqa: E731
        # (an @expectedFailure method is marked on its function: unittest reads the mark off the bound method)
        run_compiled.__unittest_expecting_failure__ = getattr(method, "__unittest_expecting_failure__", False)
        setattr(fresh, name, run_compiled)
    result = unittest.TestResult()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fresh.run(result)
    except _Timeout as e:
        return Outcome("hang", e, time.perf_counter() - start)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    seconds = time.perf_counter() - start
    if result.skipped:
        return Outcome("skip", None, seconds)
    for kind, found in (("error", result.errors), ("fail", result.failures)):
        if found:
            error = getattr(fresh, "_sf_error", None) or _ErrorText(found[0][1])
            return Outcome("hang" if isinstance(error, _Timeout) else kind, error, seconds)
    return Outcome("pass", None, seconds)


class _ErrorText(Exception):
    """Stands for an exception ``unittest`` kept only as formatted text."""


def _alarm(signum, frame):
    raise _Timeout("timed out")


def _capture_errors(case_type: type) -> None:
    """Make ``case_type``'s failures keep the exception object (``unittest`` keeps text): it is read back by
    :func:`_run` to tell the compiler's own exceptions from the test's."""
    if getattr(case_type, "_sf_patched", False):
        return
    original = case_type._callTestMethod if hasattr(case_type, "_callTestMethod") else None

    def call(self, method):
        try:
            return original(self, method) if original is not None else method()
        except BaseException as e:  # (a _Timeout too: unittest records it as an error)
            self._sf_error = e
            raise

    case_type._callTestMethod = call
    case_type._sf_patched = True


def run_module(module_name: str, compiler: str = "stillframe", backend: str = "eager", timeout: float = 20.0,
               pattern: str | None = None, show: bool = False, out=sys.stdout) -> tuple[int, list[TestFinding]]:
    """Run ``module_name``'s test methods eagerly and compiled; returns (tests compared, findings)."""
    compile_base, reset = COMPILERS[compiler]
    findings, compared = [], 0
    for case in test_cases(module_name, pattern):
        _capture_errors(type(case))
        eager = _run(case, None, timeout)
        if eager.kind != "pass":
            continue
        compared += 1
        reset()
        compiled = _run(case, lambda fn: compile_base(fn, backend=backend), timeout * 5)
        if compiled.kind in ("pass", "skip"):
            continue
        kind = "hang" if compiled.kind == "hang" else "internal" if _is_internal(compiled.error) else "divergence"
        finding = TestFinding(module_name, case.id().rsplit(".", 2)[-2] + "." + case._testMethodName, kind, compiled)
        findings.append(finding)
        print(finding.line(), file=out, flush=True)
        if show and compiled.error is not None:
            print("".join(traceback.format_exception(compiled.error)), file=out, flush=True)
    reset()
    return compared, findings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stillframe.check.cpython_tests",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+", help="test modules, e.g. test.test_generators")
    parser.add_argument("--compiler", choices=sorted(COMPILERS), default="stillframe")
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per eager test (compiled: 5 times)")
    parser.add_argument("-k", dest="pattern", default=None, help="only tests whose id holds this text")
    parser.add_argument("--show", action="store_true", help="print each finding's traceback")
    args = parser.parse_args(argv)
    total = 0
    for name in args.modules:
        start = time.perf_counter()
        compared, findings = run_module(name, args.compiler, args.backend, args.timeout, args.pattern, args.show)
        kinds = {k: sum(f.kind == k for f in findings) for k in ("internal", "hang", "divergence")}
        print(f"== {name}: {compared} tests compared, {len(findings)} findings {kinds} in "
              f"{time.perf_counter() - start:.0f} s", flush=True)
        total += len(findings)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
