"""Generator objects: made by calling a generator function, stepped by ``next``, drained by everything else."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from ..errors import UserError
from ..guards.guard import builtins_of
from . import exceptions
from ..variables.base import ConstantVariable
from ..variables.base import GeneratorEntry
from ..variables.base import GeneratorVariable
from ..variables.base import IteratorVariable
from ..variables.builder import of_type


def make_generator(tx, frame) -> GeneratorVariable:
    """The generator object of a call to a generator function, its frame not started."""
    oid = tx.new_id()
    tx.heap_set(oid, GeneratorEntry(frame, frame.code.code))
    return GeneratorVariable(oid)


def drain(tx, gen: GeneratorVariable) -> IteratorVariable:
    """Run ``gen`` to completion now; an iterator over what it yields (empty if it has finished)."""
    entry = tx.heap(gen.oid)
    if entry.frame is None:
        return tx.new_iterator(())
    tx.heap_set(gen.oid, entry.finished())
    return _run(tx, gen, entry.frame._with(yields=(), generator=None))


def step(tx, gen: GeneratorVariable) -> tuple[bool, object]:
    """Resume ``gen`` until it yields or returns, as CPython does for one ``next``: ``(True, value)`` for a
    yielded value, ``(False, returned)`` once it has finished (``returned`` is ``None`` if it had finished
    before). Nothing runs ahead of the consumer: a generator is never drained early."""
    entry = tx.heap(gen.oid)
    if entry.frame is None:
        return False, None
    tx.heap_set(gen.oid, entry.finished())  # running: a return or an exception leaves it finished
    value = _run(tx, gen, entry.frame._with(generator=gen.oid))
    return tx.heap(gen.oid).frame is not None, value


def _run(tx, gen: GeneratorVariable, frame):
    """Run the generator's ``frame`` until it yields or returns. A ``StopIteration`` leaving it becomes
    ``RuntimeError('generator raised StopIteration')`` caused by it (PEP 479; CPython 3.11 does this in C, in
    ``gen_send_ex``; 3.12 in the bytecode, ``CALL_INTRINSIC_1 INTRINSIC_STOPITERATION_ERROR``). A polyfill
    standing for a C iterator (``made_by``) lets it through, as the C iterator does."""
    depth = len(tx.state.frames)
    tx.push_frame(frame)
    try:
        return tx.run_until_return(depth)
    except UserError as e:
        if not e.traceable or not isinstance(e.exc, StopIteration) or gen.made_by is not None:
            raise
        error = exceptions.stop_iteration_error(tx, e.var if e.var is not None else exceptions.from_real(tx, e.exc))
        tx.user_error(exceptions.stand_in(tx, error), var=error)


def resume(tx, gen: GeneratorVariable):
    """``next(gen)``: the next value it yields; ``StopIteration`` (the user's) once it returns."""
    yielded, value = step(tx, gen)
    if not yielded:  # it returned instead of yielding: next() raises StopIteration(value)
        if value is None:
            tx.user_error(StopIteration())
        if not isinstance(value, ConstantVariable):
            tx.unsupported("unsupported_call", "next() of a generator that returns a non-constant value")
        tx.user_error(StopIteration() if value.value is None else StopIteration(value.value))
    return value


def _close_runs_code(frame) -> bool:
    """Whether ``close()`` of a generator suspended in ``frame`` runs any of its code: its last ``yield`` is
    inside a ``try`` / ``with`` (a ``finally``, an ``except BaseException`` or an ``__exit__`` would see the
    ``GeneratorExit``). The handler 3.12 wraps every generator body in (it turns a ``StopIteration`` into a
    ``RuntimeError``) runs nothing a user wrote."""
    if frame.ip == 0:  # not started: close() just marks it finished
        return False
    entry = frame.code.exception_handler(frame.ip - 1)
    if entry is None:
        return False
    code = frame.code.instructions
    if code[entry.target].opname == "CALL_INTRINSIC_1" and "STOPITERATION" in str(code[entry.target].argval):
        return False
    # ``except E:`` clauses whose E (a global or builtin class) does not catch GeneratorExit are skipped, as
    # CPython skips them; anything else (finally, with, a bare except, a computed E) counts as code.
    i = entry.target + 1 if code[entry.target].opname == "PUSH_EXC_INFO" else entry.target
    while i + 2 < len(code) and code[i].opname == "LOAD_GLOBAL" and code[i + 1].opname == "CHECK_EXC_MATCH" \
            and code[i + 2].opname.startswith("POP_JUMP") and code[i + 2].opname.endswith("IF_FALSE"):
        caught = frame.globals.get(code[i].argval, builtins_of(frame.globals).get(code[i].argval))
        if not of_type(caught, type) or issubclass(GeneratorExit, caught):
            return True
        i = code[i + 2].target
    return code[i].opname != "RERAISE"


def refuse_unclosed(tx) -> None:
    """Where the trace ends (a return or a graph break), a generator made in it and left suspended inside a
    ``try``/``with`` is closed by eager when its last reference goes (``del it``, or the function's locals at
    its return), running that code then. A traced generator is never closed, so the trace is retried with real
    generators (``Tracer.lazy_generators`` off), which close as eager's do."""
    for entry in tx.state.heap.values():
        if type(entry) is GeneratorEntry and entry.frame is not None and _close_runs_code(entry.frame):
            name = entry.frame.code.code.co_qualname
            tx.unsupported("suspended_generator", f"{name}() is suspended inside try/with: eager closes it when "
                           "its last reference goes, running its finally or __exit__")
