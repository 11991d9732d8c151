"""The optimizer steps stillframe captures whole: a table keyed by ``torch.optim`` class.

``stillframe.compile(opt.step)`` for an optimizer of a class listed in
:data:`OPTIMIZER_RULES` captures the parameter update in one graph, as
torch.compile does for the same classes (``torch/_dynamo/variables/optimizer.py``):
torch.optim's own lazy state initialisation (``_init_group``) runs for real on
every call, exactly as in eager; the parameters, grads and state tensors it
collects are the graph's inputs; and the update is torch's own functional
(``torch.optim.adam.adam``, ``torch.optim.sgd.sgd``) traced on fake tensors.

Each :class:`OptimizerRule` says:

* ``lists``: how many tensor lists ``_init_group`` fills (all are graph inputs;
  the update writes them in place);
* ``refuse(opt, group, lists)``: why this group cannot be captured (``None``:
  it can) -- a refused call runs ``opt.step()`` for real, whole;
* ``update(lists, group, foreach, lr, form)``: torch's functional update of one
  group, called with the tensors (real or fake), the group's hyperparameters and
  its learning rate ``lr`` (a float, a SymFloat, or a 0-dim tensor);
* ``state``: for each list that holds optimizer state ``_init_group`` may leave
  ``None`` (SGD's momentum buffers before the first step), the ``opt.state`` key
  the update's new tensor is stored under, as ``opt.step()`` stores it.

The update is traced in one of two :data:`FORMS`:

* ``"eager"``: eager's own code path (not ``capturable``, and
  ``torch.compiler.is_compiling()`` False): the bias corrections are Python
  floats read from ``state['step']`` with ``.item()``, which the graph does too,
  and ``lr`` and the other float hyperparameters (``betas``, ``eps``,
  ``momentum``, ``dampening``, ``weight_decay``) are SymFloats read from
  float64 0-dim graph inputs (the conditions torch's code puts on them, such as
  ``weight_decay != 0``, are checked on every call). The graph
  runs eager's very ops with eager's very scalars: its values are eager's bit
  for bit. A backend that runs the FX graph as it is (``"eager"``, a callable
  calling ``gm.forward``) takes it.
* ``"tensor"``: torch's ``capturable`` variant traced as torch.compile traces
  it (bias corrections as tensor arithmetic on ``state['step']``), for a
  backend that retraces the graph (AOTAutograd: ``"aot_eager"``,
  ``"inductor"``), which cannot take the ``.item()`` scalars of the eager
  form. ``lr`` is a float32 0-dim graph input (``lr_input``): from the first
  trace for Adam and AdamW (torch's capturable update computes with it as with
  the float: the same values), and for SGD once ``lr`` has changed (a constant
  before, as torch.compile's automatic dynamic makes a float symbolic once it
  changed): SGD's update passes ``lr`` as ``alpha=-lr``, a number, so a tensor
  ``lr`` takes torch's foreach path, which multiplies the grads by it and
  rounds differently. Values match eager's up to float rounding (SGD's with a
  constant ``lr``: bit for bit).

Anything not in the table, and any configuration a rule refuses (closures,
hooks, ``differentiable``, ``fused``, ``capturable``, sparse or complex
tensors, tensor hyperparameters, gradient scaling), keeps running for real
(``tensors/effects.py``, ``RUNS_FOR_REAL_PACKAGES``).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import dataclasses
import importlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .. import compat


@dataclass(frozen=True)
class OptimizerRule:
    """How one ``torch.optim`` class's ``step`` is captured (see the module docstring)."""

    name: str
    lists: int  # the tensor lists _init_group fills
    update: Callable[[tuple, dict, bool, Any, str], None]
    refuse: Callable[[Any, dict, tuple], str | None]
    exact: bool  # the tensor form computes eager's values bit for bit too (SGD: eager's own code path)
    lr_input: str  # when the tensor form takes lr as a 0-dim tensor: "same" values (Adam), or "after_change" (SGD)
    state: dict  # list index -> the opt.state key of a tensor the update creates where _init_group gave None
    list_names: tuple = ()  # the names of the lists, as _init_group's parameters name them


#: The float hyperparameters besides lr that a scheduler may change on every step (OneCycleLR cycles
#: ``betas[0]`` or ``momentum``): graph inputs in the eager form (``betas``: both).
SCALARS = ("betas", "eps", "weight_decay", "momentum", "dampening")

#: How an update is traced (see the module docstring): eager's own path first, torch.compile's tensor form for a
#: backend that cannot take the eager form's scalars.
FORMS = ("eager", "tensor")


def _common_refusal(opt: Any, group: dict) -> str | None:
    for key in ("differentiable", "fused", "capturable"):
        if group.get(key):
            return f"{key}=True"
    for key, value in group.items():
        if key != "params" and isinstance(value, torch.Tensor):
            return f"the hyperparameter {key!r} is a tensor"
        if key == "betas" and any(isinstance(b, torch.Tensor) for b in value):
            return "betas hold a tensor"
    if getattr(opt, "grad_scale", None) is not None or getattr(opt, "found_inf", None) is not None:
        return "gradient scaling (grad_scale / found_inf) is set"
    return None


def _tensors_refusal(tensors: list) -> str | None:
    for t in tensors:
        if type(t) not in (torch.Tensor, torch.nn.Parameter) or t.layout != torch.strided:
            return f"a {type(t).__name__} with layout {t.layout} (only dense tensors are captured)"
        if t.is_complex():
            return "a complex tensor"
    return None


def _sgd_update(lists: tuple, group: dict, foreach: bool, lr: Any, form: str) -> None:
    params, grads, buffers = lists
    if isinstance(lr, torch.Tensor) and not foreach:  # torch's foreach path multiplies the grads by a tensor lr
        foreach = True  # under torch.compile (its single-tensor path passes it as alpha=-lr: a number, .item())
        if group["nesterov"] and group["momentum"] != 0 and group["weight_decay"] == 0 and not group["maximize"]:
            # the foreach path adds momentum * buf into the grads themselves, where eager's single-tensor path
            # (the one the user's foreach=False or the CPU default picks) leaves p.grad as the backward made it
            grads = [g.clone() for g in grads]
    _functional("sgd", "sgd")(params, grads, buffers if group["momentum"] != 0 else [], has_sparse_grad=False,
                              foreach=foreach, fused=False, grad_scale=None, found_inf=None,
                              weight_decay=group["weight_decay"], momentum=group["momentum"], lr=lr,
                              dampening=group["dampening"], nesterov=group["nesterov"], maximize=group["maximize"])


def _sgd_refusal(opt: Any, group: dict, lists: tuple) -> str | None:
    params, grads, buffers = lists
    return _common_refusal(opt, group) or _tensors_refusal([*params, *grads, *[b for b in buffers if b is not None]])


def _adam_update(lists: tuple, group: dict, foreach: bool, lr: Any, form: str) -> None:
    params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = lists
    beta1, beta2 = group["betas"]
    _functional("adam", "adam")(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
                                foreach=foreach, capturable=form == "tensor", differentiable=False, fused=False,
                                grad_scale=None, found_inf=None, has_complex=False,
                                decoupled_weight_decay=group["decoupled_weight_decay"], amsgrad=group["amsgrad"],
                                beta1=beta1, beta2=beta2, lr=lr, weight_decay=group["weight_decay"],
                                eps=group["eps"], maximize=group["maximize"])


def _adam_refusal(opt: Any, group: dict, lists: tuple) -> str | None:
    if "decoupled_weight_decay" not in group:
        return "this torch's Adam has no decoupled_weight_decay option"
    return _common_refusal(opt, group) or _tensors_refusal([t for tensors in lists for t in tensors])


def _functional(module: str, name: str) -> Callable:
    return getattr(importlib.import_module(f"torch.optim.{module}"), name)


# The parameters of each class's _init_group after (self, group): a torch whose signature differs has no rule.
_INIT_GROUP = {
    torch.optim.SGD: ("params", "grads", "momentum_buffer_list"),
    torch.optim.Adam: ("params_with_grad", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs", "state_steps"),
}


def _rules() -> dict[type, OptimizerRule]:
    made = {torch.optim.SGD: OptimizerRule("SGD", 3, _sgd_update, _sgd_refusal, True, "after_change",
                                           {2: "momentum_buffer"}),
            torch.optim.Adam: OptimizerRule("Adam", 6, _adam_update, _adam_refusal, False, "same", {}),
            torch.optim.AdamW: OptimizerRule("AdamW", 6, _adam_update, _adam_refusal, False, "same", {})}
    rules = {}
    for cls, rule in made.items():
        base = torch.optim.Adam if cls is torch.optim.AdamW else cls
        try:
            params = tuple(inspect.signature(base._init_group).parameters)[2:]
        except (AttributeError, ValueError, TypeError):
            continue
        if params == _INIT_GROUP[base] and (cls is base or inspect.unwrap(cls.step) is inspect.unwrap(base.step)):
            rules[cls] = dataclasses.replace(rule, list_names=params)
    return rules


#: The captured optimizer classes, by exact type (a subclass may override anything: it runs for real).
OPTIMIZER_RULES: dict[type, OptimizerRule] = _rules()

#: torch.optim methods traced through (``tensors/effects.py``, ``TRACED_IN_RUNS_FOR_REAL``), by the function the
#: class holds -> the function traced in its place. ``Optimizer.zero_grad`` is wrapped in ``torch._disable_dynamo``,
#: whose wrapper calls ``torch._dynamo.disable(fn)`` (a disabled call: a graph break); its body is plain Python over
#: ``param_groups`` and each parameter's ``.grad``, which torch.compile traces too.
TRACED_METHODS: dict = {torch.optim.Optimizer.zero_grad: inspect.unwrap(torch.optim.Optimizer.zero_grad)}


def collect(opt: Any, group: dict, rule: OptimizerRule) -> tuple:
    """The tensor lists of one group, filled by torch.optim's ``_init_group`` (run for real: it creates the
    state lazily on the first step, as ``opt.step()`` would)."""
    lists = tuple([] for _ in range(rule.lists))
    compat.optimizer_init_group(opt, group, *lists)
    return lists


def resolve_foreach(group: dict, params: list) -> bool:
    """The implementation ``opt.step()`` takes for this group: ``foreach`` as set, or torch's default for
    these tensors (on CPU: the single-tensor loop)."""
    foreach = group.get("foreach")
    if foreach is None:
        return compat.default_foreach(params)
    return bool(foreach)
