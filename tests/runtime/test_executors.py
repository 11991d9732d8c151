"""The real steps (:mod:`stillframe.runtime.executors`) against the symbolic handlers, and the choke point
between stillframe's own errors and the user's (issue 10)."""

import dis
import sys

import pytest
import torch

import stillframe
import stillframe.runtime.compiler  # noqa: F401  (registers every handler and executor)
from stillframe.check.parity import assert_parity
from stillframe.errors import InternalError, Unsupported
from stillframe.bytecode import read
from stillframe.bytecode.reader import NO_REAL_STEP
from stillframe.runtime.executors import EXECUTORS, register
from stillframe.runtime.live import Continuation, LiveFrame
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


def test_code_with_an_opcode_that_has_no_real_step_is_never_traced():
    # NO_REAL_STEP lists opcodes with no executor; the runtime refuses to trace code holding one (bytecode.reader)
    assert not NO_REAL_STEP & set(EXECUTORS)


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


# ---- every instruction of a function run for real, by the executors alone, against CPython running it.
# On CPython 3.13 the bytecode reader turns 3.13's own forms (superinstructions, CALL_KW, TO_BOOL,
# CONVERT_VALUE/FORMAT_*, SET_FUNCTION_ATTRIBUTE, PUSH_NULL after the callable, END_FOR + POP_TOP) into
# the 3.12 instructions these executors run; this checks that the two agree on live values.

RAW_313_FORMS = {"LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "CALL_KW", "TO_BOOL",
                 "CONVERT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "SET_FUNCTION_ATTRIBUTE", "PUSH_NULL",
                 "END_FOR", "LOAD_FAST_AND_CLEAR", "CALL_FUNCTION_EX"}


def every_313_form(a, b, xs):
    a, b = b, a  # STORE_FAST_STORE_FAST
    total = a + b  # LOAD_FAST_LOAD_FAST
    doubled = total * 2
    c = doubled  # STORE_FAST_LOAD_FAST on 3.13
    text = f"{a!r:>6}|{b:03d}|{xs!s}|{c}|{total!a}"  # CONVERT_VALUE, FORMAT_WITH_SPEC, FORMAT_SIMPLE
    ordered = sorted(xs, key=abs, reverse=True)  # CALL_KW
    neg, small = not total, total < 3  # TO_BOOL + UNARY_NOT, COMPARE_OP
    if total < 100 and xs:  # COMPARE_OP with 3.13's bool() bit, TO_BOOL before a jump
        total += 1
    for x in xs:  # FOR_ITER, END_FOR + POP_TOP
        total += x
    squares = [x * x for x in xs if x]  # LOAD_FAST_AND_CLEAR (an inlined comprehension)
    scale = 3
    f = lambda v, w=scale, *, k=1: v * w + k + scale  # MAKE_FUNCTION + SET_FUNCTION_ATTRIBUTE, LOAD_CLOSURE
    pick = max
    most = pick(total, c)  # PUSH_NULL after a local callable
    star = pick(*xs, *squares)  # CALL_FUNCTION_EX
    try:
        int(text)
    except ValueError as e:
        caught = type(e).__name__
    return text, ordered, neg, small, total, squares, f(a, k=2), most, star, caught, doubled


def run_by_executors(fn, *args):
    """``fn(*args)`` with every instruction of ``fn`` run by its executor (``fn`` has no free variables)."""
    code = read(fn.__code__)
    frame = LiveFrame(code, 0, [], dict(zip(fn.__code__.co_varnames, args)), {}, fn.__globals__, fn.__module__)
    cont = Continuation([frame], concrete=True)
    while not cont.step():
        pass
    return cont.returned


def test_executors_run_a_function_as_cpython_does(monkeypatch):
    ran = []
    for opname, fn in list(EXECUTORS.items()):
        def recording(cont, frame, inst, fn=fn):
            ran.append(inst.opname)
            return fn(cont, frame, inst)
        monkeypatch.setitem(EXECUTORS, opname, recording)
    args = (2, 5, [3, -7, 0])
    assert run_by_executors(every_313_form, *args) == every_313_form(*args)
    wanted = {"FORMAT_VALUE", "KW_NAMES", "MAKE_FUNCTION", "LOAD_CLOSURE", "UNARY_NOT", "FOR_ITER", "PUSH_NULL",
              "CALL_FUNCTION_EX", "PUSH_EXC_INFO"}
    wanted |= {"LOAD_FAST_AND_CLEAR"} if sys.version_info >= (3, 12) else set()  # inlined comprehensions
    assert wanted <= set(ran), sorted(wanted - set(ran))
    if sys.version_info >= (3, 13):
        raw = {i.opname for i in dis.get_instructions(every_313_form)}
        assert RAW_313_FORMS <= raw, sorted(RAW_313_FORMS - raw)  # the sample really has 3.13's forms
