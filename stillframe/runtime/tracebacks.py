"""Tracebacks of the user's exceptions as eager shows them: the user's frames, not stillframe's.

A step that runs for real between two graphs executes one instruction of a user's frame that exists only in
stillframe's interpreter, so an exception it raises has stillframe's executor frames in its traceback and
none of the user's. :func:`raise_in_user_frames` re-raises it through stand-in frames, one per user frame it
unwinds, that carry the user's function name, file, line and column span, so ``traceback`` prints the user's
source lines (and carets) exactly where eager prints them::

    Traceback (most recent call last):
      File "train.py", line 12, in <module>
        fn(torch.ones(2), {})
      File ".../stillframe/api.py", line 170, in __call__     (the one wrapper frame, as torch.compile's _fn)
      File "train.py", line 7, in f
        z = g(d)
            ^^^^
      File "train.py", line 3, in g
        return d["missing"]
               ~^^^^^^^^^^^
    KeyError: 'missing'

:func:`user_traceback` then drops the frames of stillframe's own modules. ``config.verbose_tracebacks`` keeps
them all (for debugging stillframe).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import linecache
import os
import types
from typing import Any, Callable, Iterator

from .trampoline import relink, trampoline

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without the entries of stillframe's own modules (the same chain when it has none)."""
    entries = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
            entries.append(tb)
        tb = tb.tb_next
    return relink(entries)


class _Unwinding(BaseException):
    """Raised through trampolines to make traceback entries (never seen outside :func:`frames_traceback`)."""


def frames_traceback(entries: tuple, tail: types.TracebackType | None = None) -> types.TracebackType | None:
    """``tail`` after one entry per :class:`~stillframe.variables.objects.TracebackEntry` of ``entries`` (outermost
    first): each entry's frame is a trampoline claiming the user's file, function, line and columns, as a real
    step's frame does (:mod:`stillframe.runtime.trampoline`)."""
    tb = tail
    for entry in reversed(entries):
        code = entry.code
        step = trampoline(code, entry.lineno or code.co_firstlineno, "raise", entry.positions, entry.module)
        made = _raised_through(step)
        tb = types.TracebackType(tb, made.tb_frame, made.tb_lasti, made.tb_lineno)
    return tb


def _raised_through(step: Any) -> types.TracebackType:
    """The traceback entry of ``step`` raising, the trampoline's frame linked to no frame of ours.

    Raised from the caller directly, the frame (kept by the user's traceback) would keep every frame of ours under
    it alive through ``f_back``, with their locals: a plan's live values, so a ``del x`` in the user's ``except``
    did not collect ``x`` (test_raise's test_3611). So ``step`` raises inside a generator, left suspended: a
    suspended generator's frame links to no caller. The generator lives as long as the trampoline's frame (which
    holds it, ``step``'s ``keep``), and ends with it: run to its end or closed, a generator's frame would link to
    the frame that ended it (on 3.12, closing it runs its frame; 3.11 and 3.13 unlink a generator's frame as it
    stops, 3.12 does not).
    """
    keep: list = []
    generator = _raise_in(step, keep)
    keep.append(generator)
    del keep  # (only the trampoline's frame holds it now)
    return next(generator)


def _raise_in(step: Any, keep: list) -> Iterator[types.TracebackType]:
    made = []
    try:
        step(_Unwinding(), keep)
    except _Unwinding as e:
        made.append(e.__traceback__.tb_next)  # the trampoline's own entry
        e.__traceback__ = None  # (the trampoline's frame holds e: a cycle through the entry otherwise)
    del keep
    yield made.pop()  # (no local of the suspended frame holds the entry: that would be a cycle through it)


def handled_traceback(tb: types.TracebackType | None, passed: list) -> types.TracebackType | None:
    """The traceback a user's ``except`` sees for an exception a real step raised: ``tb`` without stillframe's own
    entries, after an entry for each user frame it passed through (``passed``: TracebackEntry values, innermost
    first, the handler's frame last), as CPython adds one per frame it unwinds; the frame that raised it has
    one already where the step raised through a trampoline claiming it."""
    tb = user_traceback(tb)
    if passed and _claimed(tb, passed[0].code):
        passed = passed[1:]
    return frames_traceback(tuple(reversed(passed)), tb)


def raise_in_user_frames(exc: BaseException, frames: list[tuple[types.CodeType, Any]]) -> None:
    """Raise ``exc`` through stand-ins of the user's frames ``[(code, positions), ...]``, outermost first:
    each stand-in calls the next at the span ``positions`` gives (a ``dis.Positions``) of its own line, the
    innermost raises ``exc`` there."""
    if frames and _claimed(exc.__traceback__, frames[-1][0]):
        frames = frames[:-1]  # the real step ran through a trampoline claiming that frame already

    def innermost() -> None:
        raise exc

    call: Callable[[], None] = innermost
    for i, (code, positions) in enumerate(reversed(frames)):
        call = _stand_in(code, positions, call, raises=i == 0, exc=exc)
    call()


def _claimed(tb: types.TracebackType | None, code: types.CodeType) -> bool:
    """Whether an entry of ``tb`` already claims to be a frame of ``code`` (a trampoline of
    :mod:`stillframe.runtime.trampoline`, through which a real step calls or raises)."""
    while tb is not None:
        frame_code = tb.tb_frame.f_code
        if frame_code.co_filename == code.co_filename and frame_code.co_qualname == code.co_qualname:
            return True
        tb = tb.tb_next
    return False


def _stand_in(code: types.CodeType, positions: Any, inner: Callable, raises: bool, exc: BaseException) -> Callable:
    """A callable whose one frame is named as ``code``'s function and sits at ``positions`` of its file: it
    raises ``exc`` there (``raises``) or calls ``inner`` there."""
    lineno = getattr(positions, "lineno", None) or code.co_firstlineno
    line = linecache.getline(code.co_filename, lineno).rstrip("\n")
    col, end = getattr(positions, "col_offset", None), getattr(positions, "end_col_offset", None)
    if col is None or end is None or getattr(positions, "end_lineno", lineno) != lineno:
        stripped = line.lstrip()
        col, end = len(line) - len(stripped), len(line)  # the whole line: no carets
    width = end - col
    if raises:  # `raise ___`: the statement's span is the instruction's
        name = "_" * max(width - len("raise "), 1)
        text = f"raise {name}"
        value: Any = exc
    else:  # `___()`: the call's span is the instruction's
        name = "_" * max(width - 2, 1)
        text = f"{name}()"
        value = inner
    if lineno < 2:
        col = 0  # no line above for the block that lets the statement be indented
    header = "if 1:\n" if col else ""  # a module-level statement may be indented only inside a block
    # lines counted from the user's function's first line (its co_firstlineno, as PEP 626 tests measure a
    # traceback frame's line), where the statement comes after it
    first = code.co_firstlineno if 1 <= code.co_firstlineno <= lineno - bool(header) else 1
    source = "\n" * (lineno - first - bool(header)) + header + " " * col + text + "\n"
    stand_in = compile(source, code.co_filename, "exec", dont_inherit=True)
    stand_in = stand_in.replace(co_name=code.co_name, co_qualname=code.co_qualname, co_firstlineno=first)
    namespace = {name: value, "__builtins__": {}}
    return lambda: exec(stand_in, namespace)
