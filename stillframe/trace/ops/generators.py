"""Generators: ``RETURN_GENERATOR``, ``YIELD_VALUE``.

Calling a generator function (a generator expression, mostly) runs its frame
to completion at once: each ``YIELD_VALUE`` appends to the frame's ``yields``
and resumes with ``None``; returning hands the caller an iterator over the
yielded values. Code that sends values into a generator is unsupported.
"""

from __future__ import annotations

from ...variables.base import ConstantVariable
from ..interpreter import handler


@handler("RETURN_GENERATOR")
def RETURN_GENERATOR(tx, inst):
    tx.push(ConstantVariable(None))  # what the generator's first resumption pushes (popped by POP_TOP)


@handler("YIELD_VALUE")
def YIELD_VALUE(tx, inst):
    value = tx.pop()
    frame = tx.frame
    if frame.yields is None:
        tx.unsupported("unsupported_opcode", "yield outside a generator being run")
    tx.set_frame(frame.with_yields(frame.yields + (value,)))
    tx.push(ConstantVariable(None))
