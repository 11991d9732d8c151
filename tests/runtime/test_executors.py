"""The real steps (:mod:`stillframe.runtime.executors`) against the symbolic handlers, and the choke point
between stillframe's own errors and the user's (issue 10)."""

import pytest
import torch

import stillframe
import stillframe.runtime.compiler  # noqa: F401  (registers every handler and executor)
from stillframe.check.parity import assert_parity
from stillframe.errors import InternalError, Unsupported
from stillframe.runtime.executors import EXECUTORS, register
from stillframe.trace.interpreter import HANDLERS, Tracer

# Opcodes with a real step but no symbolic handler: they only run for real, instruction by instruction
# (an exception handler's body, pattern matching, deleting outside names, class bodies).
REAL_ONLY = {"DELETE_DEREF", "DELETE_GLOBAL", "LOAD_BUILD_CLASS", "MATCH_CLASS", "MATCH_KEYS", "MATCH_MAPPING",
             "MATCH_SEQUENCE", "WITH_EXCEPT_START"}


def test_every_handler_has_an_executor():
    # A trace may stop at any instruction it handles; the runtime must be able to run that one for real.
    assert sorted(set(HANDLERS) - set(EXECUTORS)) == []


def test_executors_without_handlers_are_exactly_the_listed_ones():
    assert sorted(set(EXECUTORS) - set(HANDLERS)) == sorted(REAL_ONLY)


def test_register_refuses_a_second_executor_and_an_unknown_opname():
    with pytest.raises(AssertionError, match="two executors for NOP"):
        register("NOP", lambda cont, frame, inst: None)
    with pytest.raises(AssertionError, match="no supported CPython emits"):
        register("NOT_AN_OPCODE", lambda cont, frame, inst: None)


def del_twice(x):
    y = x + 1
    del y
    del y
    return x


def test_deleting_an_unbound_local_raises_unbound_local_error_as_eager():
    # The second `del` breaks the graph and runs for real: eager's UnboundLocalError, not a KeyError.
    assert_parity(del_twice, lambda: (torch.randn(3),))


class Ordered:
    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        return self.v < other.v


def max_of_objects_in_try(x):
    try:
        return x * max(Ordered(1), Ordered(2)).v
    except Exception:
        return x - 100


def test_a_trace_that_cannot_fold_never_enters_the_users_except():
    # max() over user objects cannot be folded to a constant: that is stillframe's Unsupported, which the
    # traced `except Exception:` must not catch (it used to return x - 100).
    assert_parity(max_of_objects_in_try, lambda: (torch.ones(2),))


def test_user_error_refuses_stillframe_errors():
    tracer = Tracer(None, None, True)
    for error in (Unsupported("x"), InternalError("y")):
        with pytest.raises(type(error)):
            tracer.user_error(error)


def catch_everything_around_a_break(x):
    try:
        y = x.sin()
        print("a break")  # a real step inside the try
        return y + 1
    except Exception:
        return x - 100


def test_a_real_step_inside_a_users_try_runs_as_eager(capsys):
    assert_parity(catch_everything_around_a_break, lambda: (torch.randn(3),), calls=2)
