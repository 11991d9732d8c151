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
them), the implementation (foreach or not) and every hyperparameter that is
not a graph input by value; per tensor, shape, stride, dtype, device and
``requires_grad``. A float ``lr`` is a graph input (a 0-dim tensor made when it
changes), so an LR scheduler that changes it on every step reuses the graph
(torch.compile 2.13 compiles it as a constant first, then as a symbolic float).
In the eager form the other float hyperparameters (:data:`SCALARS`) are inputs
too, with the conditions torch's update puts on them checked per call. Where
the traced form cannot take ``lr`` as an input yet (SGD's tensor form before
``lr`` changed) it is part of the key. A param whose grad is ``None`` is
not collected (``_init_group`` skips it, as eager does), so it changes the key.
Tensors that share storage are not captured. A call the rule refuses (a
closure, step hooks, ``fused``/``capturable``/``differentiable``, sparse or
complex tensors) gets an *eager* entry: it runs ``opt.step()`` for real, whole
(with ``fullgraph=True``: :class:`~stillframe.errors.Unsupported` naming the
reason, as torch.compile's fullgraph raises where it would break the graph).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import threading
import time
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils.weak import WeakIdKeyDictionary

from .. import compat
from ..errors import GraphBreak, GraphBreakKind, Unsupported, UserLocation
from ..guards.guard import OwnRef
from ..rules.optimizers import FORMS, OPTIMIZER_RULES, SCALARS, OptimizerRule, collect, resolve_foreach
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
    scalars: tuple = ()  # per group, its float hyperparameters but lr (see SCALARS), in order

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
    scalars: list = []
    for group in opt.param_groups:
        try:
            lists = collect(opt, group, rule)
        except Exception as e:  # eager raises it too (a sparse grad): the real step runs and raises it again
            return _refusal(f"_init_group raised {type(e).__name__}")
        hyper = tuple([(k, v) for k, v in group.items() if k != "params" and k != "lr"])
        lr = group.get("lr")
        if type(lr) not in _PLAIN or not _plain(hyper):
            return _refusal("a hyperparameter is not a Python number, bool, string or None")
        hyper, floats = _split_scalars(hyper)
        tensors = [t for ts in lists for t in ts]
        nones = tuple([i for i, t in enumerate(tensors) if t is None])
        key.append((tuple(map(len, lists)), hyper, nones, type(lr)))
        lrs.append(lr)
        scalars.append(floats)
        inputs.extend(tensors)
    live = [t for t in inputs if t is not None]
    if _shares_storage(live):
        return _refusal("two of its tensors share storage")
    return Snapshot(inputs, tuple(key), tuple(lrs), None, live, tuple(scalars))


_FLOAT_PAIR = (float, float)


def _split_scalars(hyper: tuple) -> tuple[tuple, tuple]:
    """``hyper`` with the values of its float :data:`SCALARS` replaced by their type (the key compares the rest
    by value), and those values in order (``betas`` as two)."""
    if not any(k in SCALARS for k, _ in hyper):
        return hyper, ()
    rest, floats = [], []
    for k, v in hyper:
        if k in SCALARS and type(v) is float:
            rest.append((k, float))
            floats.append(v)
        elif k == "betas" and type(v) is tuple and len(v) == 2 and type(v[0]) is float and type(v[1]) is float:
            rest.append((k, _FLOAT_PAIR))
            floats.extend(v)
        else:
            rest.append((k, v))
    return tuple(rest), tuple(floats)


def scalar_names(hyper: tuple) -> list[str]:
    """The names of the values :func:`_split_scalars` took out of ``hyper``, in order (``betas[0]``, ``eps``)."""
    names = []
    for k, v in hyper:
        if v is float:
            names.append(k)
        elif v == _FLOAT_PAIR:
            names.extend((f"{k}[0]", f"{k}[1]"))
    return names


def _shares_storage(tensors: list) -> bool:
    """Whether two of ``tensors`` share storage. Compared afresh on every call: ``zero_grad()`` frees the grads,
    so their addresses change from step to step (a cache keyed by the data pointers missed every step and cost
    more than the comparison)."""
    return len({t.untyped_storage().data_ptr() for t in tensors}) != len(tensors)


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
    return "a float hyperparameter that the graph holds as a constant changed"


@dataclass(frozen=True)
class Plan:
    """How a captured entry reads a call: which ``lr`` inputs it passes (``lr_dtype``: ``None`` where ``lr`` is
    keyed by value) and where the state tensors its graph creates go (``created``: per graph output, the
    position of its param among the graph inputs and its ``opt.state`` key)."""

    form: str
    lr_dtype: torch.dtype | None
    created: tuple
    scalar_inputs: tuple = ()  # (group, position) of the float hyperparameters that are graph inputs (float64)
    scalar_check: Callable | None = None  # the ShapeEnv's guards on them: a function of their values
    scalar_guards: tuple = ()  # those guards, readable


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
        if snap.key != self.key or (self.lrs is not None and snap.lrs != self.lrs) or \
                any(snap.scalars[g][i] != v for g, i, v in self.static_scalars):
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
        inputs = {pos for g, pos in (plan.scalar_inputs if plan is not None else ()) if g == i}
        names = iter(enumerate(scalar_names(hyper)))
        for k, v in hyper:
            if v is float or v == _FLOAT_PAIR:
                for _ in range(1 if v is float else 2):
                    pos, name = next(names)
                    where = f"param_groups[{i}][{k!r}]" + (name[len(k):] if name != k else "")
                    lines.append(f"{where} is a float (any value: a graph input)" if pos in inputs
                                 else f"{where} == {snap.scalars[i][pos]!r}")
            else:
                lines.append(f"param_groups[{i}][{k!r}] == {v!r}")
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
    lines.extend(plan.scalar_guards if plan is not None else ())
    lines.append("no two of these tensors share storage")
    return tuple(lines)


def _entry(opt: Any, rule: OptimizerRule, snap: Snapshot, plan: Plan | None, **fields: Any) -> OptimizerStepEntry:
    """An entry for ``opt`` whose check holds for calls like ``snap``: refused for the same reason kind
    (``snap.refused``), or with the same key (and ``lr`` where ``plan`` keys it) and tensors like its inputs."""
    opt_ref = OwnRef(opt)
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
            and (scalars_keyed is None or live.scalars == scalars_keyed) \
            and all(live.scalars[g][i] == v for g, i, v in static) and scalars_hold(live) \
            and tensors_match(live.live)

    scalar_check = plan.scalar_check if plan is not None else None
    held: list = [None]  # the input floats the guards last held for

    def scalars_hold(live: Snapshot) -> bool:
        if scalar_check is None:
            return True
        values = tuple(live.scalars[g][i] for g, i in inputs)
        if values != held[0]:
            if not scalar_check(*values):
                return False
            held[0] = values
        return True

    lr_dtype = plan.lr_dtype if plan is not None else None
    inputs = plan.scalar_inputs if plan is not None else ()
    scalars_keyed = snap.scalars if not inputs else None  # every float hyperparameter by value
    static = [(g, i, v) for g, floats in enumerate(snap.scalars) for i, v in enumerate(floats)
              if (g, i) not in inputs] if inputs else []
    last: list = [((), [])]  # the floats of the last call and their tensors (the graph only reads them)
    dtypes = [lr_dtype] * len(snap.lrs) * (lr_dtype is not None) + [torch.float64] * len(inputs)

    def fetch(L: dict, G: dict, F: Any) -> list:
        live = snapshot(opt_ref(), rule, L)
        if lr_dtype is None and not inputs:
            return live.live
        floats = (live.lrs if lr_dtype is not None else ()) + tuple(live.scalars[g][i] for g, i in inputs)
        held = last[0]  # one read: another thread's call may replace it meanwhile (tensors are never mutated)
        if held[0] != floats:  # a tensor made anew only for a value that changed
            tensors = [t if i < len(held[0]) and held[0][i] == v else torch.tensor(v, dtype=d, device="cpu")
                       for i, (v, d, t) in enumerate(zip(floats, dtypes, held[1] or [None] * len(floats)))]
            held = last[0] = (floats, tensors)
        return live.live + held[1]

    lines = guard_lines(rule, snap, plan, opt)
    entry = OptimizerStepEntry(check=check, guard_source="\n".join(f"# {line}" for line in lines), fetch=fetch,
                               **fields)
    entry.opt_ref, entry.key, entry.lrs, entry.warn, entry.guard_lines = opt_ref, key, lrs, False, lines
    entry.static_scalars = static if inputs else [(g, i, v) for g, floats in enumerate(snap.scalars)
                                                  for i, v in enumerate(floats)] if key is not None else []
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
    ``dynamic_lr`` and the form takes it (raises ValueError where a branch of torch's code read its value); in
    the eager form the other float hyperparameters are inputs too, but those torch's code branches on
    (``if weight_decay != 0``), which are traced again as constants."""
    scalar_inputs = {(g, i) for g, floats in enumerate(snap.scalars) for i in range(len(floats))} \
        if form == "eager" else set()
    while True:
        traced, guarded = _trace_once(opt, rule, snap, layout, form, dynamic_lr, tuple(sorted(scalar_inputs)))
        if guarded is None:
            return traced
        if not guarded & scalar_inputs:
            raise ValueError("torch's update branched on a value that is not an input")
        scalar_inputs -= guarded


def _trace_once(opt: Any, rule: OptimizerRule, snap: Snapshot, layout: list, form: str, dynamic_lr: bool,
                scalar_inputs: tuple) -> tuple[tuple | None, set | None]:
    """One trace for :func:`_trace`: ``(traced, None)``, or ``(None, guarded)`` where torch's code branched on
    the float inputs ``guarded`` (``(group, position)``)."""
    groups = list(opt.param_groups)
    tensors = snap.tensors()
    lr_dtype = None
    if dynamic_lr and all(t is float for *_, t in snap.key):
        lr_dtype = torch.float64 if form == "eager" else torch.float32
    mode = compat.optimizer_fake_mode()
    lr_inputs = []
    lr_symbols = set()
    if lr_dtype is torch.float64:  # faked first: its fake's .item() is a SymFloat of the mode's ShapeEnv
        made = [compat.symbolic_float(mode, lr, f"param_groups[{i}]['lr']") for i, lr in enumerate(snap.lrs)]
        lr_inputs = [tensor for tensor, _, _ in made]
        lr_symbols = {compat.symbol_name(sym) for _, _, sym in made}
    elif lr_dtype is not None:
        lr_inputs = [torch.tensor(lr, dtype=lr_dtype, device="cpu") for lr in snap.lrs]
    scalar_fakes = [compat.symbolic_float(mode, snap.scalars[g][i], f"param_groups[{g}] float {i}")
                    for g, i in scalar_inputs]
    by_symbol = {compat.symbol_name(sym): where for (_, _, sym), where in zip(scalar_fakes, scalar_inputs)}
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
            mine = {i: flat[len(tensors) + len(lr_inputs) + k].item()
                    for k, (g, i) in enumerate(scalar_inputs) if g == gi}
            rule.update(tuple(lists), _with_scalars(group, snap.key[gi][1], mine), foreach, lr, form)
            for p in nones:
                li, j = _locate(lengths, p)
                if lists[li][j] is None:
                    raise ValueError(f"the update did not create state tensor {p} of param group {gi}")
                outputs.append(lists[li][j])
        return tuple(outputs)

    examples = tensors + lr_inputs + [tensor for tensor, _, _ in scalar_fakes]
    gm = compat.trace_aten(update, examples, mode=mode, compiling=form == "tensor")
    guarded = compat.guarded_symbols(mode)
    if guarded & lr_symbols:
        raise ValueError("torch's update branched on the value of lr")
    check, texts = None, []
    if guarded:  # a branch on a float input (torch's pow asks `beta1 >= 0`): checked per call, as TorchDynamo
        names = [compat.symbol_name(sym) for _, _, sym in scalar_fakes]
        check, texts = compat.guard_function(mode, names)
        if check is None:
            return None, {by_symbol[name] for name in guarded if name in by_symbol} or set(scalar_inputs)
        texts = [_readable(text, names, scalar_inputs, snap) for text in texts]
    if form == "eager":  # eager's own calls, as eager makes them (the tensor form goes to AOTAutograd as ATen)
        compat.public_calls(gm)
    return (gm, examples, Plan(form, lr_dtype, tuple(created), scalar_inputs, check, tuple(texts))), None


def _readable(text: str, names: list, scalar_inputs: tuple, snap: Snapshot) -> str:
    """A ShapeEnv guard over the float inputs (``zf3 >= 0.0``) in the user's names."""
    for name, (g, i) in sorted(zip(names, scalar_inputs), key=lambda item: -len(item[0])):
        text = text.replace(name, f"param_groups[{g}]{_scalar_path(snap.key[g][1], i)}")
    return text


def _scalar_path(hyper: tuple, position: int) -> str:
    """Where float hyperparameter ``position`` of a group sits: ``['betas'][0]``, ``['eps']``."""
    name = scalar_names(hyper)[position]
    key, _, index = name.partition("[")
    return f"[{key!r}]" + (f"[{index}" if index else "")


def _with_scalars(group: dict, hyper: tuple, inputs: dict) -> dict:
    """``group`` with the float hyperparameters at the positions of ``inputs`` (see :func:`scalar_names`)
    replaced by their SymFloats."""
    if not inputs:
        return group
    group = dict(group)
    at = 0
    for k, v in hyper:
        if v is float:
            group[k] = inputs.get(at, group[k])
            at += 1
        elif v == _FLOAT_PAIR:
            group[k] = (inputs.get(at, group[k][0]), inputs.get(at + 1, group[k][1]))
            at += 2
    return group


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


# opt -> the lrs its keyed graphs hold (torch's dictionary: its weak references are not the user's, guard.has_finalizer)
_keyed_lrs: WeakIdKeyDictionary = WeakIdKeyDictionary()
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
