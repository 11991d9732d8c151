"""The one place stillframe touches private torch APIs (so a torch upgrade is fixed here alone).

Used: ``FakeTensorMode`` (``torch._subclasses``), the backend registry behind
torch.compile's ``backend=`` argument (``torch._TorchCompileWrapper``,
``torch._TorchCompileInductorWrapper``), ``torch._dynamo.reset``, TorchDynamo's C++ tensor check
(``torch._C._dynamo.guards.TensorGuards``, optional: see :func:`tensor_guards`), the raw grad-mode
switch a graph records (``torch._C._set_grad_enabled``), the C++ base of ``torch.Tensor``, fake
tensors' data-dependence errors, ``torch._utils.is_compiling``, torch.fx's tracing flag,
``torch._ops.HigherOrderOperator``, ``torch._C._FunctionBase.apply``, the Python dispatcher
(``torch._dispatch.python``), ``torch._higher_order_ops.while_loop``, ``torch._C._nn.multilabel_margin_loss``,
inductor's ``fallback_random`` flag, and
the saved-tensor hooks and torch mode stacks (``torch._C._autograd._top_saved_tensors_default_hooks``,
``torch._C._len_torch_function_stack``, ``torch._C._len_torch_dispatch_stack``: see :func:`user_interposer`). A test
(``tests/architecture/test_layers.py``) checks no other module names a private torch API.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import functools
import importlib
import inspect
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
from torch.fx.experimental.symbolic_shapes import ShapeEnv

# the sections that have modules of their own, named here as before (compat.X)
from .shapes import (  # noqa: F401,E402
    GuardOnDataDependentSymNode, TensorifyScalarRestartAnalysis, backend_context, bind_unbacked,
    drop_pending_unbacked, fake_static, fake_symbolic, float_tensor, has_unbacked, is_symbolic, python_dispatcher,
    shape_guard_exprs, size_checks, static_backend_context, sym_math, sym_size, symbol_of, symbolic_float,
    symbolic_int, take_float_specializations, unbacked_bindings)
from .views import (  # noqa: F401,E402
    CreationMeta, autograd_flags, geometry, grad_fn_made_on_read, is_aot_graph_output, is_leaf, is_stale_view,
    made_without_grad_fn, no_grad_view_before_write, rebase_on_own_node, recorded_as, restore_geometry,
    restore_storages, shares_memory, stale_view, storage_key, storage_snapshot, view_creation, view_made_as)
from .optim import (  # noqa: F401,E402
    default_foreach, guard_function, guarded_symbols, optimizer_fake_mode, optimizer_hooks, optimizer_init_group,
    public_calls, symbol_name, trace_aten)

#: ``torch.set_grad_enabled`` without the context-manager object: what graphs record and plans call.
set_grad_enabled: Callable[[bool], None] = torch._C._set_grad_enabled
#: ``torch.inference_mode``'s switch without the context-manager object: what graphs record (as torch.compile's
#: do), returning the entered ``torch._C._InferenceMode`` that ``exit_inference_mode`` leaves.
enter_inference_mode: Callable[[bool], Any] = torch.autograd.grad_mode._enter_inference_mode
exit_inference_mode: Callable[[Any], None] = torch.autograd.grad_mode._exit_inference_mode


def leave_inference_modes(tb: Any) -> None:
    """Leave the ``torch.inference_mode`` blocks a graph entered and did not leave because it raised: the entered
    contexts are held by the locals of the frames of traceback ``tb``; each is left, innermost first (leaving one
    already left does nothing), so the grad and inference modes are as before the graph."""
    entered = []
    while tb is not None:
        entered.extend(v for v in tb.tb_frame.f_locals.values() if type(v) is torch._C._InferenceMode)
        tb = tb.tb_next
    for context in reversed(entered):
        context.__exit__(None, None, None)


#: Bumps a tensor's version counter as an in-place write would (``torch.autograd.graph.increment_version``).
increment_version: Callable[[Any], None] = torch._C._increment_version
#: ``set_version_counters(tensors, versions)``: sets each tensor's version counter (shared with its views and
#: ``detach()``-es) to the int beside it (``torch._C._autograd._unsafe_set_version_counter``, torch 2.11-2.14).
set_version_counters: Callable[[Any, Any], None] = torch._C._autograd._unsafe_set_version_counter
#: The C binding behind ``F.multilabel_margin_loss``, which a program may call directly (an AOT_REFUSED key).
nn_multilabel_margin_loss: Callable[..., Any] = torch._C._nn.multilabel_margin_loss
#: The C++ class ``torch.Tensor`` derives from (methods' ``__objclass__`` may be either).
TensorBase: type = torch._C.TensorBase
#: What a fake tensor raises for an op whose output depends on tensor data.
DATA_DEPENDENT_ERRORS = (DataDependentOutputException, DynamicOutputShapeException)
#: ``torch._utils.is_compiling`` where this torch has it (an older spelling of torch.compiler.is_compiling).
utils_is_compiling: Callable[[], bool] | None = getattr(torch._utils, "is_compiling", None)
def calls_forward_alone(module: torch.nn.Module) -> bool:
    """Whether ``module(...)`` would call its forward and nothing else: no hook of its own, no global one, no
    TorchScript tracing (``nn.Module._call_impl``'s own fast path, checked the same way)."""
    hooks = torch.nn.modules.module
    return not (module._backward_hooks or module._backward_pre_hooks or module._forward_hooks or
                module._forward_pre_hooks or hooks._global_backward_pre_hooks or hooks._global_backward_hooks or
                hooks._global_forward_hooks or hooks._global_forward_pre_hooks or torch._C._get_tracing_state())


def plain_forward_hooks(module: torch.nn.Module) -> list | None:
    """The forward pre-hooks of ``module`` as ``(hook, takes_kwargs)`` pairs, in order, where a call of it runs
    those and its own forward hooks and nothing else of ``nn.Module._call_impl``'s hook machinery: no forward
    hook that must run when the forward raises (``always_call``), no backward hook, no global hook, no
    TorchScript tracing; ``None`` otherwise, or where it has no forward hook of either kind."""
    hooks = torch.nn.modules.module
    if not (module._forward_pre_hooks or module._forward_hooks) or module._forward_hooks_always_called or \
            module._backward_hooks or module._backward_pre_hooks or hooks._global_backward_pre_hooks or \
            hooks._global_backward_hooks or hooks._global_forward_hooks or hooks._global_forward_pre_hooks or \
            torch._C._get_tracing_state():
        return None
    with_kwargs = module._forward_pre_hooks_with_kwargs
    return [(hook, hook_id in with_kwargs) for hook_id, hook in module._forward_pre_hooks.items()]


#: An ATen (or ``torch.library``) operator overload and the packet of an operator's overloads (``torch.ops.aten.add``):
#: their schemas say what an op writes (``tensors/ops.schema_writes``).
OpOverload: type = torch._ops.OpOverload
OpOverloadPacket: type = torch._ops.OpOverloadPacket
#: ``torch.library.custom_op``'s op object, whose call is a call of its ``OpOverload`` (``_opoverload``): ``None``
#: where this torch has none.
CustomOpDef: type | None = getattr(getattr(torch._library, "custom_ops", None), "CustomOpDef", None)
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
    # (by type: ``isinstance`` would read the user's ``__class__``, as variables.builder.of_type says)
    if not issubclass(type(owner), type) or not issubclass(owner, torch.autograd.Function):
        return None
    if issubclass(type(value), types.MethodType):
        return owner if value.__func__ is AUTOGRAD_FUNCTION_APPLY else None
    if issubclass(type(value), types.BuiltinMethodType) and \
            isinstance(AUTOGRAD_FUNCTION_APPLY, types.ClassMethodDescriptorType):
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


_top_saved_tensors_hooks = torch._C._autograd._top_saved_tensors_default_hooks
_function_modes = torch._C._len_torch_function_stack
_dispatch_modes = torch._C._len_torch_dispatch_stack


def user_interposer() -> str | None:
    """What of the user's, active now, sees the torch calls a call makes, or ``None``: saved-tensor hooks
    (``torch.autograd.graph.saved_tensors_hooks``), a ``TorchFunctionMode`` or a ``TorchDispatchMode``.

    A compiled call made meanwhile runs for real. A plan does not make eager's calls: its guards and runtime
    make torch calls of their own, which a mode would log; an AOTAutograd graph saves other tensors than eager's
    ops, which hooks would pack (and the ``eager`` backend's captured checkpoint too). ``torch.device(...)`` as a
    context (``torch.set_default_device``) is a function mode of torch's that only fills in a factory call's
    device, which the trace follows: it is not counted.
    """
    if _top_saved_tensors_hooks(False) is not None:
        return "saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks) are active"
    if _dispatch_modes():
        return f"a TorchDispatchMode ({', '.join(active_dispatch_modes())}) is active"
    if _function_modes():
        from torch.overrides import _get_current_function_mode_stack
        from torch.utils._device import DeviceContext

        modes = [type(m).__name__ for m in _get_current_function_mode_stack() if not isinstance(m, DeviceContext)]
        if modes:
            return f"a TorchFunctionMode ({', '.join(modes)}) is active"
    return None


def default_device_context() -> Any:
    """The device the innermost ``torch.device(...)`` context (``torch.set_default_device``) gives a factory call
    that names none, or ``None`` outside one. The trace follows it (its fake factory calls see it): a GLOBAL guard
    pins it."""
    if not _function_modes():
        return None
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._device import DeviceContext

    for mode in reversed(_get_current_function_mode_stack()):
        if isinstance(mode, DeviceContext):
            return mode.device
    return None


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


def makes_one_autograd_node(backend: Any) -> bool:
    """Whether ``backend`` (from :func:`resolve_backend`) is a torch.compile backend that runs a whole graph as one
    autograd node: ``"inductor"``, a registered one other than ``"eager"`` (``aot_eager``: AOTAutograd), or one
    built with ``torch._dynamo.backends.common.aot_autograd``. A callable of the user's is taken as it comes (it
    may look at the graphs it gets: they are not cut for it)."""
    name = getattr(backend, "compiler_name", None)
    if name == "inductor":
        return True
    fn = getattr(backend, "compiler_fn", backend)
    try:
        from torch._dynamo.backends.common import AotAutograd
        from torch._dynamo.backends.registry import lookup_backend
    except ImportError:
        return False
    if isinstance(fn, AotAutograd):
        return True
    if not isinstance(name, str) or name == "eager":
        return False
    try:
        return lookup_backend(name) is fn
    except Exception:  # not a registered name (a user's function)
        return False


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


def nonrecursive_disabled(fn: Any) -> Any:
    """The function a ``torch.compiler.disable(f, recursive=False)`` (or ``torch._dynamo.disable``) wrapper stands
    for (``f``), ``None`` for anything else: such a wrapper carries ``_torchdynamo_disable_recursive = False``."""
    try:
        if getattr(fn, "_torchdynamo_disable", False) is True and \
                getattr(fn, "_torchdynamo_disable_recursive", True) is False:
            return getattr(fn, "_torchdynamo_orig_callable", None)
    except Exception:  # an object whose __getattr__ raises something else
        return None
    return None


def torch_internal_disable(fn: Any) -> bool:
    """Whether ``fn`` is a wrapper torch's own ``torch._compile._disable_dynamo`` made (``Optimizer.zero_grad``,
    ``Module._apply``...): torch.compile traces its frame and meets the disabled call inside, a silent graph break
    that runs the function for real. All such wrappers share one code object."""
    return getattr(fn, "__code__", None) is _DISABLE_DYNAMO_CODE


_DISABLE_DYNAMO_CODE = importlib.import_module("torch._compile")._disable_dynamo(lambda: None).__code__


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


#: The hooks of the ``warnings`` module that count a change of its filters (3.11 to 3.13).
_FILTER_MUTATION_HOOKS = ("_filters_mutated", "_filters_mutated_lock_held")


def _filters_not_mutated() -> None:
    """Stands in for ``warnings._filters_mutated`` while stillframe traces and compiles (see
    :func:`warning_registries_kept`)."""


@contextlib.contextmanager
def warning_registries_kept() -> Iterator[None]:
    """Keep the ``warnings`` filters' version as the block found it. Each ``catch_warnings`` or ``simplefilter``
    bumps that version, and the next warning anywhere then forgets every ``__warningregistry__`` and the "once"
    registry: AOTAutograd enters ``catch_warnings`` at each compile (as stillframe's own dtype checks do), so a
    warning that eager gives once per location ("default", "once") came again after a graph break that compiled a
    graph. The filters themselves are restored by each such block on its exit; only the count is not moved. (Not
    thread-safe against another thread changing filters meanwhile: its change would not count either.)"""
    import warnings

    saved = {name: warnings.__dict__[name] for name in _FILTER_MUTATION_HOOKS if name in warnings.__dict__}
    for name in saved:
        setattr(warnings, name, _filters_not_mutated)
    try:
        yield
    finally:
        for name, hook in saved.items():
            setattr(warnings, name, hook)


@contextlib.contextmanager
def global_state_kept() -> Iterator[None]:
    """Leave the process's global torch state as it was found, however the block ends: torch.fx's global
    tracing flag (a backend's FX trace interrupted by an exception, or raced by another thread, leaves it
    set, and every later ``torch.compile`` call raises), grad mode, the default dtype and CPU autocast; and the
    version of the ``warnings`` filters (:func:`warning_registries_kept`)."""
    saved = (fx_tracing_flag(), torch.is_grad_enabled(), torch.get_default_dtype(),
             torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
    try:
        with warning_registries_kept():
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


def lacks_derivative(value: Any) -> bool:
    """Whether tensor ``value`` (an op's result) requires grad through a node whose backward torch does not
    implement (``x // 3``: aten::floor_divide's grad_fn is a ``NotImplemented`` node), which raises only when a
    backward reaches it: AOTAutograd, tracing the backward when it compiles the graph, raises at once. A view is
    not asked (reading its grad_fn may make one, or raise: a view made under no_grad whose base was written since,
    fuzz 57:21); such ops make new tensors."""
    if not isinstance(value, torch.Tensor) or value._is_view():
        return False
    grad_fn = value.grad_fn
    return grad_fn is not None and type(grad_fn).__name__ == "NotImplemented"


def backend_compiler_failed(backend: Any, error: Exception) -> Exception:
    """torch.compile's error for a backend that raised ``error`` (or returned no callable):
    ``torch._dynamo.exc.BackendCompilerFailed`` (a ``RuntimeError``), whose message names the backend as
    torch.compile's does (``backend='my_backend' raised:\nRuntimeError: boom``) and whose
    ``inner_exception`` is ``error``."""
    exc = importlib.import_module("torch._dynamo.exc")
    name = getattr(backend, "compiler_name", None) or getattr(backend, "__name__", None) or "?"
    return exc.BackendCompilerFailed(types.SimpleNamespace(__name__=name), error, None)


def random_ops_kept() -> Any:
    """While a backend compiles a graph: its random ops draw as eager's do, and none is dropped. Where a
    ``TracingContext`` is active (a symbolic trace: AOTAutograd), torch.fx's ``Graph.eliminate_dead_code`` takes
    a random op whose result is unused for dead unless ``torch._inductor.config.fallback_random`` is set, and
    drops its draw (the generator then gives every later draw other numbers than eager's); the same flag makes
    inductor call eager's random kernels, not its own generator (other numbers again)."""
    return importlib.import_module("torch._inductor.config").patch(fallback_random=True)


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


#: torch's NumPy on tensors (``torch._numpy``), through which NumPy code is captured; ``None`` without NumPy.
try:
    import numpy as _numpy_module  # noqa: F401  (torch._numpy needs it)
    import torch._numpy as torch_numpy
except ImportError:  # pragma: no cover
    torch_numpy = None
