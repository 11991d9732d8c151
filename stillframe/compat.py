"""The one place stillframe touches private torch APIs (so a torch upgrade is fixed here alone).

Used: ``FakeTensorMode`` (``torch._subclasses``), the backend registry behind
torch.compile's ``backend=`` argument (``torch._TorchCompileWrapper``,
``torch._TorchCompileInductorWrapper``), ``torch._dynamo.reset``, TorchDynamo's C++ tensor check
(``torch._C._dynamo.guards.TensorGuards``, optional: see :func:`tensor_guards`), the raw grad-mode
switch a graph records (``torch._C._set_grad_enabled``), the C++ base of ``torch.Tensor``, fake
tensors' data-dependence errors, and ``torch._utils.is_compiling``. A test
(``tests/architecture/test_layers.py``) checks no other module names a private torch API.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

#: ``torch.set_grad_enabled`` without the context-manager object: what graphs record and plans call.
set_grad_enabled: Callable[[bool], None] = torch._C._set_grad_enabled
#: The C++ class ``torch.Tensor`` derives from (methods' ``__objclass__`` may be either).
TensorBase: type = torch._C.TensorBase
#: What a fake tensor raises for an op whose output depends on tensor data.
DATA_DEPENDENT_ERRORS = (DataDependentOutputException, DynamicOutputShapeException)
#: ``torch._utils.is_compiling`` where this torch has it (an older spelling of torch.compiler.is_compiling).
utils_is_compiling: Callable[[], bool] | None = getattr(torch._utils, "is_compiling", None)
#: Private helpers that ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` call on tensors or None:
#: each returns a tensor, or reads only metadata (``tensors/effects.py`` lets the latter fold). Missing ones
#: (another torch) are left out.
nn_metadata_helpers: dict[str, Callable] = {
    f"{module.__name__}.{name}": getattr(module, name)
    for module, name in ((torch.nn.functional, "_canonical_mask"), (torch.nn.functional, "_none_or_dtype"),
                         (torch.nn.modules.activation, "_check_arg_device"),
                         (torch.nn.modules.activation, "_arg_requires_grad"),
                         # torch 2.11's MultiheadAttention asks it; False outside make_fx, as in eager
                         (torch.nn.modules.activation, "_is_make_fx_tracing"))
    if callable(getattr(module, name, None))
}


def forget_fx_name(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """Give an erased node's name back to the graph's namespace (FX never does), newest node first.

    Without it a trace that is rolled back and resumed names its nodes ``add_1``
    where a trace from scratch says ``add``, and the namespace keeps the erased
    nodes alive.
    """
    from torch.fx.graph import _name_regex

    namespace = graph._graph_namespace
    namespace._used_names.discard(node.name)
    namespace._obj_to_name.pop(node, None)
    match = _name_regex.match(node.name)
    if match is None:
        return
    base, num = match.group(1, 2)
    if num is None:
        namespace._base_count.pop(base, None)
    else:
        namespace._base_count[base] = int(num) - 1


def new_fake_mode(symbolic: bool = False) -> FakeTensorMode:
    """A fake-tensor mode (one per trace): static shapes, or with ``symbolic`` a ``ShapeEnv`` of its own.

    The ShapeEnv allows neither data-dependent output shapes nor scalar outputs, so ``nonzero`` and
    ``.item()`` break the graph exactly as they do with static shapes.
    """
    if not symbolic:
        return FakeTensorMode(allow_non_fake_inputs=False)
    env = ShapeEnv(allow_dynamic_output_shape_ops=False, allow_scalar_outputs=False)
    return FakeTensorMode(shape_env=env, allow_non_fake_inputs=False)


def resolve_backend(backend: Any, mode: str | None, options: dict | None, dynamic: bool | None) -> Callable:
    """The compiler function torch.compile would use for these arguments.

    Accepts every name torch.compile accepts and any callable
    ``(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> callable``.
    Raises exactly what torch.compile raises for a bad name or bad arguments
    (``torch._dynamo.exc.InvalidBackend``, ``RuntimeError`` for ``mode`` with
    ``options``), and at the same moment: when compile() is called.
    """
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if backend == "inductor":
        return torch._TorchCompileInductorWrapper(mode, options, dynamic)
    return torch._TorchCompileWrapper(backend, mode, options, dynamic)


def tensor_guards(examples: list, sizes: list | None = None, strides: list | None = None) -> Any:
    """torch's C++ tensor check (TorchDynamo's ``TensorGuards``) for tensors like ``examples``, or ``None``.

    ``check(*tensors)`` is True when each tensor has its example's Python type, dispatch keys, dtype,
    device, ``requires_grad``, sizes and strides (every size static). It keeps no reference to the examples.
    ``None`` when this torch has no such class, its signature differs, or a tensor is not strided: the
    caller then checks those tensors in Python. ``sizes`` / ``strides``: per tensor, the expected sizes and
    strides with ``None`` for a symbolic one (checked by the shape guards instead); default: the examples'.
    """
    if not examples or any(t.layout != torch.strided for t in examples):
        return None
    try:
        from torch._C._dynamo.guards import TensorGuards

        guards = TensorGuards(*examples, dynamic_dims_sizes=sizes or [list(t.shape) for t in examples],
                              dynamic_dims_strides=strides or [list(t.stride()) for t in examples])
        return guards if guards.check(*examples) else None
    except Exception:  # an API change: fall back to the Python checks
        return None


# ---------------------------------------------------------------------------------------------- symbolic shapes
#: ``torch._check`` / ``torch._check_is_size``: conditions on sizes a trace hands to the ShapeEnv.
size_checks: tuple = tuple(f for f in (getattr(torch, "_check", None), getattr(torch, "_check_is_size", None)) if f)
#: ``torch.ops.aten.sym_size.int``: the graph node that reads one (symbolic) size of a tensor.
sym_size = torch.ops.aten.sym_size.int


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
                  ranges: dict | None = None) -> Any:
    """The fake of ``value`` under ``mode`` with the dimensions flagged in ``dynamic`` symbolic (0/1 sized ones
    stay static, as torch.compile specializes them); ``name`` names it in the ShapeEnv's messages.

    ``ranges``: dim -> (min, max) (either may be None) from ``mark_dynamic(..., min=, max=)``: the symbol's
    value range, guarded (``2 <= L['x'].size()[0] <= 16``); a trace that specializes it fails to compile.
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
    context = StatelessSymbolicContext(dynamic_sizes=dims, constraint_sizes=constraints)
    return mode.from_tensor(value, symbolic_context=context, source=_NamedSource(name))


def symbolic_int(mode: FakeTensorMode, value: int, name: str) -> Any:
    """A SymInt of ``mode``'s ShapeEnv standing for the Python int argument ``value`` (0 and 1 specialized, as
    torch.compile does: then the plain int comes back)."""
    env = mode.shape_env
    source = _NamedSource(name)
    # any sign (create_symbol's default assumes a size, >= 0): as torch.compile's unspecialized ints
    symbol = env.create_symbol(value, source, dynamic_dim=DimDynamic.DYNAMIC, positive=None)
    return env.create_symintnode(symbol, hint=value, source=source)


def shape_guard_exprs(mode: FakeTensorMode, fakes: list) -> list[str]:
    """The ShapeEnv's guards over ``fakes`` (the entry snapshots of the symbolic inputs: fake tensors, and
    SymInts for int arguments) as Python expressions, where ``___t{i}`` stands for the live value of ``fakes[i]``
    (``'2 <= ___t0.size()[0]'``, ``'___t0.stride()[0] == ___t0.size()[1]'``). A size or stride that is a
    constant is left out (as torch.compile leaves it to its tensor check), one the trace specialized too."""
    env = mode.shape_env
    if env is None or not fakes:
        return []
    return list(env.produce_guards(fakes, [_NamedSource(f"___t{i}") for i in range(len(fakes))]))


def backend_context(mode: FakeTensorMode) -> Any:
    """What a backend reads the fake mode (and ShapeEnv) of symbolic example inputs from, as under
    torch.compile: a ``TracingContext`` on ``mode``."""
    from torch._guards import TracingContext, tracing

    return tracing(TracingContext(mode))
