"""The one place stillframe touches private torch APIs (so a torch upgrade is fixed here alone).

Used: ``FakeTensorMode`` (``torch._subclasses``), the backend registry behind
torch.compile's ``backend=`` argument (``torch._TorchCompileWrapper``,
``torch._TorchCompileInductorWrapper``), ``torch._dynamo.reset``, TorchDynamo's C++ tensor check
(``torch._C._dynamo.guards.TensorGuards``, optional: see :func:`tensor_guards`), the raw grad-mode
switch a graph records (``torch._C._set_grad_enabled``), the C++ base of ``torch.Tensor``, fake
tensors' data-dependence errors, ``torch._utils.is_compiling``, ``torch._ops.HigherOrderOperator`` and
``torch._higher_order_ops.while_loop``. A test
(``tests/architecture/test_layers.py``) checks no other module names a private torch API.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode

#: ``torch.set_grad_enabled`` without the context-manager object: what graphs record and plans call.
set_grad_enabled: Callable[[bool], None] = torch._C._set_grad_enabled
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


def new_fake_mode() -> FakeTensorMode:
    """A fake-tensor mode with static shapes (one per trace)."""
    return FakeTensorMode(allow_non_fake_inputs=False)


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


def tensor_guards(examples: list) -> Any:
    """torch's C++ tensor check (TorchDynamo's ``TensorGuards``) for tensors like ``examples``, or ``None``.

    ``check(*tensors)`` is True when each tensor has its example's Python type, dispatch keys, dtype,
    device, ``requires_grad``, sizes and strides (every size static). It keeps no reference to the examples.
    ``None`` when this torch has no such class, its signature differs, or a tensor is not strided: the
    caller then checks those tensors in Python.
    """
    if not examples or any(t.layout != torch.strided for t in examples):
        return None
    try:
        from torch._C._dynamo.guards import TensorGuards

        guards = TensorGuards(*examples, dynamic_dims_sizes=[list(t.shape) for t in examples],
                              dynamic_dims_strides=[list(t.stride()) for t in examples])
        return guards if guards.check(*examples) else None
    except Exception:  # an API change: fall back to the Python checks
        return None
