"""The bytecode reader: a code object read into version-neutral instructions.

A :class:`Bytecode` is one code object's instructions as the interpreter steps
through them: ``CACHE`` and ``EXTENDED_ARG`` removed, opnames spelled the same
way on CPython 3.11, 3.12 and 3.13, and every jump and exception-table entry
given as an instruction *index* rather than a byte offset.  Every difference between
Python versions lives in this module, so the interpreter has one handler per
opname and never looks at ``sys.version_info``.

Example (the same output on 3.11, 3.12 and 3.13, where 3.11's ``dis`` says
``POP_JUMP_FORWARD_IF_NOT_NONE``)::

    >>> def pick(x, y):
    ...     if x is None:
    ...         x = y
    ...     return x
    >>> bytecode = read(pick.__code__)
    >>> for instruction in bytecode.instructions:
    ...     print(instruction)
       0 RESUME 0
       1 LOAD_FAST x
       2 POP_JUMP_IF_NOT_NONE -> 5
       3 LOAD_FAST y
       4 STORE_FAST x
       5 LOAD_FAST x
       6 RETURN_VALUE
    >>> jump = bytecode.instructions[2]
    >>> jump.target, bytecode.index_of_offset(jump.argval)
    (5, 5)
    >>> bytecode.source_line(2)
    'if x is None:'

``target`` is an index into ``instructions``; ``argval`` of a jump is the
byte offset of that instruction (offsets differ between versions: 3.13's
conditional jumps carry an inline cache; :meth:`Bytecode.format` shows them).

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

CPython 3.13 changed more; each 3.13 form is read into the 3.12 one, so the
interpreter and the real steps see the same instructions on every version.
A row with two names on the right is one raw instruction read as two: both
have the raw instruction's offset, positions and exception-table entry, the
first is what a jump to that offset lands on, and ``index_of_offset`` of it is
the first's index.

=====================================  ====================================
``LOAD_FAST_LOAD_FAST a, b``           ``LOAD_FAST a``, ``LOAD_FAST b``
``STORE_FAST_LOAD_FAST a, b``          ``STORE_FAST a``, ``LOAD_FAST b``
``STORE_FAST_STORE_FAST a, b``         ``STORE_FAST a``, ``STORE_FAST b``
``LOAD_FAST x`` of a cell or free      ``LOAD_CLOSURE x`` (3.13 spells the
variable                               pseudo-op LOAD_CLOSURE as LOAD_FAST)
``PUSH_NULL``                          ``PUSH_NULL``, ``SWAP 2``: 3.13 puts
                                       the NULL *above* the callable
                                       (``callable, NULL, args``); the swap
                                       makes it 3.12's ``NULL, callable``
``LOAD_GLOBAL``/``LOAD_SUPER_ATTR``    as on 3.12: ``push_null`` pushes the
with ``arg & 1``; ``LOAD_ATTR`` with   NULL below the value, and the method
``arg & 1``                            form is ``LOAD_METHOD``
``LOAD_CONST names``, ``CALL_KW n``    ``KW_NAMES names``, ``CALL n``
``TO_BOOL``                            ``NOP``: ``POP_JUMP_IF_TRUE/FALSE``
                                       and ``UNARY_NOT`` take any value and
                                       test its truth, as on 3.11 and 3.12
``COMPARE_OP`` with ``arg & 16``       ``COMPARE_OP`` (the bool conversion
(``bool(<)``)                          is the consumer's truth test)
``CONVERT_VALUE c``                    ``FORMAT_VALUE c`` (convert, then
                                       ``format(s, '')``, which is ``s``)
``FORMAT_SIMPLE``                      ``FORMAT_VALUE 0``
``FORMAT_WITH_SPEC``                   ``FORMAT_VALUE 4``
``MAKE_FUNCTION`` then                 ``MAKE_FUNCTION f1|f2...``, then one
``SET_FUNCTION_ATTRIBUTE f1, f2...``   ``NOP`` per attribute (the values lie
                                       below the code object, as on 3.12)
``END_FOR``                            ``POP_TOP`` (3.13's pops one value
                                       and a ``POP_TOP`` follows; 3.12's
                                       pops both)
=====================================  ====================================

Every other opname is ``dis``'s.  Semantics made equal across versions:

* ``target`` of ``FOR_ITER`` is where an exhausted loop continues after the
  iterator is popped.  3.12's ``dis`` points at ``END_FOR``, which CPython
  skips at run time, so the target is the instruction after it (``END_FOR``
  stays in ``instructions`` but is never reached); 3.13 skips ``END_FOR``
  and the ``POP_TOP`` after it, so the target is the instruction after both.
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

Invariants: ``instructions[i].index == i``; offsets never decrease, and two
instructions share one only when they were read from one raw instruction; for
every jump ``instructions[j.target].offset == j.argval`` and ``target`` is the
first instruction at that offset; exception-table entries cover instruction
indexes ``start <= i < end`` and do not overlap.
"""

from __future__ import annotations
try:
    from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)
except ImportError:  # loaded on its own, outside stillframe (tests/bytecode): the process's builtins
    pass

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
    "OPNAMES_313",
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

#: 3.13's instruction forms are read into 3.12's (the second table of the module docstring).
_PY313 = sys.version_info >= (3, 13)

#: For a jump whose raw target starts with these raw opnames, the interpreter continues past them.
_SKIPPED_AT_TARGET: dict[str, tuple[str, ...]] = {
    "FOR_ITER": ("END_FOR", "POP_TOP") if _PY313 else ("END_FOR",),
    "SEND": ("END_SEND",),
}

#: 3.13: raw opname -> the version-neutral opnames it is read as (``_read_313``).
READ_AS_313: dict[str, tuple[str, ...]] = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_CLOSURE"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST", "LOAD_CLOSURE"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST",),
    "LOAD_FAST": ("LOAD_FAST", "LOAD_CLOSURE"),
    "PUSH_NULL": ("PUSH_NULL", "SWAP"),
    "LOAD_CONST": ("LOAD_CONST", "KW_NAMES"),
    "CALL_KW": ("CALL",),
    "TO_BOOL": ("NOP",),
    "CONVERT_VALUE": ("FORMAT_VALUE",),
    "FORMAT_SIMPLE": ("FORMAT_VALUE",),
    "FORMAT_WITH_SPEC": ("FORMAT_VALUE",),
    "SET_FUNCTION_ATTRIBUTE": ("NOP",),
    "END_FOR": ("POP_TOP",),
    "LOAD_ATTR": ("LOAD_ATTR", "LOAD_METHOD"),
}

#: 3.13 opcodes in ``dis.opmap`` that no code object holds: the JIT's executor entry, the specializer's
#: ``__init__`` shim, the trampoline's exit, and the placeholder.
NOT_EMITTED_313 = frozenset({"ENTER_EXECUTOR", "EXIT_INIT_CHECK", "INTERPRETER_EXIT", "RESERVED"})

# The real opcodes the 3.11, 3.12 and 3.13 compilers emit (from ``dis.opmap`` less
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
_RAW_313 = """
BEFORE_ASYNC_WITH BEFORE_WITH BINARY_OP BINARY_SLICE BINARY_SUBSCR
BUILD_CONST_KEY_MAP BUILD_LIST BUILD_MAP BUILD_SET BUILD_SLICE BUILD_STRING
BUILD_TUPLE CALL CALL_FUNCTION_EX CALL_INTRINSIC_1 CALL_INTRINSIC_2 CALL_KW
CHECK_EG_MATCH CHECK_EXC_MATCH CLEANUP_THROW COMPARE_OP CONTAINS_OP
CONVERT_VALUE COPY COPY_FREE_VARS DELETE_ATTR DELETE_DEREF DELETE_FAST
DELETE_GLOBAL DELETE_NAME DELETE_SUBSCR DICT_MERGE DICT_UPDATE END_ASYNC_FOR
END_FOR END_SEND FORMAT_SIMPLE FORMAT_WITH_SPEC FOR_ITER GET_AITER GET_ANEXT
GET_AWAITABLE GET_ITER GET_LEN GET_YIELD_FROM_ITER IMPORT_FROM IMPORT_NAME
IS_OP JUMP_BACKWARD JUMP_BACKWARD_NO_INTERRUPT JUMP_FORWARD LIST_APPEND
LIST_EXTEND LOAD_ASSERTION_ERROR LOAD_ATTR LOAD_BUILD_CLASS LOAD_CONST
LOAD_DEREF LOAD_FAST LOAD_FAST_AND_CLEAR LOAD_FAST_CHECK LOAD_FAST_LOAD_FAST
LOAD_FROM_DICT_OR_DEREF LOAD_FROM_DICT_OR_GLOBALS LOAD_GLOBAL LOAD_LOCALS
LOAD_NAME LOAD_SUPER_ATTR MAKE_CELL MAKE_FUNCTION MAP_ADD MATCH_CLASS
MATCH_KEYS MATCH_MAPPING MATCH_SEQUENCE NOP POP_EXCEPT POP_JUMP_IF_FALSE
POP_JUMP_IF_NONE POP_JUMP_IF_NOT_NONE POP_JUMP_IF_TRUE POP_TOP PUSH_EXC_INFO
PUSH_NULL RAISE_VARARGS RERAISE RESUME RETURN_CONST RETURN_GENERATOR
RETURN_VALUE SEND SETUP_ANNOTATIONS SET_ADD SET_FUNCTION_ATTRIBUTE SET_UPDATE
STORE_ATTR STORE_DEREF STORE_FAST STORE_FAST_LOAD_FAST STORE_FAST_STORE_FAST
STORE_GLOBAL STORE_NAME STORE_SLICE STORE_SUBSCR SWAP TO_BOOL UNARY_INVERT
UNARY_NEGATIVE UNARY_NOT UNPACK_EX UNPACK_SEQUENCE WITH_EXCEPT_START
YIELD_VALUE
"""
#: Every opname :func:`read` can produce on CPython 3.11.
OPNAMES_311: frozenset[str] = frozenset(RENAMES.get(n, n) for n in _RAW_311.split())
#: Every opname :func:`read` can produce on CPython 3.12 (LOAD_METHOD from LOAD_ATTR).
OPNAMES_312: frozenset[str] = frozenset(
    RENAMES.get(n, n) for n in _RAW_312.split()
) | {"LOAD_METHOD"}


#: Every opname :func:`read` can produce on CPython 3.13 (3.13's own forms read as 3.12's: READ_AS_313).
OPNAMES_313: frozenset[str] = frozenset(
    name for raw in _RAW_313.split() for name in READ_AS_313.get(raw, (RENAMES.get(raw, raw),))
)


def version_opnames(version: tuple[int, ...] | None = None) -> frozenset[str]:
    """The opnames :func:`read` can produce on ``version`` (default: the running Python).

    >>> "POP_JUMP_IF_TRUE" in version_opnames((3, 11))
    True
    """
    major_minor = tuple((version or sys.version_info)[:2])
    table = {(3, 11): OPNAMES_311, (3, 12): OPNAMES_312, (3, 13): OPNAMES_313}
    if major_minor not in table:
        raise ValueError(f"stillframe reads bytecode of CPython 3.11, 3.12 and 3.13, not {major_minor}")
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


@dataclass(frozen=True, slots=True)
class _Piece:
    """A raw instruction as read, before normalization: one per raw instruction, two for a 3.13 pair."""

    raw: dis.Instruction
    opname: str
    arg: int | None
    argval: object


#: 3.13's FORMAT_VALUE-like opcodes -> 3.12's FORMAT_VALUE flags (conversion in ``& 3``, a spec in ``& 4``).
_FORMAT_313 = {"FORMAT_SIMPLE": 0, "FORMAT_WITH_SPEC": 4}
#: 3.13 superinstructions -> the two opnames they do, in order.
_PAIRS_313 = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}


def _read_313(code: types.CodeType, real: list[dis.Instruction]) -> list[_Piece]:
    """3.13's instructions in 3.12's forms (the second table of the module docstring)."""
    cells = frozenset(code.co_cellvars) | frozenset(code.co_freevars)
    names = [i.opname.removeprefix("INSTRUMENTED_") for i in real]
    pieces: list[_Piece] = []

    def add(raw: dis.Instruction, opname: str, arg: int | None, argval: object) -> None:
        if opname == "LOAD_FAST" and argval in cells:  # the pseudo-op LOAD_CLOSURE, assembled as LOAD_FAST
            opname = "LOAD_CLOSURE"
        pieces.append(_Piece(raw, opname, arg, argval))

    for k, raw in enumerate(real):
        name, arg, argval = names[k], raw.arg, raw.argval
        if name in _PAIRS_313:
            (first, second), (name1, name2) = _PAIRS_313[name], raw.argval
            add(raw, first, arg >> 4, name1)
            add(raw, second, arg & 15, name2)
        elif name == "PUSH_NULL":  # 3.13: callable, NULL; 3.12: NULL, callable
            add(raw, "PUSH_NULL", None, None)
            add(raw, "SWAP", 2, 2)
        elif name == "LOAD_CONST" and k + 1 < len(real) and names[k + 1] == "CALL_KW":
            add(raw, "KW_NAMES", arg, argval)
        elif name == "CALL_KW":
            if k == 0 or names[k - 1] != "LOAD_CONST" or not isinstance(real[k - 1].argval, tuple):
                raise ValueError(f"{code.co_qualname}: CALL_KW at {raw.offset} without its names constant")
            add(raw, "CALL", arg, argval)
        elif name in ("TO_BOOL", "SET_FUNCTION_ATTRIBUTE"):
            if name == "SET_FUNCTION_ATTRIBUTE" and names[k - 1] not in ("MAKE_FUNCTION", name):
                raise ValueError(f"{code.co_qualname}: SET_FUNCTION_ATTRIBUTE at {raw.offset} not after "
                                 "MAKE_FUNCTION")
            add(raw, "NOP", None, None)
        elif name == "MAKE_FUNCTION":
            flags, j = 0, k + 1
            while j < len(real) and names[j] == "SET_FUNCTION_ATTRIBUTE":
                flags |= real[j].arg
                j += 1
            add(raw, "MAKE_FUNCTION", flags, flags)
        elif name == "CONVERT_VALUE":
            add(raw, "FORMAT_VALUE", arg, (argval, False))
        elif name in _FORMAT_313:
            flags = _FORMAT_313[name]
            add(raw, "FORMAT_VALUE", flags, (None, bool(flags & 4)))
        elif name == "END_FOR":
            add(raw, "POP_TOP", None, None)
        else:
            add(raw, name, arg, argval)
    return pieces


class Bytecode:
    """A code object read into version-neutral :class:`Instruction` s (see the module docstring)."""

    __slots__ = ("code", "instructions", "exception_table", "_index_at", "_offsets", "_handlers")

    def __init__(self, code: types.CodeType) -> None:
        if not isinstance(code, types.CodeType):
            raise TypeError(f"Bytecode() needs a code object, got {type(code).__name__}")
        self.code = code
        raw = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
        real = [i for i in raw if i.opname not in _DROPPED]
        pieces = _read_313(code, real) if _PY313 else [_Piece(i, i.opname, i.arg, i.argval) for i in real]
        self._offsets = [p.raw.offset for p in pieces]
        # Every instruction start, EXTENDED_ARG prefixes included, maps to the
        # index of the (first) instruction it begins.
        self._index_at = {i.offset: self._index_after(i.offset) for i in raw}
        raw_opnames = [p.raw.opname.removeprefix("INSTRUMENTED_") for p in pieces]
        self.instructions = tuple(
            self._convert(p, index, raw_opnames) for index, p in enumerate(pieces)
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

    def _convert(self, piece: _Piece, index: int, raw_opnames: list[str]) -> Instruction:
        """One ``dis`` instruction (or a 3.13 piece of one) to its version-neutral form."""
        raw, arg = piece.raw, piece.arg
        opname = piece.opname.removeprefix("INSTRUMENTED_")
        opname = RENAMES.get(opname, opname)
        argval, target, push_null = piece.argval, None, False
        if raw.opcode in dis.hasjrel or raw.opcode in dis.hasjabs:
            target = self._index_after(raw.argval)
            skipped = _SKIPPED_AT_TARGET.get(opname, ())
            if skipped and tuple(raw_opnames[target : target + len(skipped)]) == skipped:
                target += len(skipped)
            argval = self._offsets[target]
        elif opname == "LOAD_GLOBAL" or opname == "LOAD_SUPER_ATTR":
            push_null = bool(arg & 1)
        elif opname == "LOAD_ATTR" and _LOAD_ATTR_METHOD_BIT and arg & 1:
            opname, push_null = "LOAD_METHOD", True
        elif opname == "LOAD_METHOD":
            push_null = True
        elif opname == "KW_NAMES":
            argval = self.code.co_consts[arg]  # 3.11's dis leaves it <unknown>
        elif opname in ("BINARY_OP", "CALL_INTRINSIC_1", "CALL_INTRINSIC_2"):
            argval = raw.argrepr  # dis renders the operator / intrinsic name here
        lineno = raw.positions.lineno if raw.positions is not None else None
        return Instruction(
            opname, arg, argval, raw.offset, index, target, lineno, raw.positions, push_null
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


#: Opnames with no real step (``runtime/executors.py``): ``except*``'s ``CHECK_EG_MATCH`` and ``PREP_RERAISE_STAR``
#: (3.12: ``CALL_INTRINSIC_2``, which also makes PEP 695 type parameters with bounds and sets a generic function's
#: ``__type_params__``), which CPython's C code runs with no Python equivalent. No graph break may stop in
#: code holding one, since the rest of it could not run for real: such code is never traced (a call of it runs
#: for real, whole). ``tests/runtime`` checks that none of them has an executor.
NO_REAL_STEP = frozenset({"CHECK_EG_MATCH", "PREP_RERAISE_STAR", "CALL_INTRINSIC_2"})

#: The ``CALL_INTRINSIC_1`` intrinsics that a real step (or, for ``INTRINSIC_STOPITERATION_ERROR``, only ever met
#: by the trace of a generator's frame) models. The others have no real step either: 3.12's PEP 695 type
#: parameters (``INTRINSIC_TYPEVAR``, ``INTRINSIC_PARAMSPEC``, ``INTRINSIC_TYPEVARTUPLE``,
#: ``INTRINSIC_SUBSCRIPT_GENERIC``, ``INTRINSIC_TYPEALIAS``: C code makes the objects, whose ``__module__`` and
#: lazily evaluated values no public constructor reproduces), ``INTRINSIC_IMPORT_STAR``, ``INTRINSIC_PRINT`` and
#: ``INTRINSIC_ASYNC_GEN_WRAP``.
STEPPED_INTRINSICS = frozenset({"INTRINSIC_LIST_TO_TUPLE", "INTRINSIC_UNARY_POSITIVE",
                                "INTRINSIC_STOPITERATION_ERROR"})


def no_real_step(inst: Instruction) -> bool:
    """Whether no real step can run ``inst``: its opname is in :data:`NO_REAL_STEP`, or it is a
    ``CALL_INTRINSIC_1`` of an intrinsic outside :data:`STEPPED_INTRINSICS`."""
    return inst.opname in NO_REAL_STEP or (inst.opname == "CALL_INTRINSIC_1" and inst.argval not in STEPPED_INTRINSICS)


def unsteppable(code: Bytecode) -> Instruction | None:
    """The first instruction of ``code`` that no real step can run (:func:`no_real_step`), ``None`` where there
    is none: such code is never traced, and a call of it runs for real, whole (``class A[T]: ...`` on 3.12 calls
    an annotation scope holding ``INTRINSIC_TYPEVAR``; ``type X = int`` holds ``INTRINSIC_TYPEALIAS``)."""
    return next((inst for inst in code.instructions if no_real_step(inst)), None)
