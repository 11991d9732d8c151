"""The bytecode reader: a code object read into version-neutral instructions.

A :class:`Bytecode` is one code object's instructions as the interpreter steps
through them: ``CACHE`` and ``EXTENDED_ARG`` removed, opnames spelled the same
way on CPython 3.11 and 3.12, and every jump and exception-table entry given as
an instruction *index* rather than a byte offset.  Every difference between
Python versions lives in this module, so the interpreter has one handler per
opname and never looks at ``sys.version_info``.

Example (the same output on 3.11 and 3.12, where 3.11's ``dis`` says
``POP_JUMP_FORWARD_IF_NOT_NONE``)::

    >>> def pick(x, y):
    ...     if x is None:
    ...         x = y
    ...     return x
    >>> bytecode = read(pick.__code__)
    >>> print(bytecode.format())
     line  off    idx instruction
        1    0      0 RESUME 0
        2    2      1 LOAD_FAST x
        2    4      2 POP_JUMP_IF_NOT_NONE -> 5
        3    6      3 LOAD_FAST y
        3    8      4 STORE_FAST x
        4   10 >>   5 LOAD_FAST x
        4   12      6 RETURN_VALUE
    >>> jump = bytecode.instructions[2]
    >>> jump.target, jump.argval, bytecode.index_of_offset(10)
    (5, 10, 5)
    >>> bytecode.source_line(2)
    'if x is None:'

``target`` is an index into ``instructions``; ``argval`` of a jump is the
byte offset of that instruction.

Normalizations (raw ``dis`` name -> name the interpreter sees):

=====================================  ====================================
``POP_JUMP_FORWARD_IF_TRUE`` (3.11)    ``POP_JUMP_IF_TRUE``; likewise
``POP_JUMP_BACKWARD_IF_TRUE`` (3.11)   ``_FALSE``, ``_NONE``, ``_NOT_NONE``
``JUMP_BACKWARD_NO_INTERRUPT``         ``JUMP_BACKWARD``
``LOAD_ATTR`` with ``arg & 1`` (3.12)  ``LOAD_METHOD`` (pushes meth, self
                                       or NULL, attr, as 3.11's does)
``INSTRUMENTED_X`` (3.12)              ``X``
``CACHE``, ``EXTENDED_ARG``            dropped; jumps into them retarget
                                       to the instruction they prefix
=====================================  ====================================

Every other opname is ``dis``'s.  Semantics made equal across versions:

* ``target`` of ``FOR_ITER`` is where an exhausted loop continues after the
  iterator is popped.  3.12's ``dis`` points at ``END_FOR``, which CPython
  skips at run time, so the target is the instruction after it (``END_FOR``
  stays in ``instructions`` but is never reached).
* ``target`` of ``SEND`` is where it continues after the sub-iterator
  returns, with the receiver popped and the return value pushed (3.11's
  ``SEND``).  3.12 jumps to ``END_SEND``, which pops the receiver; the
  target is the instruction after it (``END_SEND`` stays reachable from
  ``CLEANUP_THROW``).
* ``push_null`` is true when the instruction leaves the ``NULL``-or-self slot
  that ``CALL`` expects: ``LOAD_GLOBAL`` with ``arg & 1``, every
  ``LOAD_METHOD``, and ``LOAD_SUPER_ATTR`` with ``arg & 1``.  ``arg`` is
  kept raw, so 3.12's ``LOAD_SUPER_ATTR`` still says ``arg & 2`` for the
  two-argument ``super(C, obj)`` form (clear for a bare ``super()``).
* ``argval`` is a name string for every name/local/cell op; the operator
  string for ``COMPARE_OP`` (``'<'``) and ``BINARY_OP`` (``'+='``); the
  intrinsic's name for ``CALL_INTRINSIC_1/2``; the tuple of names for
  ``KW_NAMES``; and for jumps the byte offset of ``instructions[target]``.

``lineno`` is the line CPython reports for the instruction
(``positions.lineno``); it is ``None`` for compiler-made cleanup code.

Invariants: ``instructions[i].index == i``; for every jump
``instructions[j.target].offset == j.argval``; exception-table entries cover
instruction indexes ``start <= i < end`` and do not overlap.
"""

from __future__ import annotations

import bisect
import dis
import linecache
import sys
import threading
import types
from collections import OrderedDict
from dataclasses import dataclass

__all__ = [
    "Bytecode",
    "ExceptionTableEntry",
    "Instruction",
    "OPNAMES_311",
    "OPNAMES_312",
    "read",
    "version_opnames",
]

#: Raw opname -> version-neutral opname (names absent here are kept as is).
RENAMES: dict[str, str] = {
    **{
        f"POP_JUMP_{way}_IF_{cond}": f"POP_JUMP_IF_{cond}"
        for way in ("FORWARD", "BACKWARD")
        for cond in ("TRUE", "FALSE", "NONE", "NOT_NONE")
    },
    "JUMP_BACKWARD_NO_INTERRUPT": "JUMP_BACKWARD",
}

#: Opnames that never reach the interpreter.
_DROPPED = frozenset({"CACHE", "EXTENDED_ARG"})

#: 3.12 spells "load the attribute as a method" as LOAD_ATTR with the low bit set.
_LOAD_ATTR_METHOD_BIT = sys.version_info >= (3, 12)

#: For a jump whose raw target is the key, the interpreter continues one past it.
_SKIPPED_AT_TARGET = {"FOR_ITER": "END_FOR", "SEND": "END_SEND"}

# The real opcodes the 3.11 and 3.12 compilers emit (from ``dis.opmap`` less
# CACHE, EXTENDED_ARG, pseudo, instrumented and trampoline-only opcodes).
# ``tests/bytecode/test_reader.py`` checks the list of the running version against dis.
_RAW_311 = """
ASYNC_GEN_WRAP BEFORE_ASYNC_WITH BEFORE_WITH BINARY_OP BINARY_SUBSCR
BUILD_CONST_KEY_MAP BUILD_LIST BUILD_MAP BUILD_SET BUILD_SLICE BUILD_STRING
BUILD_TUPLE CALL CALL_FUNCTION_EX CHECK_EG_MATCH CHECK_EXC_MATCH COMPARE_OP
CONTAINS_OP COPY COPY_FREE_VARS DELETE_ATTR DELETE_DEREF DELETE_FAST
DELETE_GLOBAL DELETE_NAME DELETE_SUBSCR DICT_MERGE DICT_UPDATE END_ASYNC_FOR
FORMAT_VALUE FOR_ITER GET_AITER GET_ANEXT GET_AWAITABLE GET_ITER GET_LEN
GET_YIELD_FROM_ITER IMPORT_FROM IMPORT_NAME IMPORT_STAR IS_OP JUMP_BACKWARD
JUMP_BACKWARD_NO_INTERRUPT JUMP_FORWARD JUMP_IF_FALSE_OR_POP
JUMP_IF_TRUE_OR_POP KW_NAMES LIST_APPEND LIST_EXTEND LIST_TO_TUPLE
LOAD_ASSERTION_ERROR LOAD_ATTR LOAD_BUILD_CLASS LOAD_CLASSDEREF LOAD_CLOSURE
LOAD_CONST LOAD_DEREF LOAD_FAST LOAD_GLOBAL LOAD_METHOD LOAD_NAME MAKE_CELL
MAKE_FUNCTION MAP_ADD MATCH_CLASS MATCH_KEYS MATCH_MAPPING MATCH_SEQUENCE NOP
POP_EXCEPT POP_JUMP_BACKWARD_IF_FALSE POP_JUMP_BACKWARD_IF_NONE
POP_JUMP_BACKWARD_IF_NOT_NONE POP_JUMP_BACKWARD_IF_TRUE
POP_JUMP_FORWARD_IF_FALSE POP_JUMP_FORWARD_IF_NONE POP_JUMP_FORWARD_IF_NOT_NONE
POP_JUMP_FORWARD_IF_TRUE POP_TOP PRECALL PREP_RERAISE_STAR PRINT_EXPR
PUSH_EXC_INFO PUSH_NULL RAISE_VARARGS RERAISE RESUME RETURN_GENERATOR
RETURN_VALUE SEND SETUP_ANNOTATIONS SET_ADD SET_UPDATE STORE_ATTR STORE_DEREF
STORE_FAST STORE_GLOBAL STORE_NAME STORE_SUBSCR SWAP UNARY_INVERT
UNARY_NEGATIVE UNARY_NOT UNARY_POSITIVE UNPACK_EX UNPACK_SEQUENCE
WITH_EXCEPT_START YIELD_VALUE
"""
_RAW_312 = """
BEFORE_ASYNC_WITH BEFORE_WITH BINARY_OP BINARY_SLICE BINARY_SUBSCR
BUILD_CONST_KEY_MAP BUILD_LIST BUILD_MAP BUILD_SET BUILD_SLICE BUILD_STRING
BUILD_TUPLE CALL CALL_FUNCTION_EX CALL_INTRINSIC_1 CALL_INTRINSIC_2
CHECK_EG_MATCH CHECK_EXC_MATCH CLEANUP_THROW COMPARE_OP CONTAINS_OP COPY
COPY_FREE_VARS DELETE_ATTR DELETE_DEREF DELETE_FAST DELETE_GLOBAL DELETE_NAME
DELETE_SUBSCR DICT_MERGE DICT_UPDATE END_ASYNC_FOR END_FOR END_SEND
FORMAT_VALUE FOR_ITER GET_AITER GET_ANEXT GET_AWAITABLE GET_ITER GET_LEN
GET_YIELD_FROM_ITER IMPORT_FROM IMPORT_NAME IS_OP JUMP_BACKWARD
JUMP_BACKWARD_NO_INTERRUPT JUMP_FORWARD KW_NAMES LIST_APPEND LIST_EXTEND
LOAD_ASSERTION_ERROR LOAD_ATTR LOAD_BUILD_CLASS LOAD_CLOSURE LOAD_CONST
LOAD_DEREF LOAD_FAST LOAD_FAST_AND_CLEAR LOAD_FAST_CHECK
LOAD_FROM_DICT_OR_DEREF LOAD_FROM_DICT_OR_GLOBALS LOAD_GLOBAL LOAD_LOCALS
LOAD_NAME LOAD_SUPER_ATTR MAKE_CELL MAKE_FUNCTION MAP_ADD MATCH_CLASS
MATCH_KEYS MATCH_MAPPING MATCH_SEQUENCE NOP POP_EXCEPT POP_JUMP_IF_FALSE
POP_JUMP_IF_NONE POP_JUMP_IF_NOT_NONE POP_JUMP_IF_TRUE POP_TOP PUSH_EXC_INFO
PUSH_NULL RAISE_VARARGS RERAISE RESUME RETURN_CONST RETURN_GENERATOR
RETURN_VALUE SEND SETUP_ANNOTATIONS SET_ADD SET_UPDATE STORE_ATTR STORE_DEREF
STORE_FAST STORE_GLOBAL STORE_NAME STORE_SLICE STORE_SUBSCR SWAP UNARY_INVERT
UNARY_NEGATIVE UNARY_NOT UNPACK_EX UNPACK_SEQUENCE WITH_EXCEPT_START
YIELD_VALUE
"""
#: Every opname :func:`read` can produce on CPython 3.11.
OPNAMES_311: frozenset[str] = frozenset(RENAMES.get(n, n) for n in _RAW_311.split())
#: Every opname :func:`read` can produce on CPython 3.12 (LOAD_METHOD from LOAD_ATTR).
OPNAMES_312: frozenset[str] = frozenset(
    RENAMES.get(n, n) for n in _RAW_312.split()
) | {"LOAD_METHOD"}


def version_opnames(version: tuple[int, ...] | None = None) -> frozenset[str]:
    """The opnames :func:`read` can produce on ``version`` (default: the running Python).

    >>> "POP_JUMP_IF_TRUE" in version_opnames((3, 11))
    True
    """
    major_minor = tuple((version or sys.version_info)[:2])
    table = {(3, 11): OPNAMES_311, (3, 12): OPNAMES_312}
    if major_minor not in table:
        raise ValueError(f"stillframe reads bytecode of CPython 3.11 and 3.12, not {major_minor}")
    return table[major_minor]


@dataclass(frozen=True, slots=True)
class Instruction:
    """One version-neutral instruction; ``str()`` gives ``   4 LOAD_FAST x``."""

    opname: str  # version-neutral opname (see the module docstring)
    arg: int | None  # raw oparg after EXTENDED_ARG folding; None if the op takes none
    argval: object  # resolved argument (name, constant, operator string, jump offset...)
    offset: int  # byte offset in co_code
    index: int  # position in Bytecode.instructions
    target: int | None  # jumps, FOR_ITER, SEND: index of the instruction jumped to
    lineno: int | None  # source line; None for compiler-made instructions
    positions: dis.Positions | None  # full source span, as dis reports it
    push_null: bool = False  # also pushes the NULL-or-self slot that CALL expects

    def __str__(self) -> str:
        text = _argtext(self)
        return f"{self.index:>4} {self.opname}" + (f" {text}" if text else "")


def _argtext(instr: Instruction) -> str:
    """How :class:`Instruction` prints its argument."""
    if instr.target is not None:
        return f"-> {instr.target}"
    if instr.arg is None:
        return ""
    value = instr.argval
    if isinstance(value, types.CodeType):
        text = f"<code {value.co_qualname}>"
    elif isinstance(value, str) and instr.opname not in ("LOAD_CONST", "RETURN_CONST"):
        text = value  # a name or operator
    else:
        text = repr(value)
        text = text if len(text) <= 60 else text[:57] + "..."
    return f"NULL + {text}" if instr.push_null and instr.opname == "LOAD_GLOBAL" else text


@dataclass(frozen=True, slots=True)
class ExceptionTableEntry:
    """Instructions ``start <= i < end`` unwind to ``target`` on an exception.

    Unwinding pops the value stack down to ``depth`` items, pushes the offset of
    the raising instruction if ``lasti``, then pushes the exception.
    """

    start: int  # first instruction index covered
    end: int  # one past the last index covered
    target: int  # handler index
    depth: int  # stack depth to unwind to
    lasti: bool  # whether to push the offset of the raising instruction

    def __str__(self) -> str:
        lasti = " lasti" if self.lasti else ""
        return f"{self.start} to {self.end - 1} -> {self.target} [depth {self.depth}]{lasti}"


def parse_exception_table(code: types.CodeType) -> list[tuple[int, int, int, int, bool]]:
    """Decode ``co_exceptiontable`` into ``(start, end, target, depth, lasti)`` byte offsets.

    Each entry is four varints (start, length and target in code units, then
    ``depth << 1 | lasti``); a varint is 6-bit big-endian chunks, bit 6 set on
    all but the last (CPython's ``Objects/exception_handling_notes.txt``).
    """
    data = code.co_exceptiontable
    pos = 0

    def varint() -> int:
        nonlocal pos
        byte = data[pos]
        pos += 1
        value = byte & 63
        while byte & 64:
            byte = data[pos]
            pos += 1
            value = (value << 6) | (byte & 63)
        return value

    entries = []
    while pos < len(data):
        start, length, target, depth_lasti = varint() * 2, varint() * 2, varint() * 2, varint()
        entries.append((start, start + length, target, depth_lasti >> 1, bool(depth_lasti & 1)))
    return entries


class Bytecode:
    """A code object read into version-neutral :class:`Instruction` s (see the module docstring)."""

    __slots__ = ("code", "instructions", "exception_table", "_index_at", "_offsets", "_handlers")

    def __init__(self, code: types.CodeType) -> None:
        if not isinstance(code, types.CodeType):
            raise TypeError(f"Bytecode() needs a code object, got {type(code).__name__}")
        self.code = code
        raw = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
        real = [i for i in raw if i.opname not in _DROPPED]
        self._offsets = [i.offset for i in real]
        # Every instruction start, EXTENDED_ARG prefixes included, maps to the
        # index of the instruction it begins.
        self._index_at = {i.offset: self._index_after(i.offset) for i in raw}
        raw_opnames = [i.opname for i in real]
        self.instructions = tuple(
            self._convert(i, index, raw_opnames) for index, i in enumerate(real)
        )
        self.exception_table = tuple(
            ExceptionTableEntry(
                self._index_after(start),
                self._index_after(end),
                self._index_after(target),
                depth,
                lasti,
            )
            for start, end, target, depth, lasti in parse_exception_table(code)
        )
        handlers: list[ExceptionTableEntry | None] = [None] * len(self.instructions)
        for entry in self.exception_table:
            handlers[entry.start : entry.end] = [entry] * (entry.end - entry.start)
        self._handlers = tuple(handlers)

    def _index_after(self, offset: int) -> int:
        """Index of the first instruction at or after ``offset`` (``len`` at the end)."""
        return bisect.bisect_left(self._offsets, offset)

    def _convert(self, raw: dis.Instruction, index: int, raw_opnames: list[str]) -> Instruction:
        """One ``dis`` instruction to its version-neutral form (all normalization is here)."""
        opname = raw.opname.removeprefix("INSTRUMENTED_")
        opname = RENAMES.get(opname, opname)
        argval, target, push_null = raw.argval, None, False
        if raw.opcode in dis.hasjrel or raw.opcode in dis.hasjabs:
            target = self._index_after(raw.argval)
            if raw_opnames[target] == _SKIPPED_AT_TARGET.get(opname):
                target += 1
            argval = self._offsets[target]
        elif opname == "LOAD_GLOBAL" or opname == "LOAD_SUPER_ATTR":
            push_null = bool(raw.arg & 1)
        elif opname == "LOAD_ATTR" and _LOAD_ATTR_METHOD_BIT and raw.arg & 1:
            opname, push_null = "LOAD_METHOD", True
        elif opname == "LOAD_METHOD":
            push_null = True
        elif opname == "KW_NAMES":
            argval = self.code.co_consts[raw.arg]  # 3.11's dis leaves it <unknown>
        elif opname in ("BINARY_OP", "CALL_INTRINSIC_1", "CALL_INTRINSIC_2"):
            argval = raw.argrepr  # dis renders the operator / intrinsic name here
        lineno = raw.positions.lineno if raw.positions is not None else None
        return Instruction(
            opname, raw.arg, argval, raw.offset, index, target, lineno, raw.positions, push_null
        )

    def index_of_offset(self, offset: int) -> int:
        """The index of the instruction starting at byte ``offset``.

        The offset of an ``EXTENDED_ARG`` maps to the instruction it prefixes;
        an offset inside inline caches (or out of range) raises ``KeyError``.
        """
        return self._index_at[offset]

    def exception_handler(self, index: int) -> ExceptionTableEntry | None:
        """The innermost exception-table entry covering instruction ``index``, if any."""
        return self._handlers[index]

    def location(self, index: int) -> tuple[str, int | None]:
        """``(co_filename, lineno)`` of instruction ``index``."""
        return self.code.co_filename, self.instructions[index].lineno

    def source_line(self, index: int) -> str:
        """The stripped source text of instruction ``index``'s line (``''`` if unknown)."""
        filename, lineno = self.location(index)
        return linecache.getline(filename, lineno).strip() if lineno else ""

    def format(self) -> str:
        """All instructions, one per line (``>>`` marks jump targets), then the exception table."""
        targets = {i.target for i in self.instructions} | {e.target for e in self.exception_table}
        lines = [" line  off    idx instruction"]
        for instr in self.instructions:
            mark = ">>" if instr.index in targets else "  "
            line = "" if instr.lineno is None else instr.lineno
            lines.append(f"{line:>5} {instr.offset:>4} {mark}{instr}")
        if self.exception_table:
            lines.append("exception table:")
            lines.extend(f"  {entry}" for entry in self.exception_table)
        return "\n".join(lines)

    def __repr__(self) -> str:
        code = self.code
        return f"<Bytecode {code.co_qualname} {code.co_filename}:{code.co_firstlineno}>"


_CACHE_SIZE = 4096
_cache: OrderedDict[int, Bytecode] = OrderedDict()
_cache_lock = threading.Lock()


def read(code: types.CodeType) -> Bytecode:
    """The :class:`Bytecode` of ``code``, cached: ``read(code) is read(code)``.

    The cache is keyed by identity, not equality (two code objects compiled
    from the same text in different files compare equal), and keeps the most
    recent ``_CACHE_SIZE`` code objects alive.  Each cached entry holds its
    code object, so an ``id`` cannot be reused while its entry is cached.
    """
    key = id(code)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit.code is code:
            _cache.move_to_end(key)
            return hit
    bytecode = Bytecode(code)
    with _cache_lock:
        bytecode = _cache.setdefault(key, bytecode)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return bytecode
