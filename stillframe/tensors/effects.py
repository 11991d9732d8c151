"""The effect policy of torch calls: which may be folded at trace time, which must run for real.

A torch function or ``Tensor`` method is propagated on fake tensors
(:func:`stillframe.tensors.ops.call_tensor_op`). A fake tensor's result is
evidence of shapes, not of effects (DESIGN invariant 9): ``loss.backward()``
on a fake tensor returns ``None`` and does nothing, on a real one it fills
``.grad``. So a call whose result holds no tensor, and that wrote to no tensor
argument, enters the trace only when this module says so:

* :data:`PURE_QUERIES` lists the calls that only read metadata the trace has
  and guards (shape, stride, storage offset, dtype, device, the traced grad
  and autocast modes), or that compute on Python values alone. Their fake
  result is folded into a constant.
* Anything else breaks the graph: the graph so far runs, the call runs for
  real, and tracing resumes after it. :data:`EFFECTS` names the calls known to
  act outside the tensors they are given (autograd, hooks), so they break
  before running on fakes and with a message saying why.
* :data:`TORCH_DENY` lists torch functions that must never be traced, whatever
  they return (global RNG and default-dtype state, files, the compiler).

Calls whose result holds tensors keep their rules in :mod:`stillframe.tensors.ops`
(in-place writes from :func:`~stillframe.tensors.ops.mutated_arguments`); calls
that read tensor *values* into Python (``item``, ``tolist``, ``numpy``) break
there as data-dependent, before any fake runs.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import inspect
import operator
from typing import Any, Callable

import torch
import torch.backends.mha

from .. import compat


# Calls whose non-tensor result may be folded into a constant at trace time. A method is keyed by its name
# (``kind == "call_method"``), a function by itself (``kind == "call_function"``); the value says what the
# result depends on, and why the trace may rely on it (what guards it).
PURE_QUERIES: dict[Any, str] = {
    # Tensor methods: shape, strides, storage offset, dtype and device are in every tensor's TENSOR guard and
    # in its TensorMeta; a fake tensor answers them exactly as the real one would.
    "size": "the shape",
    "dim": "the number of dimensions",
    "ndimension": "the number of dimensions",
    "__len__": "the first dimension",
    "numel": "the shape",
    "nelement": "the shape",
    "stride": "the strides",
    "storage_offset": "the storage offset",
    "is_contiguous": "the shape and strides",
    "dim_order": "the strides",
    "is_same_size": "the shapes of both tensors",
    "is_floating_point": "the dtype",
    "is_complex": "the dtype",
    "is_signed": "the dtype",
    "element_size": "the dtype",
    "get_device": "the device",
    "type": "the dtype and device (type() with no argument; with one it returns a tensor)",
    "is_inference": "whether it is an inference tensor: in every tensor's TENSOR guard, and a fake made in the "
                    "trace is made under the traced inference mode",
    # torch functions on the same metadata, or on dtypes and Python values only.
    torch.numel: "the shape",
    torch.is_floating_point: "the dtype",

    torch.is_complex: "the dtype",
    torch.is_same_size: "the shapes",
    torch.result_type: "dtypes and whether each operand is a 0-d tensor or a Python scalar",
    torch.promote_types: "two dtypes",
    torch.can_cast: "two dtypes",
    torch.broadcast_shapes: "Python shapes",
    torch.overrides.has_torch_function: "the types of its arguments (tensor subclasses never enter a trace)",
    torch.is_autocast_enabled: "the autocast state the ops propagate under (CPU autocast is guarded at entry "
                               "and modelled by the trace)",
    torch.backends.mha.get_fastpath_enabled: "a process-wide flag that selects between two equivalent kernels",
    torch.cuda.is_available: "whether this process can use CUDA: fixed once torch has looked",
    torch.is_autocast_cpu_enabled: "the CPU autocast state (guarded at entry and modelled by the trace)",
    torch.overrides.is_tensor_like: "the type of its argument",
    torch.distributed.is_available: "whether torch was built with distributed support: fixed for the process",
}
PURE_QUERIES.update(compat.pure_private_helpers)
# ``_pair(3)`` and the other functions torch.nn.modules.utils._ntuple(n) makes: keyed by their shared code.
PURE_CODES: dict[Any, str] = {compat.ntuple_code: "Python values: a tuple of n of them"} if compat.ntuple_code else {}
# torch._check(cond), torch._check_is_size(n): a condition on Python values or symbolic sizes; the ShapeEnv guards
# what it tests, and a false one raises as in eager
PURE_QUERIES.update({fn: "its condition (a Python or symbolic value, guarded by the ShapeEnv)"
                     for fn in compat.size_checks})
# Python helpers of torch.nn (MultiheadAttention, TransformerEncoderLayer) run on fakes as one call: each returns
# a tensor (a mask), or None for a None mask, or a dtype, device check or requires_grad of its argument.
PURE_QUERIES.update({fn: f"{name}: metadata of its argument, or None for None"
                     for name, fn in compat.nn_metadata_helpers.items()})



def _cuda_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype("cuda")


# Calls (with constant arguments, if any) that only read process-wide state which can change between calls (an
# export in progress, a process group made, an autocast dtype set): folded like a pure query, and the plan is
# guarded on the value, read again by the checker given here (a non-deprecated spelling of the same read).
GUARDED_QUERIES: dict[Any, Any] = {
    torch.onnx.is_in_onnx_export: torch.onnx.is_in_onnx_export,
    torch.get_autocast_gpu_dtype: _cuda_autocast_dtype,
    torch.get_autocast_dtype: torch.get_autocast_dtype,
    torch.is_autocast_enabled: torch.is_autocast_enabled,
}
# Of those, the ones reading autocast state: inside an autocast region the trace entered, the answer is the
# region's, not the state the guard sees at entry, so there they are not guarded (only a pure query folds).
AUTOCAST_QUERIES = {torch.get_autocast_gpu_dtype, torch.get_autocast_dtype, torch.is_autocast_enabled}
if torch.distributed.is_available():
    GUARDED_QUERIES[torch.distributed.is_initialized] = torch.distributed.is_initialized


# Calls known to act beyond their arguments' fake tensors: they break the graph before running on fakes,
# with this explanation. (Any other call with no rule breaks too, after its fake result shows no tensor.)
EFFECTS: dict[Any, str] = {
    "backward": "Tensor.backward() runs autograd: its effect (gradients accumulated into .grad) is not visible "
                "on a fake tensor",
    torch.Tensor.backward: "Tensor.backward() runs autograd: its effect (gradients accumulated into .grad) is "
                           "not visible on a fake tensor",
    torch.autograd.backward: "torch.autograd.backward() runs autograd: its effect (gradients accumulated into "
                             ".grad) is not visible on a fake tensor",
    "retain_grad": "Tensor.retain_grad() tells autograd to keep this tensor's gradient: not visible on a fake "
                   "tensor",
    torch.Tensor.retain_grad: "Tensor.retain_grad() tells autograd to keep this tensor's gradient: not visible "
                              "on a fake tensor",
    "data_ptr": "Tensor.data_ptr() is the address of the real tensor's memory: a fake tensor has none",
    "register_hook": "Tensor.register_hook() installs a gradient hook on the real tensor",
    torch.Tensor.register_hook: "Tensor.register_hook() installs a gradient hook on the real tensor",
    "register_post_accumulate_grad_hook": "Tensor.register_post_accumulate_grad_hook() installs a hook on the "
                                          "real tensor",
}
# Quantizing makes a tensor of a quantized dtype, which fake tensors cannot stand for (FakeTensorMode gives a
# float32 fake, on which .dequantize() is a no-op and the graph returned the quantized tensor: found by a probe).
for _name in ("quantize_per_tensor", "quantize_per_channel", "quantize_per_tensor_dynamic"):
    _fn = getattr(torch, _name, None)
    if _fn is not None:
        EFFECTS[_fn] = f"torch.{_name}() makes a quantized tensor, which no fake tensor stands for"
# Gradient clipping reads and rescales the parameters' .grad, which their fake tensors do not carry (on fakes
# it sees no gradient, returns a norm of 0 and clips nothing).
for _name in ("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_"):
    _fn = getattr(torch.nn.utils, _name, None)
    if _fn is not None:
        EFFECTS[_fn] = f"torch.nn.utils.{_name}() reads and writes the parameters' .grad, which fake tensors do " \
                       "not carry"


# Ops an AOTAutograd backend gets wrong (on torch 2.11 to 2.14), each with when and why: ``when(constants,
# requires_grad)`` flags the calls it gets wrong from their positional arguments (each the Python value of a
# constant of the trace, or ``NOT_CONSTANT``) and whether each tensor argument requires grad (in order). On those
# backends a flagged call breaks the graph and runs for real (:func:`aot_refusal`). torch.compile never traces
# torch.nn's RNN modules (Dynamo skips them).
AOT_REFUSED: dict[Any, tuple[Callable[[tuple, list], bool], str]] = {}

#: :func:`aot_refusal`'s stand-in for an argument that is not a constant of the trace.
NOT_CONSTANT = object()


def _always(constants: tuple, requires_grad: list) -> bool:
    return True


def _lstm_input_without_grad(constants: tuple, requires_grad: list) -> bool:
    """Whether a ``torch.lstm`` call's input requires no grad: where its weights do, AOTAutograd then saves an
    undefined tensor of the CPU kernel for backward, and the compiled forward fails (measured with
    ``aot_function(nop)`` on torch 2.13: 1 and 2 layers, with or without ``h0`` requiring grad). The weights come in
    a list, whose tensors ``requires_grad`` does not list: the call is refused whatever they are."""
    return bool(requires_grad) and not requires_grad[0]


def _drops_rnn_dropout(constants: tuple, requires_grad: list) -> bool:
    """Whether a ``torch.gru`` / ``torch.rnn_tanh`` / ``torch.rnn_relu`` call applies dropout between layers, which
    torch's decomposition of these ops leaves out (its test ``num_layers < i - 1`` is never true), or may.

    The positional forms: ``(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)``
    and, for a packed sequence, ``(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
    bidirectional)``. An argument that is not a constant (``NOT_CONSTANT``) counts as one that may apply dropout."""
    if len(constants) != 9:
        return True
    at = 5 if isinstance(constants[3], bool) else 6  # has_biases, a bool, comes before params in the packed form
    num_layers, dropout, train = constants[at - 1:at + 2]
    return not (train is False or num_layers == 1 or (isinstance(dropout, (int, float)) and dropout == 0))


AOT_REFUSED[torch.lstm] = (_lstm_input_without_grad, "torch.lstm (nn.LSTM) on an input that requires no grad: "
                           "AOTAutograd saves an undefined tensor of its CPU kernel for backward, and the compiled "
                           "forward then fails ('expected all tensors_saved_with_vc_check to be Tensors')")
for _fn in (torch.gru, torch.rnn_tanh, torch.rnn_relu):
    AOT_REFUSED[_fn] = (_drops_rnn_dropout, f"torch.{_fn.__name__} with dropout in training: AOTAutograd decomposes "
                        "it into ops that never apply the dropout between layers that eager applies")
# multilabel_margin_loss: AOTAutograd runs torch's Python decomposition of aten.multilabel_margin_loss_forward, which
# counts the labels after a target row's first -1 terminator that eager ignores (wrong loss and gradient whenever a
# row ends early; torch.compile(backend="aot_eager") gives the same wrong value).
for _fn in (torch.nn.functional.multilabel_margin_loss, compat.nn_multilabel_margin_loss):
    AOT_REFUSED[_fn] = (_always, "multilabel_margin_loss: AOTAutograd decomposes it into ops that count the labels "
                        "after a target row's -1 terminator, which eager ignores")


def aot_refusal(target: Any, describe_call: Callable[[], tuple[tuple, list, bool]]) -> str | None:
    """Why a call of ``target`` breaks the graph on an AOTAutograd backend (:data:`AOT_REFUSED`), or None.

    ``describe_call()``, asked only of a target with an entry, gives the call's positional arguments (each the Python
    value of a constant or ``NOT_CONSTANT``), whether each tensor argument requires grad (in order), and whether it
    passes keyword arguments: such a call is refused whenever the target has an entry (the tests read positions)."""
    try:
        rule = AOT_REFUSED.get(target)
    except TypeError:  # an unhashable target
        return None
    if rule is None:
        return None
    when, why = rule
    constants, requires_grad, has_kwargs = describe_call()
    return why if has_kwargs or when(constants, requires_grad) else None


# torch functions never traced, whatever they return: they read or write process-wide state (the RNG, the
# default dtype, determinism), files, or the compiler. A call breaks the graph and runs for real.
TORCH_DENY = {torch.manual_seed, torch.seed, torch.save, torch.load, torch.compile,
              torch.set_default_dtype, torch.use_deterministic_algorithms,
              torch.get_rng_state, torch.set_rng_state, torch.initial_seed,
              torch.utils.swap_tensors, torch.nn.utils.vector_to_parameters,  # write Python objects, .data
              compat.increment_version}

# torch modules whose functions read or write process-wide state (the RNG and its per-device copies, device and
# backend flags, files, other processes): none of their functions is run on fakes, whatever it returns. A fake
# run is a real run of their Python: ``torch.random.manual_seed`` reseeds the real generator at trace time, before
# the random ops traced ahead of it have run in the graph.
STATEFUL_TORCH_MODULES = (
    "torch.random", "torch.cuda", "torch.mps", "torch.xpu", "torch.mtia", "torch.backends",  # RNG, devices, flags
    "torch.serialization", "torch.hub", "torch.distributed", "torch.multiprocessing",  # files, other processes
    "torch.utils.data", "torch.profiler", "torch.autograd.profiler", "torch.testing",
    "torch.library", "torch.jit", "torch.export", "torch.compiler", "torch.onnx",  # registries and compilers
    "torch.utils.backend_registration", "torch.utils.cpp_backtrace", "torch._utils_internal", "torch.overrides",
    "torch.autograd.graph", "torch.autograd.gradcheck", "torch.autograd.forward_ad", "torch.utils.hooks",
    "torch.nn.utils.weight_norm", "torch.nn.utils.spectral_norm", "torch.nn.utils.parametrize",  # edit modules
    "torch.nn.utils.prune")
# Names of torch functions that set or reseed process-wide state (``torch.set_num_threads``,
# ``torch.set_printoptions``, ``torch._C._set_deterministic_algorithms``, ``torch.cuda.manual_seed_all``).
STATE_SETTER_PREFIXES = ("set_", "_set_", "manual_seed", "seed", "use_deterministic", "_use_deterministic")


def never_traced(target: Any) -> str | None:
    """Why a torch callable must break the graph before it runs, even on fakes, or ``None``.

    Covers :data:`TORCH_DENY`, :data:`STATEFUL_TORCH_MODULES` and :data:`STATE_SETTER_PREFIXES`, through
    ``functools.wraps`` wrappers: importing ``torch._dynamo`` replaces ``torch.manual_seed`` with a wrapper
    (``torch._disable_dynamo``) that is not the function this table holds. Pure queries
    (:data:`PURE_QUERIES`, such as ``torch.cuda.is_available``) and guarded queries (:data:`GUARDED_QUERIES`, such
    as ``torch.distributed.is_initialized``) are not covered.
    """
    fn, seen = target, 0
    while fn is not None and seen < 8:
        key = hashable_key(fn)
        if key is not None and (key in PURE_QUERIES or key in GUARDED_QUERIES):
            return None
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or ""
        if key is not None and key in TORCH_DENY:
            return f"{name} reads or writes process-wide torch state (the RNG, the default dtype, files)"
        module = getattr(fn, "__module__", None)
        module = module if isinstance(module, str) else ""
        if module == "torch" or module.startswith("torch."):
            if any(module == m or module.startswith(m + ".") for m in STATEFUL_TORCH_MODULES):
                return f"{name} ({module}) reads or writes process-wide state (the RNG, devices, backends, files)"
            if isinstance(name, str) and name.rpartition(".")[2].startswith(STATE_SETTER_PREFIXES):
                return f"{name} sets process-wide torch state"
        fn, seen = getattr(fn, "__wrapped__", None), seen + 1
    return None


# torch packages whose Python code keeps state in Python objects: optimizers and learning-rate schedulers
# (``state[p]``, ``param_groups``, step counts, lazily created on the first step). No call into them is run
# on fake tensors as one op (that runs the step's Python for real at trace time: ``Adam.step`` on fakes
# writes a fake ``state["step"]`` into the real optimizer) or traced through (its reads of ``.grad`` and
# its state break the graph at every parameter): ``opt.step()``, ``sched.step()`` break the graph and run for
# real, whole (``opt.zero_grad()`` is traced: TRACED_IN_RUNS_FOR_REAL). ``opt.step`` of SGD, Adam and AdamW is
# captured by its own rule instead (``rules/optimizers.py``): compiled directly, and as the real step a compiled
# training step takes.
# ``torch.utils.hooks``: a hook's ``RemovableHandle.remove()`` deletes it from the hooks dict through a weakref,
# keyed by a handle id that grows on every registration (traced through, each call's new id made a new plan).
RUNS_FOR_REAL_PACKAGES = ("torch.optim", "torch.utils.hooks")

# The calls into RUNS_FOR_REAL_PACKAGES traced all the same, as torch.compile traces them: ``Optimizer.zero_grad``
# keeps no state of its own; it reads each parameter's ``.grad`` and sets it to None or zeroes it, which the trace
# models (a ``.grad`` write is a side effect replayed after the graph: ``rules/tensor_attrs.py``). Its body: the
# function the class holds is torch's ``_disable_dynamo`` wrapper, which ``rules/optimizers.py`` (TRACED_METHODS)
# replaces by the body where the trace calls it, and which otherwise runs for real.
TRACED_IN_RUNS_FOR_REAL = frozenset({inspect.unwrap(torch.optim.Optimizer.zero_grad)})

# Functions that register process-wide module hooks (``nn.modules.module``'s global dicts, which every module call
# reads): traced through, the registration was a pending write the trace's module calls did not see.
RUNS_FOR_REAL_FUNCTIONS = frozenset(
    getattr(torch.nn.modules.module, name) for name in (
        "register_module_forward_hook", "register_module_forward_pre_hook", "register_module_backward_hook",
        "register_module_full_backward_hook", "register_module_full_backward_pre_hook",
        "register_module_buffer_registration_hook", "register_module_module_registration_hook",
        "register_module_parameter_registration_hook") if hasattr(torch.nn.modules.module, name))


# Ops whose success depends on tensor *values*: an integer index out of range raises only when the graph runs
# (a fake tensor cannot tell), after the trace has moved past the user's ``try``; inside a try whose except may
# catch it (Tracer.raise_observer) such a call runs for real. Keyed as PURE_QUERIES (methods by name).
# F.embedding is left out: models look up embeddings everywhere, and its indices come from the data loader.
RAISES_ON_VALUES: set = {operator.getitem, operator.setitem, torch.index_select, torch.gather, torch.take,
                         torch.scatter, torch.scatter_add, torch.index_add, torch.index_copy, torch.index_fill,
                         "__getitem__", "__setitem__", "index_select", "gather", "take", "put_", "put",
                         "index_put_", "index_put", "index_add_", "index_add", "index_copy_", "index_copy",
                         "index_fill_", "index_fill", "scatter_", "scatter", "scatter_add_", "scatter_add"}


# Integer division: ``xi // 0``, ``xi % z``, ``torch.div(xi, z, rounding_mode="floor")`` raise "ZeroDivisionError"
# where a divisor is 0 and both operands are integers (floats give inf or nan); the fake kernels never raise.
# Keyed as RAISES_ON_VALUES; the value is the position of the divisor among the arguments.
INTEGER_DIVISIONS: dict = {
    operator.floordiv: 1, operator.mod: 1, operator.ifloordiv: 1, operator.imod: 1, torch.floor_divide: 1,
    torch.remainder: 1, torch.fmod: 1, torch.div: 1, torch.divide: 1,
    "__floordiv__": 1, "__mod__": 1, "__ifloordiv__": 1, "__imod__": 1, "__rfloordiv__": 0, "__rmod__": 0,
    "floor_divide": 1, "floor_divide_": 1, "remainder": 1, "remainder_": 1, "fmod": 1, "fmod_": 1, "div": 1,
    "div_": 1, "divide": 1, "divide_": 1}
_NEEDS_ROUNDING_MODE = {torch.div, torch.divide, "div", "div_", "divide", "divide_"}  # else true division


def raises_on_values(kind: str, target: Any, fake_args: tuple, fake_kwargs: dict) -> bool:
    """Whether a call may raise depending on tensor values the fakes do not have: ``target`` (listed in
    :data:`RAISES_ON_VALUES`) called with an integer index tensor (the first argument, the tensor indexed, is not
    an index), or an integer division (:data:`INTEGER_DIVISIONS`) whose divisor is not a nonzero constant."""
    key = hashable_key(target)
    if key is None or (kind == "call_method") != isinstance(key, str):
        return False
    if key in RAISES_ON_VALUES:
        return any(_integer_tensor(a) for a in (*fake_args[1:], *fake_kwargs.values()))
    if key in INTEGER_DIVISIONS:
        return _integer_division(key, fake_args, fake_kwargs)
    return False


def _integer_division(key: Any, fake_args: tuple, fake_kwargs: dict) -> bool:
    if key in _NEEDS_ROUNDING_MODE and fake_kwargs.get("rounding_mode") is None:
        return False
    if len(fake_args) < 2:
        return False
    divisor = fake_args[INTEGER_DIVISIONS[key]]
    if not isinstance(divisor, torch.Tensor) and divisor != 0:  # a nonzero Python number (a constant)
        return False
    try:
        dtype = torch.result_type(fake_args[0], fake_args[1])
    except (TypeError, RuntimeError):
        return False
    return not dtype.is_floating_point and not dtype.is_complex


def _integer_tensor(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_integer_tensor(v) for v in value)
    return isinstance(value, torch.Tensor) and not value.dtype.is_floating_point and \
        not value.dtype.is_complex and value.dtype is not torch.bool


# Module methods that convert every parameter and buffer (``nn.Module._apply``: ``param.data = fn(param)``, or a
# new Parameter, and the ``.grad`` of each, per ``torch.__future__`` flags): traced, the writes to ``.data`` and
# the module's registries are effects no graph carries (torch.compile does not capture them cleanly either).
MODULE_CONVERSIONS = frozenset(
    getattr(torch.nn.Module, name) for name in (
        "_apply", "to", "to_empty", "type", "float", "double", "half", "bfloat16", "cpu", "cuda", "xpu", "ipu",
        "mtia", "share_memory") if hasattr(torch.nn.Module, name))


def runs_for_real(target: Any) -> str | None:
    """Why a call of ``target`` (any callable) must break the graph and run for real, or ``None``."""
    if hashable_key(target) in RUNS_FOR_REAL_FUNCTIONS:
        return f"{target.__name__} registers a hook every module call reads: it runs for real"
    if hashable_key(target) in MODULE_CONVERSIONS:
        return f"Module.{target.__name__} converts the module's parameters and buffers in place: it runs for real"
    module = getattr(target, "__module__", None)
    if not isinstance(module, str) or hashable_key(target) in TRACED_IN_RUNS_FOR_REAL:
        return None
    for package in RUNS_FOR_REAL_PACKAGES:
        if module == package or module.startswith(package + "."):
            name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
            return (f"{name} ({module}) keeps its state in Python objects: it runs for real, never on fake "
                    "tensors")
    return None


def hashable_key(target: Any) -> Any:
    """``target`` itself when it can key a table (is hashable), else ``None``."""
    try:
        hash(target)
    except TypeError:
        return None
    return target


def is_pure_query(kind: str, target: Any) -> bool:
    """Whether ``target``'s result, when it holds no tensor and nothing was written, may become a constant."""
    key = hashable_key(target)
    if key is not None and (kind == "call_method") == isinstance(key, str) and key in PURE_QUERIES:
        return True
    return kind == "call_function" and getattr(target, "__code__", None) in PURE_CODES


def query_checker(kind: str, target: Any, in_autocast_region: bool) -> Any:
    """For a call in :data:`GUARDED_QUERIES`, the function its plan's guard calls again; else ``None``."""
    key = hashable_key(target)
    if kind != "call_function" or key is None or (in_autocast_region and key in AUTOCAST_QUERIES):
        return None
    return GUARDED_QUERIES.get(key)


def known_effect(kind: str, target: Any) -> str | None:
    """Why ``target`` must run for real (its effect is invisible on fakes), or ``None`` if it is not known to."""
    key = hashable_key(target)
    if key is None or (kind == "call_method") != isinstance(key, str):
        return None
    return EFFECTS.get(key)


def no_rule(describe: str, result: Any) -> str:
    """The explanation of a break at a call that has no rule and returned no tensor."""
    return (f"{describe} returned a {type(result).__name__}, and no rule says it only reads tensor metadata: "
            "an effect of it (if any) would not be visible on a fake tensor")
