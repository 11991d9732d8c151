"""Exceptions made in traced code are objects made afresh on every call, as eager makes them (rules/exceptions.py).

They were constants of the trace: one object baked into the plan served every call (a logged or returned
exception was the same object each time, notes and attributes accumulated across calls, a chained exception was
shared), ``__traceback__`` was ``None`` in the traced handler and outside (``__exit__`` got ``tb=None``), a user
class's ``__init__`` was not honoured when the plan copied it, and an exception object from outside the trace,
raised in it, had its first call's values baked in.

Each test calls the function three times eagerly and three times compiled, and compares what the calls returned or
raised and what they left in ``LOG``, described by :func:`_describe`: every exception's class, args, ``str``,
``repr``, notes, instance attributes, chaining and traceback entries (function name and line), and which
objects are the same object (``LOG[-1] is not LOG[-2]`` across calls).
"""

from __future__ import annotations

import io
import json
import sys
import traceback
import warnings

import pytest
import torch

import stillframe
from stillframe.errors import StillframeWarning

BACKENDS = ["eager", "aot_eager"]
BUF = io.StringIO()
LOG: list = []


def _describe(value, labels: dict):
    """A plain-data description of ``value``; objects with identity (exceptions, lists) are labelled in order of
    first appearance, so that the same object seen twice is described as the same label both times."""
    if isinstance(value, torch.Tensor):
        return "tensor", value.tolist()
    if isinstance(value, (BaseException, list)):
        if id(value) in labels:
            return "same as", labels[id(value)][0]
        labels[id(value)] = (len(labels), value)  # (the object is kept alive: its id is not reused meanwhile)
        if isinstance(value, list):
            return "list", labels[id(value)][0], [_describe(v, labels) for v in value]
        return ("exception", labels[id(value)][0], type(value).__name__, _describe(value.args, labels), str(value),
                repr(value), _describe(getattr(value, "__notes__", None), labels),
                {k: _describe(v, labels) for k, v in vars(value).items() if k != "__notes__"},
                _describe(value.__context__, labels), _describe(value.__cause__, labels),
                value.__suppress_context__, _walk(value.__traceback__))
    if isinstance(value, tuple):
        return tuple(_describe(v, labels) for v in value)
    if isinstance(value, dict):
        return {k: _describe(v, labels) for k, v in value.items()}
    return value


def _walk(tb) -> list:
    entries = []
    while tb is not None:
        entries.append((tb.tb_frame.f_code.co_name, tb.tb_lineno))
        tb = tb.tb_next
    return entries


def _three_calls(fn, backend=None) -> tuple:
    """What three calls of ``fn`` (compiled with ``backend`` when given) returned or raised, and what they left in
    ``LOG``; and the StillframeWarnings (eager fallbacks) the compiled calls emitted."""
    LOG.clear()
    target = stillframe.compile(fn, backend=backend) if backend else fn
    outcomes = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StillframeWarning)
        for i in range(3):
            try:
                outcomes.append(("returned", target(torch.ones(2) * i)))
            except Exception as e:
                outcomes.append(("raised", e))
    labels: dict = {}
    seen = _describe(outcomes, labels), _describe(list(LOG), labels)
    LOG.clear()
    return seen, [str(w.message) for w in caught if issubclass(w.category, StillframeWarning)]


def assert_same_as_eager(fn, backend):
    eager, _ = _three_calls(fn)
    compiled, fallbacks = _three_calls(fn, backend)
    assert fallbacks == [], fallbacks
    assert compiled == eager


# ------------------------------------------------------------------ one object per call
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_logged_exception_is_a_new_object_with_its_traceback_on_every_call(backend):
    # the plan copied one baked object: each call's copy had no traceback (eager's has the frame it was raised in)
    def fn(x):
        try:
            raise ValueError("v", 1)
        except ValueError as e:
            LOG.append(e)
        return x + 1

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_notes_added_in_the_handler_belong_to_that_calls_exception(backend):
    # add_note broke the graph and ran on the baked object: call n's exception had n notes
    def fn(x):
        try:
            raise ValueError("v")
        except ValueError as e:
            e.add_note("while loading")
            LOG.append(e)
        return x + 1

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_notes_added_before_the_raise_are_kept(backend):
    def fn(x):
        e = ValueError("v")
        e.add_note("first")
        try:
            raise e
        except ValueError as f:
            return x + 1, f

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_chained_exception_is_not_shared_between_calls(backend):
    # the cause (and context) of a logged exception was one object for every call
    def fn(x):
        try:
            try:
                raise KeyError("k")
            except KeyError as k:
                raise ValueError("v") from k
        except ValueError as e:
            LOG.append(e)
            return x + 1, e.__cause__ is e.__context__

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_list_in_args_is_the_list_itself(backend):
    # args were made constants: e.args[0] was a copy, blind to the append
    def fn(x):
        items = [1]
        try:
            raise ValueError(items)
        except ValueError as e:
            items.append(2)
            return x + 1, e.args, e.args[0] is items

    assert_same_as_eager(fn, backend)


class Failed(Exception):
    def __init__(self, code, message="failed"):
        super().__init__(message)
        self.code = code
        self.seen = [code]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_exception_class_keeps_what_its_init_made(backend):
    # the plan remade it as Failed(*args) and then copied its __dict__: args became ('failed',), not ('boom',)
    def fn(x):
        try:
            raise Failed(3, "boom")
        except Failed as e:
            LOG.append(e)
            return x + 1, e.code, str(e)

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_attribute_list_of_a_user_exception_is_new_on_every_call(backend):
    # one baked object's list: [3, 9], then [3, 9, 9] ...
    def fn(x):
        try:
            raise Failed(3)
        except Failed as e:
            e.seen.append(9)
            return x + 1, e.seen

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_args_come_from_this_call(backend):
    # Failed(n) broke the graph (a class with BaseException.__new__), and the resumed trace raised the first
    # call's object for every call: e.code was 0 on every call
    def fn(x):
        n = int(x.sum())
        try:
            raise Failed(n)
        except Failed as e:
            return x + 1, e.code

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_made_before_a_break_and_raised_after_it(backend):
    # made before the print, raised after it: the live object was baked into the resumed plan (args of call 0)
    def fn(x):
        err = ValueError(int(x.sum()))
        print("made", file=BUF)
        try:
            raise err
        except ValueError as e:
            return x + 1, e.args, e is err

    assert_same_as_eager(fn, backend)


# ------------------------------------------------------------------ tracebacks
def _fail(n):
    raise ValueError("inner", n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_traceback_read_in_the_handler(backend):
    # __traceback__ was None in the traced handler
    def fn(x):
        try:
            _fail(1)
        except ValueError as e:
            return x + 1, e.__traceback__ is None, _walk(e.__traceback__)

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_traceback_of_an_exception_that_leaves_the_function(backend):
    # the logged exception's traceback names the frames it was raised through: the handler's, then the raiser's
    def fn(x):
        try:
            try:
                _fail(2)
            except ValueError:
                raise
        except ValueError as e:
            LOG.append(e)
        return x + 1

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_raise_again_by_name_adds_a_traceback_entry(backend):
    def fn(x):
        try:
            try:
                _fail(2)
            except ValueError as e:
                raise e
        except ValueError as f:
            return x + 1, f

    assert_same_as_eager(fn, backend)


class _Exit:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        LOG.append((kind, value, _walk(tb)))
        return True


@pytest.mark.parametrize("backend", BACKENDS)
def test_exit_gets_the_traceback(backend):
    # __exit__ got tb=None
    def fn(x):
        with _Exit():
            _fail(3)
        return x + 1

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exc_info_and_format_exc_in_the_handler(backend):
    # sys.exc_info()[2] was None and format_exc printed no frame
    def fn(x):
        try:
            _fail(4)
        except ValueError:
            text = traceback.format_exc()
            return x + 1, _walk(sys.exc_info()[2]), text.count('File "'), text.splitlines()[-1]

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_with_traceback_none_returns_the_exception_itself(backend):
    # with_traceback broke the graph and ran on a copy: e.with_traceback(None) is e was False
    def fn(x):
        try:
            raise ValueError("v")
        except ValueError as e:
            return x + 1, e.with_traceback(None) is e, e.__traceback__ is None

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_traceback_of_an_exception_a_real_step_raised_in_a_frame_stillframe_runs(backend):
    # json.loads is traced down to its C scanner, which runs for real and raises: the handler's traceback held
    # stillframe's executor frames (live.py, executors.py), not f, loads, decode, raw_decode
    def fn(x):
        try:
            json.loads("{")
        except ValueError as e:
            return x + 1, _walk(e.__traceback__)

    assert_same_as_eager(fn, backend)


# ------------------------------------------------------------------ what the trace answers
@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_answered_in_the_trace(backend):
    def fn(x):
        try:
            raise OSError(2, "missing", "f.txt")
        except FileNotFoundError as e:
            e.tag = "t"
            return (x + 1, type(e).__name__, e.errno, e.filename, str(e), repr(e), e.args, e.tag,
                    f"{e!r}", isinstance(e, (KeyError, OSError)), getattr(e, "nope", None))

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_c_state_and_args_written_in_the_trace(backend):
    def fn(x):
        stop = StopIteration(5)
        stop.value = 6
        err = ValueError(1)
        err.args = [1, 2]
        err.__context__ = stop
        return x + 1, stop, err, str(err)

    assert_same_as_eager(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_group_keeps_its_exceptions(backend):
    def fn(x):
        v = ValueError(1)
        group = ExceptionGroup("g", [v, KeyError(2)])
        LOG.append(group)
        return x + 1, group.exceptions[0] is v, group.message, type(BaseExceptionGroup("b", [v])).__name__

    assert_same_as_eager(fn, backend)
