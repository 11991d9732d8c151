"""The one place stillframe touches private torch APIs (so a torch upgrade is fixed here alone).

Used: ``FakeTensorMode`` (``torch._subclasses``), the backend registry behind
torch.compile's ``backend=`` argument (``torch._TorchCompileWrapper``,
``torch._TorchCompileInductorWrapper``), ``torch._dynamo.reset``, TorchDynamo's C++ tensor check
(``torch._C._dynamo.guards.TensorGuards``, optional: see :func:`tensor_guards`), the raw grad-mode
switch a graph records (``torch._C._set_grad_enabled``), the C++ base of ``torch.Tensor``, fake
tensors' data-dependence errors, ``torch._utils.is_compiling``, torch.fx's tracing flag,
``torch._ops.HigherOrderOperator``, ``torch._C._FunctionBase.apply``, the Python dispatcher
(``torch._dispatch.python``) and ``torch._higher_order_ops.while_loop``. A test
(``tests/architecture/test_layers.py``) checks no other module names a private torch API.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import math
import types
from typing import Any, Callable, Iterator

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
    UnsupportedFakeTensorException,
    UnsupportedOperatorException,
)
from torch._guards import TracingContext, tracing
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv, StatefulSymbolicContext,
                                                   StatelessSymbolicContext)

#: ``torch.set_grad_enabled`` without the context-manager object: what graphs record and plans call.
set_grad_enabled: Callable[[bool], None] = torch._C._set_grad_enabled
#: Bumps a tensor's version counter as an in-place write would (``torch.autograd.graph.increment_version``).
increment_version: Callable[[Any], None] = torch._C._increment_version
#: The C++ class ``torch.Tensor`` derives from (methods' ``__objclass__`` may be either).
TensorBase: type = torch._C.TensorBase
#: What a fake tensor raises for an op whose output depends on tensor data.
DATA_DEPENDENT_ERRORS = (DataDependentOutputException, DynamicOutputShapeException)
#: ``torch._utils.is_compiling`` where this torch has it (an older spelling of torch.compiler.is_compiling).
utils_is_compiling: Callable[[], bool] | None = getattr(torch._utils, "is_compiling", None)
#: The class of torch's higher-order ops (``torch.ops.higher_order.cond`` ...).
HigherOrderOperator: type = torch._ops.HigherOrderOperator
#: ``torch._higher_order_ops.while_loop``, the user-facing while loop whose calls stillframe records as the
#: ``torch.ops.higher_order.while_loop`` op (``None`` where this torch has none).
while_loop: Callable | None = getattr(getattr(torch, "_higher_order_ops", None), "while_loop", None)
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


#: Private pure helpers torch's own Python code (and user code copied from it) calls, with what each result
#: depends on (``tensors/effects.py`` lets their results fold). Missing ones (another torch) are left out.
pure_private_helpers: dict[Callable, str] = {
    getattr(module, name): reason
    for module, name, reason in (
        (torch.nn._reduction, "get_enum", "a reduction name (a Python string)"),
        (torch.nn.init, "_calculate_correct_fan", "the shape of its tensor and a mode name"),
        (torch.nn.init, "_calculate_fan_in_and_fan_out", "the shape of its tensor"),
        (torch.fx._symbolic_trace, "is_fx_tracing", "whether torch.fx is tracing: never while compiled code runs"),
        (torch._C, "_get_privateuse1_backend_name", "the privateuse1 device's name: fixed once the process set it"))
    if callable(getattr(module, name, None))
}
#: The code shared by ``_pair``, ``_single`` ... (the functions ``_ntuple(n)`` makes): pure on Python values.
ntuple_code = getattr(getattr(torch.nn.modules.utils, "_pair", None), "__code__", None)


def _autograd_function_apply() -> Any:
    raw = inspect.getattr_static(torch.autograd.Function, "apply")
    return raw.__func__ if isinstance(raw, classmethod) else raw


#: ``torch.autograd.Function.apply`` as stillframe's rule table keys it: the Python function of the classmethod
#: (up to torch 2.13), or the C classmethod of ``torch._C._FunctionBase`` (torch 2.14, where ``MyFunction.apply``
#: is a builtin method bound to the class).
AUTOGRAD_FUNCTION_APPLY: Any = _autograd_function_apply()


def autograd_function_of(value: Any) -> type | None:
    """The ``torch.autograd.Function`` subclass ``cls`` when ``value`` is ``cls.apply`` (on any torch here: a
    bound classmethod, or from torch 2.14 a builtin method whose ``__self__`` is the class), else ``None``."""
    owner = getattr(value, "__self__", None)
    if not isinstance(owner, type) or not issubclass(owner, torch.autograd.Function):
        return None
    if isinstance(value, types.MethodType):
        return owner if value.__func__ is AUTOGRAD_FUNCTION_APPLY else None
    if isinstance(value, types.BuiltinMethodType) and isinstance(AUTOGRAD_FUNCTION_APPLY, types.ClassMethodDescriptorType):
        # bound C methods are equal when they bind the same C function to the same object
        return owner if value == AUTOGRAD_FUNCTION_APPLY.__get__(None, owner) else None
    return None


@functools.cache
def autograd_function_apply_takes_kwargs() -> bool:
    """Whether ``MyFunction.apply(x, k=1)`` passes ``k`` on to ``forward``: torch 2.13 and 2.14 do; torch 2.11's C
    ``apply`` raises ``TypeError: apply() takes no keyword arguments`` (asked once, of a Function that returns
    its argument)."""

    class _Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, k):
            return k

    try:
        return _Probe.apply(k=1) == 1
    except TypeError:
        return False


def _same(value: Any) -> Any:
    return value


def user_saved_tensors_hooks_shadowed() -> Any:
    """A context in which the user's saved-tensor hooks (``torch.autograd.graph.saved_tensors_hooks``) do not
    run: while ops propagate on fake tensors, autograd saves fakes, and a user's pack hook must not see them
    (eager packs each real saved tensor once; the graph's run does that). Identity hooks shadow the user's."""
    if torch._C._autograd._top_saved_tensors_default_hooks(False) is None:
        return contextlib.nullcontext()
    return torch.autograd.graph.saved_tensors_hooks(_same, _same)


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


def new_fake_mode(symbolic: bool = False, scalar_outputs: bool = False,
                  dynamic_output_shapes: bool = False) -> FakeTensorMode:
    """A fake-tensor mode (one per trace): static shapes, or with ``symbolic`` a ``ShapeEnv`` of its own.

    The ShapeEnv allows scalar outputs (``.item()`` as an unbacked symbol) only with ``scalar_outputs``, and
    data-dependent output shapes (``nonzero``) only with ``dynamic_output_shapes``, as torch.compile's
    ``capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops`` set its ShapeEnv; otherwise they break the
    graph exactly as they do with static shapes.
    """
    if not symbolic:
        return FakeTensorMode(allow_non_fake_inputs=False)
    env = ShapeEnv(allow_dynamic_output_shape_ops=dynamic_output_shapes, allow_scalar_outputs=scalar_outputs)
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


def is_eager_backend(backend: Any) -> bool:
    """Whether ``backend`` (from :func:`resolve_backend`) is torch.compile's ``"eager"``: the graph runs as is."""
    return getattr(backend, "compiler_name", None) == "eager"


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


def torch_disabled(fn: Any) -> bool:
    """Whether ``fn`` is marked never to be compiled by ``torch.compiler.disable``, ``torch._dynamo.disable``
    (either ``recursive=``) or ``torch._dynamo.skip``: each sets ``_torchdynamo_disable`` on what it returns."""
    try:
        return getattr(fn, "_torchdynamo_disable", False) is True
    except Exception:  # an object whose __getattr__ raises something else
        return False


def innermost_fn(fn: Any) -> Any:
    """What ``torch.compile`` compiles when given ``fn``: the function inside the wrappers that
    ``torch.compile`` and ``torch.compiler.disable`` put around it (torch's ``innermost_fn``: followed
    through ``_torchdynamo_orig_callable`` only where ``_torchdynamo_wrapper_id`` is the wrapper's own id,
    so a bound method or a ``functools.wraps`` copy is not unwrapped)."""
    while (hasattr(fn, "_torchdynamo_orig_callable")
           and getattr(fn, "_torchdynamo_wrapper_id", None) == id(fn) and not isinstance(fn, torch.nn.Module)):
        fn = fn._torchdynamo_orig_callable
    return fn


def compile_lock() -> Any:
    """The process-wide lock torch.compile holds while it traces a frame and runs the backend
    (``torch._dynamo.convert_frame.compile_lock``, a reentrant lock). stillframe holds the same one, so its
    traces, torch.compile's and ``torch._dynamo.reset()`` never run at once (backends keep global state)."""
    return importlib.import_module("torch._dynamo.convert_frame").compile_lock


def fx_tracing_flag() -> bool:
    """torch.fx's "an FX trace is running" flag (what ``torch.fx._symbolic_trace.is_fx_tracing`` reads): a module
    global up to torch 2.13, per thread from torch 2.14 (``_get_is_fx_tracing``)."""
    fx = importlib.import_module("torch.fx._symbolic_trace")
    getter = getattr(fx, "_get_is_fx_tracing", None)
    return getter() if getter is not None else fx._is_fx_tracing_flag


def set_fx_tracing_flag(value: bool) -> None:
    """Set the flag :func:`fx_tracing_flag` reads (this thread's, from torch 2.14)."""
    fx = importlib.import_module("torch.fx._symbolic_trace")
    setter = getattr(fx, "_set_is_fx_tracing", None)
    if setter is not None:
        setter(value)
    else:
        fx._is_fx_tracing_flag = value


@contextlib.contextmanager
def global_state_kept() -> Iterator[None]:
    """Leave the process's global torch state as it was found, however the block ends: torch.fx's global
    tracing flag (a backend's FX trace interrupted by an exception, or raced by another thread, leaves it
    set, and every later ``torch.compile`` call raises), grad mode, the default dtype and CPU autocast."""
    saved = (fx_tracing_flag(), torch.is_grad_enabled(), torch.get_default_dtype(),
             torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
    try:
        yield
    finally:
        set_fx_tracing_flag(saved[0])
        if torch.is_grad_enabled() != saved[1]:
            set_grad_enabled(saved[1])
        if torch.get_default_dtype() != saved[2]:
            torch.set_default_dtype(saved[2])
        if (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")) != saved[3:]:
            torch.set_autocast_enabled("cpu", saved[3])
            torch.set_autocast_dtype("cpu", saved[4])


#: What a backend may raise that torch.compile turns into a graph break with a warning, not an error: fake
#: tensors' refusals (stillframe runs that graph's code eagerly, with a StillframeWarning).
BACKEND_FALLBACK_ERRORS = (*DATA_DEPENDENT_ERRORS, UnsupportedOperatorException, UnsupportedFakeTensorException)


def backend_compiler_failed(backend: Any, error: Exception) -> Exception:
    """torch.compile's error for a backend that raised ``error`` (or returned no callable):
    ``torch._dynamo.exc.BackendCompilerFailed`` (a ``RuntimeError``), whose message names the backend as
    torch.compile's does (``backend='my_backend' raised:\nRuntimeError: boom``) and whose
    ``inner_exception`` is ``error``."""
    exc = importlib.import_module("torch._dynamo.exc")
    name = getattr(backend, "compiler_name", None) or getattr(backend, "__name__", None) or "?"
    return exc.BackendCompilerFailed(types.SimpleNamespace(__name__=name), error, None)


def is_backend_compiler_failed(error: BaseException) -> bool:
    exc = importlib.import_module("torch._dynamo.exc")
    return isinstance(error, exc.BackendCompilerFailed)


def dynamo_config() -> Any:
    """torch.compile's configuration module, ``torch._dynamo.config`` (a ``torch.utils._config_module.ConfigModule``:
    a write goes through its class's ``__setattr__``)."""
    return importlib.import_module("torch._dynamo.config")


def dynamo_module() -> Any:
    """``torch._dynamo`` (for its ``reset``)."""
    return importlib.import_module("torch._dynamo")


def dynamo_config_default(name: str) -> Any:
    """The default of a ``torch._dynamo.config`` setting (``None`` where this torch does not say)."""
    try:
        return dynamo_config()._config[name].default
    except (AttributeError, KeyError):
        return None


# ---------------------------------------------------------------------------------------------- symbolic shapes
#: ``torch._check`` / ``torch._check_is_size``: conditions on sizes a trace hands to the ShapeEnv.
size_checks: tuple = tuple(f for f in (getattr(torch, "_check", None), getattr(torch, "_check_is_size", None)) if f)
#: ``torch.ops.aten.sym_size.int``: the graph node that reads one (symbolic) size of a tensor.
sym_size = torch.ops.aten.sym_size.int
#: ``math.<name>`` -> ``torch._sym_<name>``: the math functions a SymInt / SymFloat computes symbolically (the
#: ones torch.compile records in its graph instead of specializing).
sym_math = {getattr(math, name): getattr(torch, f"_sym_{name}") for name in
            ("sqrt", "cos", "cosh", "sin", "sinh", "tan", "tanh", "asin", "acos", "atan", "log2")}


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
    return mode.from_tensor(value, symbolic_context=context, source=_NamedSource(name))


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
    return torch.tensor(value, dtype=torch.float64)


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


@contextlib.contextmanager
def torch_compile_counted(flags: dict | None = None) -> Iterator[dict]:
    """Count what torch.compile does inside the block: on exit the yielded dict holds ``graphs`` (Dynamo's
    ``unique_graphs``) and ``recompiles`` (records of its ``recompiles`` log artifact, one per recompiled
    frame). Dynamo's caches are reset before and after; ``flags`` patch ``torch._dynamo.config`` inside."""
    import logging

    from torch._dynamo.utils import counters

    class _Count(logging.Handler):
        def __init__(self):
            super().__init__()
            self.count = 0

        def emit(self, record):
            self.count += 1

    torch._dynamo.reset()
    counters.clear()
    handler = _Count()
    logger = logging.getLogger("torch._dynamo.guards.__recompiles")
    torch._logging.set_logs(recompiles=True)
    logger.addHandler(handler)
    result: dict = {}
    try:
        with torch._dynamo.config.patch(**(flags or {})):
            yield result
    finally:
        result.update(graphs=counters["stats"]["unique_graphs"], recompiles=handler.count)
        logger.removeHandler(handler)
        torch._logging.set_logs()
        torch._dynamo.reset()


def active_dispatch_modes() -> list[str]:
    """The class names of the modes on torch's dispatch-mode stack (``[]`` in eager code)."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return [type(m).__name__ for m in _get_current_dispatch_mode_stack()]


def pop_dispatch_modes() -> list[str]:
    """Leave torch's dispatch-mode stack empty, returning the class names of the modes that were on it.

    Eager code runs with no mode active; one left there (a ``FakeTensorMode`` a compiler entered and an
    exception skipped the exit of) turns every later tensor op of the process fake. The fuzzer checks this
    after each program (``torch.utils._python_dispatch``'s mode stack)."""
    from torch.utils._python_dispatch import _pop_mode

    names = active_dispatch_modes()
    for _ in names:
        _pop_mode()
    return names


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
    ``capture_scalar_outputs=True``: the graph handed over holds no ``.item()`` of the user's."""
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


# --- torch.optim (stillframe.compile(opt.step): rules/optimizers.py, runtime/optimizer_step.py) ---------------

def optimizer_init_group(opt: Any, group: dict, *lists: list) -> Any:
    """``opt._init_group(group, *lists)``: torch.optim's own collection of one param group's tensors (params
    with a grad, their grads and state), creating the state lazily on the first step as ``opt.step()`` does."""
    return opt._init_group(group, *lists)


_optimizer_module = importlib.import_module("torch.optim.optimizer")


def optimizer_hooks(opt: Any) -> bool:
    """Whether a call of ``opt.step()`` runs step hooks: global or the optimizer's own, pre or post (called on
    every compiled step: four dict lookups)."""
    return bool(_optimizer_module._global_optimizer_pre_hooks or _optimizer_module._global_optimizer_post_hooks
                or opt._optimizer_step_pre_hooks or opt._optimizer_step_post_hooks)


def default_foreach(params: list) -> bool:
    """Whether torch.optim takes its foreach implementation for these (real) tensors when ``foreach=None``."""
    module = importlib.import_module("torch.optim.optimizer")
    return bool(module._default_to_fused_or_foreach(params, False, use_fused=False)[1])


def trace_aten(fn: Callable, examples: list, mode: FakeTensorMode | None = None,
               compiling: bool = True) -> torch.fx.GraphModule:
    """``fn(*examples)`` traced on fake tensors into an ATen-level FX graph (``make_fx``), with grad off and
    ``torch.compiler.is_compiling()`` True (torch's own code takes the paths it takes under torch.compile), or,
    with ``compiling=False``, the paths it takes in eager. ``mode``: the fake mode to trace in (its ShapeEnv
    holds the symbols of the examples faked in it beforehand; see :func:`optimizer_fake_mode`)."""
    context = tracing(TracingContext(mode)) if mode is not None else contextlib.nullcontext()
    with torch.no_grad(), context, (_compiling() if compiling else contextlib.nullcontext()):
        return make_fx(fn, tracing_mode="fake")(*examples)



# ---------------------------------------------------------------- a view's grad_fn, made when asked for

_DEFAULT_VIEW = torch._C._autograd.CreationMeta.DEFAULT
_LEAF_IN_PLACE = "a leaf Variable that requires grad is being used in an in-place operation."


def view_made_in_grad_mode(t: torch.Tensor) -> bool:
    """Whether view ``t`` was made with grad mode on (autograd then allows in-place ops on it in grad mode)."""
    return torch._C._autograd._get_creation_meta(t) != torch._C._autograd.CreationMeta.NO_GRAD_MODE


def grad_fn_made_on_read(t: torch.Tensor) -> bool:
    """Whether reading ``t.is_leaf`` or ``t.grad_fn`` may make ``t``'s grad_fn: ``t`` is a view (made in grad
    mode) whose base requires grad, and autograd makes a view's grad_fn lazily, when it is asked for. Such a
    read changes what eager does next (see :func:`is_stale_view`), so stillframe never makes it itself."""
    return t._is_view() and t._base.requires_grad and torch._C._autograd._get_creation_meta(t) == _DEFAULT_VIEW


def autograd_flags(t: torch.Tensor) -> tuple[bool, bool, bool]:
    """``(requires_grad, is_leaf, grad_fn is not None)`` as Python reads them, without making a view's grad_fn
    (:func:`grad_fn_made_on_read`: such a view requires grad and the read would give it a grad_fn)."""
    if grad_fn_made_on_read(t):
        return True, False, True
    return t.requires_grad, t.is_leaf, t.grad_fn is not None


def made_without_grad_fn(t: torch.Tensor) -> bool:
    """Whether view ``t`` has no grad_fn because its base did not require grad when it was made (read without
    making one): if the base takes history later, ``t`` may become a stale view (:func:`is_stale_view`)."""
    return (t._is_view() and not t._base.requires_grad
            and torch._C._autograd._get_creation_meta(t) == _DEFAULT_VIEW and t.grad_fn is None)


def is_leaf(t: torch.Tensor) -> bool | None:
    """``t.is_leaf`` without making a view's grad_fn (:func:`autograd_flags`); ``None`` where reading it raises
    (a view made under ``no_grad`` whose base was written in place since)."""
    if grad_fn_made_on_read(t):
        return False
    try:
        return t.is_leaf
    except RuntimeError:
        return None


def is_stale_view(t: torch.Tensor) -> bool:
    """Whether autograd treats view ``t`` as a leaf that requires grad: it was made while its base did not
    require grad, the base took history since (an in-place op through another alias: ``v = y.t(); y[0] = w``),
    and nothing has asked for ``t``'s grad_fn since (reading ``is_leaf`` or ``grad_fn``, or a differentiable op
    on ``t``, makes it). Eager refuses an in-place op on it in grad mode ("a leaf Variable that requires grad is
    being used in an in-place operation."). Found out from autograd's own in-place check, with an ``add_``
    whose shapes cannot match, so nothing is written; on a view that is not stale the check goes on to make
    the grad_fn, as any differentiable op on it would. Works on real and fake tensors."""
    if not grad_fn_made_on_read(t):
        return False
    wrong_shape = t.new_empty((1,)).expand(2, *t.shape)
    try:
        with torch.enable_grad():
            torch.Tensor.add_(t, wrong_shape)
    except RuntimeError as e:
        return str(e).startswith(_LEAF_IN_PLACE)
    raise AssertionError("an add_ of a wrong shape succeeded")  # pragma: no cover


def stale_view(base: torch.Tensor, shape: Any, stride: Any, offset: Any) -> torch.Tensor:
    """A view of ``base`` with this geometry that :func:`is_stale_view`: made under ``no_grad`` (so without a
    grad_fn although ``base`` requires grad), then marked as made in grad mode, and made at another version of
    the storage than the current one (the version counter is set back right after, so nothing saved for
    backward sees a change), so that asking for its grad_fn makes one, as for the view it stands for."""
    view = no_grad_view_before_write(base, shape, stride, offset)
    torch._C._autograd._set_creation_meta(view, _DEFAULT_VIEW)
    return view


def no_grad_view_before_write(base: torch.Tensor, shape: Any, stride: Any, offset: Any) -> torch.Tensor:
    """A view of ``base`` with this geometry made under ``no_grad`` at another version of the storage than the
    current one (the version counter is set back right after, so nothing saved for backward sees a change):
    as a view made under ``no_grad`` before a write to its base, reading its ``grad_fn`` or ``is_leaf`` raises
    where the base requires grad."""
    version = base._version
    torch._C._autograd._unsafe_set_version_counter((base,), (version + 1,))
    try:
        with torch.no_grad():
            view = base.as_strided(shape, stride, offset)
    finally:
        torch._C._autograd._unsafe_set_version_counter((base,), (version,))
    return view

def public_calls(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` (an ATen graph from :func:`trace_aten`) calling torch's public API instead of ``torch.ops.aten``
    overloads, as a TorchDynamo graph does: ``aten.add_.Tensor(x, y, alpha=a)`` becomes ``x.add_(y, alpha=a)``,
    ``aten.sqrt.default(x)`` ``torch.sqrt(x)``, ``aten._local_scalar_dense.default(x)`` ``x.item()``. The public
    call picks the same overload from the same arguments (the graph was traced through it), and skips the
    Python layer of ``OpOverload.__call__`` and its schema parsing (a few microseconds per op, which is most of a
    small graph's time on the eager backend). An op with no public name of its own stays as it is."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload) \
                or node.target.namespace != "aten":
            continue
        name = node.target.overloadpacket.__name__
        function = getattr(torch, name, None)
        on_tensor = bool(node.args) and isinstance(node.args[0], torch.fx.Node) \
            and isinstance(node.args[0].meta.get("val"), torch.Tensor)
        if name == "_local_scalar_dense":
            node.op, node.target = "call_method", "item"
        elif node.target._overloadname == "out":  # torch.maximum(a, b, out=c): the function takes out=
            if callable(function):
                node.target = function
        elif name.endswith("_") and on_tensor and hasattr(torch.Tensor, name):  # in place: a method only
            node.op, node.target = "call_method", name
        elif callable(function):
            node.target = function
        elif on_tensor and hasattr(torch.Tensor, name):
            node.op, node.target = "call_method", name
    gm.recompile()
    return gm


def optimizer_fake_mode() -> FakeTensorMode:
    """A fake mode for tracing an optimizer's update: static shapes, and a ShapeEnv in which ``.item()`` of a
    tensor is an unbacked symbol (eager's Adam reads ``state['step'].item()``) and a float input a SymFloat
    (:func:`symbolic_float`)."""
    return FakeTensorMode(shape_env=ShapeEnv(allow_scalar_outputs=True), static_shapes=True)


def symbol_guards(mode: FakeTensorMode) -> list:
    """The guards ``mode``'s ShapeEnv recorded (a branch on a SymFloat's value)."""
    return list(mode.shape_env.guards)


@contextlib.contextmanager
def _compiling() -> Iterator[None]:
    """``torch.compiler.is_compiling()`` answers True inside the block (torch's own compile-session flag)."""
    session = getattr(torch.compiler, "_compile_session_context", None)
    if session is not None:
        with session():
            yield
        return
    saved = torch.compiler._is_compiling_flag
    torch.compiler._is_compiling_flag = True
    try:
        yield
    finally:
        torch.compiler._is_compiling_flag = saved


#: torch's NumPy on tensors (``torch._numpy``), through which NumPy code is captured; ``None`` without NumPy.
try:
    import numpy as _numpy_module  # noqa: F401  (torch._numpy needs it)
    import torch._numpy as torch_numpy
except ImportError:  # pragma: no cover
    torch_numpy = None
