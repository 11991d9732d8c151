"""Log channels (``STILLFRAME_LOGS=graph,guards,breaks,recompiles,bytecode``), routed through ``logging``.

Each channel is a child of the ``stillframe`` logger; a channel named in
``config.logs`` is set to INFO and gets a stderr handler, so
``STILLFRAME_LOGS=graph python train.py`` prints every captured graph.
"""

from __future__ import annotations

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
