"""Python semantics over VariableTrackers, as rules keyed by type or target.

Python's object model makes getattr, call and setattr mutually recursive, so
the modules here refer to each other. Lower modules (``truthiness``,
``operators``, ``containers``, ``context``, ``objects``, ``attrs``) reach the
ones above them through the module object (``calls.call_sync(...)``), never by
a function-local import; ``calls`` imports the rest by name, ``builtin_calls``
(the builtin table, constant folding) first, ``builtin_calls`` imports ``known``
(constants and iteration) first, and ``known`` imports the lower modules by name. Importing ``calls`` first (here) fixes one import order
for the package.
"""

from . import calls  # noqa: F401
from . import iteration  # noqa: F401  (registers the builtins over iterables)
from . import symbolic  # noqa: F401  (what each protocol does with a symbolic size)
