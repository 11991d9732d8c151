"""The real steps that only move values: stack shuffles, building containers, appending to them, jumps.

Registered in the one executor registry (:mod:`stillframe.runtime.executors`), as the rest; kept apart because
each is one line of CPython's semantics on the live stack, with nothing to model.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from typing import TYPE_CHECKING

from ..bytecode.reader import Instruction
from ..guards.guard import builtins_of
from ..variables.standins import NULL
from .executors import executor, function_str, pop_n

if TYPE_CHECKING:
    from .live import Continuation, LiveFrame


@executor("LOAD_CLOSURE")
def LOAD_CLOSURE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(frame.cells[inst.argval])


@executor("POP_TOP")
def POP_TOP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.pop()


@executor("PUSH_NULL")
def PUSH_NULL(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(NULL)


@executor("COPY")
def COPY(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(frame.stack[-inst.arg])


@executor("BUILD_TUPLE")
def BUILD_TUPLE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(tuple(pop_n(frame, inst.arg)))


@executor("BUILD_LIST")
def BUILD_LIST(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(pop_n(frame, inst.arg))


@executor("BUILD_SET")
def BUILD_SET(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(set(pop_n(frame, inst.arg)))


@executor("BUILD_SLICE")
def BUILD_SLICE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(slice(*pop_n(frame, inst.arg)))


@executor("LIST_APPEND")
def LIST_APPEND(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack[-inst.arg - 1].append(frame.stack.pop())


@executor("LIST_EXTEND")
def LIST_EXTEND(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack[-inst.arg - 1].extend(frame.stack.pop())


@executor("LIST_TO_TUPLE")
def LIST_TO_TUPLE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(tuple(frame.stack.pop()))


@executor("SET_ADD")
def SET_ADD(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack[-inst.arg - 1].add(frame.stack.pop())


@executor("MAP_ADD")
def MAP_ADD(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack[-inst.arg - 2].__setitem__(*pop_n(frame, 2))


@executor("IS_OP")
def IS_OP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append((frame.stack.pop() is frame.stack.pop()) != bool(inst.argval))


@executor("GET_LEN")
def GET_LEN(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(len(frame.stack[-1]))


@executor("MATCH_SEQUENCE")
def MATCH_SEQUENCE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    """Whether the subject's type is a sequence for ``match`` (CPython reads its Py_TPFLAGS_SEQUENCE, which a class
    inherits from its base or gets by ``collections.abc.Sequence.register``; str, bytes and bytearray lack it)."""
    frame.stack.append(bool(type(frame.stack[-1]).__flags__ & _TPFLAGS_SEQUENCE))


@executor("MATCH_MAPPING")
def MATCH_MAPPING(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    """Whether the subject's type is a mapping for ``match`` (its Py_TPFLAGS_MAPPING, as MATCH_SEQUENCE's)."""
    frame.stack.append(bool(type(frame.stack[-1]).__flags__ & _TPFLAGS_MAPPING))


_TPFLAGS_SEQUENCE, _TPFLAGS_MAPPING = 1 << 5, 1 << 6  # CPython's Include/object.h


@executor("DELETE_DEREF")
def DELETE_DEREF(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    delattr(frame.cells[inst.argval], "cell_contents")


@executor("DELETE_GLOBAL")
def DELETE_GLOBAL(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.globals.__delitem__(inst.argval)


@executor("LOAD_BUILD_CLASS")
def LOAD_BUILD_CLASS(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    build_class = builtins_of(frame.globals).get("__build_class__")  # the frame's, as CPython reads it
    if build_class is None:
        raise NameError("__build_class__ not found")
    frame.stack.append(build_class)


@executor("NOP", "RESUME", "PRECALL", "COPY_FREE_VARS")
def NOP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    None


@executor("JUMP_FORWARD", "JUMP_BACKWARD")
def JUMP_FORWARD(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    setattr(frame, "ip", inst.target)


@executor("DICT_UPDATE")
def DICT_UPDATE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    # ({**m}: CPython's own DICT_UPDATE, which reads m's keys() and words a non-mapping as "... is not a mapping";
    # dict.update would iterate a non-mapping as pairs)
    frame.stack[-inst.arg - 1].update({**frame.stack.pop()})


@executor("DICT_MERGE")
def DICT_MERGE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    """``f(**m)``: merge ``m`` into the call's keyword dict, with CPython's errors naming the called function (the
    first of the two slots below the positional arguments that is not NULL, on 3.11 to 3.13)."""
    update = frame.stack.pop()
    target = frame.stack[-inst.arg]
    called = next((v for v in frame.stack[-inst.arg - 3:-inst.arg - 1] if v is not NULL), None)
    if not hasattr(update, "keys"):
        raise TypeError(f"{function_str(called)} argument after ** must be a mapping, not {type(update).__name__}")
    for key in update.keys():
        if key in target:
            raise TypeError(f"{function_str(called)} got multiple values for keyword argument '{key}'")
        target[key] = update[key]
