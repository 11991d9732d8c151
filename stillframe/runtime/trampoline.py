"""Trampolines: one-line functions whose code claims the user's file, line and function name.

A real step calls (or raises) through one, so code that looks at its
caller's frame -- ``warnings.warn``, ``logging``, tracebacks -- sees the
user's ``file:line`` and function, as in eager. Deferred logging calls are
replayed through them too (:mod:`stillframe.runtime.rebuild`).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import __future__
import functools
import linecache
import operator
import types
from typing import TYPE_CHECKING, Any

from .stack import stack_room

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
    inst = frame.code.instructions[max(frame.ip - 1, 0)]
    module = frame.globals.get("__name__")
    return trampoline(code, inst.lineno or code.co_firstlineno, kind, inst.positions,
                      module if isinstance(module, str) else None, frame.globals)


def call_through_frames(frames: list, fn: Any, args: Any, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` called through one "call" trampoline per frame of ``frames`` (outermost first; the
    last is the frame making the call): the Python stack above ``fn`` is the user's, inlined callers included, so
    ``warnings.warn(..., stacklevel=2)`` in a helper names the helper's caller, and ``sys._getframe(1)`` is a
    frame of the user's, as in eager."""
    with stack_room():  # (made with stillframe's room: only fn runs under the user's recursion limit)
        step = frame_trampoline(frames[-1], "call")
        outer = [frame_trampoline(frame, "call") for frame in frames[:-1]]
    if len(frames) == 1:
        return step(fn, args, kwargs)
    call = functools.partial(step, fn, args, kwargs)
    for step in reversed(outer[1:]):
        call = functools.partial(step, call, (), {})
    try:
        return outer[0](call, (), {})
    except BaseException as e:  # its traceback names the frame that called fn once, as a call of fn alone does:
        e.__traceback__ = _without(e.__traceback__, [step.__code__ for step in outer])  # (the callers' entries
        raise                                                           # are made as it unwinds them: tracebacks.py)


def _without(tb: types.TracebackType | None, codes: list) -> types.TracebackType | None:
    """``tb`` without the first entries running ``codes``, in order (the outer trampolines of one call)."""
    kept = []
    while tb is not None:
        if codes and tb.tb_frame.f_code is codes[0]:
            codes = codes[1:]
        else:
            kept.append(tb)
        tb = tb.tb_next
    return relink(kept)


def relink(entries: list) -> types.TracebackType | None:
    """A traceback made of ``entries`` (traceback entries, outermost first) linked anew, in that order."""
    result = None
    for entry in reversed(entries):
        result = types.TracebackType(result, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return result


def trampoline(code: types.CodeType, line: int, kind: str, positions: Any = None, module: str | None = None,
               globals_: dict | None = None) -> Any:
    """:func:`frame_trampoline` for line ``line`` of ``code`` (also used to replay deferred logging calls).

    ``kind`` ``"call"``: ``step(fn, args, kwargs)`` returns ``fn(*args, **kwargs)``; ``"raise"``:
    ``step(exc)`` raises ``exc``; ``step(exc, keep)`` too, its frame holding ``keep`` while it lives.
    ``positions`` (a ``dis.Positions`` on ``line``) is the column span the call or raise claims; without it, the
    whole line. ``globals_``: the user's globals, the trampoline's own
    (``warnings`` keeps its ``__warningregistry__`` there and names the module from ``__name__``, as
    ``type(name, bases, ns)`` sets ``__module__``); without them, ``module``, the ``__name__`` the trampoline's
    globals carry.
    """
    col, end = _span(code, line, positions)
    key = (code.co_filename, line, code.co_name, kind, col, end, module, id(globals_))
    held = _TRAMPOLINES.get(key)
    if held is None or held[1] is not globals_:
        fn = _make(code, line, kind, col, end - col, module)
        if globals_ is not None:  # (the globals stay alive with the function, so their id is not reused)
            fn = types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__)
        held = _TRAMPOLINES[key] = (fn, globals_)
    return held[0]


def _span(code: types.CodeType, line: int, positions: Any) -> tuple[int, int]:
    col, end = getattr(positions, "col_offset", None), getattr(positions, "end_col_offset", None)
    if col is None or end is None or getattr(positions, "lineno", line) != line or \
            getattr(positions, "end_lineno", line) != line:
        text = linecache.getline(code.co_filename, line).rstrip("\n")
        col, end = len(text) - len(text.lstrip()), len(text)
    return col, end


#: The ``co_flags`` bits that are ``__future__`` features (CPython's PyCF_MASK): what ``compile`` inherits.
_FUTURE_FLAGS = functools.reduce(operator.or_, (getattr(__future__, name).compiler_flag
                                                for name in __future__.all_feature_names))


def _make(code: types.CodeType, line: int, kind: str, col: int, width: int, module: str | None) -> Any:
    # the ``def`` sits on the user's function's first line where the body leaves room (blank lines between), so
    # that ``f_code.co_firstlineno`` and ``f_lineno`` of the trampoline's frame are the user's (PEP 626 tests
    # measure a traceback frame's line from its code's first line)
    first = code.co_firstlineno
    if kind == "call" and line >= 3:  # `name()` spans the columns; name is fn bound to its arguments
        name = "_" * max(width - 2, 3)
        head = "\n" * (first - 1) + "def ___step(___fn, ___a, ___k, ___partial=___partial):\n" + \
            "\n" * (line - first - 2) if 1 <= first <= line - 2 else \
            "\n" * (line - 3) + "def ___step(___fn, ___a, ___k, ___partial=___partial):\n"
        text = head + f" {name} = ___partial(___fn, *___a, **___k); return (\n" + " " * col + f"{name}()\n )\n"
    elif kind == "raise" and line >= 2 and col >= 1:  # `raise name` spans the columns
        name = "_" * max(width - len("raise "), 3)
        head = "\n" * (first - 1) + f"def ___step({name}, ___keep=None):\n" + "\n" * (line - first - 1) \
            if 1 <= first <= line - 1 else "\n" * (line - 2) + f"def ___step({name}, ___keep=None):\n"
        text = head + " " * col + f"raise {name}\n"
    else:  # the whole line, at its first column
        body = "return ___fn(*___a, **___k)" if kind == "call" else "raise ___e"
        params = "___fn, ___a, ___k" if kind == "call" else "___e, ___keep=None"
        text = "\n" * (line - 1) + f"def ___step({params}): {body}\n"
    namespace: dict = {"___partial": functools.partial}
    if module is not None:
        namespace["__name__"] = module
    # the user's code's __future__ flags, not this module's: exec, eval and compile called by the step inherit them
    exec(compile(text, code.co_filename, "exec", flags=code.co_flags & _FUTURE_FLAGS, dont_inherit=True), namespace)
    fn = namespace["___step"]
    fn.__code__ = fn.__code__.replace(co_name=code.co_name, co_qualname=code.co_qualname)
    return fn
