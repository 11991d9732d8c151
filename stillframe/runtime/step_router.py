"""Inside a compiled training step, ``opt.step()`` after the backward's graph break runs a compiled ``opt.step``.

See :class:`StepRouter`; the compiled step itself is ``runtime/optimizer_step.py``'s.
"""

from __future__ import annotations

import types
import weakref
from typing import Any, Callable

from ..guards.guard import OwnRef
from ..rules.optimizers import OPTIMIZER_RULES


class StepRouter:
    """Inside a compiled function, a real step that calls ``opt.step()`` calls a compiled ``opt.step`` instead.

    ``loss.backward(); opt.step()`` in a compiled training step breaks the graph at the backward (it runs
    for real); the ``opt.step()`` that follows is a real step too, and this router makes it run the
    captured update (one graph, cached per optimizer) where the rule's values are eager's bit for bit
    (``OptimizerRule.exact``: SGD); the others (Adam, AdamW: equal up to float rounding) keep running for
    real there, so a compiled training step stays exactly eager's. Each ``lr`` is a cache entry of its own:
    an ``opt.step`` an LR scheduler wraps (its ``lr`` changes by design) is not routed, and one whose
    compiled step has used half of ``limit`` entries (``lr`` changed by hand) runs for real from then on,
    so the training step keeps a steady state. ``compile_step(fn)`` makes the compiled callable (the
    caller's backend); at most ``limit`` optimizers are routed, the rest run for real.
    """

    def __init__(self, compile_step: Callable[[Any], Callable], limit: int) -> None:
        self.compile_step = compile_step
        self.limit = limit
        self.compiled: dict[int, tuple[weakref.ref, Any, Any]] = {}

    def __call__(self, fn: Any) -> Any:
        """``fn`` itself, or the compiled step to call in its place."""
        if type(fn) is not types.MethodType:
            return fn
        opt, target = fn.__self__, fn.__func__
        rule = OPTIMIZER_RULES.get(type(opt))
        if rule is None or not rule.exact or target is not getattr(type(opt), "step", None):
            return fn
        held = self.compiled.get(id(opt))
        if held is not None and held[0]() is opt and held[1] is target:
            compiled = held[2]
            if compiled is None or len(compiled.cache_entries()) >= max(self.limit // 2, 1):
                self.compiled[id(opt)] = (held[0], target, None)  # runs for real from now on
                return fn
            return compiled
        if len(self.compiled) >= self.limit:
            self.compiled = {k: v for k, v in self.compiled.items() if v[0]() is not None}
            if len(self.compiled) >= self.limit:
                return fn
        compiled = self.compile_step(fn)
        self.compiled[id(opt)] = (OwnRef(opt), target, compiled)
        return compiled
