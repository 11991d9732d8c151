"""Control flow, exceptions, generators, ``with`` and scopes as CPython's own test suite checks them (issue 11).

Findings of ``python -m stillframe.check.cpython_tests`` on ``test_generators``, ``test_contextlib``,
``test_raise``, ``test_with``, ``test_scope`` and ``test_exceptions``, each reduced to a small function. Every test
runs the function eagerly and compiled (backend ``eager``) and compares what came back or was raised: the value, the
exception's type and message, its ``__context__`` and ``__cause__`` (type and message), and what the function left
in the objects it was given.
"""

from __future__ import annotations

import sys
import warnings

import torch

import stillframe


def _describe(exc, depth=0):
    """An exception as plain data: type, message, and the same of its ``__context__`` and ``__cause__``."""
    if exc is None or depth > 4:
        return None
    return (type(exc).__name__, str(exc), _describe(exc.__context__, depth + 1), _describe(exc.__cause__, depth + 1),
            exc.__suppress_context__)


def _outcome(fn, args):
    try:
        value = fn(*args)
    except BaseException as e:  # noqa: B036 (SystemExit, GeneratorExit are compared too)
        return "raised", _describe(e)
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    elif isinstance(value, tuple):
        value = tuple(v.tolist() if isinstance(v, torch.Tensor) else v for v in value)
    return "returned", value


def assert_same(fn, make_args):
    """``fn`` eagerly and compiled (fresh arguments from ``make_args`` each side) return or raise the same."""
    eager = _outcome(fn, make_args())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = _outcome(stillframe.compile(fn, backend="eager"), make_args())
    assert compiled == eager


def _gen():
    yield 1


def test_delete_generator_name_raises_type_error():
    # test_generators GeneratorTest.test_name: ``del gen.__name__`` was recorded as a pending deletion and the
    # replay raised eager's TypeError after the trace, outside the user's ``except`` (an internal error)
    def f(x, gen):
        try:
            del gen.__name__
        except TypeError as e:
            return x + 1, str(e), gen.__name__
        return x, "none"

    assert_same(f, lambda: (torch.ones(2), _gen()))


class _Slotted:
    __slots__ = ("a", "__dict__")


def test_delete_slot_of_object_with_dict():
    # a slot of an object that also has a __dict__: deleting it was refused (it is not in the __dict__)
    def f(x, obj):
        try:
            del obj.a
        except AttributeError as e:
            return x + 1, str(e)
        return x, hasattr(obj, "a")

    def make():
        obj = _Slotted()
        obj.a = 1
        return torch.ones(2), obj

    assert_same(f, make)


def test_system_exit_of_a_real_step_reaches_the_users_except():
    # test_exceptions ExceptionTests.testRaising: SystemExit raised by a real step (sys.exit) went past the user's
    # ``except SystemExit`` out of the call (the real step caught Exception only)
    import sys

    def f(x):
        log = []
        try:
            sys.exit(3)
        except SystemExit as e:
            log.append(("caught", e.code))
        return x + 1, log

    assert_same(f, lambda: (torch.ones(2),))


def test_generator_exit_of_a_real_step_runs_the_users_finally():
    # test_with ExceptionalTestCase.testRaisedGeneratorExit1/2: GeneratorExit raised in a ``with`` of a
    # @contextmanager skipped the context manager's exit and the user's ``finally``
    import contextlib

    log = []

    @contextlib.contextmanager
    def cm():
        log.append("enter")
        yield
        log.append("exit")

    def f(x):
        del log[:]
        try:
            with cm():
                print("", end="")  # a real step
                raise GeneratorExit("from with")
        finally:
            log.append("finally")

    def run(fn):
        try:
            fn(torch.ones(2))
        except GeneratorExit as e:
            return str(e), list(log)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run(stillframe.compile(f, backend="eager")) == run(f)


def _set_relative_recursion_limit(n):
    import sys

    depth = 1
    while True:
        try:
            sys.setrecursionlimit(depth)
        except RecursionError:
            depth += 1
        else:
            break
    sys.setrecursionlimit(depth + n)


def _recurse_in_except():
    try:
        1 / 0
    except ZeroDivisionError:
        _recurse_in_except()


def test_recursion_limit_set_near_the_users_depth():
    # test_exceptions ExceptionTests.test_recursion_in_except_handler: the user sets the recursion limit 10 frames
    # above its depth to meet a RecursionError in its own recursion. The next trace (and the next real step's
    # trampolines) raised that RecursionError inside stillframe, out of the call past the user's ``finally``, which
    # then never set the limit back
    import sys

    def f(x):
        limit = sys.getrecursionlimit()
        out = []
        try:
            _set_relative_recursion_limit(10)
            try:
                _recurse_in_except()
            except RecursionError:
                out.append("recursion")
        finally:
            sys.setrecursionlimit(limit)
        return x + 1, out, sys.getrecursionlimit() == limit

    limit = sys.getrecursionlimit()
    try:
        assert_same(f, lambda: (torch.ones(2),))
    finally:
        sys.setrecursionlimit(limit)


def test_bare_raise_with_no_active_exception_after_a_break():
    # test_raise TestRaise.test_invalid_reraise: a bare ``raise`` run for real with no exception being handled
    # raised TypeError("exceptions must derive from BaseException") (the executor raised None)
    def f(x):
        print("", end="")  # a real step: the raise below runs for real
        try:
            raise
        except RuntimeError as e:
            return x + 1, str(e)

    assert_same(f, lambda: (torch.ones(2),))


def test_bare_raise_reraises_the_callers_exception_after_a_break():
    # a bare ``raise`` in a function called from the caller's ``except`` re-raises the caller's exception
    def f(x):
        print("", end="")
        raise

    def caller(fn):
        try:
            raise KeyError("outer")
        except KeyError:
            fn(torch.ones(2))

    def outcome(fn):
        try:
            caller(fn)
        except BaseException as e:
            return _describe(e)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert outcome(stillframe.compile(f, backend="eager")) == outcome(f)


def _raise(exc):
    raise exc


def _chain(exc, depth=0):
    return None if exc is None or depth > 5 else (type(exc).__name__, _chain(exc.__context__, depth + 1))


def test_exit_stack_chains_its_callbacks_exceptions():
    # test_contextlib TestExitStack.test_exit_exception_chaining / ..._with_existing_context: ExitStack.__exit__,
    # run for real, reads sys.exc_info() to chain what its callbacks raise as nested ``with`` statements would; it
    # was called outside the handler, so it saw no exception and the chain was wrong (IndexError's __context__ was
    # the ZeroDivisionError, not the KeyError)
    import contextlib

    def f(x):
        saved = []

        def suppress(*details):
            saved.append(details[1])
            return True

        try:
            with contextlib.ExitStack() as stack:
                stack.callback(_raise, IndexError)
                stack.callback(_raise, KeyError)
                stack.callback(_raise, AttributeError)
                stack.push(suppress)
                stack.callback(_raise, ValueError)
                1 / 0
        except IndexError as exc:
            return x + 1, _chain(exc), _chain(saved[0])

    assert_same(f, lambda: (torch.ones(2),))


class _MyException(Exception):
    pass


def test_exit_keeps_an_explicit_none_context():
    # test_contextlib TestExitStack.test_exit_exception_explicit_none_context: a context manager's exit raises an
    # exception whose __context__ it set to None; the real step chained the body's exception to it again
    import contextlib

    @contextlib.contextmanager
    def cm():
        try:
            yield
        except BaseException:
            exc = _MyException()
            try:
                raise exc
            finally:
                exc.__context__ = None

    def f(x):
        try:
            with cm():
                raise IndexError()
        except _MyException as exc:
            return x + 1, _chain(exc)

    assert_same(f, lambda: (torch.ones(2),))


def test_exec_and_eval_read_the_users_locals_after_a_break():
    # test_scope ScopeTests.testClassAndGlobal: ``exec(src)`` run for real found stillframe's frame as its caller
    # (NameError: name 'self' is not defined where eager reads the user's local)
    def f(x):
        y = 5
        print("", end="")
        exec("z = y + 1")
        return x + eval("y * 2")

    assert_same(f, lambda: (torch.ones(2),))


def test_unbound_own_cell_is_an_unbound_local_error():
    # test_scope ScopeTests.testUnboundLocal / testUnboundLocal_AfterDel: reading a cell of the frame's own before
    # it is bound raised NameError ("free variable") where eager raises UnboundLocalError ("local variable"),
    # traced and after a break alike
    def traced(x):
        x = x + 1
        print(y)

        def inner():
            return y
        y = 1

    def after_break(x):
        print("", end="")
        y = 1
        del y
        return x + y

        def inner():
            return y

    def free(x):
        def inner():
            return x + y
        z = inner()
        y = 1
        return z

    for fn in (traced, after_break, free):
        assert_same(fn, lambda: (torch.ones(2),))


_FINALIZED: list = []


class _Finalized:
    def __del__(self):
        _FINALIZED.append("del")


def test_del_in_a_handler_of_a_traced_exception_collects_at_once():
    # test_raise TestContext.test_3611: ``del x`` in the ``except`` of an exception the plan raised did not collect
    # ``x`` (its __del__ ran at some later collection): the traceback's frames, made by trampolines, linked through
    # f_back to the plan's frames, which held every live value of the call
    def f(x):
        obj = _Finalized()
        try:
            try:
                f.missing
            except AttributeError:
                del obj
                _FINALIZED.append("after del")
                raise TypeError
        except TypeError as e:
            return x + 1, type(e.__context__).__name__, list(_FINALIZED)

    def make():
        del _FINALIZED[:]
        return (torch.ones(2),)

    assert_same(f, make)


class _LacksEnter:
    def __exit__(self, *exc_info):
        pass


class _LacksExit:
    def __enter__(self):
        return self


def test_with_on_an_object_lacking_enter_or_exit():
    # test_with FailureTestCase.testEnterAttributeError1/2, testExitAttributeError (and test_contextlib
    # test_typo_enter/exit): CPython 3.11 raises TypeError "... does not support the context manager protocol";
    # the real step raised AttributeError "type object ... has no attribute '__enter__'"
    def f(x, manager):
        try:
            with manager:
                x = x + 1
        except TypeError as e:
            return x, str(e)

    for manager in (_LacksEnter, _LacksExit, object):
        assert_same(f, lambda: (torch.ones(2), manager()))


class _Blech:
    blech = None


def test_name_and_attribute_errors_carry_the_name():
    # test_exceptions NameErrorTests.test_name_error_has_name, AttributeErrorTests.test_getattr_has_name_and_obj:
    # the NameError / AttributeError the trace raised for a missing name had ``.name`` None (CPython sets it; the
    # traceback's "Did you mean" reads it). (``AttributeError.obj`` is still None: see the module's report.)
    def undefined(x):
        try:
            bluch  # noqa: F821
        except NameError as e:
            return x + 1, e.name

    def undefined_after_break(x):
        print("", end="")
        try:
            bluch  # noqa: F821
        except NameError as e:
            return x + 1, e.name

    def missing_attr(x, obj):
        try:
            obj.bluch
        except AttributeError as e:
            return x + 1, e.name

    assert_same(undefined, lambda: (torch.ones(2),))
    assert_same(undefined_after_break, lambda: (torch.ones(2),))
    assert_same(missing_attr, lambda: (torch.ones(2), _Blech()))
    assert_same(missing_attr, lambda: (torch.ones(2), _Blech))


def _in_except():
    try:
        1 / 0
    except ZeroDivisionError:
        print("", end="")
        1 / 0
        pass


def test_traceback_frame_lines_are_measured_from_the_users_first_line():
    # test_exceptions PEP626Tests (test_lineno_after_raise_in_except, ..._in_named_except, ..._in_finally_*): a
    # traceback entry made by a trampoline had a frame whose f_code.co_firstlineno was the trampoline's own (its
    # ``def`` two lines above the user's line), so f_lineno - co_firstlineno was 1 or 2 whatever the user's line
    def f(x):
        _in_except()
        return x

    def lines(fn):
        try:
            fn(torch.ones(2))
        except ZeroDivisionError as e:
            tb, found = e.__traceback__, []
            while tb is not None:
                code = tb.tb_frame.f_code
                if code.co_name in ("f", "_in_except"):
                    found.append((code.co_name, tb.tb_frame.f_lineno - code.co_firstlineno))
                tb = tb.tb_next
            return found

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert lines(stillframe.compile(f, backend="eager")) == lines(f)
