"""``stillframe.compile(opt.step)``: the parameter update of a captured optimizer class in one graph.

:func:`optimizer_outcome` is the miss path of a compiled ``opt.step`` for the
classes of :data:`stillframe.rules.optimizers.OPTIMIZER_RULES` (SGD, Adam,
AdamW), as torch.compile captures them::

    _init_group per param group, for real   (lazy state creation, as eager)
      -> params, grads, state tensors, lr    (the graph's inputs, read afresh on every call)
      -> torch's functional update traced on fake tensors (ATen FX graph, in-place on its inputs)
      -> backend(gm, example_inputs), called with grad off as opt.step() runs

The update is traced in eager's own form first (its values are eager's bit for
bit), and in torch.compile's tensor form when the backend cannot take that
(``rules/optimizers.py``, ``FORMS``).

A cache entry holds for one optimizer (compared by identity through a weak
reference) and one *key*: per group, how many tensors each list has, which
state tensors do not exist yet (SGD's momentum buffers before the first step:
the graph creates them and they are stored in ``opt.state`` as eager stores
them), the implementation (foreach or not) and every hyperparameter but ``lr``
by value; per tensor, shape, stride, dtype, device and ``requires_grad``. A
float ``lr`` is a graph input (a 0-dim tensor made on each call), so an LR
scheduler that changes it on every step reuses the graph, as torch.compile
does for a tensor ``lr`` (a Python float ``lr`` recompiles torch.compile
whenever it changes). Where the traced form cannot take ``lr`` as an input
(SGD's tensor form) it is part of the key. A param whose grad is ``None`` is
not collected (``_init_group`` skips it, as eager does), so it changes the key.
Tensors that share storage are not captured. A call the rule refuses (a
closure, step hooks, ``fused``/``capturable``/``differentiable``, sparse or
complex tensors) gets an *eager* entry: it runs ``opt.step()`` for real, whole
(with ``fullgraph=True``: :class:`~stillframe.errors.Unsupported` naming the
reason, as torch.compile's fullgraph raises where it would break the graph).
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
from ..errors import GraphBreak, GraphBreakKind, Unsupported, UserLocation
from ..rules.optimizers import FORMS, OPTIMIZER_RULES, OptimizerRule, collect, resolve_foreach
from .entry import CacheEntry


@dataclass(frozen=True)
class Snapshot:
    """One call's view of an optimizer: its tensors (``None`` where a state tensor does not exist yet), the key
    they match (every hyperparameter but ``lr``), each group's ``lr``, or why the call is refused."""

    inputs: list
    key: tuple
    lrs: tuple
    refused: str | None
    live: list = ()  # the graph's tensor inputs: ``inputs`` without the ``None`` ones

    def tensors(self) -> list:
        """The graph's tensor inputs: :attr:`inputs` without the ``None`` ones."""
        return list(self.live)


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


def _refusal(reason: str) -> Snapshot:
    return Snapshot([], (), (), reason)


def _snapshot(opt: Any, rule: OptimizerRule, L: dict) -> Snapshot:
    args, kwargs = L.get("args", ()), L.get("kwargs", {})
    if len(args) > 1 or any(v is not None for v in kwargs.values()):
        return _refusal("a closure is passed")
    if compat.optimizer_hooks(opt):
        return _refusal("step hooks are registered")
    inputs: list = []
    key: list = []
    lrs: list = []
    for group in opt.param_groups:
        try:
            lists = collect(opt, group, rule)
        except Exception as e:  # eager raises it too (a sparse grad): the real step runs and raises it again
            return _refusal(f"_init_group raised {type(e).__name__}")
        hyper = tuple([(k, v) for k, v in group.items() if k != "params" and k != "lr"])
        lr = group.get("lr")
        if type(lr) not in _PLAIN or not _plain(hyper):
            return _refusal("a hyperparameter is not a Python number, bool, string or None")
        tensors = [t for ts in lists for t in ts]
        nones = tuple([i for i, t in enumerate(tensors) if t is None])
        key.append((tuple(map(len, lists)), hyper, nones, type(lr)))
        lrs.append(lr)
        inputs.extend(tensors)
    live = [t for t in inputs if t is not None]
    if _shares_storage(live):
        return _refusal("two of its tensors share storage")
    return Snapshot(inputs, tuple(key), tuple(lrs), None, live)


_verified = threading.local()  # the data pointers of the last tensors found not to share storage


def _shares_storage(tensors: list) -> bool:
    """Whether two of ``tensors`` share storage. Tensors at the very addresses of the last ones found apart
    (the same tensors, step after step) are apart still: distinct storages that kept their addresses cannot have
    come to overlap, so the storages are only compared when an address changed."""
    ptrs = tuple(t.data_ptr() for t in tensors)
    if getattr(_verified, "ptrs", None) == ptrs:
        return False
    if len({t.untyped_storage().data_ptr() for t in tensors}) != len(tensors):
        return True
    _verified.ptrs = ptrs
    return False


_PLAIN = (int, float, bool, str, type(None))
_PLAIN_HYPERS: set = set()  # hyperparameter tuples found plain (they recur on every step)


def _plain(hyper: tuple) -> bool:
    """Whether every hyperparameter of ``hyper`` is a Python number, bool, string or None (or a tuple of them:
    ``betas``); checked once per distinct tuple."""
    try:
        if hyper in _PLAIN_HYPERS:
            return True
    except TypeError:  # an unhashable value (a list) is not plain
        return False
    if not all(type(v) in _PLAIN or type(v) is tuple and all(type(b) in _PLAIN for b in v) for _, v in hyper):
        return False
    if len(_PLAIN_HYPERS) < 1024:
        _PLAIN_HYPERS.add(hyper)
    return True


def describe_change(old: tuple, new: tuple, old_lrs: tuple | None = None, new_lrs: tuple = ()) -> str:
    """The first difference between two keys (and, where ``lr`` is keyed, ``old_lrs``), in the user's terms."""
    if len(old) != len(new):
        return "the number of param groups changed"
    for i, (a, b) in enumerate(zip(old, new)):
        if a[0] != b[0]:
            return f"param_groups[{i}]: the number of params with a grad (or of state tensors) changed"
        for (k, v), (k2, v2) in zip(a[1], b[1]):
            if (k, v) != (k2, v2):
                return f"param_groups[{i}][{k!r}] == {v!r} expected, got {v2!r}"
        if a[2] != b[2]:
            return f"param_groups[{i}]: a state tensor was created"
        if a[3] != b[3]:
            return f"param_groups[{i}]['lr'] is a {a[3].__name__} expected, got a {b[3].__name__}"
    for i, (a, b) in enumerate(zip(old_lrs or (), new_lrs)):
        if a != b:
            return f"param_groups[{i}]['lr'] == {a!r} expected, got {b!r}"
    return "nothing"


@dataclass(frozen=True)
class Plan:
    """How a captured entry reads a call: which ``lr`` inputs it passes (``lr_dtype``: ``None`` where ``lr`` is
    keyed by value) and where the state tensors its graph creates go (``created``: per graph output, the
    position of its param among the graph inputs and its ``opt.state`` key)."""

    form: str
    lr_dtype: torch.dtype | None
    created: tuple


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
        if snap.key != self.key or (self.lrs is not None and snap.lrs != self.lrs):
            return describe_change(self.key, snap.key, self.lrs, snap.lrs)
        return "a tensor's type, shape, stride, dtype, device or requires_grad changed"


def _tensor_check(tensors: list) -> Callable[[list], bool]:
    """A check that tensors match ``tensors`` in type, dispatch keys, dtype, device, requires_grad, shape and
    strides (torch's C++ tensor check where this torch has it)."""
    guards = compat.tensor_guards(tensors)
    if guards is not None:
        return lambda live: guards.check(*live)
    meta = [(type(t), t.shape, t.stride(), t.dtype, t.device, t.requires_grad) for t in tensors]
    return lambda live: [(type(t), t.shape, t.stride(), t.dtype, t.device, t.requires_grad) for t in live] == meta


def guard_lines(rule: OptimizerRule, snap: Snapshot, plan: Plan | None, opt: Any) -> tuple[str, ...]:
    """The checks of an entry made from ``snap``, readable (for ``explain`` and ``guard_source``)."""
    who = f"L['self'] is {rule.name} optimizer {hex(id(opt))}"
    if snap.refused is not None:
        return (who, f"the call is refused: {snap.refused} (it runs opt.step() for real)")
    lines = [who, "no closure is passed, no step hooks are registered", f"len(param_groups) == {len(snap.key)}"]
    at = 0
    for i, ((lengths, hyper, nones, lr_type), lr) in enumerate(zip(snap.key, snap.lrs)):
        lines.append(f"param_groups[{i}]: {lengths[0]} params with a grad; "
                     + ", ".join(f"len({name}) == {n}" for name, n in zip(rule.list_names, lengths))
                     + (f"; state tensors at {list(nones)} not created yet" if nones else ""))
        lines.extend(f"param_groups[{i}][{k!r}] == {v!r}" for k, v in hyper)
        if plan is not None and plan.lr_dtype is not None:
            lines.append(f"param_groups[{i}]['lr'] is a {lr_type.__name__} (any value: a graph input)")
        else:
            lines.append(f"param_groups[{i}]['lr'] == {lr!r}")
        for p, t in enumerate(snap.inputs[at:at + sum(lengths)]):
            if t is not None:
                li, j = _locate(lengths, p)
                lines.append(f"param_groups[{i}] {rule.list_names[li]}[{j}]: {type(t).__name__}(dtype={t.dtype}, "
                             f"device={t.device}, shape={tuple(t.shape)}, stride={t.stride()}, "
                             f"requires_grad={t.requires_grad})")
        at += sum(lengths)
    lines.append("no two of these tensors share storage")
    return tuple(lines)


def _entry(opt: Any, rule: OptimizerRule, snap: Snapshot, plan: Plan | None, **fields: Any) -> OptimizerStepEntry:
    """An entry for ``opt`` whose check holds for calls like ``snap``: refused for the same reason kind
    (``snap.refused``), or with the same key (and ``lr`` where ``plan`` keys it) and tensors like its inputs."""
    opt_ref = weakref.ref(opt)
    key = snap.key if snap.refused is None else None
    lrs = snap.lrs if plan is not None and plan.lr_dtype is None else None
    tensors_match = _tensor_check(snap.tensors()) if key is not None else None

    def check(L: dict, G: dict, F: Any) -> bool:
        found = optimizer_of(F, L)
        if found is None or found[0] is not opt_ref():
            return False
        live = snapshot(found[0], rule, L)
        if key is None:
            return live.refused is not None
        return live.refused is None and live.key == key and (lrs is None or live.lrs == lrs) \
            and tensors_match(live.live)

    lr_dtype = plan.lr_dtype if plan is not None else None
    last_lr: list = [None, None]  # the lrs of the last call and their tensors (the graph only reads them)

    def fetch(L: dict, G: dict, F: Any) -> list:
        live = snapshot(opt_ref(), rule, L)
        if lr_dtype is None:
            return live.live
        if last_lr[0] != live.lrs:
            last_lr[:] = live.lrs, [torch.tensor(lr, dtype=lr_dtype) for lr in live.lrs]
        return live.live + last_lr[1]

    lines = guard_lines(rule, snap, plan, opt)
    entry = OptimizerStepEntry(check=check, guard_source="\n".join(f"# {line}" for line in lines), fetch=fetch,
                               **fields)
    entry.opt_ref, entry.key, entry.lrs, entry.warn, entry.guard_lines = opt_ref, key, lrs, False, lines
    entry.form = plan.form if plan is not None else None
    return entry


def _refused(opt: Any, rule: OptimizerRule, snap: Snapshot, reason: str, fn: Any, fullgraph: bool) -> Any:
    """An eager entry for calls like ``snap``: ``opt.step()`` runs for real, whole, with a warning; with
    ``fullgraph`` it raises :class:`Unsupported` instead, as torch.compile's fullgraph does."""
    message = f"{rule.name}.step is not captured: {reason}"
    if fullgraph:
        code = getattr(fn, "__code__", None)
        where = UserLocation(code.co_filename, code.co_firstlineno) if code is not None else None
        raise Unsupported(GraphBreak(GraphBreakKind.EFFECTFUL_CALL, message,
                                     ("without fullgraph=True, this optimizer step runs opt.step() for real",),
                                     where))
    entry = _entry(opt, rule, snap, None, eager=True, reason=message)
    entry.warn = True
    return entry


def _layout(opt: Any, rule: OptimizerRule, snap: Snapshot) -> tuple[list, str | None]:
    """Per group ``(lengths, foreach, nones)``, and the rule's refusal of the call (``None``: captured)."""
    layout, at, refused = [], 0, snap.refused
    for group, (lengths, _, nones, _) in zip(opt.param_groups, snap.key if refused is None else ()):
        lists = []
        for n in lengths:
            lists.append(snap.inputs[at:at + n])
            at += n
        refused = refused or rule.refuse(opt, group, tuple(lists))
        layout.append((lengths, resolve_foreach(group, lists[0]), nones))
    return layout, refused


def _trace(opt: Any, rule: OptimizerRule, snap: Snapshot, layout: list, form: str,
           dynamic_lr: bool) -> tuple[torch.fx.GraphModule, list, Plan]:
    """The update of every group traced in ``form``: ``(graph, example inputs, plan)``. ``lr`` is an input where
    ``dynamic_lr`` and the form takes it (raises ValueError where a branch of torch's code read its value)."""
    groups = list(opt.param_groups)
    tensors = snap.tensors()
    lr_dtype = None
    if dynamic_lr and all(t is float for *_, t in snap.key):
        lr_dtype = torch.float64 if form == "eager" else torch.float32
    mode = compat.optimizer_fake_mode()
    lr_inputs = []
    if lr_dtype is torch.float64:  # faked first: its fake's .item() is a SymFloat of the mode's ShapeEnv
        lr_inputs = [compat.symbolic_float(mode, lr, f"param_groups[{i}]['lr']")[0] for i, lr in enumerate(snap.lrs)]
    elif lr_dtype is not None:
        lr_inputs = [torch.tensor(lr, dtype=lr_dtype) for lr in snap.lrs]
    created: list = []
    param_at = 0
    for (lengths, _, nones), group in zip(layout, groups):
        for p in nones:
            li, j = _locate(lengths, p)
            created.append((param_at + j, rule.state[li]))
        param_at += sum(lengths) - len(nones)

    def update(*flat: torch.Tensor) -> tuple:
        live = iter(flat[:len(tensors)])
        outputs = []
        for gi, ((lengths, foreach, nones), group) in enumerate(zip(layout, groups)):
            items = [None if p in nones else next(live) for p in range(sum(lengths))]
            lists, at = [], 0
            for n in lengths:
                lists.append(items[at:at + n])
                at += n
            if lr_dtype is None:
                lr = snap.lrs[gi]
            else:
                lr_input = flat[len(tensors) + gi]
                lr = lr_input.item() if lr_dtype is torch.float64 else lr_input
            rule.update(tuple(lists), group, foreach, lr, form)
            for p in nones:
                li, j = _locate(lengths, p)
                if lists[li][j] is None:
                    raise ValueError(f"the update did not create state tensor {p} of param group {gi}")
                outputs.append(lists[li][j])
        return tuple(outputs)

    examples = tensors + lr_inputs
    gm = compat.trace_aten(update, examples, mode=mode, compiling=form == "tensor")
    if compat.symbol_guards(mode):
        raise ValueError("torch's update branched on the value of lr")
    if form == "eager":  # eager's own calls, as eager makes them (the tensor form goes to AOTAutograd as ATen)
        compat.public_calls(gm)
    return gm, examples, Plan(form, lr_dtype, tuple(created))


def _locate(lengths: tuple, p: int) -> tuple[int, int]:
    """The (list, item) of position ``p`` of a group's tensors laid out list after list."""
    for li, n in enumerate(lengths):
        if p < n:
            return li, p
        p -= n
    raise IndexError(p)


def optimizer_outcome(fn: types.FunctionType, L: dict, call_backend: Callable, fullgraph: bool = False,
                      backend: Any = None) -> tuple | None:
    """``(entry, trace_seconds, compile_seconds)`` for a call of a captured ``opt.step``, or ``None`` when
    ``fn`` is not one. A refused call gets an eager entry (it runs ``opt.step()`` for real; with ``fullgraph``
    it raises :class:`Unsupported`). ``call_backend(gm, example_inputs)`` compiles the graph (raising as
    torch.compile does when it fails): the eager form first, torch.compile's tensor form where the backend
    fails on the eager form (AOTAutograd retraces it and cannot take its ``.item()`` scalars; ``backend``, the
    backend object, is remembered as one that does)."""
    found = optimizer_of(fn, L)
    if found is None:
        return None
    opt, rule, sets_called = found
    t0 = time.perf_counter()
    snap = snapshot(opt, rule, L)
    layout, refused = _layout(opt, rule, snap)
    if refused is not None:
        return _refused(opt, rule, snap, refused, fn, fullgraph), time.perf_counter() - t0, 0.0
    trace_seconds = compile_seconds = 0.0
    failure: Exception | None = None
    for form in FORMS:
        if form == "eager" and _rejects_eager_form(backend):
            continue
        dynamic_lr = form == "eager" or rule.lr_input == "same" or _lr_changed(opt, snap.lrs)
        t1 = time.perf_counter()
        try:
            try:
                gm, examples, plan = _trace(opt, rule, snap, layout, form, dynamic_lr)
            except ValueError:  # lr steered a branch: keyed by value in this form
                gm, examples, plan = _trace(opt, rule, snap, layout, form, dynamic_lr=False)
        except Exception as e:  # ours, or torch's functional on fakes
            failure = e
            trace_seconds += time.perf_counter() - t1
            continue
        t2 = time.perf_counter()
        trace_seconds += t2 - t1
        try:
            with compat.global_state_kept():
                compat.set_grad_enabled(False)  # the graph runs with grad off, as opt.step() does
                compiled = call_backend(gm, list(examples))
        except Exception:
            compat.take_float_specializations()  # AOTAutograd's request to specialize is torch's global state
            compile_seconds += time.perf_counter() - t2
            if form == FORMS[-1]:
                raise
            _rejects_eager_form(backend, True)
            continue
        compile_seconds += time.perf_counter() - t2
        break
    else:
        reason = f"tracing the update failed ({type(failure).__name__}: {failure})"
        return _refused(opt, rule, snap, reason, fn, fullgraph), trace_seconds, compile_seconds

    def run(*inputs: torch.Tensor) -> Any:
        mode = torch.is_grad_enabled()
        compat.set_grad_enabled(False)
        try:
            return compiled(*inputs)
        finally:
            compat.set_grad_enabled(mode)

    created = plan.created

    def rebuild(outputs: Any, inputs: list, L: dict, G: dict, F: Any) -> None:
        live = entry.opt_ref()
        if live is not None:
            for (param_at, name), tensor in zip(created, outputs):  # stored as opt.step() stores them
                live.state[inputs[param_at]][name] = tensor
            if sets_called:
                live._opt_called = True
        return None  # opt.step() without a closure returns None

    if plan.lr_dtype is None:
        _keyed_lrs.setdefault(opt, set()).add(snap.lrs)
    entry = _entry(opt, rule, snap, plan, compiled=run, rebuild=rebuild, graph_module=gm)
    return entry, trace_seconds, compile_seconds


_keyed_lrs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # opt -> the lrs its keyed graphs hold
_eager_form_rejected: weakref.WeakSet = weakref.WeakSet()  # backends that failed on the eager form


def _lr_changed(opt: Any, lrs: tuple) -> bool:
    """Whether ``opt`` had a graph traced with another ``lr`` as a constant: ``lr`` changes, so the next graph
    takes it as an input (torch.compile's automatic dynamic makes a float symbolic once it changed)."""
    return any(seen != lrs for seen in _keyed_lrs.get(opt, ()))


def _rejects_eager_form(backend: Any, rejected: bool = False) -> bool:
    """Whether ``backend`` failed on an eager-form graph before (then only the tensor form is traced for it);
    with ``rejected``, record that it did. A backend that cannot be weakly referenced is not remembered."""
    try:
        if rejected:
            _eager_form_rejected.add(backend)
        return backend in _eager_form_rejected
    except TypeError:
        return False


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
