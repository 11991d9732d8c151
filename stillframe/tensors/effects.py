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

from typing import Any

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
# Gradient clipping reads and rescales the parameters' .grad, which their fake tensors do not carry (on fakes
# it sees no gradient, returns a norm of 0 and clips nothing).
for _name in ("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_"):
    _fn = getattr(torch.nn.utils, _name, None)
    if _fn is not None:
        EFFECTS[_fn] = f"torch.nn.utils.{_name}() reads and writes the parameters' .grad, which fake tensors do " \
                       "not carry"


# torch functions never traced, whatever they return: they read or write process-wide state (the RNG, the
# default dtype, determinism), files, or the compiler. A call breaks the graph and runs for real.
TORCH_DENY = {torch.manual_seed, torch.seed, torch.save, torch.load, torch.compile,
              torch.set_default_dtype, torch.use_deterministic_algorithms,
              torch.get_rng_state, torch.set_rng_state, torch.initial_seed}


# torch packages whose Python code keeps state in Python objects: optimizers and learning-rate schedulers
# (``state[p]``, ``param_groups``, step counts, lazily created on the first step). No call into them is run
# on fake tensors as one op (that runs the step's Python for real at trace time: ``Adam.step`` on fakes
# writes a fake ``state["step"]`` into the real optimizer) or traced through (its reads of ``.grad`` and
# its state break the graph at every parameter): ``opt.step()``, ``opt.zero_grad()``, ``sched.step()``
# break the graph and run for real, whole.
RUNS_FOR_REAL_PACKAGES = ("torch.optim",)


def runs_for_real(target: Any) -> str | None:
    """Why a call of ``target`` (any callable) must break the graph and run for real, or ``None``."""
    module = getattr(target, "__module__", None)
    if not isinstance(module, str):
        return None
    for package in RUNS_FOR_REAL_PACKAGES:
        if module == package or module.startswith(package + "."):
            name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
            return (f"{name} ({module}) keeps its state in Python objects: it runs for real, never on fake "
                    "tensors")
    return None


def _key(target: Any) -> Any:
    try:
        hash(target)
    except TypeError:
        return None
    return target


def is_pure_query(kind: str, target: Any) -> bool:
    """Whether ``target``'s result, when it holds no tensor and nothing was written, may become a constant."""
    key = _key(target)
    if key is not None and (kind == "call_method") == isinstance(key, str) and key in PURE_QUERIES:
        return True
    return kind == "call_function" and getattr(target, "__code__", None) in PURE_CODES


def query_checker(kind: str, target: Any, in_autocast_region: bool) -> Any:
    """For a call in :data:`GUARDED_QUERIES`, the function its plan's guard calls again; else ``None``."""
    key = _key(target)
    if kind != "call_function" or key is None or (in_autocast_region and key in AUTOCAST_QUERIES):
        return None
    return GUARDED_QUERIES.get(key)


def known_effect(kind: str, target: Any) -> str | None:
    """Why ``target`` must run for real (its effect is invisible on fakes), or ``None`` if it is not known to."""
    key = _key(target)
    if key is None or (kind == "call_method") != isinstance(key, str):
        return None
    return EFFECTS.get(key)


def no_rule(describe: str, result: Any) -> str:
    """The explanation of a break at a call that has no rule and returned no tensor."""
    return (f"{describe} returned a {type(result).__name__}, and no rule says it only reads tensor metadata: "
            "an effect of it (if any) would not be visible on a fake tensor")
