"""Generator objects: made by calling a generator function, stepped by ``next``, drained by everything else."""

from __future__ import annotations
from ..variables.base import ConstantVariable
from ..variables.base import GeneratorEntry
from ..variables.base import GeneratorVariable
from ..variables.base import IteratorVariable


def make_generator(tx, frame) -> GeneratorVariable:
    """The generator object of a call to a generator function, its frame not started."""
    oid = tx.new_id()
    tx.heap_set(oid, GeneratorEntry(frame))
    return GeneratorVariable(oid)


def drain(tx, gen: GeneratorVariable) -> IteratorVariable:
    """Run ``gen`` to completion now; an iterator over what it yields (empty if it has finished)."""
    entry = tx.heap(gen.oid)
    if entry.frame is None:
        return tx.new_iterator(())
    tx.heap_set(gen.oid, GeneratorEntry(None))
    depth = len(tx.state.frames)
    tx.push_frame(entry.frame._with(yields=(), generator=None))
    return tx.run_until_return(depth)


def step(tx, gen: GeneratorVariable) -> tuple[bool, object]:
    """Resume ``gen`` until it yields or returns, as CPython does for one ``next``: ``(True, value)`` for a
    yielded value, ``(False, returned)`` once it has finished (``returned`` is ``None`` if it had finished
    before). Nothing runs ahead of the consumer: a generator is never drained early."""
    entry = tx.heap(gen.oid)
    if entry.frame is None:
        return False, None
    tx.heap_set(gen.oid, GeneratorEntry(None))  # running: a return or an exception leaves it finished
    depth = len(tx.state.frames)
    tx.push_frame(entry.frame._with(generator=gen.oid))
    value = tx.run_until_return(depth)
    return tx.heap(gen.oid).frame is not None, value


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
