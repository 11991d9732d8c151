"""``MyFunction.apply(*args)`` of a ``torch.autograd.Function``: forward and backward as subgraphs of torch's
``autograd_function_apply`` higher-order op, as torch.compile captures it::

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x); ctx.k = k
            return x * k
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ctx.k, None

    Scale.apply(x, 3.0)  ->  autograd_function_apply(self.fwd_body_0, self.bwd_body_0, l_x, ...)
        fwd_body_0(x):           return ((x * 3.0,), (x,))         # outputs, then saved values
        bwd_body_0(grad_0, x):   return (grad_0 * 3.0,)            # one gradient per input of fwd_body_0

``forward`` is speculated (under no_grad, as autograd runs it) with a stand-in ctx (:class:`TracedCtx`)
that records ``save_for_backward``, ``mark_non_differentiable`` and the attributes the user stores;
``backward`` is speculated with that ctx and one fresh tensor per output gradient. The tensors
``backward`` reads from ``forward`` (saved ones, or stashed on ctx) become outputs of the forward
subgraph and inputs of the backward one. When no input needs a gradient, ``forward`` is simply
inlined (eager runs it and records nothing). A ``setup_context`` staticmethod is run after ``forward``
as autograd does. A ``@once_differentiable`` backward returns its gradients detached (it runs under
``no_grad``: a double backward sees gradients that require no grad, as in eager). ``ctx.mark_dirty(x)``
on an input that forward changes in place and returns is the op's ``dirty_idx``, as torch.compile records
it: after the op that input has a new version (its history rebased on the Function) and the output is the
input itself. Anything else (dirty leaves that require grad, dirty tensors with views or not returned, a
tensor changed in place but not marked, ``set_materialize_grads(False)`` -- which gradients are None is
known only when backward runs --, setup_context with keyword or default arguments, side effects, a backward
with the wrong number of gradients) is a graph break: ``apply`` runs for real, with eager's gradients.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import operator
import types
from typing import TYPE_CHECKING

import torch
import torch.fx
from .. import compat
from ..variables.base import (
    ConstantVariable,
    LazyArgument,
    PythonObjectVariable,
    TensorVariable,
    TupleVariable,
    UserMethodVariable,
    VariableTracker,
)
from ..variables.builder import wrap
from ..tensors import saved as saved_tensors
from ..tensors.meta import TensorEntry, fresh_base
from ..tensors.ops import wrap_result
from .context import set_grad_mode
from . import calls
from .speculation import Leaf, fake_of_nodes, output_tensors, speculate


if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


class TracedCtx:
    """The ``ctx`` a traced ``forward`` and ``backward`` see (a plain Python object the trace models)."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.to_save = ()
        self.non_differentiable = ()
        self.dirty = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.to_save = tensors

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable = self.non_differentiable + tensors

    def mark_dirty(self, *tensors):
        self.dirty = self.dirty + tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = value


def run_forward(forward, setup_context, needs_input_grad, *args, **kwargs):
    """Traced, not run: ``forward(ctx, *args, **kwargs)`` with a new ctx (or ``forward(*args)`` then
    ``setup_context(ctx, args, output)``); returns the output and the ctx."""
    ctx = TracedCtx(needs_input_grad)
    if setup_context is None:
        output = forward(ctx, *args, **kwargs)
    else:
        output = forward(*args)
        setup_context(ctx, args, output)
    ctx.saved_tensors = ctx.to_save
    return output, ctx


HOP = torch.ops.higher_order.autograd_function_apply


def _break(tx: Tracer, cls: type, why: str) -> None:
    tx.unsupported("higher_order", f"{cls.__qualname__}.apply: {why}", ("apply runs for real, with eager's "
                                                                        "gradients",))


def _uses_forward_ad(cls: type) -> bool:
    """Whether ``cls`` may take part in forward-mode AD, which the captured Function (its backward alone) has no
    place for: its forward or ``setup_context`` calls ``ctx.save_for_forward``, or it has a ``jvp`` rule and a
    dual level is open (``torch.autograd.forward_ad.dual_level``)."""
    for method in (cls.forward, cls.setup_context):
        code = getattr(method, "__code__", None)
        if code is not None and "save_for_forward" in code.co_names:
            return True
    return cls.jvp is not torch.autograd.Function.jvp and torch.autograd.forward_ad._current_level >= 0


def apply(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """``cls.apply(*args)`` (``fn``: the bound classmethod, or from torch 2.14 the live builtin method bound to the
    class, :func:`compat.autograd_function_of`): see the module docstring."""
    owner = fn.self_var if isinstance(fn, UserMethodVariable) else None
    cls = owner.value if isinstance(owner, PythonObjectVariable) else None
    if cls is None and isinstance(fn, PythonObjectVariable):
        cls = compat.autograd_function_of(fn.value)
    if not isinstance(cls, type) or not issubclass(cls, torch.autograd.Function):
        return tx.unsupported("higher_order", "autograd.Function.apply called on something that is not a "
                              "Function subclass")
    saved_tensors.refuse_if_saving_runs_for_real(tx, f"{cls.__qualname__}.apply")
    forward, backward = cls.forward, cls.backward
    if not isinstance(forward, types.FunctionType) or not isinstance(backward, types.FunctionType) or \
            backward is torch.autograd.Function.backward:
        return _break(tx, cls, "forward and backward must be Python staticmethods")
    if tx.transform_depth:  # functorch calls the Function's own rules there (backward, jvp, vmap), or raises
        return _break(tx, cls, "applied inside a torch.func transform, which uses the Function's backward, jvp "
                      "and vmap rules where the graph would differentiate or batch its forward's ops")
    if _uses_forward_ad(cls):
        return _break(tx, cls, "forward-mode AD (ctx.save_for_forward, or a jvp rule while a dual level is open)")
    setup = cls.setup_context if cls.setup_context is not torch.autograd.Function.setup_context else None
    if setup is not None and (kwargs or not isinstance(setup, types.FunctionType) or
                              len(args) != forward.__code__.co_argcount):
        return _break(tx, cls, "setup_context with keyword or default arguments")
    if kwargs and not compat.autograd_function_apply_takes_kwargs():
        tx.user_error(TypeError("apply() takes no keyword arguments"))  # torch 2.11's C apply, as eager raises
    if kwargs and forward.__code__.co_kwonlyargcount:  # apply binds keywords to positions, which these have none
        return _break(tx, cls, "keywords passed to a forward with keyword-only parameters (eager's apply decides)")
    setup_var = wrap(tx, setup, None) if setup is not None else ConstantVariable(None)
    args = [wrap(tx, a.value, a.source) if isinstance(a, LazyArgument) else a for a in args]
    grad = tx.state.grad_enabled
    # ctx.needs_input_grad is each input's requires_grad, in grad mode or not (eager's C apply)
    needs = tuple(isinstance(a, TensorVariable) and tx.tensor(a).meta.requires_grad for a in args)
    run = wrap(tx, run_forward, None)
    forward_var, needs_var = wrap(tx, forward, None), TupleVariable(tuple(ConstantVariable(n) for n in needs))
    if not grad or not any(needs):  # eager runs forward under no_grad and records nothing for backward
        set_grad_mode(tx, False)
        try:
            output = calls.call_sync(tx, run, [forward_var, setup_var, needs_var, *args], kwargs)
        finally:  # (an exception forward raises leaves grad mode as it was, as eager's C apply does)
            set_grad_mode(tx, grad)
        _dirty_moves(tx, output.items[1])
        return tx.push(output.items[0])
    tensor_args = [a for a in args if isinstance(a, TensorVariable)]
    if len({a.tid for a in tensor_args}) != len(tensor_args):
        return _break(tx, cls, "the same tensor passed twice")
    tx.state = tx.state.replace(grad_enabled=False)
    fwd = speculate(tx, run, [forward_var, setup_var, needs_var, *args], f"{cls.__qualname__}.forward", kwargs)
    tx.state = tx.state.replace(grad_enabled=grad)
    output, ctx = fwd.output.items
    dirty = _dirty_inputs(tx, cls, fwd, ctx, tensor_args)
    effects = [e for e in fwd.effects if not (dirty and e.endswith(" in place"))]  # only the dirty ones: checked
    if effects:
        return _break(tx, cls, f"{fwd.name} {'; '.join(effects)}")
    materialize = fwd.state.heap[ctx.oid].attrs.get("materialize_grads")
    if not (isinstance(materialize, ConstantVariable) and materialize.value is True):
        return _break(tx, cls, "set_materialize_grads(False): backward sees None for unused outputs")
    single = isinstance(output, TensorVariable)
    outputs = [output] if single else list(output.items) if isinstance(output, TupleVariable) else None
    if outputs is None or not outputs or not all(isinstance(o, TensorVariable) for o in outputs):
        return _break(tx, cls, "forward must return a tensor or a tuple of tensors")
    if not dirty <= {o.tid for o in outputs}:
        return _break(tx, cls, "forward does not return a tensor it marked dirty")
    out_nodes, problem = output_tensors(tx, fwd, [Leaf(tid=o.tid) for o in outputs if o.tid not in dirty])
    if problem:
        return _break(tx, cls, problem)
    clean = iter(out_nodes)  # a dirty output is the input itself, changed in place: its node in forward's graph
    out_nodes = [fwd.state.heap[o.tid].node if o.tid in dirty else next(clean) for o in outputs]

    scratch = torch.fx.Graph()  # the gradients' nodes: free variables of backward, lifted to its first inputs
    grads, grad_nodes = [], []
    for i, o in enumerate(outputs):
        meta = tx.tensor(o).meta
        with tx.fake_mode:
            fake = torch.empty_strided(meta.shape, meta.stride, dtype=meta.dtype, device=meta.device)
        node = scratch.placeholder(f"grad_{i}")
        node.meta["val"] = node.meta["example_value"] = fake
        grads.append(tx.new_tensor(fake, node))
        grad_nodes.append(node)
    tx.state = tx.state.replace(grad_enabled=False)
    bwd = speculate(tx, wrap(tx, backward, None), [ctx, *grads], f"{cls.__qualname__}.backward")
    tx.state = tx.state.replace(grad_enabled=grad)
    if bwd.effects:
        return _break(tx, cls, f"{bwd.name} {'; '.join(bwd.effects)}")
    returned = bwd.output.items if isinstance(bwd.output, TupleVariable) else (bwd.output,)
    extra = returned[len(args):]  # autograd accepts trailing Nones (a keyword argument's "gradient")
    if len(returned) < len(args) or not all(isinstance(g, ConstantVariable) and g.value is None for g in extra):
        return _break(tx, cls, f"backward returns {len(returned)} gradients for {len(args)} inputs")
    returned = returned[:len(args)]
    arg_grads = {}
    for a, g in zip(args, returned):
        none = isinstance(g, ConstantVariable) and g.value is None
        if not none and not (isinstance(a, TensorVariable) and isinstance(g, TensorVariable)):
            return _break(tx, cls, "backward returns a gradient that is not a tensor or None, or one for an "
                          "argument that is not a tensor")
        if isinstance(a, TensorVariable):
            arg_grads[tx.tensor(a).node] = None if none else bwd.state.heap[g.tid].node

    if getattr(backward, "__code__", None) is ONCE_DIFFERENTIABLE:
        arg_grads = {n: _detached(tx, bwd.builder, g) for n, g in arg_grads.items()}
    fwd_graph = fwd.builder.graph
    read = bwd.builder.free_variables() + [n for n in arg_grads.values() if n is not None]  # returned as is too
    saved = [n for n in dict.fromkeys(read) if n.graph is not scratch and n.graph is not bwd.builder.graph]
    inputs = list(dict.fromkeys([tx.tensor(a).node for a in tensor_args] + fwd.builder.free_variables() +
                                [n for n in saved if n.graph is not fwd_graph]))
    to_save = {fwd.state.heap[t.tid].node for t in _tensors(tx, fwd, ctx, "to_save")}
    non_differentiable = {t.tid for t in _tensors(tx, fwd, ctx, "non_differentiable")}
    kwargs_for_op = {"non_differentiable_idx": [i for i, o in enumerate(outputs) if o.tid in non_differentiable],
                     "saved_for_backward_idx": [i for i, n in enumerate(saved) if n in to_save]}
    if dirty:
        if any(fwd.state.heap[o.tid].node in saved for o in outputs if o.tid in dirty):
            return _break(tx, cls, "backward reads a tensor forward changed in place")
        kwargs_for_op["dirty_idx"] = [i for i, o in enumerate(outputs) if o.tid in dirty]
    examples = fake_of_nodes(tx, inputs)
    fwd_gm = fwd.builder.finish_subgraph((tuple(out_nodes), tuple(saved)), inputs, examples)
    bwd_gm = bwd.builder.finish_subgraph(tuple(arg_grads.get(n) for n in inputs), grad_nodes + saved,
                                         fake_of_nodes(tx, grad_nodes + saved))
    with tx.fake_context():
        if dirty:  # forward writes them: fresh fakes (a fake of the trace is never mutated)
            dirty_nodes = {tx.tensor(TensorVariable(t)).node: t for t in dirty}
            examples = [fresh_base(tx.state.heap[dirty_nodes[n]].meta) if n in dirty_nodes else e
                        for n, e in zip(inputs, examples)]
        fake_out = HOP(fwd_gm, bwd_gm, *examples, **kwargs_for_op)
    node = tx.graph.call_function(HOP, (tx.graph.get_attr("fwd_body", fwd_gm), tx.graph.get_attr("bwd_body", bwd_gm),
                                        *inputs), kwargs_for_op, fake_out)
    _record_saved(tx, fwd, ctx, outputs, fake_out)
    if not dirty:
        results = wrap_result(tx, tuple(fake_out), node)
        return tx.push(results.items[0] if single else results)
    items = []
    for i, (o, fake) in enumerate(zip(outputs, fake_out)):
        item_node = tx.graph.call_function(operator.getitem, (node, i), {}, fake)
        if o.tid in dirty:  # eager returns the input itself, its autograd history rebased on the Function
            # its counter moved as forward's writes moved it, then once more (see _dirty_moves)
            before = tx.state.heap[o.tid]
            moved = fwd.state.heap[o.tid].meta.counter - before.meta.counter + 1
            tx.bind_tensor(o.tid, before.bump(fake, item_node, moved))
            items.append(TensorVariable(o.tid))
        else:
            items.append(tx.new_tensor(fake, item_node))
    tx.push(items[0] if single else TupleVariable(tuple(items)))


#: The code of the function ``@once_differentiable`` makes (it runs the backward under ``no_grad``).
ONCE_DIFFERENTIABLE = torch.autograd.function.once_differentiable(lambda ctx: None).__code__


def _record_saved(tx: Tracer, fwd, ctx: VariableTracker, outputs: list, fake_out: tuple) -> None:
    """What ``ctx.save_for_backward`` saved, as fakes of the trace (inputs of the Function, and its outputs): a
    later in-place write to one makes the call run for real (tensors/saved.py), since AOTAutograd's graph saves
    the value from before the write."""
    out_fakes = {o.tid: f for o, f in zip(outputs, fake_out)}
    fakes = [out_fakes[t.tid] if t.tid in out_fakes else tx.state.heap[t.tid].fake
             for t in _tensors(tx, fwd, ctx, "to_save") if t.tid in out_fakes or t.tid < fwd.first_id]
    if fakes and tx.functional_backend:  # (the eager backend saves them through autograd: runtime/function_apply.py)
        saved_tensors.record(tx, fakes)


def _detached(tx: Tracer, builder, node: torch.fx.Node | None) -> torch.fx.Node | None:
    """``node.detach()`` in the backward subgraph: a ``@once_differentiable`` backward computes its gradients
    under ``no_grad``, so a double backward (``create_graph=True``) sees gradients that require no grad, as in
    eager (torch.compile's aot_eager gives them requires_grad=True)."""
    if node is None:
        return None
    with tx.fake_mode:
        val = node.meta["val"].detach()
    return builder.call_function(torch.ops.aten.detach.default, (node,), {}, val)


def _dirty_inputs(tx: Tracer, cls: type, fwd, ctx: VariableTracker, tensor_args: list) -> set:
    """The tids of the inputs forward marked dirty (``ctx.mark_dirty``), which must be exactly the tensors from
    outside it that forward changed in place: inputs of the Function with no views in the trace, not leaves
    that require grad (eager raises for those: the call runs for real)."""
    dirty = {t.tid for t in _tensors(tx, fwd, ctx, "dirty")}
    changed = {tid for tid, e in tx.state.heap.items() if tid < fwd.first_id and isinstance(e, TensorEntry)
               and fwd.state.heap[tid].meta.version != e.meta.version}
    if dirty != changed and (dirty or changed):
        _break(tx, cls, "forward changes a tensor in place that it does not mark dirty" if changed - dirty
               else "forward marks dirty a tensor it does not change in place")
    for tid in dirty:
        meta = tx.state.heap[tid].meta
        if tid not in {a.tid for a in tensor_args} or meta.base is not None or tx.alias_group({tid})[1]:
            _break(tx, cls, "forward marks dirty a tensor that is not an input of the Function, or has views")
        if meta.is_leaf and meta.requires_grad:
            _break(tx, cls, "forward changes in place a leaf that requires grad")
    return dirty


def _dirty_moves(tx: Tracer, ctx: VariableTracker) -> None:
    """Eager's Function moves the version counter of each tensor forward marked dirty once more when forward
    returns, in grad mode or not (found by a probe: ``x.add_(1)`` in a forward marking ``x`` dirty moves it by 2)."""
    entry = tx.state.heap[ctx.oid].attrs.get("dirty")
    for t in entry.items if isinstance(entry, TupleVariable) else ():
        if isinstance(t, TensorVariable):
            roots, views = tx.alias_group({t.tid})
            for tid in (*roots, *views):
                tx.bind_tensor(tid, tx.state.heap[tid].counter_moved(1))


def _tensors(tx: Tracer, fwd, ctx: VariableTracker, name: str) -> list:
    """The tensors the traced ctx holds in attribute ``name`` (a tuple), read in the state forward left."""
    entry = fwd.state.heap[ctx.oid].attrs.get(name)
    items = entry.items if isinstance(entry, TupleVariable) else ()
    return [t for t in items if isinstance(t, TensorVariable)]
