"""Trampolines: one-line functions whose code claims the user's file, line and function name.

A real step calls (or raises) through one, so code that looks at its
caller's frame -- ``warnings.warn``, ``logging``, tracebacks -- sees the
user's ``file:line`` and function, as in eager. Deferred logging calls are
replayed through them too (:mod:`stillframe.runtime.rebuild`).
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .live import LiveFrame

_TRAMPOLINES: dict[tuple, Any] = {}


def frame_trampoline(frame: LiveFrame, kind: str) -> Any:
    """A one-line function whose code claims the user's file, line and function name.

    The real step calls (or raises) through it, so code that looks at its
    caller's frame -- ``warnings.warn``, ``logging``, tracebacks -- sees the
    user's ``file:line`` and function, as in eager.
    """
    code = frame.code.code
    return trampoline(code, frame.code.instructions[frame.ip - 1].lineno or code.co_firstlineno, kind)


def trampoline(code: types.CodeType, line: int, kind: str) -> Any:
    """:func:`frame_trampoline` for line ``line`` of ``code`` (also used to replay deferred logging calls)."""
    key = (code.co_filename, line, code.co_name, kind)
    fn = _TRAMPOLINES.get(key)
    if fn is None:
        body = "return ___fn(*___a, **___k)" if kind == "call" else "raise ___e"
        params = "___fn, ___a, ___k" if kind == "call" else "___e"
        text = "\n" * (line - 1) + f"def ___step({params}): {body}\n"
        namespace: dict = {}
        exec(compile(text, code.co_filename, "exec"), namespace)
        fn = namespace["___step"]
        fn.__code__ = fn.__code__.replace(co_name=code.co_name, co_qualname=code.co_qualname)
        _TRAMPOLINES[key] = fn
    return fn
