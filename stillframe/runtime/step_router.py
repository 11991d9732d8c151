"""Inside a compiled training step, ``opt.step()`` after the backward's graph break runs a compiled ``opt.step``;
``t.retain_grad()`` run for real on an output of an AOTAutograd graph is prepared for (:func:`before_retain_grad`).

See :class:`StepRouter`; the compiled step itself is ``runtime/optimizer_step.py``'s.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import functools
import types
import weakref
from typing import Any, Callable

import torch

from .. import compat
from ..guards.guard import OwnRef
from ..rules.optimizers import OPTIMIZER_RULES
from .shallow import CalleeRouter, ShallowCall, shallow_target


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

    def __init__(self, compile_step: Callable[[Any], Callable], limit: int,
                 compile_callee: Callable[[Any], Callable] | None = None) -> None:
        self.compile_step = compile_step
        self.limit = limit
        self.compiled: dict[int, tuple[weakref.ref, Any, Any]] = {}
        # torch.compiler.disable(f, recursive=False) wrappers a real step calls: f's frame runs for real, what it calls
        # compiled with compile_callee, each once (runtime/shallow.py); by id of the wrapper (of a method's function)
        self.callees = CalleeRouter(compile_callee) if compile_callee is not None else None  # (one per caller)
        self.shallow: dict[int, tuple[weakref.ref, ShallowCall]] = {}

    def __call__(self, fn: Any) -> Any:
        """``fn`` itself, or the compiled step to call in its place (and ``t.retain_grad()`` is prepared for:
        :func:`before_retain_grad`), or for a ``torch.compiler.disable(f, recursive=False)`` wrapper a
        :class:`~stillframe.runtime.shallow.ShallowCall` of ``f``."""
        wrapper = fn.__func__ if type(fn) is types.MethodType else fn
        # (only a plain function is looked at: reading an attribute of any other callable may run its __getattr__)
        if self.callees is not None and type(wrapper) is types.FunctionType and \
                compat.nonrecursive_disabled(wrapper) is not None:
            return self._shallow(fn)
        if type(fn) is not types.MethodType:
            if type(fn) is types.BuiltinMethodType and fn.__name__ == "retain_grad":
                before_retain_grad(fn.__self__)
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

    def _shallow(self, fn: Any) -> Any:
        wrapper = fn.__func__ if type(fn) is types.MethodType else fn
        held = self.shallow.get(id(wrapper))
        if held is None or held[0]() is not wrapper:
            target = shallow_target(wrapper)
            if target is None or len(self.shallow) >= self.limit:
                return fn
            held = self.shallow[id(wrapper)] = (weakref.ref(wrapper), ShallowCall(target, self.callees))
        if isinstance(fn, types.MethodType):  # a method: its frame runs with the instance as its first argument
            return functools.partial(held[1], fn.__self__)
        return held[1]


def before_retain_grad(t: Any) -> None:
    """Before ``t.retain_grad()`` runs for real on an output of an AOTAutograd graph other than its first, ``t`` is
    rebased on a one-output node of its own (:func:`compat.rebase_on_own_node`: its value, version and gradients
    unchanged; its ``output_nr`` 0, as the one-output op that made it in eager has).

    torch moves a retained gradient's hook to the new node of an in-place op by the tensor's ``output_nr`` read after
    the rebase (0), not before, so an in-place op on a tensor that retains its grad and is output 1 or later of its
    node fails with ``out != nullptr INTERNAL ASSERT FAILED`` (``torch/csrc/autograd/variable.cpp``; eager
    ``torch.linalg.svd``'s ``S`` fails too). Eager's ``t`` is most often a one-output op's result, on which the
    write runs (fuzz 59:16: ``t5 = t1 @ t1`` returned by the graph, then ``t5.retain_grad(); t5.fill_(2.0)``;
    torch.compile fails the same way). Left as they are: a view (its write rebases its base), a tensor with
    gradient hooks (a hook registered before the retain would then run after the retained gradient is stored,
    where eager runs it before), a complex one (``mul_(1)`` is not an exact identity on infinities), and inference
    mode (nothing is recorded there)."""
    if (isinstance(t, torch.Tensor) and t.grad_fn is not None and t.output_nr != 0 and not t.retains_grad
            and t.dtype.is_floating_point and not t._is_view() and not t._backward_hooks
            and not torch.is_inference_mode_enabled() and compat.is_aot_graph_output(t)):
        compat.rebase_on_own_node(t)
