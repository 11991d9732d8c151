"""Trampolines: one-line functions whose code claims the user's file, line and function name.

A real step calls (or raises) through one, so code that looks at its
caller's frame -- ``warnings.warn``, ``logging``, tracebacks -- sees the
user's ``file:line`` and function, as in eager. Deferred logging calls are
replayed through them too (:mod:`stillframe.runtime.rebuild`).
"""

from __future__ import annotations

import functools
import linecache
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .live import LiveFrame

_TRAMPOLINES: dict[tuple, Any] = {}


def frame_trampoline(frame: LiveFrame, kind: str) -> Any:
    """A function whose code claims the user's file, line, columns and function name.

    The real step calls (or raises) through it, so code that looks at its
    caller's frame -- ``warnings.warn``, ``logging``, tracebacks -- sees the
    user's ``file:line`` and function, as in eager; a traceback through it
    shows the user's line with eager's carets (the instruction's column span).
    """
    code = frame.code.code
    inst = frame.code.instructions[frame.ip - 1]
    module = frame.globals.get("__name__")
    return trampoline(code, inst.lineno or code.co_firstlineno, kind, inst.positions,
                      module if isinstance(module, str) else None)


def trampoline(code: types.CodeType, line: int, kind: str, positions: Any = None, module: str | None = None) -> Any:
    """:func:`frame_trampoline` for line ``line`` of ``code`` (also used to replay deferred logging calls).

    ``kind`` ``"call"``: ``step(fn, args, kwargs)`` returns ``fn(*args, **kwargs)``; ``"raise"``:
    ``step(exc)`` raises ``exc``. ``positions`` (a ``dis.Positions`` on ``line``) is the column span the
    call or raise claims; without it, the whole line. ``module``: the ``__name__`` of the user's globals, which
    the trampoline's globals carry too (``type(name, bases, ns)`` sets ``__module__`` from it, ``warnings``
    attributes a warning to it).
    """
    col, end = _span(code, line, positions)
    key = (code.co_filename, line, code.co_name, kind, col, end, module)
    fn = _TRAMPOLINES.get(key)
    if fn is None:
        fn = _make(code, line, kind, col, end - col, module)
        _TRAMPOLINES[key] = fn
    return fn


def _span(code: types.CodeType, line: int, positions: Any) -> tuple[int, int]:
    col, end = getattr(positions, "col_offset", None), getattr(positions, "end_col_offset", None)
    if col is None or end is None or getattr(positions, "lineno", line) != line or \
            getattr(positions, "end_lineno", line) != line:
        text = linecache.getline(code.co_filename, line).rstrip("\n")
        col, end = len(text) - len(text.lstrip()), len(text)
    return col, end


def _make(code: types.CodeType, line: int, kind: str, col: int, width: int, module: str | None) -> Any:
    if kind == "call" and line >= 3:  # `name()` spans the columns; name is fn bound to its arguments
        name = "_" * max(width - 2, 3)
        text = ("\n" * (line - 3) + "def ___step(___fn, ___a, ___k):\n"
                f" {name} = ___partial(___fn, *___a, **___k); return (\n" + " " * col + f"{name}()\n )\n")
    elif kind == "raise" and line >= 2 and col >= 1:  # `raise name` spans the columns
        name = "_" * max(width - len("raise "), 3)
        text = "\n" * (line - 2) + f"def ___step({name}):\n" + " " * col + f"raise {name}\n"
    else:  # the whole line, at its first column
        body = "return ___fn(*___a, **___k)" if kind == "call" else "raise ___e"
        params = "___fn, ___a, ___k" if kind == "call" else "___e"
        text = "\n" * (line - 1) + f"def ___step({params}): {body}\n"
    namespace: dict = {"___partial": functools.partial}
    if module is not None:
        namespace["__name__"] = module
    exec(compile(text, code.co_filename, "exec"), namespace)
    fn = namespace["___step"]
    fn.__code__ = fn.__code__.replace(co_name=code.co_name, co_qualname=code.co_qualname)
    return fn
