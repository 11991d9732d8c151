"""Private torch APIs of symbolic shapes: fake tensors with symbolic sizes, SymInt/SymFloat inputs, unbacked
symbols, the ShapeEnv's guards, and the TracingContext a backend reads them from (``torch.fx.experimental
.symbolic_shapes``, ``torch._guards``, ``torch._dispatch.python``). Re-exported by :mod:`stillframe.compat`."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import dataclasses
import functools
import inspect
import math
from typing import Any, Iterator

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._guards import TracingContext, tracing
from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv, StatefulSymbolicContext,
                                                   StatelessSymbolicContext)

#: ``torch._check`` / ``torch._check_is_size``: conditions on sizes a trace hands to the ShapeEnv.
size_checks: tuple = tuple(f for f in (getattr(torch, "_check", None), getattr(torch, "_check_is_size", None)) if f)
#: ``torch.ops.aten.sym_size.int``: the graph node that reads one (symbolic) size of a tensor.
sym_size = torch.ops.aten.sym_size.int
#: ``math.<name>`` -> ``torch._sym_<name>``: the math functions a SymInt / SymFloat computes symbolically (the
#: ones torch.compile records in its graph instead of specializing).
sym_math = {getattr(math, name): getattr(torch, f"_sym_{name}") for name in
            ("sqrt", "cos", "cosh", "sin", "sinh", "tan", "tanh", "asin", "acos", "atan", "log2")}


def has_unbacked(value: Any) -> bool:
    """Whether the SymInt / SymFloat / SymBool (or fake tensor) ``value`` involves an unbacked symbol: a value read
    from a tensor's data (``t.item()``) or a data-dependent size (``nonzero``)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    return bool(free_unbacked_symbols(value))


def is_symbolic(value: Any) -> bool:
    """Whether ``value`` is a SymInt / SymFloat / SymBool that a ShapeEnv has not reduced to a constant (by
    0/1 specialization, or a guard that pinned it)."""
    method = _KNOWN_VALUE.get(type(value))
    if method is None:
        return False
    known = getattr(value.node, method, None)
    return known is None or known() is None


def symbol_of(value: Any) -> Any:
    """The sympy symbol ``value`` (a SymInt) stands for when it is one symbol alone (``s0``, not ``2*s0``), else
    ``None``."""
    if not is_symbolic(value):
        return None
    expr = value.node.expr
    return expr if getattr(expr, "is_Symbol", False) else None


_KNOWN_VALUE = {torch.SymInt: "maybe_as_int", torch.SymBool: "maybe_as_bool", torch.SymFloat: "maybe_as_float"}


def _torch_source_class() -> type:
    """A ``torch._guards.Source`` that renders as a fixed text: how torch's ShapeEnv names an input of ours.

    ``name`` is a property in recent torch and a method before; ``guard_source`` likewise.
    """
    import dataclasses
    import functools
    import inspect

    from torch._guards import GuardSource, Source as TorchSource

    name_is_property = isinstance(inspect.getattr_static(TorchSource, "name"), (property, functools.cached_property))
    guard_is_property = isinstance(inspect.getattr_static(TorchSource, "guard_source"),
                                   (property, functools.cached_property))
    namespace: dict = {"__annotations__": {"text": str}}
    if name_is_property:
        namespace["_name_template"] = property(lambda self: self.text)
        if isinstance(inspect.getattr_static(TorchSource, "name"), property):
            namespace["name"] = property(lambda self: self.text)
    else:
        namespace["name"] = lambda self: self.text
    namespace["guard_source"] = (property(lambda self: GuardSource.LOCAL) if guard_is_property
                                 else (lambda self: GuardSource.LOCAL))
    return dataclasses.dataclass(frozen=True)(type("NamedSource", (TorchSource,), namespace))


_NamedSource = _torch_source_class()


def fake_symbolic(mode: FakeTensorMode, value: torch.Tensor, dynamic: tuple, name: str,
                  ranges: dict | None = None, base_dynamic: tuple | None = None) -> Any:
    """The fake of ``value`` under ``mode`` with the dimensions flagged in ``dynamic`` symbolic (0/1 sized ones
    stay static, as torch.compile specializes them); ``name`` names it in the ShapeEnv's messages.

    ``ranges``: dim -> (min, max) (either may be None) from ``mark_dynamic(..., min=, max=)``: the symbol's
    value range, guarded (``2 <= L['x'].size()[0] <= 16``); a trace that specializes it fails to compile.
    ``base_dynamic``: for a view, which dimensions of its ``_base`` are symbolic (torch's default, when no
    context is given for the base, is all of them, as TorchDynamo avoids by giving one).
    """
    from torch.fx.experimental.symbolic_shapes import StrictMinMaxConstraint
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges

    dims = [DimDynamic.DYNAMIC if d else DimDynamic.STATIC for d in dynamic]
    constraints = [None] * len(dims)
    for dim, (low, high) in (ranges or {}).items():
        if dim < len(dims) and dynamic[dim]:
            constraints[dim] = StrictMinMaxConstraint(
                vr=ValueRanges(lower=0 if low is None else low, upper=int_oo if high is None else high),
                warn_only=False)
    base_context = None
    if value._base is not None:
        base_context = StatelessSymbolicContext(dynamic_sizes=[
            DimDynamic.DYNAMIC if d else DimDynamic.STATIC for d in (base_dynamic or (False,) * value._base.dim())])
    context = StatelessSymbolicContext(dynamic_sizes=dims, constraint_sizes=constraints,
                                       view_base_context=base_context)
    return _without_value(mode.from_tensor(value, symbolic_context=context, source=_NamedSource(name)))


def fake_static(mode: FakeTensorMode, value: torch.Tensor) -> Any:
    """The fake of ``value`` under ``mode`` (static shapes), knowing no tensor data (see :func:`_without_value`)."""
    return _without_value(mode.from_tensor(value))


def _without_value(fake: Any) -> Any:
    """``fake`` without the value torch's fake-tensor converter gives the fake of a 0-dim input (``item_memo``):
    with a ShapeEnv a backed symbol for ``.item()`` (all torch versions), without one the plain number (torch >=
    2.14). The trace guards no tensor's data, and neither is guarded: with it, ``x[i]`` / ``x[i:]`` / ``int(i)``
    traced with the first call's ``i`` (a branch on ``x[i:].shape[0]`` went unguarded), and AOTAutograd's retrace
    (a new fake epoch, where the symbol is gone) made ``x[i]`` an unbacked symbol it could not guard on. Without
    it, an op that reads the value depends on tensor data and breaks the graph, on every torch version and with
    static and dynamic shapes alike (found by probes)."""
    if fake.dim() == 0 and fake.item_memo is not None:
        fake.item_memo = None
    return fake


def symbolic_int(mode: FakeTensorMode, value: int, name: str) -> Any:
    """A SymInt of ``mode``'s ShapeEnv standing for the Python int argument ``value``: of any sign, and symbolic
    at 0 and 1 too, as torch.compile's unspecialized ints (``ShapeEnv.create_unspecified_symbol``; sizes are
    0/1-specialized, ints are not, so a loop counter that was 0 on the first trace is symbolic from 1 on)."""
    env = mode.shape_env
    source = _NamedSource(name)
    symbol = env.create_unspecified_symbol(value, source, dynamic_dim=DimDynamic.DYNAMIC)
    return env.create_symintnode(symbol, hint=value, source=source)


def symbolic_float(mode: FakeTensorMode, value: float, name: str) -> tuple[torch.Tensor, Any, Any]:
    """``(tensor, fake, symfloat)`` for the Python float ``value`` made a graph input as torch.compile passes
    one: a float64 0-dim tensor (the backend's example input), its fake under ``mode``, whose ``.item()`` is a
    SymFloat of ``mode``'s ShapeEnv standing for ``value`` (guards on it are guards on the float, named
    ``name``)."""
    env = mode.shape_env
    source = _NamedSource(name)
    tensor = float_tensor(value)
    fake = mode.from_tensor(tensor)
    symbol = env.create_unspecified_symbol(value, source, dynamic_dim=DimDynamic.DYNAMIC)
    sym = env.create_symfloatnode(symbol, hint=value, source=source)
    fake.item_memo = sym
    return tensor, fake, sym


def float_tensor(value: float) -> torch.Tensor:
    """What a float graph input is passed as (a ``CallSource`` of it): a float64 0-dim tensor, as torch.compile
    passes an unspecialized float."""
    return torch.tensor(value, dtype=torch.float64, device="cpu")  # (not torch.set_default_device's)


#: What the ShapeEnv raises where Python needs the value of an unbacked symbol (``if t.item() > 0`` under
#: capture_scalar_outputs): a graph break, as torch.compile makes it.
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode  # noqa: E402

def bind_unbacked(mode: FakeTensorMode, node: Any, value: Any) -> None:
    """Record on ``node`` (whose result is ``value``) the unbacked symbols its fake op created (``t.item()``'s
    ``u0``, ``nonzero``'s size), as torch.compile records ``unbacked_bindings``: AOTAutograd's retrace finds
    them there, and the ShapeEnv no longer holds them as pending."""
    env = mode.shape_env
    if env is None or not env.pending_fresh_unbacked_symbols:
        return
    from torch.fx.experimental.symbolic_shapes import compute_unbacked_bindings

    bindings = compute_unbacked_bindings(env, value)
    if bindings:
        node.meta["unbacked_bindings"] = bindings


def drop_pending_unbacked(mode: FakeTensorMode) -> None:
    """Forget unbacked symbols that no node of the graph binds (made by a fake op whose node a rollback erased):
    a backend that retraces the graph (AOTAutograd) must not look for them."""
    env = mode.shape_env
    if env is not None:
        env.pending_fresh_unbacked_symbols.clear()


#: What a backend raises when its pass that turns float inputs back into tensor ops (AOTAutograd's
#: tensorify_python_scalars) had to specialize some of them: the frame is traced again with those floats static.
try:
    from torch._dynamo.exc import TensorifyScalarRestartAnalysis
except ImportError:  # pragma: no cover - older torch
    TensorifyScalarRestartAnalysis = ()


def take_float_specializations() -> set[str]:
    """The names of the float symbols (``zf0``) the tensorify pass asked to specialize, and forget them (the
    request is torch's global state: read once, by the frame that is traced again)."""
    from torch._dynamo.symbolic_convert import TensorifyState

    names = set(TensorifyState.force_specializations)
    TensorifyState.clear()
    return names


def shape_guard_exprs(mode: FakeTensorMode, fakes: list) -> list[str]:
    """The ShapeEnv's guards over ``fakes`` (the entry snapshots of the symbolic inputs: fake tensors, and
    SymInts for int arguments) as Python expressions, where ``___t{i}`` stands for the live value of ``fakes[i]``
    (``'2 <= ___t0.size()[0]'``, ``'___t0.stride()[0] == ___t0.size()[1]'``). A size or stride that is a
    constant is left out (as torch.compile leaves it to its tensor check), one the trace specialized too."""
    env = mode.shape_env
    if env is None or not fakes:
        return []
    return list(env.produce_guards(fakes, [_NamedSource(f"___t{i}") for i in range(len(fakes))]))


def python_dispatcher() -> Any:
    """A context in which ops dispatch through torch's Python dispatcher (``torch._dispatch.python``), as
    torch.compile propagates every op of a trace. With symbolic sizes it matters: a C++ kernel that reads a
    tensor's sizes (torch 2.11's vmap batching rule for ``torch.dot`` ...) gets them symbolically instead of
    as ints, which would specialize each symbol to the example's size (a guard ``size()[0] == 5``)."""
    from torch._dispatch.python import enable_python_dispatcher

    return enable_python_dispatcher()


def unbacked_bindings(mode: FakeTensorMode, value: Any) -> dict | None:
    """The unbacked symbols ``value`` (a fake op result) brought into ``mode``'s ShapeEnv, by where they sit in it,
    marked as bound (as TorchDynamo does when it records the node), for the node's ``meta['unbacked_bindings']``:
    else they stay pending and the backend's own trace of the graph stops at them."""
    from torch.fx.experimental.symbolic_shapes import compute_unbacked_bindings

    return compute_unbacked_bindings(mode.shape_env, value) if mode.shape_env is not None else None


def backend_context(mode: FakeTensorMode) -> Any:
    """What a backend reads the fake mode (and ShapeEnv) of symbolic example inputs from, as under
    torch.compile: a ``TracingContext`` on ``mode``. Scalar outputs are allowed while the backend runs (what
    AOTAutograd derives for a ``while_loop``'s backward reads its trip count), as under torch.compile with
    ``capture_scalar_outputs=True``: the graph handed over holds no ``.item()`` of the user's. Nor an op that
    reads the value of a 0-dim integer input (``x[i]``): that value (the fake's ``item_memo``) is gone in
    AOTAutograd's new fake epoch, and allowed scalar outputs would make it an unbacked symbol the op cannot guard
    on; the trace breaks the graph at such an op instead (``_without_value``)."""
    return _scalar_outputs_allowed(mode, tracing(TracingContext(mode)))


def static_backend_context(examples: list) -> Any:
    """A ``TracingContext`` for a graph of static shapes whose ops want a ShapeEnv in the backend (AOTAutograd's
    fake ``while_loop`` asks the mode's ShapeEnv for fresh unbacked symbols), as torch.compile always gives one:
    a fake mode with its own ShapeEnv, in which each example tensor is made with every size static (the
    guards of the trace pin them), so the backend compiles the same static graph it would without it."""
    mode = FakeTensorMode(shape_env=ShapeEnv(allow_dynamic_output_shape_ops=False, allow_scalar_outputs=True))
    context = TracingContext(mode)
    for i, example in enumerate(examples):
        if isinstance(example, torch.Tensor):
            context.tensor_to_context[example] = StatefulSymbolicContext(
                dynamic_sizes=[DimDynamic.STATIC] * example.dim(), tensor_source=_NamedSource(f"___t{i}"))
    return tracing(context)  # scalar outputs allowed, as in backend_context


@contextlib.contextmanager
def _scalar_outputs_allowed(mode: FakeTensorMode, inner: Any) -> Iterator[None]:
    env = mode.shape_env
    before = env.settings  # a frozen record (fake tensors' dispatch cache keys include it)
    env.settings = dataclasses.replace(before, allow_scalar_outputs=True)
    try:
        with inner:
            yield
    finally:
        env.settings = before

