"""Divergences CPython's own tests find on Python 3.12 and 3.13 but not on 3.11 (issue 11).

Found by ``python -m stillframe.check.cpython_tests`` run on each version's own ``test`` package (test_raise,
test_contextlib, test_generators, test_super, test_dict, test_list ...) and compared with the 3.11 run. Each is
reduced to a small function checked against eager. Where the cause is general (the version only changes the path
that reaches it, e.g. 3.13's ``module.__setattr__`` being object's), the test runs on every version.
"""

import contextlib
import io
import sys

import pytest
import torch

from stillframe.check.parity import assert_parity


class _Box:
    pass


def _attr_from_a_pop(x, box, items):
    box.item = items.pop()
    y = x + 1
    print(end="")  # a graph break: the pop and the store are replayed by the plan
    return y, type(box.item).__name__, len(items)


def test_a_value_popped_from_an_outside_list_is_read_before_the_list_is_replayed():
    # test_contextlib TestRedirectStdout/TestRedirectStderr (6 tests) on 3.13: `setattr(sys, self._stream,
    # self._old_targets.pop())` in redirect_stdout.__exit__ is traced there (3.13's module.__setattr__ is object's;
    # 3.11 and 3.12 break on it), and the plan replayed `_old_targets[:] = []` before reading the popped value as
    # `_old_targets[0]`: an IndexError of the rebuild's own reached the user. The same on every version for an
    # object's attribute
    assert_parity(_attr_from_a_pop, lambda: (torch.ones(2), _Box(), [_Box()]))


def _redirected(x, target):
    with contextlib.redirect_stdout(target):
        print("hello", file=sys.stdout)
    return x + 1, target.getvalue(), sys.stdout is sys.__stdout__ or sys.stdout is not target


def test_redirect_stdout_restores_the_stream_it_replaced():
    # test_contextlib TestRedirectStdout.test_redirect_to_string_io (3.13)
    assert_parity(_redirected, lambda: (torch.ones(2), io.StringIO()))


def _closed_after_its_end(x):
    def gen():
        try:
            yield
        except GeneratorExit:
            return 0

    g = gen()
    next(g)
    try:
        next(g)
    except StopIteration:
        pass
    print(end="")  # a graph break: the finished generator is rebuilt
    return x + 1, g.close(), type(g).__name__, g.gi_frame, g.__qualname__


def test_a_finished_generator_is_rebuilt_as_a_generator():
    # test_generators GeneratorCloseTest.test_close_exhausted (new in 3.13; the cause is on every version): a
    # generator the trace ran to its end was rebuilt at a break as iter(()), a tuple_iterator, and
    # `gen.close()` raised AttributeError
    assert_parity(_closed_after_its_end, lambda: (torch.ones(2),))


class _MySuper:
    calls: list = []

    def __init__(self, *args):
        _MySuper.calls.append(args)

    msg = "super super"


_SHADOWED = '''
class C:
    def zero(self):
        return super().msg

    def two(self):
        return super(1, 2).msg


def zero(x):
    return x + 1, *called(C().zero)


def two(x):
    return x + 1, *called(C().two)


def called(method):
    before = len(MySuper.calls)
    try:
        value = method()
    except (AttributeError, TypeError) as e:  # (what the trace's builtin super raised)
        value = type(e).__name__
    return value, MySuper.calls[before:]
'''


def _with_super_shadowed() -> dict:
    namespace = {"super": _MySuper, "MySuper": _MySuper, "__name__": "shadowed_super"}
    exec(compile(_SHADOWED, "<shadowed super>", "exec"), namespace)
    return namespace


def test_super_shadowed_by_a_global_is_called_as_written():
    # test_super TestSuper.test_shadowed_dynamic, test_shadowed_dynamic_two_arg (Python 3.12+: `super().x` is one
    # LOAD_SUPER_ATTR, which calls a global `super` that is not the builtin with (), or (a, b) as written): the trace
    # and the real step took it for the builtin, read MySuper's attribute from the real super (AttributeError), or
    # checked (1, 2) as the builtin's arguments (TypeError). On 3.11 the call is an ordinary CALL
    namespace = _with_super_shadowed()
    assert_parity(namespace["zero"], lambda: (torch.ones(2),))
    assert_parity(namespace["two"], lambda: (torch.ones(2),))


class _BadFirstArg:
    def method(self):
        return super(1, self).method()


def _bad_first_arg(x):
    try:
        _BadFirstArg().method()
    except TypeError as e:
        return x + 1, str(e)
    return x, None


def test_super_with_a_first_argument_that_is_no_type_raises_the_builtins_error():
    # test_super TestSuper.test_bad_first_arg (Python 3.12+): "super() argument 1 must be a type, not int" was
    # the trace's "super(type, obj): obj must be an instance or subtype of type"
    assert_parity(_bad_first_arg, lambda: (torch.ones(2),))


class _ConstructsNone(BaseException):
    @classmethod
    def __new__(*args, **kwargs):
        return None


def _cause_class_that_makes_none(x):
    try:
        raise IndexError from _ConstructsNone
    except TypeError as e:
        return x + 1, "TypeError", str(e)
    except IndexError as e:
        return x - 1, "IndexError", e.__cause__, e.__suppress_context__


def test_a_cause_class_that_makes_no_exception():
    # test_raise TestCause.test_class_cause_nonexception_result (3.13): CPython 3.13 raises TypeError "calling
    # <class ...> should have returned an instance of BaseException, not <class 'NoneType'>"; 3.11 and 3.12 take
    # the None for the cause. The trace did as 3.11 on every version
    assert_parity(_cause_class_that_makes_none, lambda: (torch.ones(2),))


class _SuperCheck:
    def method(self, type_, obj):
        return super(type_, obj).method()


def _supercheck(x, type_, obj):
    try:
        _SuperCheck().method(type_, obj)
    except TypeError as e:
        return x + 1, str(e)
    return x, None


@pytest.mark.parametrize("type_,obj", [(int, _SuperCheck()), (_SuperCheck, []), (_SuperCheck, list)],
                         ids=["instance-of-other", "builtin-instance", "type"])
def test_super_refusing_its_object_raises_this_pythons_message(type_, obj):
    # test_super TestSuper.test_supercheck_fail (3.13): "super(type, obj): obj (instance of list) is not an instance
    # or subtype of type (_SuperCheck)." where 3.11 and 3.12 say "obj must be an instance or subtype of type"; the
    # trace's message was 3.11's
    assert_parity(_supercheck, lambda: (torch.ones(2), type_, obj))
