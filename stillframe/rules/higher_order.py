"""Higher-order operators: calls that take Python callables and put them in the graph as subgraphs.

Each rule speculates the callables (:mod:`.speculation`) and records torch's own higher-order op, as
torch.compile does, so the backend sees the same graph::

    torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,))
      ->  cond_true_0 = self.cond_true_0;  cond_false_0 = self.cond_false_0
          cond = torch.ops.higher_order.cond(gt, cond_true_0, cond_false_0, (l_x,));  getitem = cond[0]

What a rule cannot capture (a branch with side effects, outputs that disagree, an exception inside a
branch) is a graph break: the call runs for real, and eager decides (torch.cond then raises its own
error); under ``fullgraph=True`` the break is the error, with :func:`.speculation.diff`'s words.

:data:`HIGHER_ORDER` maps each callable to its rule; :func:`stillframe.rules.calls.call` consults it first.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import torch
from ..variables.base import (
    ConstantVariable,
    LazyArgument,
    ListVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
)
from ..variables.builder import wrap
from ..tensors.ops import to_fx, wrap_result
from . import autograd_function, calls
from .speculation import diff, fake_of_nodes, flatten, output_tensors, speculate, unflatten

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


def _realize(tx: Tracer, var: VariableTracker) -> VariableTracker:
    return wrap(tx, var.value, var.source) if isinstance(var, LazyArgument) else var


def _bind(tx: Tracer, names: tuple, args: list, kwargs: dict, defaults: dict, what: str) -> list:
    """Positional and keyword arguments bound to ``names``, or a graph break (the real call raises)."""
    bound = dict(zip(names, args))
    if len(args) > len(names) or any(k not in names or k in bound for k in kwargs):
        tx.unsupported("higher_order", f"{what} called with arguments it does not take")
    bound.update(kwargs)
    bound = {**defaults, **bound}
    missing = [n for n in names if n not in bound]
    if missing:
        tx.unsupported("higher_order", f"{what} called without {', '.join(missing)}")
    return [_realize(tx, bound[n]) for n in names]


def _operand_items(tx: Tracer, operands: VariableTracker, what: str) -> list:
    if isinstance(operands, TupleVariable):
        items = list(operands.items)
    elif isinstance(operands, ListVariable):
        items = list(tx.list_items(operands))
    else:
        tx.unsupported("higher_order", f"{what}'s operands are a {operands.python_type().__name__}, "
                       "not a tuple or list")
    items = [_realize(tx, i) for i in items]
    if not all(isinstance(i, TensorVariable) for i in items):
        tx.unsupported("higher_order", f"{what}'s operands must all be tensors")
    return items


def cond(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """``torch.cond(pred, true_fn, false_fn, operands)``: both branches speculated from one checkpoint and
    recorded as ``torch.ops.higher_order.cond``; a Python constant ``pred`` inlines the taken branch."""
    pred, true_fn, false_fn, operands = _bind(tx, ("pred", "true_fn", "false_fn", "operands"), args, kwargs,
                                              {"operands": TupleVariable(())}, "torch.cond")
    if isinstance(pred, ConstantVariable) and isinstance(pred.value, (bool, int, float)):
        items = _operand_items(tx, operands, "torch.cond") if not isinstance(operands, TupleVariable) \
            else list(operands.items)
        return calls.call(tx, true_fn if pred.value else false_fn, items, {})
    if not isinstance(pred, TensorVariable) or math.prod(tx.tensor(pred).meta.shape) != 1:
        tx.unsupported("higher_order", "torch.cond's pred is not a bool or a one-element tensor")
    items = _operand_items(tx, operands, "torch.cond")
    true = speculate(tx, true_fn, items, "the true branch")
    false = speculate(tx, false_fn, items, "the false branch")
    differences = diff(tx, true, false, ("dtype", "shape", "device"))  # requires_grad: the op's autograd merges
    if differences:
        tx.unsupported("higher_order", "torch.cond's branches differ: " + "; ".join(differences),
                       ("both branches must return the same structure of tensors with the same dtype, shape "
                        "and device, and change nothing outside themselves",))
    spec, true_leaves = flatten(tx, true.output)
    _, false_leaves = flatten(tx, false.output)
    true_nodes, problem = output_tensors(tx, true, true_leaves)
    false_nodes, problem_false = output_tensors(tx, false, false_leaves)
    if problem or problem_false:
        tx.unsupported("higher_order", f"torch.cond: {problem or problem_false}",
                       ("return a new tensor (x.clone()) instead of an operand or a view of one",))
    if not true_nodes:
        tx.unsupported("higher_order", "torch.cond's branches return no tensor")
    inputs = list(dict.fromkeys(true.builder.free_variables() + false.builder.free_variables()))
    examples = fake_of_nodes(tx, inputs)
    true_gm = true.builder.finish_subgraph(tuple(true_nodes), inputs, examples)
    false_gm = false.builder.finish_subgraph(tuple(false_nodes), inputs, examples)
    op = torch.ops.higher_order.cond
    with tx.fake_context():
        fake_out = op(tx.tensor(pred).fake, true_gm, false_gm, tuple(examples))
    node = tx.graph.call_function(op, (to_fx(tx, pred), tx.graph.get_attr("cond_true", true_gm),
                                       tx.graph.get_attr("cond_false", false_gm), tuple(inputs)), {},
                                  fake_out)
    tensors = iter(wrap_result(tx, tuple(fake_out), node).items)
    leaves = [next(tensors) if leaf.tid is not None else ConstantVariable(leaf.value) for leaf in true_leaves]
    tx.push(unflatten(tx, spec, leaves))


def _target_key(target: Any) -> Any:
    try:
        hash(target)
    except TypeError:
        return None
    return target


#: The higher-order callables with a rule: ``rule(tx, fn, args, kwargs)`` pushes the result (``fn``: the callee's
#: VT; ``autograd.Function.apply`` is keyed by its function and finds the class in the bound method).
HIGHER_ORDER: dict[Any, Callable] = {torch.cond: cond, autograd_function.APPLY: autograd_function.apply}


def higher_order_rule(target: Any) -> Callable | None:
    """The rule for calling ``target``, if it is a higher-order operator stillframe captures."""
    key = _target_key(target)
    return HIGHER_ORDER.get(key) if key is not None else None
