"""Containers: building, indexing, unpacking and iterating (``BUILD_*``, ``BINARY_SUBSCR``, ``FOR_ITER`` ...).

Lists and dicts built during the trace live in the heap (mutating one binds a
new heap entry); tuples and slices are plain immutable VTs. Iteration is
unrolled at trace time: ``GET_ITER`` snapshots the items into an
``IteratorVariable`` (whose position is heap state, shared by every reference to
it) and ``FOR_ITER`` advances it.
"""

from __future__ import annotations
from ...own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)


from ...variables.base import (
    ConstantVariable,
    DictEntry,
    DictLayout,
    DictVariable,
    GeneratorVariable,
    IteratorVariable,
    ListVariable,
    LiveIteratorVariable,
    SliceVariable,
    TensorVariable,
    TupleVariable,
)
from ...rules.builtin_calls import _len, iterator_of
from ...rules.exceptions import stop_iteration_error
from ...rules.known import const_value, hash_key, items_or_real_error, sequence_items
from ...rules.generators import step as step_generator
from ...rules.type_checks import python_type_of
from ..interpreter import handler
from .operators import UNARY_POSITIVE
from ...rules.containers import delete_subscript
from ...rules.containers import store_subscript
from ...rules.containers import subscript


@handler("BUILD_TUPLE")
def BUILD_TUPLE(tx, inst):
    tx.push(TupleVariable(tuple(tx.popn(inst.arg))))


@handler("BUILD_LIST")
def BUILD_LIST(tx, inst):
    tx.push(tx.new_list(tuple(tx.popn(inst.arg))))


@handler("BUILD_MAP")
def BUILD_MAP(tx, inst):
    flat = tx.popn(2 * inst.arg)
    entry = DictEntry(())
    for k, v in zip(flat[::2], flat[1::2]):
        entry = entry.set(hash_key(tx, k), v)
    tx.push(tx.new_dict(entry.items, layout=DictLayout.built(tuple(k for k, _ in entry.items), inst.arg)))


@handler("BUILD_CONST_KEY_MAP")
def BUILD_CONST_KEY_MAP(tx, inst):
    keys = const_value(tx, tx.pop())
    values = tx.popn(inst.arg)
    entry = DictEntry(())
    for k, v in zip(keys, values):  # equal keys are one ({1: "a", True: "b"} is {1: "b"}), as BUILD_MAP's
        entry = entry.set(k, v)
    tx.push(tx.new_dict(entry.items, layout=DictLayout.built(tuple(k for k, _ in entry.items), inst.arg)))


@handler("BUILD_SLICE")
def BUILD_SLICE(tx, inst):
    parts = tx.popn(inst.arg)
    if len(parts) == 2:
        parts.append(ConstantVariable(None))
    tx.push(SliceVariable(*parts))


@handler("LIST_TO_TUPLE")
def LIST_TO_TUPLE(tx, inst):
    tx.push(TupleVariable(tuple(tx.list_items(tx.pop()))))


@handler("CALL_INTRINSIC_1")
def CALL_INTRINSIC_1(tx, inst):
    if inst.argval == "INTRINSIC_LIST_TO_TUPLE":
        return LIST_TO_TUPLE(tx, inst)
    if inst.argval == "INTRINSIC_UNARY_POSITIVE":
        return UNARY_POSITIVE(tx, inst)
    if inst.argval == "INTRINSIC_STOPITERATION_ERROR":  # 3.12: a StopIteration leaving a generator's frame
        return tx.push(stop_iteration_error(tx, tx.pop()))
    tx.unsupported("unsupported_opcode", f"CALL_INTRINSIC_1 {inst.argval}")


@handler("LIST_EXTEND")
def LIST_EXTEND(tx, inst):
    seq = tx.pop()
    target = tx.peek(inst.arg - 1)
    tx.set_list_items(target, tx.list_items(target) + tuple(sequence_items(tx, seq)))


@handler("LIST_APPEND")
def LIST_APPEND(tx, inst):
    value = tx.pop()
    target = tx.peek(inst.arg - 1)
    tx.set_list_items(target, tx.list_items(target) + (value,))


@handler("DICT_MERGE")
def DICT_MERGE(tx, inst):
    update = tx.pop()
    target = tx.peek(inst.arg - 1)
    if not isinstance(update, DictVariable):  # (a list, None: the real step raises CPython's "must be a mapping")
        if isinstance(update, (ConstantVariable, ListVariable, TupleVariable, TensorVariable)):
            tx.user_error(TypeError("argument after ** must be a mapping"), traceable=False)
        tx.unsupported("unsupported_call", f"** of a {python_type_of(tx, update).__name__}: it runs for real")
    entry = tx.dict_entry(target)
    for k, v in tx.dict_entry(update).items:
        if entry.get(k) is not None:
            # (the real step words it as CPython does: the called function's qualified name first)
            tx.user_error(TypeError(f"got multiple values for keyword argument '{k}'"), traceable=False)
        entry = entry.set(k, v)
    tx.set_dict_entry(target, entry, "merge")


@handler("DICT_UPDATE")
def DICT_UPDATE(tx, inst):
    update = tx.pop()
    target = tx.peek(inst.arg - 1)
    if not isinstance(update, DictVariable):  # ({**obj}, case {**rest}: a mapping the trace keeps opaque, or not one)
        tx.unsupported("unsupported_call", f"{{**x}} of a {python_type_of(tx, update).__name__}: it runs for real")
    entry = tx.dict_entry(target)
    for k, v in tx.dict_entry(update).items:
        entry = entry.set(k, v)
    tx.set_dict_entry(target, entry, "merge")


@handler("MAP_ADD")
def MAP_ADD(tx, inst):
    value = tx.pop()
    key = tx.pop()
    target = tx.peek(inst.arg - 1)
    tx.set_dict_entry(target, tx.dict_entry(target).set(hash_key(tx, key, target), value))


@handler("BINARY_SUBSCR")
def BINARY_SUBSCR(tx, inst):
    key = tx.pop()
    container = tx.pop()
    tx.push(subscript(tx, container, key))


@handler("BINARY_SLICE")
def BINARY_SLICE(tx, inst):
    stop = tx.pop()
    start = tx.pop()
    container = tx.pop()
    tx.push(subscript(tx, container, SliceVariable(start, stop, ConstantVariable(None))))


@handler("STORE_SUBSCR")
def STORE_SUBSCR(tx, inst):
    key = tx.pop()
    container = tx.pop()
    value = tx.pop()
    store_subscript(tx, container, key, value)


@handler("STORE_SLICE")
def STORE_SLICE(tx, inst):
    stop = tx.pop()
    start = tx.pop()
    container = tx.pop()
    value = tx.pop()
    store_subscript(tx, container, SliceVariable(start, stop, ConstantVariable(None)), value)


@handler("UNPACK_SEQUENCE")
def UNPACK_SEQUENCE(tx, inst):
    items = items_or_real_error(tx, tx.pop())
    if len(items) != inst.arg:
        if len(items) > inst.arg:
            tx.user_error(ValueError(f"too many values to unpack (expected {inst.arg})"))
        tx.user_error(ValueError(f"not enough values to unpack (expected {inst.arg}, got {len(items)})"))
    tx.push(*reversed(items))


@handler("GET_ITER")
def GET_ITER(tx, inst):
    tx.push(iterator_of(tx, tx.pop()))  # iter(gen) is gen: FOR_ITER steps it, one item per iteration


@handler("FOR_ITER")
def FOR_ITER(tx, inst):
    it = tx.peek()
    if isinstance(it, LiveIteratorVariable):
        # The loop's body broke the graph before: take the next item for real, so one plan serves the rest of
        # the body whichever iteration it is (and the loop's exit is a plan of its own, not a recompilation).
        tx.unsupported("loop_iteration", "the next item of a loop whose body has a graph break is taken for real",
                       ("each iteration then runs the same cached plans",))
    if isinstance(it, GeneratorVariable):
        yielded, value = step_generator(tx, it)
        if yielded:
            tx.push(value)
        else:
            tx.pop()
            tx.jump(inst)
        return
    if not isinstance(it, IteratorVariable):
        tx.unsupported("unsupported_iteration", f"iterating a {it.python_type().__name__}")
    item = tx.iterator_next(it)  # the iterator stays on the stack: its position is heap state
    if item is not None:
        tx.push(item)
    else:
        tx.pop()
        tx.jump(inst)


@handler("END_FOR")
def END_FOR(tx, inst):
    tx.popn(2)


@handler("UNPACK_EX")
def UNPACK_EX(tx, inst):
    """``a, *rest, b = seq``: ``arg & 0xFF`` names before the star, ``arg >> 8`` after it."""
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = items_or_real_error(tx, tx.pop())
    if len(items) < before + after:
        tx.user_error(ValueError(f"not enough values to unpack (expected at least {before + after}, "
                                 f"got {len(items)})"))
    middle = tx.new_list(items[before:len(items) - after])
    values = list(items[:before]) + [middle] + list(items[len(items) - after:])
    tx.push(*reversed(values))


@handler("DELETE_SUBSCR")
def DELETE_SUBSCR(tx, inst):
    key = tx.pop()
    container = tx.pop()
    delete_subscript(tx, container, key)


@handler("BUILD_SET")
def BUILD_SET(tx, inst):
    """A set of Python constants, in the heap (``{a, b}``, and set comprehensions with SET_ADD)."""
    values = [hash_key(tx, v) for v in tx.popn(inst.arg)]
    try:
        set(values)
    except TypeError as e:  # an unhashable member: Python's error
        tx.user_error(e)
    tx.push(tx.new_set(values))


@handler("SET_UPDATE")
def SET_UPDATE(tx, inst):
    update = [hash_key(tx, v) for v in sequence_items(tx, tx.pop())]
    target = tx.peek(inst.arg - 1)
    try:
        tx.set_set_values(target, tx.set_values(target) | set(update))
    except TypeError as e:  # an unhashable member: Python's error
        tx.user_error(e)


@handler("SET_ADD")
def SET_ADD(tx, inst):
    value = hash_key(tx, tx.pop())
    target = tx.peek(inst.arg - 1)
    try:
        hash(value)
    except TypeError as e:
        tx.user_error(e)
    tx.set_set_values(target, tx.set_values(target) | {value})


@handler("GET_LEN")
def GET_LEN(tx, inst):
    tx.push(ConstantVariable(_len(tx, tx.peek())))
