"""The eager-parity checker: run a program eagerly and compiled, and list every way the two differ.

Eager PyTorch is the oracle (DESIGN invariant 7). :func:`compare` calls ``fn``
on fresh inputs, calls the compiled version on identical fresh inputs, and
compares what a user could observe:

* the return value, recursively (tensors, tuples, lists, dicts, namedtuples,
  Python scalars, ``None``, strings); for a tensor: type, dtype, shape,
  significant strides, device, layout, ``requires_grad``, ``is_leaf``,
  ``grad_fn is None``, values, and which input it aliases;
* object identity: if eager returns an input tensor itself, or one tensor
  twice, the compiled call must too;
* every input after the call (in-place mutation of data and metadata:
  values, shape, stride, storage offset, ``requires_grad``), and for an
  ``nn.Module`` its parameters, buffers and plain attributes;
* gradients: the floating outputs that require grad are summed and
  backpropagated on both sides; ``.grad`` of every leaf input that requires
  grad and of every module parameter must agree (``None`` included);
* exceptions: same type and same message, in both directions;
* :class:`stillframe.StillframeWarning`: an eager fallback is a mismatch unless
  ``expect_fallback=True`` (and then its absence is).

Example::

    >>> import torch
    >>> from stillframe.check import compare
    >>> def f(x):
    ...     return x * 2
    >>> report = compare(f, lambda: (torch.randn(3),), compiled=lambda x: x * 2.001)
    >>> report.ok
    False
    >>> print(report.mismatches[0].splitlines()[0])
    result: values differ: Tensor-likes are not close!

Inputs are made by ``make_args`` twice per call, each time right after
``torch.manual_seed(seed + call_index)``, so random inputs are identical on both
sides and fresh on each call. ``make_args`` returns ``(args_tuple, kwargs_dict)``,
or just a tuple of positional arguments; any other value (a list included) is
the one positional argument. It may take one parameter, the call index. To
pass a tuple and a dict as the only two positional arguments, return
``((tup, dct), {})``.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import copy
import dis
import inspect
import random
import warnings as _warnings
from dataclasses import dataclass, field
from typing import Any

import torch
import stillframe

from ..errors import StillframeWarning
from ..variables.builder import of_type
from .values import (Walker, arg_tensors, identity_labels, qualname, storage_labels, tensors_of,
                     tolerances)

__all__ = ["ParityReport", "assert_parity", "compare"]

SCALARS = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device,
            torch.layout, torch.memory_format, slice, range, type(Ellipsis), type(NotImplemented))
_MAX_VALUE_LINES = 6


@dataclass
class ParityReport:
    """What :func:`compare` found: ``ok`` is true when ``mismatches`` is empty.

    ``eager_result`` / ``compiled_result`` hold the last call's return value, or
    the exception it raised. ``warnings`` holds the ``StillframeWarning`` records
    (``warnings.WarningMessage``) emitted by the compiled side, in order.
    ``compiled`` is the compiled callable, kept so :meth:`format` can show its
    cache entries.
    """

    ok: bool
    mismatches: list[str]
    eager_result: Any = None
    compiled_result: Any = None
    warnings: list = field(default_factory=list)
    eager_results: list = field(default_factory=list)
    compiled_results: list = field(default_factory=list)
    fn: Any = None
    compiled: Any = None

    def format(self) -> str:
        """Render the report: mismatches, warnings, and (when the compiled object has them) graphs and guards.

        On failure the bytecode of the user's function is shown too, so one
        failing test prints everything needed to debug it (STYLE habit 10).
        """
        name = _describe(self.fn)
        lines: list[str] = []
        if self.ok:
            lines.append(f"parity OK for {name}")
        else:
            lines.append(f"parity FAILED for {name}: {len(self.mismatches)} mismatch(es)")
            for mismatch in self.mismatches:
                first, *rest = mismatch.splitlines() or [""]
                lines.append(f"  - {first}")
                lines.extend(f"      {line}" for line in rest)
        if self.warnings:
            lines.append("StillframeWarnings from the compiled side:")
            for record in self.warnings:
                lines.append(f"  - {record.category.__name__}: {record.message}")
        lines.extend(_format_cache_entries(self.compiled))
        if not self.ok:
            lines.extend(_format_bytecode(self.fn))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def assert_parity(fn, make_args, **kwargs) -> ParityReport:
    """Like :func:`compare`, but raise ``AssertionError(report.format())`` unless the report is ok."""
    report = compare(fn, make_args, **kwargs)
    if not report.ok:
        raise AssertionError(report.format())
    return report


def compare(
    fn,
    make_args,
    *,
    compiled=None,
    backend="eager",
    fullgraph: bool = False,
    calls: int = 1,
    rtol: float | None = None,
    atol: float | None = None,
    grad: bool = True,
    expect_fallback: bool = False,
    compile_kwargs: dict | None = None,
    check_aliasing: bool = True,
    seed: int = 0,
) -> ParityReport:
    """Run ``fn`` eagerly and compiled ``calls`` times on fresh identical inputs; report every difference.

    ``fn``: a function or an ``nn.Module`` (the eager side runs ``fn`` itself).
    ``compiled``: the compiled side; by default ``stillframe.compile(fn, backend=,
    fullgraph=, **compile_kwargs)``, where a module is first deep-copied so the
    two sides own identical, independent parameters. The same compiled object
    serves every call, so ``calls > 1`` exercises the cache.
    ``rtol`` / ``atol``: tolerances for floating values (``torch.testing.assert_close``
    defaults when both are None; one alone sets the other to 0). Integer and
    bool tensors are always compared exactly.
    ``grad``: also backpropagate and compare gradients.
    ``expect_fallback``: whether a ``StillframeWarning`` (eager fallback) is
    expected from the compiled side across all calls.
    ``check_aliasing``: compare which inputs each output tensor shares storage with.
    """
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    rtol, atol = tolerances(rtol, atol)
    category = StillframeWarning
    recorded: list = []

    eager_module = fn if isinstance(fn, torch.nn.Module) else None
    if compiled is None:
        target = copy.deepcopy(fn) if eager_module is not None else fn
        with _recording(recorded, category):
            # stillframe.compile is read at call time: the runner may have routed it.
            compiled = stillframe.compile(target, backend=backend, fullgraph=fullgraph, **(compile_kwargs or {}))
    compiled_module = _underlying_module(compiled)
    if eager_module is None:
        compiled_module = None

    report = ParityReport(ok=True, mismatches=[], fn=fn, compiled=compiled)
    for index in range(calls):
        prefix = f"call {index}: " if calls > 1 else ""
        e_args, e_kwargs = _make_args(make_args, seed + index, index)
        c_args, c_kwargs = _make_args(make_args, seed + index, index)
        eager = _run(fn, e_args, e_kwargs, seed + index, grad, eager_module)
        with _recording(recorded, category):
            comp = _run(compiled, c_args, c_kwargs, seed + index, grad, compiled_module)
        report.eager_results.append(eager.outcome)
        report.compiled_results.append(comp.outcome)
        found: list[str] = []
        _compare_call(eager, comp, eager_module, compiled_module, rtol, atol, check_aliasing, found)
        report.mismatches.extend(prefix + m for m in found)

    report.warnings = [r for r in recorded if category is not None and issubclass(r.category, category)]
    if expect_fallback and not report.warnings:
        report.mismatches.append("expected a StillframeWarning (eager fallback), none was emitted")
    if not expect_fallback and report.warnings:
        texts = "\n".join((str(r.message).splitlines() or [""])[0] for r in report.warnings)
        report.mismatches.append(f"unexpected StillframeWarning (eager fallback):\n{texts}")
    report.eager_result = report.eager_results[-1]
    report.compiled_result = report.compiled_results[-1]
    report.ok = not report.mismatches
    return report


# ---------------------------------------------------------------- running one side


@dataclass
class _Run:
    """One side of one call: its inputs, what it returned or raised, and its gradients."""

    args: tuple
    kwargs: dict
    result: Any = None
    error: Exception | None = None
    differentiable: int = 0
    backward_error: Exception | None = None
    grads: dict[str, torch.Tensor | None] | None = None

    @property
    def outcome(self):
        return self.error if self.error is not None else self.result


def _make_args(make_args, seed: int, index: int) -> tuple[tuple, dict]:
    torch.manual_seed(seed)
    random.seed(seed)
    got = make_args(index) if _takes_index(make_args) else make_args()
    if of_type(got, tuple) and len(got) == 2 and of_type(got[0], tuple) and of_type(got[1], dict):
        return tuple(got[0]), dict(got[1])
    if of_type(got, tuple):
        return got, {}
    return (got,), {}


def _takes_index(make_args) -> bool:
    try:
        params = inspect.signature(make_args).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in params)


def _run(call, args, kwargs, seed: int, grad: bool, module) -> _Run:
    run = _Run(args, kwargs)
    torch.manual_seed(seed + 1_000_003)
    random.seed(seed + 1_000_003)
    try:
        run.result = call(*args, **kwargs)
    except Exception as exc:  # the user's exception is data here: it is compared, not handled
        run.error = exc
        return run
    if grad:
        _backward(run, module)
    return run


def _backward(run: _Run, module) -> None:
    """Backpropagate ``sum(o.float().sum())`` over differentiable outputs; record per-call leaf grads.

    Each leaf's ``.grad`` is cleared before and re-accumulated after, so the
    recorded gradient is this call's own even when both sides share parameters.
    """
    outs = [t for _, t in tensors_of(run.result, "result")
            if t.requires_grad and t.is_floating_point()]
    run.differentiable = len(outs)
    if not outs:
        return
    leaves = _grad_leaves(run.args, run.kwargs, module)
    unique = {id(t): t for t in leaves.values()}
    stash = {key: t.grad for key, t in unique.items()}
    for t in unique.values():
        t.grad = None
    try:
        loss = sum(o.float().sum() for o in outs)
        loss.backward()
    except Exception as exc:
        run.backward_error = exc
    fresh = {key: t.grad for key, t in unique.items()}
    with torch.no_grad():
        for key, t in unique.items():
            old, new = stash[key], fresh[key]
            if old is not None:
                t.grad = old if new is None else old + new
    run.grads = {label: (None if fresh[id(t)] is None else fresh[id(t)].detach().clone())
                 for label, t in leaves.items()}


def _grad_leaves(args, kwargs, module) -> dict[str, torch.Tensor]:
    leaves = {path: t for path, t in arg_tensors(args, kwargs) if t.is_leaf and t.requires_grad}
    if module is not None:
        for name, param in module.named_parameters():
            leaves[f"self.{name}"] = param
    return leaves


@contextlib.contextmanager
def _recording(sink: list, category):
    """Record every warning raised inside; keep them in ``sink``; re-emit the ones that are not stillframe's."""
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        try:
            yield
        finally:
            records = list(caught)
    for record in records:
        sink.append(record)
        if category is None or not issubclass(record.category, category):
            _warnings.warn_explicit(record.message, record.category, record.filename, record.lineno)


# ---------------------------------------------------------------- comparing one call


def _compare_call(eager: _Run, comp: _Run, eager_module, compiled_module, rtol, atol, check_aliasing, out):
    if eager.error is not None or comp.error is not None:
        _compare_errors("", eager.error, comp.error, out, same_message=True)
    else:
        e_ids = identity_labels(eager.args, eager.kwargs, eager_module)
        c_ids = identity_labels(comp.args, comp.kwargs, compiled_module)
        e_storage = storage_labels(eager.args, eager.kwargs, eager_module) if check_aliasing else None
        c_storage = storage_labels(comp.args, comp.kwargs, compiled_module) if check_aliasing else None
        walker = Walker(rtol, atol, out, (e_ids, c_ids), (e_storage, c_storage))
        walker.compare(eager.result, comp.result, "result")

    inputs = Walker(rtol, atol, out, None, None, inputs=True)
    for i, (e, c) in enumerate(zip(eager.args, comp.args)):
        inputs.compare(e, c, f"args[{i}] after the call")
    for key in eager.kwargs:
        if key in comp.kwargs:
            inputs.compare(eager.kwargs[key], comp.kwargs[key], f"kwargs[{key!r}] after the call")
    if eager_module is not None and compiled_module is not None and eager_module is not compiled_module:
        _compare_module_state(eager_module, compiled_module, inputs)

    if eager.error is None and comp.error is None:
        _compare_grads(eager, comp, rtol, atol, out)


def _compare_errors(where: str, e_err, c_err, out, *, same_message: bool):
    if e_err is None:
        out.append(f"{where}compiled raised {type(c_err).__name__}: {c_err} ; eager returned normally")
    elif c_err is None:
        out.append(f"{where}eager raised {type(e_err).__name__}: {e_err} ; compiled returned normally")
    elif type(e_err) is not type(c_err):
        out.append(f"{where}exception type differs: eager {qualname(type(e_err))}: {e_err} ; "
                   f"compiled {qualname(type(c_err))}: {c_err}")
    elif same_message and str(e_err) != str(c_err):
        out.append(f"{where}exception message differs ({type(e_err).__name__}):\n"
                   f"eager:    {e_err}\ncompiled: {c_err}")


def _compare_module_state(eager_module, compiled_module, walker: Walker):
    for what, getter in (("parameters", "named_parameters"), ("buffers", "named_buffers")):
        e_named = dict(getattr(eager_module, getter)())
        c_named = dict(getattr(compiled_module, getter)())
        if list(e_named) != list(c_named):
            walker.out.append(f"module {what} differ: eager {list(e_named)}, compiled {list(c_named)}")
            continue
        for name in e_named:
            walker.compare(e_named[name], c_named[name], f"self.{name} after the call")
    e_subs, c_subs = dict(eager_module.named_modules()), dict(compiled_module.named_modules())
    for name, e_sub in e_subs.items():
        c_sub = c_subs.get(name)
        if c_sub is None:
            walker.out.append(f"submodule self.{name} missing on the compiled side")
            continue
        prefix = f"self.{name}." if name else "self."
        e_attrs, c_attrs = _plain_attributes(e_sub), _plain_attributes(c_sub)
        for key in sorted(set(e_attrs) | set(c_attrs)):
            if key not in e_attrs or key not in c_attrs:
                walker.out.append(f"{prefix}{key}: attribute present on one side only after the call")
            else:
                walker.compare(e_attrs[key], c_attrs[key], f"{prefix}{key} after the call")


def _plain_attributes(module) -> dict:
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and isinstance(v, (bool, int, float, str, type(None), tuple))}


def _compare_grads(eager: _Run, comp: _Run, rtol, atol, out):
    if eager.differentiable != comp.differentiable:
        out.append(f"grad: eager has {eager.differentiable} floating output tensor(s) requiring grad, "
                   f"compiled has {comp.differentiable}; gradients not compared")
        return
    if eager.grads is None or comp.grads is None:
        return
    if eager.backward_error is not None or comp.backward_error is not None:
        # backward messages name autograd nodes, which legitimately differ; the type must not
        _compare_errors("backward: ", eager.backward_error, comp.backward_error, out, same_message=False)
        return
    walker = Walker(rtol, atol, out, None, None, grads=True)
    for label in list(dict.fromkeys([*eager.grads, *comp.grads])):
        if label not in eager.grads or label not in comp.grads:
            out.append(f"grad of {label}: leaf requiring grad on one side only")
            continue
        e, c = eager.grads[label], comp.grads[label]
        if (e is None) != (c is None):
            out.append(f"grad of {label}: eager {'None' if e is None else 'a tensor'}, "
                       f"compiled {'None' if c is None else 'a tensor'}")
        elif e is not None:
            walker.compare(e, c, f"grad of {label}")


def _underlying_module(compiled):
    if not isinstance(compiled, torch.nn.Module):
        return None
    for name in ("original_module", "_orig_mod"):
        inner = getattr(compiled, name, None)
        if isinstance(inner, torch.nn.Module):
            return inner
    return compiled


def _describe(fn) -> str:
    if fn is None:
        return "<unknown>"
    if isinstance(fn, torch.nn.Module):
        return f"module {type(fn).__qualname__}"
    return getattr(fn, "__qualname__", None) or repr(fn)


def _format_cache_entries(compiled) -> list[str]:
    if compiled is None:
        return []
    try:
        entries = list(compiled.cache_entries())
    except AttributeError:
        return []
    except Exception as exc:  # a diagnostics aid must not hide the real report
        return [f"(cache_entries() failed: {type(exc).__name__}: {exc})"]
    lines = [f"cache entries: {len(entries)}"]
    for i, entry in enumerate(entries):
        lines.append(f"  entry {i} (eager={getattr(entry, 'eager', '?')}):")
        guard_source = getattr(entry, "guard_source", None)
        if guard_source:
            lines.append("    guards:")
            lines.extend(f"      {line}" for line in str(guard_source).splitlines())
        gm = getattr(entry, "graph_module", None)
        if gm is not None:
            try:
                text = gm.print_readable(print_output=False)
            except Exception:  # print_readable is a convenience; .code always exists
                text = getattr(gm, "code", repr(gm))
            lines.append("    graph:")
            lines.extend(f"      {line}" for line in str(text).splitlines())
    return lines


def _format_bytecode(fn) -> list[str]:
    target = type(fn).forward if isinstance(fn, torch.nn.Module) else fn
    try:
        target = inspect.unwrap(target)
        text = dis.Bytecode(target).dis()
    except (TypeError, ValueError):
        return []
    return [f"bytecode of {_describe(fn)}:", *(f"  {line}" for line in text.splitlines())]
