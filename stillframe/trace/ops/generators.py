"""Generators: ``RETURN_GENERATOR``, ``YIELD_VALUE``, and generator objects.

Calling a generator function makes a generator object (a ``GeneratorVariable``
whose heap entry holds its suspended frame). It runs in one of two ways:

* ``next(gen)`` resumes its frame until the next ``YIELD_VALUE``, which suspends
  the frame back into the heap and hands the caller the value; returning makes
  the caller's ``next`` raise ``StopIteration`` (a ``@contextmanager`` is driven
  this way, so its body is traced between its ``__enter__`` and ``__exit__``);
* everything else (``for``, ``list(gen)``, ``sum(gen)`` ...) drains it: its
  frame runs to completion, each ``YIELD_VALUE`` appending to the frame's
  ``yields``, and the caller gets an iterator over them.

A generator suspended mid-way cannot be rebuilt at a graph break (it would have
to be a real generator at that point); the trace is then redone with drained
generators only (``Tracer.lazy_generators``), where such code breaks earlier.
Code that sends values into a generator or throws into it is unsupported.
"""

from __future__ import annotations
from ...own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from ...variables.base import ConstantVariable, GeneratorEntry
from ..interpreter import handler


@handler("RETURN_GENERATOR")
def RETURN_GENERATOR(tx, inst):
    tx.push(ConstantVariable(None))  # what the generator's first resumption pushes (popped by POP_TOP)


@handler("YIELD_VALUE")
def YIELD_VALUE(tx, inst):
    value = tx.pop()
    frame = tx.frame
    if frame.generator is not None:  # next(gen): suspend, hand the value to the caller
        suspended = frame.with_stack(frame.stack + (ConstantVariable(None),))._with(generator=None)
        tx.heap_set(frame.generator, GeneratorEntry(suspended, suspended.code.code))
        tx.state = tx.state.replace(frames=tx.state.frames[:-1])
        tx.push(value)
        return
    if frame.yields is None:
        tx.unsupported("unsupported_opcode", "yield outside a generator being run")
    tx.set_frame(frame.with_yields(frame.yields + (value,)))
    tx.push(ConstantVariable(None))


