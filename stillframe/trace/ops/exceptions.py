"""Exceptions and imports: ``LOAD_ASSERTION_ERROR``, ``RAISE_VARARGS``, ``IMPORT_NAME``, ``IMPORT_FROM``.

A ``raise`` reached during tracing is the user's own exception: the tracer sends
it to the innermost traced ``except``/``finally`` (``Tracer.catch``); when none
catches it, the instruction runs for real, so the user sees exactly eager's
exception and traceback. The exception is a value of the trace, made afresh by
the plan on every call (:mod:`stillframe.rules.exceptions`).
Only already-imported modules can be imported inside a traced function
(importing runs arbitrary code, which tracing must not do).
"""

from __future__ import annotations
from ...own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from ...variables.base import BuiltinVariable, ConstantVariable, NullVariable
from ...rules.attrs import getattr_var, super_attr
from ...rules.builtin_calls import checked_super
from ...rules.exceptions import HANDLER_CLASSES_ERROR, handler_classes_valid, handler_matches, raise_value
from ...rules.imports import import_statement
from ...rules.known import const_value
from ...rules.type_checks import python_type_of
from ..interpreter import handler


@handler("LOAD_ASSERTION_ERROR")
def LOAD_ASSERTION_ERROR(tx, inst):
    tx.push(BuiltinVariable(AssertionError))


@handler("RAISE_VARARGS")
def RAISE_VARARGS(tx, inst):
    if inst.arg == 0:  # a bare `raise`: the exception being handled (PUSH_EXC_INFO), as it is
        if tx.state.handling is None:
            tx.unsupported("unsupported_opcode", "a bare `raise` outside a traced `except` block")
        raise_value(tx, tx.state.handling, reraise=True)
    cause = tx.pop() if inst.arg == 2 else None
    raise_value(tx, tx.pop(), cause)


@handler("IMPORT_NAME")
def IMPORT_NAME(tx, inst):
    fromlist = tx.pop()
    level = tx.pop()
    tx.push(import_statement(tx, inst.argval, const_value(tx, fromlist), const_value(tx, level)))


@handler("IMPORT_FROM")
def IMPORT_FROM(tx, inst):
    tx.push(getattr_var(tx, tx.peek(), inst.argval))


@handler("LOAD_SUPER_ATTR")
def LOAD_SUPER_ATTR(tx, inst):
    self_var = tx.peek()
    cls = tx.peek(1)
    global_super = tx.peek(2)
    if not (isinstance(global_super, BuiltinVariable) and global_super.fn is super) or \
            not isinstance(const_value(tx, cls), type):
        # CPython's own path for these: the global `super` (shadowed) called with (cls, self), or none for the
        # zero-argument form, then its attribute read; the builtin's with a cls that is no type raises its TypeError
        tx.unsupported("unsupported_opcode", "super() where `super` is not the builtin or its class is not a type",
                       ("it runs for real; tracing resumes after it",))
    tx.pop()
    tx.pop()
    tx.pop()
    attr = super_attr(tx, checked_super(tx, const_value(tx, cls), self_var), inst.argval)
    if inst.push_null:
        tx.push(NullVariable(), attr)
    else:
        tx.push(attr)


# ------------------------------------------------------------- handlers (Tracer.catch jumps to them)
@handler("PUSH_EXC_INFO")
def PUSH_EXC_INFO(tx, inst):
    exc = tx.pop()
    tx.push(tx.state.handling or ConstantVariable(None), exc)
    tx.state = tx.state.replace(handling=exc)


@handler("POP_EXCEPT")
def POP_EXCEPT(tx, inst):
    previous = tx.pop()
    tx.state = tx.state.replace(handling=None if isinstance(previous, ConstantVariable) and previous.value is None
                                else previous)


@handler("CHECK_EXC_MATCH")
def CHECK_EXC_MATCH(tx, inst):
    types_ = const_value(tx, tx.pop())
    if not handler_classes_valid(types_):
        tx.user_error(TypeError(HANDLER_CLASSES_ERROR))
    tx.push(ConstantVariable(handler_matches(python_type_of(tx, tx.peek()), types_)))


@handler("RERAISE")
def RERAISE(tx, inst):
    exc = tx.pop()
    if inst.arg:
        tx.pop()  # f_lasti
    # the exception goes on as it is: no new chaining (a handler's cleanup re-raising after POP_EXCEPT would
    # otherwise make the outer handled exception its __context__), and no traceback entry for this frame
    raise_value(tx, exc, reraise=True)
