"""Errors and warnings raised by stillframe.

Two families, kept apart as byterun keeps ``VirtualMachineError`` apart from
the user's own exceptions:

* faults of ours: :class:`InternalError` (a bug in stillframe). It never
  reaches the user as a crash: the frame falls back to eager with a warning.
* things the tracer cannot capture: :class:`Unsupported`, carrying a
  :class:`GraphBreak` value (kind, explanation, hints, user location). Without
  ``fullgraph=True`` it becomes an eager fallback plus one
  :class:`StillframeWarning`; with ``fullgraph=True`` it is raised to the user
  (matches torch.compile's ``fullgraph``).

Exceptions raised by the user's own code are never wrapped: the call runs
eagerly and the user sees exactly the exception eager Python raises.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class UserLocation:
    """Where in the user's source something happened: ``file:line`` plus the line's text."""

    filename: str
    lineno: int | None
    source: str = ""

    def __str__(self) -> str:
        text = f"{self.filename}:{self.lineno}"
        if self.source:
            text += f"\n    {self.source.strip()}"
        return text


@dataclass(frozen=True, slots=True)
class GraphBreak:
    """A reason tracing had to stop, as data (STYLE habit 8).

    ``kind`` is a short stable tag (``"unsupported_opcode"``,
    ``"data_dependent"``, ``"unsupported_call"`` ...), ``explanation`` one
    sentence for a user, ``hints`` what they can do about it, ``location`` the
    innermost user frame being traced when it happened.
    """

    kind: str
    explanation: str
    hints: tuple[str, ...] = ()
    location: UserLocation | None = None

    def format(self) -> str:
        lines = [f"{self.kind}: {self.explanation}"]
        if self.location is not None:
            lines.append(f"  at {self.location}")
        for hint in self.hints:
            lines.append(f"  hint: {hint}")
        return "\n".join(lines)


class StillframeError(Exception):
    """Base class of every exception stillframe itself raises."""


class Unsupported(StillframeError):
    """The traced program does something stillframe cannot capture.

    Raised to the user only with ``fullgraph=True`` (matches torch.compile's
    ``fullgraph``); otherwise the call runs eagerly with one warning carrying
    the same text. ``.graph_break`` holds the structured reason.
    """

    def __init__(self, graph_break: GraphBreak):
        super().__init__(graph_break.format())
        self.graph_break = graph_break


class InternalError(StillframeError):
    """A bug in stillframe (an invariant of the tracer did not hold)."""


class StillframeWarning(UserWarning):
    """Emitted once when a function (or one of its cache entries) runs eagerly."""


class UserError(Exception):
    """The user's code raised (or would raise) ``exc`` at trace time; eager must run to show it.

    ``traceable``: the exception is certainly eager's own (a ``raise`` in the user's code, or a Python rule
    that mirrors CPython's), so a traced ``except`` may catch it. An error from running an op on fake
    tensors is not: fake tensors may fail where real ones do not, so it is never caught in the trace; the
    instruction runs for real instead, and the real exception (if any) reaches the user's handlers.
    """

    def __init__(self, exc: BaseException, location: UserLocation | None, traceable: bool = True):
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.exc = exc
        self.location = location
        self.traceable = traceable
