"""``stillframe.compile(opt.step)``: the parameter update of a captured optimizer class in one graph.

:func:`optimizer_outcome` is the miss path of a compiled ``opt.step`` for the
classes of :data:`stillframe.rules.optimizers.OPTIMIZER_RULES` (SGD, Adam,
AdamW), as torch.compile captures them::

    _init_group per param group, for real   (lazy state creation, as eager)
      -> params, grads, state tensors        (the graph's inputs, read afresh on every call)
      -> torch's functional update traced on fake tensors (ATen FX graph, in-place on its inputs)
      -> backend(gm, example_inputs), called with grad off as opt.step() runs

A cache entry holds for one optimizer (compared by identity through a weak
reference) and one *key*: per group, how many tensors each list has, the
implementation (foreach or not) and every hyperparameter by value (``lr``
included: a scheduler that changes it makes a new entry, never a stale
graph); per tensor, shape, stride, dtype, device and ``requires_grad``. A
param whose grad is ``None`` is not collected (``_init_group`` skips it, as
eager does), so it changes the key. Tensors that share storage are not
captured. A call the rule refuses (a closure, step hooks, SGD's first step
before its momentum buffers exist, ``fused``/``capturable``/
``differentiable``, sparse or complex tensors) gets an *eager* entry: it runs
``opt.step()`` for real, whole.
"""

from __future__ import annotations

import threading
import time
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .. import compat
from ..rules.optimizers import FIRST_STEP, OPTIMIZER_RULES, OptimizerRule, collect, resolve_foreach
from .entry import CacheEntry


@dataclass(frozen=True)
class Snapshot:
    """One call's view of an optimizer: the graph inputs and the key they match, or why it is refused."""

    inputs: list
    key: tuple
    refused: str | None


def optimizer_of(fn: types.FunctionType, L: dict) -> tuple[Any, OptimizerRule, bool] | None:
    """``(opt, rule, sets_called)`` when ``fn`` called with ``L`` is ``opt.step`` of a captured class: the
    class's own step (``L['args'][0]`` is ``opt``), or the wrapper an LR scheduler puts on ``opt.step``
    (``sets_called``: it records ``opt._opt_called = True`` before stepping). ``None`` otherwise."""
    if getattr(fn, "_wrapped_by_lr_sched", False) and "opt_ref" in fn.__code__.co_freevars:
        ref = fn.__closure__[fn.__code__.co_freevars.index("opt_ref")].cell_contents
        opt = ref() if isinstance(ref, weakref.ref) else None
        target, sets_called = getattr(fn, "__wrapped__", None), True
    else:
        args = L.get("args")
        opt = args[0] if isinstance(args, tuple) and args else None
        target, sets_called = fn, False
    rule = OPTIMIZER_RULES.get(type(opt))
    if rule is None or getattr(type(opt), "step", None) is not target:
        return None
    return opt, rule, sets_called


_memo = threading.local()  # the snapshot of the call in progress: every entry's check of one call shares it


def snapshot(opt: Any, rule: OptimizerRule, L: dict) -> Snapshot:
    """The inputs and key of this call (``L``: its bound arguments), computed once per call."""
    memo = getattr(_memo, "last", None)
    if memo is not None and memo[0] is L and memo[1] is opt:
        return memo[2]
    snap = _snapshot(opt, rule, L)
    _memo.last = (L, opt, snap)
    return snap


def _snapshot(opt: Any, rule: OptimizerRule, L: dict) -> Snapshot:
    args, kwargs = L.get("args", ()), L.get("kwargs", {})
    if len(args) > 1 or any(v is not None for v in kwargs.values()):
        return Snapshot([], (), "a closure is passed")
    if compat.optimizer_hooks(opt):
        return Snapshot([], (), "step hooks are registered")
    inputs: list = []
    key: list = []
    for group in opt.param_groups:
        try:
            lists = collect(opt, group, rule)
        except Exception as e:  # eager raises it too (a sparse grad): the real step runs and raises it again
            return Snapshot([], (), f"_init_group raised {type(e).__name__}")
        hyper = tuple((k, v) for k, v in group.items() if k != "params")
        if not all(type(v) in _PLAIN or type(v) is tuple and all(type(b) in _PLAIN for b in v) for _, v in hyper):
            return Snapshot([], (), "a hyperparameter is not a Python number, bool, string or None")
        tensors = [t for ts in lists for t in ts]
        key.append((tuple(len(ts) for ts in lists), hyper,
                    tuple(i for i, t in enumerate(tensors) if t is None)))  # SGD's first step: buffers are None
        inputs.extend(tensors)
    if all(t is not None for t in inputs) and len({t.untyped_storage().data_ptr() for t in inputs}) != len(inputs):
        return Snapshot([], (), "two of its tensors share storage")
    return Snapshot(inputs, tuple(key), None)


_PLAIN = (int, float, bool, str, type(None))


def describe_change(old: tuple, new: tuple) -> str:
    """The first difference between two keys, in the user's terms."""
    if len(old) != len(new):
        return "the number of param groups changed"
    for i, (a, b) in enumerate(zip(old, new)):
        if a[0] != b[0]:
            return f"param_groups[{i}]: the number of params with a grad (or of state tensors) changed"
        for (k, v), (k2, v2) in zip(a[1], b[1]):
            if (k, v) != (k2, v2):
                return f"param_groups[{i}][{k!r}] == {v!r} expected, got {v2!r}"
        if a[2] != b[2]:
            return f"param_groups[{i}]: a momentum buffer was created"
    return "nothing"


class OptimizerStepEntry(CacheEntry):
    """A cache entry for one optimizer and one key (captured), or for calls its rule refuses (``eager``)."""

    def failing_guard(self, L: dict, G: dict, F: Any) -> str | None:
        found = optimizer_of(F, L) if isinstance(F, types.FunctionType) else None
        if found is None or found[0] is not self.opt_ref():
            return "another optimizer"
        snap = snapshot(found[0], found[1], L)
        if self.key is None:
            return None if snap.refused is not None else "the call is no longer refused"
        if snap.refused is not None:
            return f"not captured: {snap.refused}"
        if snap.key != self.key:
            return describe_change(self.key, snap.key)
        return "a tensor's type, shape, stride, dtype, device or requires_grad changed"


def _tensor_check(inputs: list) -> Callable[[list], bool]:
    """A check that tensors match ``inputs`` in type, dispatch keys, dtype, device, requires_grad, shape and
    strides (torch's C++ tensor check where this torch has it)."""
    tensors = [t for t in inputs if t is not None]
    guards = compat.tensor_guards(tensors)
    if guards is not None:
        return lambda live: guards.check(*[t for t in live if t is not None])
    meta = [(type(t), t.shape, t.stride(), t.dtype, t.device, t.requires_grad) for t in tensors]
    return lambda live: [(type(t), t.shape, t.stride(), t.dtype, t.device, t.requires_grad)
                         for t in live if t is not None] == meta


def _entry(opt: Any, rule: OptimizerRule, snap: Snapshot, **fields: Any) -> OptimizerStepEntry:
    """An entry for ``opt`` whose check holds for calls like ``snap``: refused for the same reason kind
    (``snap.refused``), or with the same key and tensors like its inputs."""
    opt_ref = weakref.ref(opt)
    key = snap.key if snap.refused is None else None
    tensors_match = _tensor_check(snap.inputs) if key is not None else None

    def check(L: dict, G: dict, F: Any) -> bool:
        found = optimizer_of(F, L)
        if found is None or found[0] is not opt_ref():
            return False
        live = snapshot(found[0], rule, L)
        if key is None:
            return live.refused is not None
        return live.refused is None and live.key == key and tensors_match(live.inputs)

    def fetch(L: dict, G: dict, F: Any) -> list:
        return snapshot(opt_ref(), rule, L).inputs

    what = f"refused: {snap.refused}" if key is None else f"{len(snap.inputs)} tensors"
    entry = OptimizerStepEntry(check=check, guard_source=f"# {rule.name}.step of one optimizer, {what}",
                               fetch=fetch, **fields)
    entry.opt_ref, entry.key, entry.warn = opt_ref, key, False
    return entry


def _refused(opt: Any, rule: OptimizerRule, snap: Snapshot, reason: str) -> OptimizerStepEntry:
    """An eager entry for calls like ``snap``: ``opt.step()`` runs for real, whole. It asks for a warning
    (``warn``) unless the refusal passes by itself (SGD's first step creates the momentum buffers)."""
    entry = _entry(opt, rule, snap, eager=True, reason=f"{rule.name}.step is not captured: {reason}")
    entry.warn = reason != FIRST_STEP
    return entry


def optimizer_outcome(fn: types.FunctionType, L: dict, call_backend: Callable) -> tuple | None:
    """``(entry, trace_seconds, compile_seconds)`` for a call of a captured ``opt.step``, or ``None`` when
    ``fn`` is not one. A refused call gets an eager entry (it runs ``opt.step()`` for real).
    ``call_backend(gm, example_inputs)`` compiles the graph (raising as torch.compile does when it fails)."""
    found = optimizer_of(fn, L)
    if found is None:
        return None
    opt, rule, sets_called = found
    t0 = time.perf_counter()
    snap = snapshot(opt, rule, L)
    groups, layout, at = list(opt.param_groups), [], 0
    refused = snap.refused
    for group, (lengths, _, _) in zip(groups, snap.key if refused is None else ()):
        lists = []
        for n in lengths:
            lists.append(snap.inputs[at:at + n])
            at += n
        refused = refused or rule.refuse(opt, group, tuple(lists))
        layout.append((lengths, resolve_foreach(group, lists[0])))
    if refused is not None:
        return _refused(opt, rule, snap, refused), time.perf_counter() - t0, 0.0

    def update(*flat: torch.Tensor) -> tuple:
        at = 0
        for group, (lengths, foreach) in zip(groups, layout):
            lists = []
            for n in lengths:
                lists.append(list(flat[at:at + n]))
                at += n
            rule.update(tuple(lists), group, foreach)
        return ()

    try:
        gm = compat.trace_aten(update, snap.inputs)
    except Exception as e:  # ours, or torch's functional on fakes: this key runs for real from now on
        return _refused(opt, rule, snap, f"tracing the update failed ({type(e).__name__}: {e})"), \
            time.perf_counter() - t0, 0.0
    t1 = time.perf_counter()
    with compat.global_state_kept():
        compat.set_grad_enabled(False)  # the graph runs with grad off, as opt.step() does
        compiled = call_backend(gm, list(snap.inputs))
    t2 = time.perf_counter()

    def run(*inputs: torch.Tensor) -> Any:
        mode = torch.is_grad_enabled()
        compat.set_grad_enabled(False)
        try:
            return compiled(*inputs)
        finally:
            compat.set_grad_enabled(mode)

    def rebuild(outputs: Any, inputs: list, L: dict, G: dict, F: Any) -> None:
        if sets_called:
            live = entry.opt_ref()
            if live is not None:
                live._opt_called = True
        return None  # opt.step() without a closure returns None

    entry = _entry(opt, rule, snap, compiled=run, rebuild=rebuild, graph_module=gm)
    return entry, t1 - t0, t2 - t1


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
        self.compiled[id(opt)] = (weakref.ref(opt), target, compiled)
        return compiled
