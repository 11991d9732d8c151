"""Which opcodes the interpreter has no handler for, and why (STYLE habit 1).

The list may only shrink. Every opcode left out is one that model code does
not run while it is being traced: asynchronous code, module and class bodies,
pattern matching, and exception *handlers* (reached only after the traced code
raised; such a call runs eagerly, so the handler runs in CPython itself).
"""

import sys

import stillframe.runtime.compiler  # noqa: F401  (registers every handler)
from stillframe.bytecode import OPNAMES_311, OPNAMES_312, OPNAMES_313
from stillframe.trace.interpreter import HANDLERS

ASYNC = "asynchronous code (async def, async for/with, await) is not model code"
MODULE_BODY = "only runs in module or class bodies, never in a traced function"
HANDLER = "exception handler: exception groups (except*) and a `with` block left by an exception are not traced"
MATCH = "structural pattern matching (match/case) is not supported yet"
YIELD_FROM = "`yield from` / generator delegation: generators are run to completion, delegation is not modelled"
DELETE = "deleting an attribute, global or closure variable of an outside object is not replayed yet"

UNHANDLED_311 = {
    "ASYNC_GEN_WRAP": ASYNC, "BEFORE_ASYNC_WITH": ASYNC, "END_ASYNC_FOR": ASYNC, "GET_AITER": ASYNC,
    "GET_ANEXT": ASYNC, "GET_AWAITABLE": ASYNC, "SEND": YIELD_FROM, "GET_YIELD_FROM_ITER": YIELD_FROM,
    "IMPORT_STAR": MODULE_BODY, "LOAD_BUILD_CLASS": MODULE_BODY, "LOAD_CLASSDEREF": MODULE_BODY,
    "LOAD_NAME": MODULE_BODY, "STORE_NAME": MODULE_BODY, "DELETE_NAME": MODULE_BODY,
    "SETUP_ANNOTATIONS": MODULE_BODY, "PRINT_EXPR": MODULE_BODY,
    "CHECK_EG_MATCH": HANDLER, "PREP_RERAISE_STAR": HANDLER, "WITH_EXCEPT_START": HANDLER,
    "MATCH_CLASS": MATCH, "MATCH_KEYS": MATCH, "MATCH_MAPPING": MATCH, "MATCH_SEQUENCE": MATCH,
    "DELETE_DEREF": DELETE, "DELETE_GLOBAL": DELETE,
}
UNHANDLED_312_ONLY = {
    "CALL_INTRINSIC_2": HANDLER, "CLEANUP_THROW": YIELD_FROM, "END_SEND": YIELD_FROM,
    "LOAD_FROM_DICT_OR_DEREF": MODULE_BODY, "LOAD_FROM_DICT_OR_GLOBALS": MODULE_BODY, "LOAD_LOCALS": MODULE_BODY,
}


def test_unhandled_opcodes_311_are_exactly_the_listed_ones():
    assert sorted(set(OPNAMES_311) - set(HANDLERS)) == sorted(UNHANDLED_311)


def test_unhandled_opcodes_312_are_exactly_the_listed_ones():
    expected = set(UNHANDLED_311) | set(UNHANDLED_312_ONLY)
    assert sorted(set(OPNAMES_312) - set(HANDLERS)) == sorted(expected & set(OPNAMES_312))


def test_unhandled_opcodes_313_are_exactly_the_listed_ones():
    # 3.13's own opcodes are read into 3.12's forms (stillframe.bytecode.reader), so its list is 3.12's
    # less what 3.13 no longer emits.
    expected = set(UNHANDLED_311) | set(UNHANDLED_312_ONLY)
    assert sorted(set(OPNAMES_313) - set(HANDLERS)) == sorted(expected & set(OPNAMES_313))
    assert "CALL_KW" not in OPNAMES_313 and "LOAD_FAST_LOAD_FAST" not in OPNAMES_313  # read as CALL, LOAD_FAST x2


def test_every_handler_serves_an_opcode_of_some_version():
    assert set(HANDLERS) <= set(OPNAMES_311) | set(OPNAMES_312) | set(OPNAMES_313)


def test_running_version_is_covered():
    assert sys.version_info[:2] in ((3, 11), (3, 12), (3, 13))
