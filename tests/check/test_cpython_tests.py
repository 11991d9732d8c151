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


def test_doctests_a_module_loads_are_left_out(cases_module):
    # test_generators's load_tests adds its doctests (DocTestCase, method runTest): they were taken for test methods
    # and remaking one by name raised AttributeError out of the runner, which stopped before the module's summary
    import doctest

    documented = types.ModuleType("sf_cpython_doctests", ">>> 1 + 1\n2\n")

    def load_tests(loader, tests, pattern):
        tests.addTest(doctest.DocTestSuite(documented))
        return tests
    sys.modules[cases_module].load_tests = load_tests
    assert [case._testMethodName for case in cpython_tests.test_cases(cases_module)] == \
        ["test_eager_fails", "test_generator_chaining", "test_skipped"]


class _ExpectedFailure(unittest.TestCase):
    __test__ = False

    @unittest.expectedFailure
    def test_known_failure(self):
        self.assertEqual(1, 2)


def test_an_expected_failure_stays_expected_when_compiled(monkeypatch):
    # the compiled method replaced the test's method without its @expectedFailure mark, so unittest took its
    # (expected) failure for a real one: test_descr's test_bad_new was a divergence
    module = types.ModuleType("sf_cpython_expected")
    module._ExpectedFailure = _ExpectedFailure
    monkeypatch.setitem(sys.modules, module.__name__, module)
    out = io.StringIO()
    compared, findings = cpython_tests.run_module(module.__name__, "stillframe", out=out)
    assert (compared, findings, out.getvalue()) == (1, [], "")
