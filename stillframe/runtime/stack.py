"""Stack room: stillframe's own work runs with room under the recursion limit, the user's code under the user's limit.

A compiled call runs the user's code (real steps, eager fallbacks) and stillframe's own work (guards, traces,
a backend's compile, a plan's graph and rebuild, making a real step's trampolines) on one Python stack, under
one ``sys.getrecursionlimit()``. A program may set that limit just above its own depth, to meet a
``RecursionError`` in its own recursion a few calls down (CPython's test_exceptions
``test_recursion_in_except_handler``): eager then runs on, while stillframe's next trace or trampoline raised
that ``RecursionError`` out of stillframe, past the user's ``finally`` (which never set the limit back).
:class:`stack_room` gives stillframe's own work its room: a trace (first call or after a break), the plan after a
real step, a real step's trampolines, and the guards of a call, retried with room where they raised
``RecursionError`` (the hot path of a call costs nothing more). Real steps and eager fallbacks run outside such a
block. A real step still runs deeper than eager's call (by stillframe's frames under it): a recursion run for real
there meets the limit that many frames sooner; a program that measures its depth in the same call, as the test
above does, sees the same thing on both sides.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import sys

#: Python frames stillframe's own work for a call may take above the frame that starts it. The trace does not
#: recurse per user frame it inlines (60 nested user calls trace within ~90 frames of the caller).
STACK_ROOM = 500


class stack_room:
    """``with stack_room():`` a block with ``STACK_ROOM`` frames of stack under the recursion limit: where the
    limit leaves less, it is raised for the block and set back after it (to what it was on entry: no user code
    runs inside). Costs one ``sys._getframe`` where the room is there. Entering it takes one Python frame (no
    ``__init__``, no generator): it is entered where the user's limit may leave only a frame or two. Raises
    nothing of its own."""

    __slots__ = ("limit",)

    def __enter__(self) -> None:
        self.limit = limit = sys.getrecursionlimit()
        try:
            sys._getframe(max(limit - STACK_ROOM, 0))
        except ValueError:  # fewer frames than that: the room is there
            self.limit = None
            return
        depth, frame = 0, sys._getframe()
        while frame is not None:
            depth, frame = depth + 1, frame.f_back
        sys.setrecursionlimit(depth + STACK_ROOM)

    def __exit__(self, *exc_info: object) -> None:
        if self.limit is not None:
            sys.setrecursionlimit(self.limit)
