"""Log channels (``STILLFRAME_LOGS=graph,guards,breaks,recompiles,bytecode``), routed through ``logging``, and
where a compiled function is in the user's source (:func:`defined_at`).

Each channel is a child of the ``stillframe`` logger; a channel named in
``config.logs`` is set to INFO and gets a stderr handler, so
``STILLFRAME_LOGS=graph python train.py`` prints every captured graph.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import logging
from typing import Any

from ..config import config

_root = logging.getLogger("stillframe")


def _channel(name: str) -> logging.Logger:
    logger = _root.getChild(name)
    if name in config.logs and not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(f"[stillframe:{name}] %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    return logger


def graph(fn: Any, gm: Any, guard_source: str) -> None:
    g = _channel("graph")
    if g.isEnabledFor(logging.INFO):
        g.info("captured graph of %s:\n%s", getattr(fn, "__qualname__", fn), gm.code)
    k = _channel("guards")
    if k.isEnabledFor(logging.INFO):
        k.info("guards of %s:\n%s", getattr(fn, "__qualname__", fn), guard_source)


def event(channel: str, message: str, *args: Any) -> None:
    logger = _channel(channel)
    if logger.isEnabledFor(logging.INFO):
        logger.info(message, *args)


def defined_at(fn: Any) -> str:
    """``file:line`` where the user wrote ``fn``: through the decorators that wrap it with ``functools.wraps``
    (``__wrapped__``), so a transformers model's ``forward`` is named at the model's ``def``, not at the
    library's wrapper (``utils/generic.py``)."""
    seen = set()
    while id(fn) not in seen and getattr(getattr(fn, "__wrapped__", None), "__code__", None) is not None:
        seen.add(id(fn))
        fn = fn.__wrapped__
    code = getattr(fn, "__code__", None)
    return "?" if code is None else f"{code.co_filename}:{code.co_firstlineno}"
