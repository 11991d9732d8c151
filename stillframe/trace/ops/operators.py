"""Operators: ``BINARY_OP``, ``UNARY_*``, ``COMPARE_OP``, ``IS_OP``, ``CONTAINS_OP``.

On tensors an operator becomes a graph node whose target is the ``operator``
function (``operator.add``, ``operator.iadd`` for ``+=``, which is in-place on a
tensor); on Python constants it is evaluated at trace time.
"""

from __future__ import annotations
from ...own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import operator

from ...variables.base import (
    ConstantVariable,
)
from ...rules.truthiness import truthiness
from ..interpreter import handler
from ...rules.operators import _unary
from ...rules.operators import binary_op
from ...rules.operators import compare
from ...rules.operators import contains
from ...rules.operators import identical


@handler("BINARY_OP")
def BINARY_OP(tx, inst):
    b = tx.pop()
    a = tx.pop()
    tx.push(binary_op(tx, inst.argval, a, b))


@handler("UNARY_NEGATIVE")
def UNARY_NEGATIVE(tx, inst):
    _unary(tx, operator.neg, "-")


@handler("UNARY_POSITIVE")
def UNARY_POSITIVE(tx, inst):
    _unary(tx, operator.pos, "+")


@handler("UNARY_INVERT")
def UNARY_INVERT(tx, inst):
    _unary(tx, operator.invert, "~")


@handler("UNARY_NOT")
def UNARY_NOT(tx, inst):
    tx.push(ConstantVariable(not truthiness(tx, tx.pop())))


@handler("COMPARE_OP")
def COMPARE_OP(tx, inst):
    b = tx.pop()
    a = tx.pop()
    tx.push(compare(tx, inst.argval, a, b))


@handler("IS_OP")
def IS_OP(tx, inst):
    b = tx.pop()
    a = tx.pop()
    result = identical(tx, a, b)
    tx.push(ConstantVariable(result != bool(inst.argval)))


@handler("CONTAINS_OP")
def CONTAINS_OP(tx, inst):
    container = tx.pop()
    item = tx.pop()
    tx.push(ConstantVariable(contains(tx, container, item) != bool(inst.argval)))


