"""Jumps: ``POP_JUMP_IF_*``, ``JUMP_IF_*_OR_POP``, ``JUMP_FORWARD`` / ``JUMP_BACKWARD``.

A condition must be known at trace time (a Python constant, ``None``-ness, a
shape, a module flag); a condition on tensor *data* is data-dependent control
flow: the graph breaks there and the jump runs for real (DESIGN invariant 6).
"""

from __future__ import annotations
from ...own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from ..interpreter import handler
from ...rules.truthiness import _is_none
from ...rules.truthiness import truthiness


@handler("POP_JUMP_IF_TRUE")
def POP_JUMP_IF_TRUE(tx, inst):
    if truthiness(tx, tx.pop()):
        tx.jump(inst)


@handler("POP_JUMP_IF_FALSE")
def POP_JUMP_IF_FALSE(tx, inst):
    if not truthiness(tx, tx.pop()):
        tx.jump(inst)


@handler("POP_JUMP_IF_NONE")
def POP_JUMP_IF_NONE(tx, inst):
    if _is_none(tx.pop()):
        tx.jump(inst)


@handler("POP_JUMP_IF_NOT_NONE")
def POP_JUMP_IF_NOT_NONE(tx, inst):
    if not _is_none(tx.pop()):
        tx.jump(inst)


@handler("JUMP_IF_TRUE_OR_POP")
def JUMP_IF_TRUE_OR_POP(tx, inst):
    if truthiness(tx, tx.peek()):
        tx.jump(inst)
    else:
        tx.pop()


@handler("JUMP_IF_FALSE_OR_POP")
def JUMP_IF_FALSE_OR_POP(tx, inst):
    if not truthiness(tx, tx.peek()):
        tx.jump(inst)
    else:
        tx.pop()


@handler("JUMP_FORWARD")
def JUMP_FORWARD(tx, inst):
    tx.jump(inst)


@handler("JUMP_BACKWARD")
def JUMP_BACKWARD(tx, inst):
    tx.jump(inst)
