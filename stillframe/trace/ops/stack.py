"""Stack manipulation and frame exit: ``POP_TOP``, ``COPY``, ``SWAP``, ``PUSH_NULL``, ``RETURN_VALUE`` ..."""

from __future__ import annotations
from ...own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from ...variables.base import NULL, ConstantVariable
from ..interpreter import handler


@handler("NOP")
def NOP(tx, inst):
    pass


@handler("RESUME")
def RESUME(tx, inst):
    pass


@handler("PRECALL")
def PRECALL(tx, inst):
    pass


@handler("COPY_FREE_VARS")
def COPY_FREE_VARS(tx, inst):
    pass  # a frame's closure cells are bound when the frame is made


@handler("POP_TOP")
def POP_TOP(tx, inst):
    tx.pop()


@handler("PUSH_NULL")
def PUSH_NULL(tx, inst):
    tx.push(NULL)


@handler("COPY")
def COPY(tx, inst):
    tx.push(tx.peek(inst.arg - 1))


@handler("SWAP")
def SWAP(tx, inst):
    stack = list(tx.frame.stack)
    stack[-1], stack[-inst.arg] = stack[-inst.arg], stack[-1]
    tx.set_frame(tx.frame.with_stack(tuple(stack)))


@handler("RETURN_VALUE")
def RETURN_VALUE(tx, inst):
    tx.return_value(tx.pop())


@handler("RETURN_CONST")
def RETURN_CONST(tx, inst):
    tx.return_value(ConstantVariable(inst.argval))
