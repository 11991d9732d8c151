"""Private torch APIs of ``torch.optim`` and of tracing an optimizer's update to ATen (``make_fx``) for
``stillframe.compile(opt.step)`` (rules/optimizers.py, runtime/optimizer_step.py). Re-exported by
:mod:`stillframe.compat`."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import importlib
from typing import Any, Callable, Iterator

import torch
from torch._guards import TracingContext, tracing
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

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


def guarded_symbols(mode: FakeTensorMode) -> set[str]:
    """The names of the symbols (``zf0``) the guards of ``mode``'s ShapeEnv read (a branch on a SymFloat's value:
    ``if weight_decay != 0``)."""
    return {str(s) for guard in mode.shape_env.guards for s in guard.expr.free_symbols}


def guard_function(mode: FakeTensorMode, names: list[str]) -> tuple[Callable | None, list[str]]:
    """The guards of ``mode``'s ShapeEnv as one Python function of the values of the symbols ``names``
    (``zf0``, ...: True where every guard holds, as TorchDynamo checks its float guards), and their text; ``None``
    for the function where a guard reads another symbol or cannot be made a function."""
    import sympy

    exprs = [guard.expr for guard in mode.shape_env.guards]
    symbols = {str(s): s for expr in exprs for s in expr.free_symbols}
    if not set(symbols) <= set(names):
        return None, []
    try:
        check = sympy.lambdify([symbols.get(name, sympy.Dummy()) for name in names], sympy.And(*exprs), "math")
        return check, [str(expr) for expr in exprs]
    except Exception:  # a function of torch's sympy with no Python form
        return None, []


def symbol_name(sym: Any) -> str:
    """The name of the symbol a SymFloat of ``symbolic_float`` stands for (``zf0``)."""
    return str(sym.node.expr)


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
