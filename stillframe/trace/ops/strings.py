"""Strings: ``FORMAT_VALUE``, ``BUILD_STRING`` (f-strings over values known at trace time)."""

from __future__ import annotations
from ...own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)
from ...variables.base import ConstantVariable
from ...rules.exceptions import is_exception, text
from ...rules.known import const_value
from ..interpreter import handler


_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}


@handler("FORMAT_VALUE")
def FORMAT_VALUE(tx, inst):
    spec = const_value(tx, tx.pop()) if inst.arg & 0x04 else ""
    convert = _CONVERSIONS[inst.arg & 0x03]
    if not spec and convert in (None, str, repr) and is_exception(tx, tx.peek()):  # f"{e}", f"{e!r}"
        return tx.push(text(tx, convert or str, tx.pop()))
    value = const_value(tx, tx.pop())
    if convert is not None:
        value = convert(value)
    tx.push(ConstantVariable(format(value, spec)))


@handler("BUILD_STRING")
def BUILD_STRING(tx, inst):
    parts = [const_value(tx, p) for p in tx.popn(inst.arg)]
    tx.push(ConstantVariable("".join(parts)))
