"""The CPython-test-suite runner (``stillframe.check.cpython_tests``): what it compares and how it classifies."""

import io
import sys
import types
import unittest

import pytest

import stillframe
from stillframe.check import cpython_tests, fuzz


class _Cases(unittest.TestCase):
    __test__ = False  # run by the runner under test, not by pytest

    def test_generator_chaining(self):
        def gen():
            try:
                yield 1
                yield 2
            finally:
                log.append("closed")
        log = []
        g = gen()
        self.assertEqual(next(g), 1)
        g.close()
        self.assertEqual(log, ["closed"])
        try:
            try:
                raise KeyError("a")
            except KeyError as e:
                raise ValueError("b") from e
        except ValueError as e:
            self.assertIsInstance(e.__cause__, KeyError)

    def test_eager_fails(self):
        self.assertEqual(1, 2)

    @unittest.skip("skipped eagerly")
    def test_skipped(self):
        pass


@pytest.fixture
def cases_module(monkeypatch):
    module = types.ModuleType("sf_cpython_cases")
    module._Cases = _Cases
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module.__name__


def test_only_tests_eager_passes_are_compared_and_a_compiled_pass_is_no_finding(cases_module):
    out = io.StringIO()
    compared, findings = cpython_tests.run_module(cases_module, "stillframe", out=out)
    assert (compared, findings, out.getvalue()) == (1, [], "")


@pytest.mark.parametrize("raised, kind", [(AssertionError, "divergence"), (stillframe.errors.StillframeError,
                                                                           "internal")])
def test_a_compiled_failure_is_a_finding_of_its_kind(cases_module, monkeypatch, raised, kind):
    def broken(fn, backend="eager"):
        def run(*args):
            raise raised("made by the test's compiler")
        return run
    monkeypatch.setitem(fuzz.COMPILERS, "broken", (broken, lambda: None))
    out = io.StringIO()
    compared, findings = cpython_tests.run_module(cases_module, "broken", out=out)
    assert compared == 1 and [f.kind for f in findings] == [kind]
    assert findings[0].test == "_Cases.test_generator_chaining" and "made by the test's compiler" in out.getvalue()
