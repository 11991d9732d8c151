"""The builtins stillframe's own code runs with: a copy of the ``builtins`` namespace taken when stillframe is imported.

A user program may rebind a builtin while compiled code runs (``builtins.len = lru_cache(4)(len)`` in CPython's
test_functools, a ``mock.patch("builtins.open")``, a key with a Python ``__eq__`` planted in the builtins dict in
test_iter). A function looks builtin names up in the builtins it captured when it was created, from its globals'
``__builtins__`` (CPython 3.10 and later: ``function.__builtins__``). Every stillframe module binds
``__builtins__`` to :data:`BUILTINS` before its first function or class::

    from .own_builtins import BUILTINS as __builtins__

so ``len(...)`` in stillframe's runtime is always the real ``len``, and the user's rebinding never runs inside
stillframe (where an exception it raises would reach the user as one of stillframe's own: DESIGN invariant 8).
``exec`` and ``eval`` called from a stillframe function with globals that lack ``__builtins__`` (the guard
functions, the rebuild code) inherit the calling frame's builtins, this copy too.

The user's code still sees the user's rebinding, as eagerly: the trace reads a builtin name from the builtins of
the user's function (``trace/ops/names.py``) and guards the entry it read. The copy is taken once, so a builtin
the user had already rebound when stillframe was first imported is the one stillframe keeps; code stillframe calls
in the standard library and in torch (``dataclasses.replace``, FX's code generation) still runs with the
process's builtins, as it does under eager torch.compile.
"""

import builtins

#: The ``builtins`` namespace as it was when stillframe was imported (a copy; never mutated).
BUILTINS: dict = dict(vars(builtins))
