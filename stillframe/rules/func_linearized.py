"""``torch.func.vjp``, ``jvp`` and ``linearize``: the transformed function is speculated into a subgraph, and
the graph calls the transform on it, as :mod:`.func_transforms` does for ``vmap`` and ``grad``::

    out, vjp_fn = vjp(torch.sin, x);  (g,) = vjp_fn(torch.ones_like(out))
      ->  run_subgraph(self.vjp_body_0, l_x)                          # out
          clone = torch.clone(l_x)                                      # what vjp_fn reads
          vjp_function(self.vjp_body_1, (1, 0), False, clone, ones)     # torch.func.vjp(body, x)[1](ones)

``jvp(f, primals, tangents)`` is one node (:func:`apply_jvp`). ``vjp`` and ``linearize`` return a function:
in the trace it is ``functools.partial(vjp_function, body, counts, has_aux, *tensors)`` (copies of the primals
and the closed-over tensors) (or
:func:`linearize_function`), so calling it records one node, and a partial that crosses a graph break or is
returned is a real function computing eager's values. The body runs again when that function is called
(the forward is recomputed, as torch.func's own ``linearize`` does) on copies of the primals and the tensors
it closes over made at the call of ``vjp``, so an in-place change in between does not reach it; where such
a change comes after ``vjp`` in the same trace, the ``vjp`` runs for real instead (eager's ``vjp_fn`` raises
if autograd saved the tensor written). A body that draws random numbers breaks the graph (its recomputation
would draw others).

torch.compile (2.13) captures ``vjp`` and ``jvp`` in one graph and breaks on ``linearize``
(``disallow_in_graph``); stillframe captures all three, ``linearize`` where no primal or closed-over tensor
requires grad (else eager's autograd through it is make_fx's own, and it runs for real). Torch's own errors (a tuple ``primals`` that is not
a tuple, a cotangent of the wrong shape) are raised by the real call: the fake run of the node meets them
first and breaks the graph.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import inspect
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
import torch.func
from ..tensors import saved as saved_tensors
from ..tensors.meta import TensorEntry
from ..tensors.ops import call_tensor_op, to_fx, wrap_result
from ..variables.base import (
    ConstantVariable,
    LazyArgument,
    PartialVariable,
    PythonObjectVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
)
from ..variables.builder import wrap
from .func_transforms import _break, _fresh, _restructure
from .speculation import draws_random_numbers, fake_of_nodes, flatten, output_tensors, speculate_transformed

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


# ------------------------------------------------------------------ what the graph calls (and rebuilt partials)
def _closed(gm: torch.fx.GraphModule, closed_over: tuple) -> Any:
    return lambda *primals: gm(*primals, *closed_over)


def _split(counts: tuple, args: tuple) -> tuple:
    n, m = counts
    return args[:n], args[n:n + m], args[n + m:]


def run_subgraph(gm: torch.fx.GraphModule, *args: Any) -> Any:
    """``gm(*args)``: the forward value of a ``vjp`` or ``linearize`` (what the function returns)."""
    return gm(*args)


def apply_jvp(gm: torch.fx.GraphModule, counts: tuple, options: tuple, *args: Any) -> Any:
    """``torch.func.jvp(body, primals, tangents, **options)``; ``args``: primals, closed-over tensors, tangents."""
    primals, closed_over, tangents = _split(counts, args)
    return torch.func.jvp(_closed(gm, closed_over), tuple(primals), tuple(tangents), **dict(options))


def vjp_function(gm: torch.fx.GraphModule, counts: tuple, has_aux: bool, *args: Any, **kwargs: Any) -> Any:
    """The ``vjp_fn`` of ``torch.func.vjp(body, *primals, has_aux=has_aux)`` called on ``args``' last item
    (the cotangents, shaped as the output), after the primals and the closed-over tensors."""
    primals, closed_over, rest = _split(counts, args)
    return torch.func.vjp(_closed(gm, closed_over), *primals, has_aux=has_aux)[1](*rest, **kwargs)


def linearize_function(gm: torch.fx.GraphModule, counts: tuple, *args: Any) -> Any:
    """The ``jvp_fn`` of ``torch.func.linearize(body, *primals)`` called on the tangents (after the primals and
    the closed-over tensors): ``torch.func.jvp``'s tangent output, which is what it computes."""
    primals, closed_over, tangents = _split(counts, args)
    return torch.func.jvp(_closed(gm, closed_over), tuple(primals), tuple(tangents))[1]


# ------------------------------------------------------------------------------------------------ the rules
def _realized(tx: Tracer, var: VariableTracker) -> VariableTracker:
    return wrap(tx, var.value, var.source) if isinstance(var, LazyArgument) else var


def _body(tx: Tracer, name: str, func: VariableTracker, primals: list, has_aux: bool) -> tuple:
    """``func`` speculated on fresh tensors shaped like ``primals``: (subgraph, closed-over tensors as VTs)."""
    if not all(isinstance(p, TensorVariable) for p in primals):
        _break(tx, f"{name}'s primals are not all tensors")
    scratch = torch.fx.Graph()
    fresh = [_fresh(tx, p, None, scratch, f"primal_{i}") for i, p in enumerate(primals)]
    fresh_nodes = list(scratch.nodes)
    spec = speculate_transformed(tx, func, fresh, f"the function given to {name}")
    if spec.effects:
        _break(tx, f"the function given to {name} " + "; ".join(spec.effects))
    flat = flatten(tx, spec.output)
    if flat is None or any(leaf.tid is None for leaf in flat[1]):
        _break(tx, f"the function given to {name} returns something other than tensors, tuples and lists")
    structure, leaves = flat
    if has_aux and (structure == "tensor" or structure[0] != "tuple" or len(structure[1]) != 2):
        _break(tx, f"the function given to {name} with has_aux=True does not return (output, aux)")
    nodes, problem = output_tensors(tx, spec, leaves)
    if problem:
        _break(tx, problem)
    scratch_ids = {id(n) for n in fresh_nodes}
    closed_over = [n for n in spec.builder.free_variables() if id(n) not in scratch_ids and n.graph is not scratch]
    by_node = {e.node: tid for tid, e in tx.state.heap.items() if isinstance(e, TensorEntry) and e.node is not None}
    if not all(n in by_node for n in closed_over):
        _break(tx, f"the function given to {name} reads a value of the trace that is not a tensor")
    examples = [n.meta["val"] for n in fresh_nodes] + fake_of_nodes(tx, closed_over)
    gm = spec.builder.finish_subgraph(_restructure(structure, iter(nodes)), fresh_nodes + closed_over, examples)
    return gm, [TensorVariable(by_node[n]) for n in closed_over]


def _record(tx: Tracer, target: Any, name: str, gm: torch.fx.GraphModule, constants: tuple, tensors: list,
            extra: tuple = (), kwargs: dict | None = None) -> VariableTracker:
    """One node ``target(gm, *constants, *tensors, *extra, **kwargs)``, its value propagated on fakes
    (``extra``: VTs of tensors or tuples of them; ``kwargs``: constants)."""
    fakes = [tx.tensor(t).fake for t in tensors]
    with tx.fake_context():
        try:
            fake_out = target(gm, *constants, *fakes, *(_fake_tree(tx, e) for e in extra), **(kwargs or {}))
        except Exception as e:  # noqa: BLE001 (functorch's own errors: the real call raises them)
            _break(tx, f"{name} raises {type(e).__name__}: {e}")
    args = (tx.graph.get_attr(f"{name}_body", gm), *constants, *(to_fx(tx, t) for t in tensors),
            *(to_fx(tx, e) for e in extra))
    return wrap_result(tx, fake_out, tx.graph.call_function(target, args, dict(kwargs or {}), fake_out))


def _fake_tree(tx: Tracer, var: VariableTracker) -> Any:
    if isinstance(var, TensorVariable):
        return tx.tensor(var).fake
    if isinstance(var, TupleVariable):
        return tuple(_fake_tree(tx, i) for i in var.items)
    if isinstance(var, ConstantVariable):
        return var.value
    return [_fake_tree(tx, i) for i in tx.list_items(var)]


def _tensor_tree(tx: Tracer, var: VariableTracker) -> bool:
    if isinstance(var, TensorVariable):
        return True
    if isinstance(var, TupleVariable) and var.cls is tuple:
        return all(_tensor_tree(tx, i) for i in var.items)
    return False


def _bind(tx: Tracer, target: Any, args: list, kwargs: dict) -> dict:
    try:
        bound = inspect.signature(target).bind(*args, **kwargs)
    except TypeError:
        _break(tx, f"{target.__name__} called with arguments it does not take")
    bound.apply_defaults()
    out = {}
    for k, v in bound.arguments.items():
        if isinstance(v, VariableTracker):
            out[k] = _realized(tx, v)
        elif isinstance(v, tuple) and all(isinstance(i, VariableTracker) for i in v):  # *primals
            out[k] = [_realized(tx, i) for i in v]
        else:
            out[k] = ConstantVariable(v)
    return out


def _flag(tx: Tracer, var: VariableTracker, what: str) -> bool:
    if not isinstance(var, ConstantVariable) or not isinstance(var.value, bool):
        _break(tx, f"{what} is not a constant bool")
    return var.value


def jvp(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """``torch.func.jvp(func, primals, tangents, strict=False, has_aux=False)``: one node."""
    bound = _bind(tx, torch.func.jvp, args, kwargs)
    primals, tangents = bound["primals"], bound["tangents"]
    options = (("strict", _flag(tx, bound["strict"], "jvp's strict")),
               ("has_aux", _flag(tx, bound["has_aux"], "jvp's has_aux")))
    if not isinstance(primals, TupleVariable) or not isinstance(tangents, TupleVariable) or \
            not all(isinstance(t, TensorVariable) for t in tangents.items):
        _break(tx, "jvp's primals and tangents are not tuples of tensors")
    gm, closed_over = _body(tx, "jvp", bound["func"], list(primals.items), options[1][1])
    counts = (len(primals.items), len(closed_over))
    tx.push(_record(tx, apply_jvp, "jvp", gm, (counts, options), [*primals.items, *closed_over, *tangents.items]))


def _forward(tx: Tracer, name: str, function: Any, bound: dict, has_aux: bool) -> None:
    """``vjp`` and ``linearize``: the forward value now, and a partial of ``function`` for the returned function."""
    primals = list(bound["primals"])
    gm, closed_over = _body(tx, name, bound["func"], primals, has_aux)
    if any(draws_random_numbers(n) for n in gm.graph.nodes):
        _break(tx, f"the function given to {name} draws random numbers: the function {name} returns would "
               "compute its gradient from different ones")
    tensors = [*primals, *closed_over]
    if function is linearize_function and tx.state.grad_enabled and any(
            tx.tensor(t).meta.requires_grad for t in tensors):
        # eager's jvp_fn runs a graph traced by make_fx whose constants cut the autograd path to the primals
        # (its outputs require grad, yet give them no gradient): torch.compile breaks on linearize, as here
        _break(tx, "linearize of tensors that require grad runs for real (its outputs' autograd is make_fx's)")
    output = _record(tx, run_subgraph, name, gm, (), tensors)
    counts = (len(primals), len(closed_over))
    # what the returned function reads: copies, so that an in-place change of a primal or a closed-over tensor
    # before it is called does not reach it (eager's vjp_fn reads what autograd saved at the call of vjp)
    snapshots = [call_tensor_op(tx, "call_function", torch.clone, (t,), {}) for t in tensors]
    if function is vjp_function:
        # eager's vjp_fn reads what autograd saved, and raises at its call if one of those tensors was written in
        # place since ("modified by an inplace operation"): a later write makes this vjp run for real
        # (tensors/saved.py); any primal or closed-over tensor counts, as which ones are saved is not known here
        saved_tensors.record(tx, [tx.tensor(t).fake for t in tensors])
    flags = (ConstantVariable(has_aux),) if function is vjp_function else ()
    made = PartialVariable(wrap(tx, function, None), (PythonObjectVariable(gm), ConstantVariable(counts), *flags,
                                                      *snapshots), ())
    if has_aux:
        tx.push(TupleVariable((output.items[0], made, output.items[1])))
    else:
        tx.push(TupleVariable((output, made)))


def vjp(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """``torch.func.vjp(func, *primals, has_aux=False)`` -> ``(output, vjp_fn[, aux])``."""
    saved_tensors.refuse_if_saving_runs_for_real(tx, "torch.func.vjp")
    bound = _bind(tx, torch.func.vjp, args, kwargs)
    _forward(tx, "vjp", vjp_function, bound, _flag(tx, bound["has_aux"], "vjp's has_aux"))


def linearize(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """``torch.func.linearize(func, *primals)`` -> ``(output, jvp_fn)``."""
    _forward(tx, "linearize", linearize_function, _bind(tx, torch.func.linearize, args, kwargs), False)


def _call_made(tx: Tracer, target: Any, args: list, kwargs: dict, name: str, n_constants: int) -> None:
    """A call of the partial a traced ``vjp`` / ``linearize`` made: ``args`` are the partial's (the subgraph,
    counts, flags, tensors) and then the caller's: one node."""
    if len(args) < n_constants or not isinstance(args[0], PythonObjectVariable) or not all(
            isinstance(a, ConstantVariable) for a in args[1:n_constants]):
        _break(tx, f"a function {name} returned called in an unexpected way")
    if kwargs:
        _break(tx, f"the function {name} returned called with keyword arguments")
    gm, counts = args[0].value, args[1].value
    tensors = list(args[n_constants:n_constants + sum(counts)])
    extra = tuple(_realized(tx, e) for e in args[n_constants + sum(counts):])
    if not all(_tensor_tree(tx, e) for e in extra):
        _break(tx, f"the function {name} returned is called on something other than tensors and tuples of them")
    constants = tuple(a.value for a in args[1:n_constants])
    tx.push(_record(tx, target, name, gm, constants, tensors, extra))


def call_vjp_function(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """The ``vjp_fn`` a traced ``vjp`` returned, called on the cotangents: one node."""
    _call_made(tx, vjp_function, args, kwargs, "vjp", 3)


def call_linearize_function(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """The ``jvp_fn`` a traced ``linearize`` returned, called on the tangents: one node."""
    _call_made(tx, linearize_function, args, kwargs, "linearize", 2)


#: The rules, by the callable: the transforms, and the functions the partials they return call.
RULES = {torch.func.vjp: vjp, torch.func.jvp: jvp, torch.func.linearize: linearize,
         vjp_function: call_vjp_function, linearize_function: call_linearize_function}
