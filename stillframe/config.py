"""The one typed configuration object of stillframe, and the only reader of the environment.

Example::

    >>> import stillframe
    >>> stillframe.config.cache_size_limit
    8
    >>> stillframe.config.cache_size_limit = 2   # takes effect on the next call

Environment variables read once at import: ``STILLFRAME_CACHE_SIZE_LIMIT``
(int), ``STILLFRAME_SUPPRESS_ERRORS`` and ``STILLFRAME_VERBOSE_TRACEBACKS`` (``1``), ``STILLFRAME_LOGS``
(comma separated: ``graph,guards,breaks,recompiles,bytecode,dynamic``; ``dynamic`` says which dimension became
symbolic and why).
"""

from __future__ import annotations
from .own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import os
from dataclasses import dataclass, field


def _logs_from_env() -> frozenset[str]:
    raw = os.environ.get("STILLFRAME_LOGS", "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


@dataclass(slots=True)
class Config:
    """Settings of stillframe (all in one place; STYLE habit 12).

    ``cache_size_limit``: cache entries per code object before the function
    runs eagerly with one warning (matches torch.compile's
    ``torch._dynamo.config.cache_size_limit``, default 8).
    ``inline_depth_limit``: how deep user-function inlining may nest before the
    trace is unsupported (guards against runaway recursion).
    ``max_trace_steps``: instructions one trace may interpret (guards against
    loops that never end at trace time).
    ``logs``: which log channels are on.
    ``suppress_errors``: a backend that fails makes the code it was given run eagerly, with one
    ``StillframeWarning``, instead of raising ``BackendCompilerFailed`` (torch.compile's
    ``torch._dynamo.config.suppress_errors``, default False; also ``STILLFRAME_SUPPRESS_ERRORS=1``).
    ``capture_scalar_outputs``: ``.item()`` is captured in the graph as an unbacked SymInt / SymFloat instead of
    breaking the graph (torch.compile's ``torch._dynamo.config.capture_scalar_outputs``, default False; also
    ``TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1``, the variable torch reads).
    ``capture_dynamic_output_shape_ops``: ops whose output shape depends on data (``nonzero``,
    ``masked_select``, boolean-mask indexing, ``unique``) are captured with unbacked sizes instead of breaking the
    graph (torch.compile's ``capture_dynamic_output_shape_ops``; also ``TORCHDYNAMO_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS=1``).
    ``rerun_snapshot_bytes``: the most bytes of input storage (in all) a graph that writes its inputs' data and
    may raise at run time (an op reading an integer or boolean tensor, such as an index) copies before each
    call, so that if it raises, the inputs are put back and the code runs again for real with eager's side
    effects (``CacheEntry.rerun_on_raise``; default 256 KiB). Larger inputs are not copied: such a graph that
    raises loses the effects the plan replays after it, as under torch.compile.
    ``verbose_tracebacks``: keep stillframe's own frames in the tracebacks of the user's exceptions, with a
    note per user frame (for debugging stillframe; default False: the user sees eager's frames; also
    ``STILLFRAME_VERBOSE_TRACEBACKS=1``).
    """

    cache_size_limit: int = field(default_factory=lambda: int(os.environ.get("STILLFRAME_CACHE_SIZE_LIMIT", "8")))
    inline_depth_limit: int = 64
    max_trace_steps: int = 1_000_000
    logs: frozenset[str] = field(default_factory=_logs_from_env)
    suppress_errors: bool = field(default_factory=lambda: os.environ.get("STILLFRAME_SUPPRESS_ERRORS", "") == "1")
    capture_scalar_outputs: bool = field(
        default_factory=lambda: os.environ.get("TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS", "") == "1")
    capture_dynamic_output_shape_ops: bool = field(
        default_factory=lambda: os.environ.get("TORCHDYNAMO_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS", "") == "1")
    rerun_snapshot_bytes: int = 256 * 1024
    verbose_tracebacks: bool = field(
        default_factory=lambda: os.environ.get("STILLFRAME_VERBOSE_TRACEBACKS", "") == "1")


config = Config()
