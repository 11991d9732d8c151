"""Higher-order operators: calls that take Python callables and put them in the graph as subgraphs.

Each rule speculates the callables (:mod:`.speculation`) and records torch's own higher-order op, as
torch.compile does, so the backend sees the same graph::

    torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,))
      ->  cond_true_0 = self.cond_true_0;  cond_false_0 = self.cond_false_0
          cond = torch.ops.higher_order.cond(gt, cond_true_0, cond_false_0, (l_x,));  getitem = cond[0]

What a rule cannot capture (a branch with side effects, outputs that disagree, an exception inside a
branch) is a graph break: the call runs for real, and eager decides (torch.cond then raises its own
error); under ``fullgraph=True`` the break is the error, with :func:`.speculation.diff`'s words.

Here: ``torch.cond``, ``while_loop`` and ``torch.utils.checkpoint.checkpoint``; ``autograd.Function.apply``
in :mod:`.autograd_function`, the ``torch.func`` transforms in :mod:`.func_transforms`. :data:`HIGHER_ORDER`
maps each callable to its rule; :func:`stillframe.rules.calls.call` consults it first. A backend that fails on
one of these ops makes the runtime trace the frame again with it in ``tx.uncaptured_ops``: a graph break.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.fx
import torch.utils.checkpoint as checkpoint_api
from .. import compat
from ..tensors.meta import TensorEntry, fresh_base
from ..variables.base import (
    ConstantVariable,
    LazyArgument,
    ListVariable,
    PythonObjectVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
)
from ..variables.builder import wrap
from ..errors import RetraceSymbolic
from ..tensors.effects import hashable_key
from ..tensors.ops import to_fake, to_fx, wrap_result
from . import autograd_function, calls, func_linearized, func_transforms
from .speculation import (Leaf, diff, draws_random_numbers, fake_of_nodes, flatten, output_tensors, result_fakes,
                          speculate, unflatten)

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


def _operand_items(tx: Tracer, operands: VariableTracker, what: str, nested: bool = False) -> list:
    if isinstance(operands, TupleVariable):
        items = list(operands.items)
    elif isinstance(operands, ListVariable):
        items = list(tx.list_items(operands))
    else:
        tx.unsupported("higher_order", f"{what}'s operands are a {operands.python_type().__name__}, "
                       "not a tuple or list")
    items = [_realize(tx, i) for i in items]
    if not all(_tensor_tree(tx, i, nested) for i in items):
        tx.unsupported("higher_order", f"{what}'s operands must all be tensors"
                       f"{' (or tuples and lists of them)' if nested else ''}")
    return items


def _tensor_tree(tx: Tracer, var: VariableTracker, nested: bool) -> bool:
    """A tensor, or (``nested``) a tuple or list whose leaves are all tensors."""
    if isinstance(var, TensorVariable):
        return True
    if nested and isinstance(var, TupleVariable) and var.cls is tuple:
        return all(_tensor_tree(tx, i, nested) for i in var.items)
    if nested and isinstance(var, ListVariable):
        return all(_tensor_tree(tx, i, nested) for i in tx.list_items(var))
    return False


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
    items = _operand_items(tx, operands, "torch.cond", nested=True)  # a pytree of tensors, as torch.cond takes
    true = speculate(tx, true_fn, items, "the true branch")
    false = speculate(tx, false_fn, items, "the false branch")
    differences = diff(tx, true, false, ("dtype", "ndim", "device"))  # requires_grad: the op's autograd merges
    if differences:
        tx.unsupported("higher_order", "torch.cond's branches differ: " + "; ".join(differences),
                       ("both branches must return the same structure of tensors with the same dtype, number of "
                        "dimensions and device, and change nothing outside themselves",))
    resized = diff(tx, true, false, ("shape",))
    if resized and tx.fake_mode.shape_env is None:
        if tx.shapes is not None and not tx.shapes.symbolic:
            # as torch.compile: a size that differs between the branches is an unbacked symbol of the ShapeEnv
            raise RetraceSymbolic("torch.cond's branches return different sizes: " + "; ".join(resized))
        tx.unsupported("higher_order", "torch.cond's branches return different sizes: " + "; ".join(resized),
                       ("this trace has no ShapeEnv to give the output an unbacked size",))
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
    if resized:  # torch's own merge of the branches' outputs: a size that differs becomes an unbacked symbol
        with tx.fake_context():
            fake_out = tuple(op(to_fake(tx, pred), true_gm, false_gm, tuple(examples)))
    else:
        fake_out = result_fakes(tx, [true.state.heap[leaf.tid].meta for leaf in true_leaves if leaf.tid is not None],
                                any(getattr(e, "requires_grad", False) for e in examples))
    node = tx.graph.call_function(op, (to_fx(tx, pred), tx.graph.get_attr("cond_true", true_gm),
                                       tx.graph.get_attr("cond_false", false_gm), tuple(inputs)), {},
                                  fake_out)
    bindings = compat.unbacked_bindings(tx.fake_mode, fake_out) if resized else None
    if bindings:
        node.meta["unbacked_bindings"] = bindings
    tensors = iter(wrap_result(tx, tuple(fake_out), node).items)
    leaves = [next(tensors) if leaf.tid is not None else ConstantVariable(leaf.value) for leaf in true_leaves]
    tx.push(unflatten(tx, spec, leaves))


#: The arguments ``torch.utils.checkpoint.checkpoint`` takes for itself; any other keyword goes to the function.
CHECKPOINT_KWARGS = {"use_reentrant": None, "preserve_rng_state": True, "context_fn": checkpoint_api.noop_context_fn,
                     "determinism_check": "default", "debug": False, "early_stop": True}
def checkpoint(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)``: ``fn`` speculated into a subgraph
    recorded as ``torch.ops.higher_order.tag_activation_checkpoint`` (its activations are recomputed in
    backward: for real under the eager backend, by the partitioner under AOTAutograd), as torch.compile does.

    ``use_reentrant=True`` is captured when an input requires grad (the two kinds then agree), else it runs
    for real, as does a call without ``use_reentrant`` (eager warns), a ``context_fn``, random ops in the
    region, side effects or outputs that alias inputs: a graph break, and checkpoint runs for real.
    """
    if not args:
        tx.unsupported("higher_order", "torch.utils.checkpoint.checkpoint called without a function")
    own = {k: _realize(tx, v) for k, v in kwargs.items() if k in CHECKPOINT_KWARGS}
    fn_kwargs = {k: v for k, v in kwargs.items() if k not in CHECKPOINT_KWARGS}
    settings = {}
    for key, value in own.items():
        if not isinstance(value, ConstantVariable) and not (isinstance(value, PythonObjectVariable) and
                                                            value.value is CHECKPOINT_KWARGS[key]):
            tx.unsupported("higher_order", f"checkpoint's {key} is not a constant")
        settings[key] = getattr(value, "value", None)
    reentrant = settings.get("use_reentrant")
    if reentrant is None:
        tx.unsupported("higher_order", "checkpoint without use_reentrant runs for real (eager warns, then "
                       "takes use_reentrant=True)", ("pass use_reentrant=False to capture the region",))
    if reentrant and not (tx.state.grad_enabled and not fn_kwargs and any(
            isinstance(a, TensorVariable) and tx.tensor(a).meta.requires_grad for a in args[1:])):
        # The two kinds compute the same values and gradients when an input requires grad; otherwise the
        # reentrant one gives no gradient to the region's parameters (with a warning), so it runs for real.
        tx.unsupported("higher_order", "checkpoint with use_reentrant=True, keyword arguments or no input that "
                       "requires grad runs for real", ("pass use_reentrant=False to capture the region",))
    if any(settings.get(k, d) != d for k, d in CHECKPOINT_KWARGS.items() if k not in ("use_reentrant",
                                                                                  "preserve_rng_state")):
        tx.unsupported("higher_order", "checkpoint with context_fn, determinism_check, debug or early_stop")
    body = speculate(tx, args[0], [_realize(tx, a) for a in args[1:]], "the checkpointed function", fn_kwargs)
    if body.effects:
        tx.unsupported("higher_order", "the checkpointed function " + "; ".join(body.effects),
                       ("checkpoint runs for real (its recomputation would repeat the effect)",))
    flat = flatten(tx, body.output)
    if flat is None:
        tx.unsupported("higher_order", "the checkpointed function returns something other than tensors, tuples, "
                       "lists and numbers")
    spec, leaves = flat
    nodes, problem = output_tensors(tx, body, leaves)
    if problem or not nodes:
        tx.unsupported("higher_order", f"checkpoint: {problem or 'the function returns no tensor'}")
    random = [n for n in body.builder.graph.nodes if draws_random_numbers(n)]
    if random:
        tx.unsupported("higher_order", f"the checkpointed function draws random numbers ({random[0].target}): "
                       "recomputing it in the graph would draw different ones", ("checkpoint runs for real",))
    nested = [n for n in body.builder.graph.nodes if n.op == "get_attr"]
    if nested:  # the op recomputes under a dispatch mode that torch's other higher-order ops have no rule for
        tx.unsupported("higher_order", "the checkpointed function holds another higher-order op",
                       ("checkpoint runs for real",))
    inputs = body.builder.free_variables()
    examples = fake_of_nodes(tx, inputs)
    gm = body.builder.finish_subgraph(tuple(nodes), inputs, examples)
    op = torch.ops.higher_order.tag_activation_checkpoint
    fake_out = result_fakes(tx, [body.state.heap[leaf.tid].meta for leaf in leaves if leaf.tid is not None], None)
    node = tx.graph.call_function(op, (tx.graph.get_attr("wrap_body", gm), *inputs), {"use_reentrant": False},
                                  fake_out)
    tensors = iter(wrap_result(tx, tuple(fake_out), node).items)
    tx.push(unflatten(tx, spec, [next(tensors) if leaf.tid is not None else ConstantVariable(leaf.value)
                                 for leaf in leaves]))


def fresh_tensors(tx: Tracer, like: list, name: str) -> tuple[list, list]:
    """New tensors with the metadata of ``like`` (not views, not aliasing anything), each the value of a
    placeholder of a scratch graph: a callable speculated on them reads them as free variables of its
    own, never confused with a tensor of the trace it also reads (``x`` carried and closed over)."""
    scratch = torch.fx.Graph()
    tensors, nodes = [], []
    for i, var in enumerate(like):
        meta = dataclasses.replace(tx.tensor(var).meta, base=None, version=0)
        with tx.fake_mode:
            fake = fresh_base(meta)
        node = scratch.placeholder(f"{name}_{i}")
        node.meta["val"] = node.meta["example_value"] = fake
        tensors.append(tx.new_tensor(fake, node))
        nodes.append(node)
    return tensors, nodes


def while_loop(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """``while_loop(cond_fn, body_fn, carried_inputs)``: both callables speculated on fresh carried tensors
    and recorded as ``torch.ops.higher_order.while_loop(cond, body, carried, additional)``, where the
    additional inputs are the tensors they close over (an operand sharing memory with another is passed as a
    clone: AOTAutograd refuses aliased operands). Int carries, differing metadata, side effects and aliasing
    outputs break the graph (the loop runs for real)."""
    cond_fn, body_fn, carried = _bind(tx, ("cond_fn", "body_fn", "carried_inputs"), args, kwargs, {}, "while_loop")
    items = _operand_items(tx, carried, "while_loop")
    fresh, fresh_nodes = fresh_tensors(tx, items, "carry")
    test = speculate(tx, cond_fn, fresh, "cond_fn")
    body = speculate(tx, body_fn, fresh, "body_fn")
    problems = [f"{spec.name} {effect}" for spec in (test, body) for effect in spec.effects]
    pred_nodes, problem = output_tensors(tx, test, [Leaf(tid=test.output.tid)]) if isinstance(
        test.output, TensorVariable) else ([], "cond_fn does not return a tensor")
    if problem or math.prod(test.state.heap[test.output.tid].meta.shape) != 1:
        problems.append(problem or "cond_fn returns a tensor of more than one element")
    flat = flatten(tx, body.output)
    spec, leaves = flat if flat is not None else (None, [])
    nodes, problem = output_tensors(tx, body, leaves)
    if problem or len(nodes) != len(items) or len(leaves) != len(items):
        problems.append(problem or f"body_fn returns {len(leaves)} values for {len(items)} carried inputs")
    else:
        for i, (var, leaf) in enumerate(zip(items, leaves)):
            mine, theirs = tx.tensor(var).meta, body.state.heap[leaf.tid].meta
            problems += [f"body_fn's output {i} has {f} {getattr(theirs, f)} but the carried input has "
                         f"{getattr(mine, f)}" for f in ("dtype", "shape", "device") if getattr(mine, f) !=
                         getattr(theirs, f)]
    if problems:
        tx.unsupported("higher_order", "while_loop: " + "; ".join(problems), ("the loop runs for real",))
    scratch = {id(n) for n in fresh_nodes}
    additional = [n for n in dict.fromkeys(test.builder.free_variables() + body.builder.free_variables())
                  if id(n) not in scratch]
    examples = [tx.tensor(v).fake for v in fresh] + fake_of_nodes(tx, additional)
    cond_gm = test.builder.finish_subgraph(pred_nodes[0], fresh_nodes + additional, examples)
    body_gm = body.builder.finish_subgraph(tuple(nodes), fresh_nodes + additional, examples)
    fakes = result_fakes(tx, [body.state.heap[leaf.tid].meta for leaf in leaves],
                         any(tx.tensor(v).meta.requires_grad for v in items) or
                         any(getattr(e, "requires_grad", False) for e in examples[len(fresh):]))
    op = torch.ops.higher_order.while_loop
    operands = _unaliased(tx, [to_fx(tx, v) for v in items] + additional)
    node = tx.graph.call_function(op, (tx.graph.get_attr("while_loop_cond_graph", cond_gm),
                                       tx.graph.get_attr("while_loop_body_graph", body_gm),
                                       tuple(operands[:len(items)]), tuple(operands[len(items):])), {}, tuple(fakes))
    tx.push(unflatten(tx, spec, list(wrap_result(tx, tuple(fakes), node).items)))


def _unaliased(tx: Tracer, nodes: list) -> list:
    """``nodes`` (a higher-order op's tensor operands, outer graph), each one that shares memory with an earlier
    one replaced by a clone of it: AOTAutograd's functionalization refuses a ``while_loop`` whose inputs alias
    (``x`` both carried and closed over). torch.compile hands the aliased operands over and its backend
    raises; the clone computes what eager does (the loop reads its inputs, never writes them)."""
    roots = {e.node: (e.meta.base if e.meta.base is not None else tid) for tid, e in tx.state.heap.items()
             if isinstance(e, TensorEntry) and e.node is not None}
    seen: set = set()
    out = []
    for node, fake in zip(nodes, fake_of_nodes(tx, nodes)):
        root = roots.get(node, node)
        if root in seen:
            with tx.fake_context():
                copy = fake.clone()
            node = tx.graph.call_function(torch.clone, (node,), {}, copy)
        seen.add(root)
        out.append(node)
    return out


def _unless_rejected(op: str, rule: Callable) -> Callable:
    """``rule``, or a graph break where the backend failed on ``torch.ops.higher_order.<op>`` (the runtime
    then traced the frame again with ``tx.uncaptured_ops``)."""

    def run(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
        if op in tx.uncaptured_ops:
            tx.unsupported("higher_order", f"the backend cannot compile torch.ops.higher_order.{op}",
                           ("the call runs for real",))
        return rule(tx, fn, args, kwargs)

    return run


#: The higher-order callables with a rule: ``rule(tx, fn, args, kwargs)`` pushes the result (``fn``: the callee's
#: VT; ``autograd.Function.apply`` is keyed by :data:`compat.AUTOGRAD_FUNCTION_APPLY` and finds the class in the bound
#: method).
HIGHER_ORDER: dict[Any, Callable] = {
    torch.cond: _unless_rejected("cond", cond),
    checkpoint_api.checkpoint: _unless_rejected("tag_activation_checkpoint", checkpoint),
}
HIGHER_ORDER[compat.AUTOGRAD_FUNCTION_APPLY] = _unless_rejected("autograd_function_apply", autograd_function.apply)
if compat.while_loop is not None:
    HIGHER_ORDER[compat.while_loop] = _unless_rejected("while_loop", while_loop)
HIGHER_ORDER.update({transform: func_transforms.make_transform for transform in func_transforms.TRANSFORMS})
HIGHER_ORDER[func_transforms.apply_transform] = func_transforms.apply
HIGHER_ORDER[torch.func.functional_call] = func_transforms.functional_call
HIGHER_ORDER.update(func_linearized.RULES)


def higher_order_rule(target: Any) -> Callable | None:
    """The rule for calling ``target``, if it is a higher-order operator stillframe captures."""
    key = hashable_key(target)
    rule = HIGHER_ORDER.get(key) if key is not None else None
    if rule is None and compat.autograd_function_of(target) is not None:  # torch 2.14: a builtin bound to the class
        rule = HIGHER_ORDER[compat.AUTOGRAD_FUNCTION_APPLY]
    if rule is None and func_transforms.is_functorch_internal(target):
        return func_transforms.run_functorch_for_real
    return rule
