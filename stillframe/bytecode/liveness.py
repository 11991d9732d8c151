"""Which local variables a frame may still read: liveness of fast locals over a :class:`Bytecode`.

At a graph break the plan rebuilds the live call stack (``runtime/rebuild.py``). A local that the code after
the break never reads again is *dead* there: rebuilding it would make its tensor a graph output, and an output
of an AOTAutograd graph joins that graph's single autograd node, so a ``backward()`` through another output
gave the dead tensor's inputs a zero ``.grad`` where eager leaves ``None`` (fuzz 28:43; TorchDynamo keeps
only live locals at a break, as this does).

:func:`live_locals` is the classic backward dataflow over the instructions: a local is live before an
instruction that reads it (``LOAD_FAST``, ``LOAD_FAST_CHECK``, ``LOAD_FAST_AND_CLEAR``, and ``DELETE_FAST``,
which raises when it is unbound), dead before one that stores it without reading it, and live before any
instruction from which a path (jumps, fall-through, and the exception handler that covers it) reaches a read.
It errs towards *live*: an instruction not known to end its block is taken to fall through.

Code that can see its frame's locals by name (``locals()``, ``vars()``, ``eval``/``exec``, ``dir()``,
``sys._getframe``, ``inspect``), or see when a local's object dies (``weakref``), keeps every local live;
zero-argument ``super()`` reads the first argument.
"""

from __future__ import annotations
try:
    from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)
except ImportError:  # loaded on its own, outside stillframe (tests/bytecode): the process's builtins
    pass

import threading
import weakref

from .reader import Bytecode

_READS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST"})
_WRITES = frozenset({"STORE_FAST"})
#: Instructions after which control never falls through to the next one.
_NO_FALL_THROUGH = frozenset({"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD",
                              "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP"})
#: Names through which code reads its own frame's locals: all of them stay live.
_FRAME_READERS = frozenset({"locals", "vars", "eval", "exec", "dir", "_getframe", "currentframe", "inspect",
                            "stack", "getframeinfo", "f_locals", "breakpoint",
                            # weak references see when an object dies: eager's frame holds every local until it
                            # returns, so none may be dropped early (`r = weakref.ref(o)`, o never read again)
                            "weakref", "ref", "proxy", "finalize", "WeakMethod", "WeakSet", "WeakValueDictionary",
                            "WeakKeyDictionary"})

_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # code object -> live sets (or None)
_lock = threading.Lock()


def live_locals(code: Bytecode, index: int) -> frozenset | None:
    """The fast locals of ``code`` that may be read from instruction ``index`` on (before it runs), or ``None``
    where every local must be kept (the code reads its frame's locals by name)."""
    with _lock:
        table = _cache.get(code.code, False)
    if table is False:
        table = _analyse(code)
        with _lock:
            _cache[code.code] = table
    return None if table is None else table[index]


def _analyse(code: Bytecode) -> tuple | None:
    instructions = code.instructions
    names = set(code.code.co_names)
    if names & _FRAME_READERS:
        return None
    always = set()
    if "super" in names or any(i.opname == "LOAD_SUPER_ATTR" for i in instructions):
        if code.code.co_argcount or code.code.co_posonlyargcount:
            always.add(code.code.co_varnames[0])  # zero-argument super() reads the first argument's slot
    n = len(instructions)
    successors: list[tuple] = []
    for i, inst in enumerate(instructions):
        nxt = []
        if inst.opname not in _NO_FALL_THROUGH and i + 1 < n:
            nxt.append(i + 1)
        if inst.target is not None:
            nxt.append(inst.target)
        successors.append(tuple(nxt))
    handlers = [code.exception_handler(i) for i in range(n)]
    live: list[frozenset] = [frozenset()] * (n + 1)
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            inst = instructions[i]
            out = set()
            for s in successors[i]:
                out |= live[s]
            if inst.opname in _WRITES:
                out.discard(inst.argval)
            if inst.opname in _READS:
                out.add(inst.argval)
            handler = handlers[i]
            if handler is not None:  # it may raise before it stores: the handler sees the locals as they were
                out |= live[handler.target]
            new = frozenset(out | always)
            if new != live[i]:
                live[i] = new
                changed = True
    return tuple(live)
