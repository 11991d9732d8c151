"""Names: locals, constants, globals, cells and attributes (``LOAD_FAST``, ``LOAD_GLOBAL``, ``LOAD_ATTR`` ...)."""

from __future__ import annotations
from ...own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from ...guards.guard import Guard, builtins_of
from ...guards.source import AttrSource, BuiltinsSource, GetItemSource, GlobalSource, GlobalsSource
from ...own_builtins import BUILTINS
from ...variables.base import CellEntry, CellVariable, ConstantVariable, NULL, TupleVariable
from ...variables.builder import wrap, load_local
from ...rules.attrs import getattr_var
from ...rules.frames import unbound_cell_error
from ...rules.objects import delete_attr, record_side_effect, store_attr
from ..interpreter import handler


def _const(value):
    if type(value) is tuple:
        return TupleVariable(tuple(_const(v) for v in value))
    if type(value) is frozenset:
        return ConstantVariable(value)
    return ConstantVariable(value)


@handler("LOAD_CONST")
def LOAD_CONST(tx, inst):
    tx.push(_const(inst.argval))


@handler("LOAD_FAST")
def LOAD_FAST(tx, inst):
    value = load_local(tx, inst.argval, keep_scalars=True)
    if value is None:
        tx.user_error(UnboundLocalError(
            f"cannot access local variable '{inst.argval}' where it is not associated with a value"))
    tx.push(value)


@handler("LOAD_FAST_CHECK")
def LOAD_FAST_CHECK(tx, inst):
    LOAD_FAST(tx, inst)


@handler("LOAD_FAST_AND_CLEAR")
def LOAD_FAST_AND_CLEAR(tx, inst):
    frame = tx.frame
    value = load_local(tx, inst.argval)
    frame = tx.frame
    tx.set_frame(frame.with_locals(frame.locals.delete(inst.argval) if value is not None else frame.locals))
    tx.push(value if value is not None else NULL)


@handler("STORE_FAST")
def STORE_FAST(tx, inst):
    value = tx.pop()
    frame = tx.frame
    if value is NULL:  # 3.12 comprehensions restore a cleared local
        tx.set_frame(frame.with_locals(frame.locals.delete(inst.argval) if inst.argval in frame.locals
                                       else frame.locals))
        return
    tx.set_frame(frame.with_locals(frame.locals.set(inst.argval, value)))


@handler("DELETE_FAST")
def DELETE_FAST(tx, inst):
    frame = tx.frame
    if inst.argval not in frame.locals:
        tx.user_error(UnboundLocalError(
            f"cannot access local variable '{inst.argval}' where it is not associated with a value"))
    tx.set_frame(frame.with_locals(frame.locals.delete(inst.argval)))


@handler("LOAD_GLOBAL")
def LOAD_GLOBAL(tx, inst):
    name = inst.argval
    frame = tx.frame
    if inst.push_null:
        tx.push(NULL)
    pending = tx.state.side_effects.get(("global", frame.globals_module, name)) if tx.state.side_effects else None
    if pending is not None:
        tx.push(pending[1])
        return
    if name in frame.globals:
        tx.push(wrap(tx, frame.globals[name], GlobalSource(name, frame.globals_module)))
        return
    table = builtins_of(frame.globals)
    if table is BUILTINS:  # stillframe's own code (a polyfill): the copy it runs with never changes
        tx.push(wrap(tx, table[name], None))
        return
    # a builtin, or no name at all: the plan holds while no global of that name appears and the builtins entry
    # stays as read (a user may rebind builtins.len between calls)
    tx.add_guard(Guard(GlobalsSource(frame.globals_module), "HAS_KEY", (name, False)))
    value = table.get(name, _ABSENT)
    if value is _ABSENT:
        tx.add_guard(Guard(BuiltinsSource(frame.globals_module), "HAS_KEY", (name, False)))
        tx.user_error(NameError(f"name '{name}' is not defined", name=name))  # (.name: CPython sets it too)
    tx.push(wrap(tx, value, GetItemSource(BuiltinsSource(frame.globals_module), name)))


_ABSENT = object()


@handler("MAKE_CELL")
def MAKE_CELL(tx, inst):
    oid = tx.new_cell(load_local(tx, inst.argval))
    frame = tx.frame
    tx.set_frame(frame.with_cells(frame.cells.set(inst.argval, oid)))


@handler("LOAD_CLOSURE")
def LOAD_CLOSURE(tx, inst):
    tx.push(CellVariable(tx.frame.cells[inst.argval]))


@handler("LOAD_DEREF")
def LOAD_DEREF(tx, inst):
    cell = tx.frame.cells.get(inst.argval)
    if not isinstance(cell, int) and tx.state.side_effects:
        pending = tx.state.side_effects.get(("cell", id(cell[1])))
        if pending is not None:  # written earlier in this trace (nonlocal)
            tx.push(pending[1][1])
            return
    if isinstance(cell, int):
        contents = tx.heap(cell).contents
        if contents is None:
            tx.user_error(unbound_cell_error(tx.frame.code.code, inst.argval))
        tx.push(contents)
        return
    _, real_cell, cell_source = cell
    try:
        contents = real_cell.cell_contents
    except ValueError:
        tx.user_error(unbound_cell_error(tx.frame.code.code, inst.argval))
    tx.push(wrap(tx, contents, AttrSource(cell_source, "cell_contents") if cell_source is not None else None))


@handler("STORE_DEREF")
def STORE_DEREF(tx, inst):
    value = tx.pop()
    cell = tx.frame.cells.get(inst.argval)
    if isinstance(cell, int):
        tx.heap_set(cell, CellEntry(value))
        return
    _, real_cell, cell_source = cell
    if cell_source is None:
        tx.unsupported("side_effect", f"assigning the closure variable '{inst.argval}' of a function "
                       "stillframe cannot name")
    tx.keepalive.append(real_cell)
    record_side_effect(tx, ("cell", id(real_cell)), (cell_source, value))


@handler("LOAD_ATTR")
def LOAD_ATTR(tx, inst):
    obj = tx.pop()
    tx.push(getattr_var(tx, obj, inst.argval))


@handler("LOAD_METHOD")
def LOAD_METHOD(tx, inst):
    obj = tx.pop()
    attr = getattr_var(tx, obj, inst.argval)
    tx.push(NULL, attr)


@handler("STORE_ATTR")
def STORE_ATTR(tx, inst):
    obj = tx.pop()
    value = tx.pop()
    store_attr(tx, obj, inst.argval, value)


@handler("DELETE_ATTR")
def DELETE_ATTR(tx, inst):
    delete_attr(tx, tx.pop(), inst.argval)


@handler("STORE_GLOBAL")
def STORE_GLOBAL(tx, inst):
    frame = tx.frame
    record_side_effect(tx, ("global", frame.globals_module, inst.argval), tx.pop())
