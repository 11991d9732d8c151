"""``torch.func`` transforms (``vmap``, ``grad``, ``grad_and_value``, ``jacrev``, ``jacfwd``, ``hessian``):
the transformed function is speculated into a subgraph, and the graph calls the transform on it::

    vmap(lambda a, b: a @ b, in_dims=(0, None))(x, w)
      ->  apply_to_graph("vmap", (("in_dims", (0, None)), ...), self.vmap_body_0, l_x, l_w)
          vmap_body_0(a, l_w):  matmul = a @ l_w;  return matmul          # one sample of x

``torch.func.vmap(f, ...)`` itself makes ``functools.partial(apply_transform, "vmap", options, f)``: calling
it is a call of :func:`apply_transform`, whose rule speculates ``f`` on one sample of each batched argument
(``grad`` and the Jacobians: on fresh tensors shaped like the arguments), lifts what ``f`` reads from the
trace as extra inputs (unbatched, not differentiated), and records :func:`apply_to_graph`. Runs eagerly,
both are exactly ``torch.func.<name>(f, **options)(*args)``, so a graph break anywhere still computes
eager's values: the partial crosses the break as a partial, and a function from ``torch._functorch``
(a transform made for real) is never inlined -- it runs for real.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import dataclasses
import inspect
import types
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
import torch.func
from ..tensors.meta import fresh_base
from ..guards.source import ModuleMemberSource
from ..variables.base import (
    ConstantVariable,
    DictVariable,
    LazyArgument,
    NNModuleVariable,
    PartialVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
)
from ..variables.builder import of_type, wrap
from ..tensors.ops import wrap_result
from . import calls
from .nn_modules import module_attr
from .known import const_value, is_const
from .speculation import fake_of_nodes, flatten, output_tensors, speculate_transformed

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer

#: The transforms captured, by the function torch.func exposes.
TRANSFORMS = {getattr(torch.func, name): name
              for name in ("vmap", "grad", "grad_and_value", "jacrev", "jacfwd", "hessian")}


def apply_transform(name: str, options: tuple, func: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.func.<name>(func, **options)(*args, **kwargs)``: what a transform made in a trace computes."""
    return getattr(torch.func, name)(func, **dict(options))(*args, **kwargs)


def apply_to_graph(name: str, options: tuple, gm: torch.fx.GraphModule, *args: Any) -> Any:
    """The graph's call of a transform on a speculated subgraph (the target of the FX node)."""
    return getattr(torch.func, name)(gm, **dict(options))(*args)


def _break(tx: Tracer, why: str) -> None:
    tx.unsupported("higher_order", f"torch.func: {why}", ("the transformed function runs for real",))


def make_transform(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """``torch.func.vmap(f, in_dims=...)`` and the others: a partial of :func:`apply_transform` (options must
    be constants)."""
    target = getattr(fn, "fn", None)
    name = TRANSFORMS[target]
    try:
        bound = inspect.signature(target).bind(*args, **kwargs)
    except TypeError:
        return _break(tx, f"{name} called with arguments it does not take")
    func = bound.arguments.pop("func")
    if not all(is_const(tx, v) for v in bound.arguments.values()):
        return _break(tx, f"{name}'s options are not constants")
    options = tuple((k, const_value(tx, v)) for k, v in bound.arguments.items())
    tx.push(PartialVariable(wrap(tx, apply_transform, None), (ConstantVariable(name), ConstantVariable(options),
                                                                func), ()))


def _fresh(tx: Tracer, var: TensorVariable, drop: int | None, scratch: torch.fx.Graph, label: str) -> TensorVariable:
    """A new tensor like ``var`` (without dimension ``drop``: one sample of a batched argument), the value of a
    placeholder of ``scratch``."""
    meta = tx.tensor(var).meta
    shape = list(meta.shape)
    if drop is not None:
        if not -len(shape) <= drop < len(shape):
            _break(tx, f"in_dims {drop} is out of range for a tensor of {len(shape)} dimensions")
        del shape[drop]
    stride = torch.empty(shape, device="meta").stride()
    meta = dataclasses.replace(meta, shape=tuple(shape), stride=stride, storage_offset=0, base=None, version=0)
    with tx.fake_mode:
        fake = fresh_base(meta)
    node = scratch.placeholder(label)
    node.meta["val"] = node.meta["example_value"] = fake
    return tx.new_tensor(fake, node)


def apply(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """A call of :func:`apply_transform` in the trace: see the module docstring."""
    if len(args) < 3 or not is_const(tx, args[0]) or not is_const(tx, args[1]):
        return _break(tx, "a transform called in an unexpected way")
    name, options = const_value(tx, args[0]), dict(const_value(tx, args[1]))
    func = args[2]
    user_args = [wrap(tx, a.value, a.source) if isinstance(a, LazyArgument) else a for a in args[3:]]
    scratch = torch.fx.Graph()
    call_args, fresh_nodes, dims = [], [], []
    if name == "vmap":
        in_dims = options.get("in_dims", 0)
        in_dims = tuple(in_dims) if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(user_args)
        if len(in_dims) != len(user_args) or not all(d is None or isinstance(d, int) for d in in_dims):
            return _break(tx, "vmap's in_dims is not one int or None per argument")
        for i, (a, d) in enumerate(zip(user_args, in_dims)):
            if d is None:
                call_args.append(a)
            elif isinstance(a, TensorVariable):
                call_args.append(_fresh(tx, a, d, scratch, f"sample_{i}"))
                fresh_nodes.append(scratch.find_nodes(op="placeholder", target=f"sample_{i}")[0])
                dims.append(d)
            else:
                return _break(tx, f"vmap maps over dimension {d} of a {a.python_type().__name__}")
    else:
        argnums = options.get("argnums", 0)
        positions = {}
        for i, a in enumerate(user_args):
            if isinstance(a, TensorVariable):
                positions[i] = len(fresh_nodes)
                call_args.append(_fresh(tx, a, None, scratch, f"arg_{i}"))
                fresh_nodes.append(scratch.find_nodes(op="placeholder", target=f"arg_{i}")[0])
            else:
                call_args.append(a)
        wanted = argnums if isinstance(argnums, tuple) else (argnums,)
        if not all(isinstance(n, int) and n in positions for n in wanted):
            return _break(tx, f"{name}'s argnums {argnums} must name tensor arguments")
        options["argnums"] = tuple(positions[n] for n in wanted) if isinstance(argnums, tuple) else positions[argnums]
    spec = speculate_transformed(tx, func, call_args, f"the function given to {name}", kwargs)
    if spec.effects:
        return _break(tx, f"the function given to {name} " + "; ".join(spec.effects))
    flat = flatten(tx, spec.output)
    if flat is None:
        return _break(tx, f"the function given to {name} returns something other than tensors, tuples and lists")
    structure, leaves = flat
    if any(leaf.tid is None for leaf in leaves):
        return _break(tx, f"the function given to {name} returns a number")
    nodes, problem = output_tensors(tx, spec, leaves)
    if problem:
        return _break(tx, problem)
    scratch_ids = {id(n) for n in fresh_nodes}
    lifted = [n for n in spec.builder.free_variables() if id(n) not in scratch_ids and n.graph is not scratch]
    inputs = fresh_nodes + lifted
    if name == "vmap":
        options["in_dims"] = tuple(dims) + (None,) * len(lifted)
    examples = [n.meta["val"] for n in fresh_nodes] + fake_of_nodes(tx, lifted)
    gm = spec.builder.finish_subgraph(_restructure(structure, iter(nodes)), inputs, examples)
    real_inputs = [a for a, c in zip(user_args, call_args) if isinstance(c, TensorVariable) and c is not a]
    outer = [tx.tensor(a).fake for a in real_inputs] + examples[len(fresh_nodes):]
    frozen = tuple(options.items())
    with tx.fake_context():
        try:
            fake_out = apply_to_graph(name, frozen, gm, *outer)
        except Exception as e:  # noqa: BLE001 (functorch's own errors: KeyError for an op it has no rule for ...)
            return _break(tx, f"{name} of the traced function raises {type(e).__name__}: {e}")
    from_graph = [tx.tensor(a).node for a in real_inputs] + lifted
    node = tx.graph.call_function(apply_to_graph, (name, frozen, tx.graph.get_attr(f"{name}_body", gm),
                                                   *from_graph), {}, fake_out)
    tx.push(wrap_result(tx, fake_out, node))


def _restructure(structure: Any, nodes: Any) -> Any:
    """The subgraph's output: ``structure`` (from :func:`flatten`) with each tensor leaf's node."""
    if structure == "tensor":
        return next(nodes)
    kind, children = structure
    items = [_restructure(c, nodes) for c in children]
    return tuple(items) if kind == "tuple" else items


def functional_call(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    """``torch.func.functional_call(module, {name: tensor}, args, kwargs)``: ``module`` called with each named
    parameter or buffer read as the given tensor. While the call is traced, the memo entry of each member's
    source (``L['m'].lin.weight``) holds the given tensor's VT, so every read of it (``self.weight``,
    ``parameters()``) finds that instead of the live member; the entries are restored afterwards, as
    functional_call restores the module."""
    try:
        bound = inspect.signature(torch.func.functional_call).bind(*args, **kwargs)
    except TypeError:
        return _break(tx, "functional_call called with arguments it does not take")
    bound.apply_defaults()
    arguments = {k: v if isinstance(v, VariableTracker) else ConstantVariable(v) for k, v in bound.arguments.items()}
    module, members = arguments["module"], arguments["parameter_and_buffer_dicts"]
    options = {k: arguments[k] for k in ("tie_weights", "strict")}
    if not isinstance(module, NNModuleVariable) or module.source is None or not isinstance(members, DictVariable) \
            or not all(is_const(tx, v) for v in options.values()) or const_value(tx, options["strict"]):
        return _break(tx, "functional_call of a module from outside the trace with one dict (strict=False)")
    call_args = arguments["args"]
    call_args = [] if isinstance(call_args, ConstantVariable) and call_args.value is None else \
        list(call_args.items) if isinstance(call_args, TupleVariable) else [call_args]
    call_kwargs = arguments["kwargs"]
    call_kwargs = {} if isinstance(call_kwargs, ConstantVariable) and call_kwargs.value is None else \
        dict(tx.dict_entry(call_kwargs).items) if isinstance(call_kwargs, DictVariable) else None
    if call_kwargs is None:
        return _break(tx, "functional_call's kwargs is not a dict")
    named, replaced = {}, {}
    for key, value in tx.dict_entry(members).items:
        if not isinstance(key, str):
            return _break(tx, "functional_call with a key that is not a string")
        *path, leaf = key.split(".")
        owner = module
        for part in path:
            owner = module_attr(tx, owner, part)
            if not isinstance(owner, NNModuleVariable):
                return _break(tx, f"functional_call: {key} is not a parameter or buffer of a submodule")
        registry = next((r for r in ("_parameters", "_buffers") if leaf in owner.module.__dict__.get(r, {})), None)
        if registry is None:
            return _break(tx, f"functional_call: {key} is not a parameter or buffer of the module")
        named[ModuleMemberSource(owner.source, leaf, registry).name] = value
        replaced[id(owner.module.__dict__[registry][leaf])] = value
    shared = [t for t in _members(module.module) if sum(t is u for u in _members(module.module)) > 1]
    if shared:
        return _break(tx, "functional_call of a module with tied parameters")
    prefix = module.source.name

    def inside(name: str) -> bool:  # a path through the module (a reference held elsewhere is not replaced)
        return name == prefix or name.startswith((prefix + ".", prefix + "["))

    # Names the trace already read a replaced member by, through the module, are replaced too; a read by a
    # new path through the module (a new input, or a SAME guard on the member's VT) is detected below.
    originals = {tx.state.memo[("id", i)].tid: v for i, v in replaced.items() if ("id", i) in tx.state.memo}
    for name, var in tx.state.memo.items():
        if isinstance(name, str) and inside(name) and isinstance(var, TensorVariable) and var.tid in originals:
            named.setdefault(name, originals[var.tid])
    sources = {tx.tensor(TensorVariable(tid)).source for tid in originals}
    inputs_before, guards_before = len(tx.state.inputs), tx.state.guards
    saved = {name: tx.state.memo.get(name) for name in named}
    tx.state = tx.state.replace(memo=tx.state.memo.update(named))
    try:
        output = calls.call_sync(tx, module, call_args, call_kwargs)
    finally:
        memo = tx.state.memo
        for name, old in saved.items():
            memo = (memo.delete(name) if name in memo else memo) if old is None else memo.set(name, old)
        tx.state = tx.state.replace(memo=memo)
    new_inputs = list(tx.state.inputs)[inputs_before:]
    new_guards = [g for key, (_, g) in tx.state.guards.items() if key not in guards_before]
    if any(id(tx.input_values.get(tid)) in replaced and inside(src.name) for src, tid in new_inputs) or any(
            g.kind == "SAME" and g.source is not None and inside(g.source.name) and g.expected in sources
            for g in new_guards):
        return _break(tx, "functional_call: the module reads a replaced parameter or buffer by another path")
    tx.push(output)


def _members(module: torch.nn.Module) -> list:
    return [t for m in module.modules() for r in (m._parameters, m._buffers) for t in r.values() if t is not None]


def is_functorch_internal(target: Any) -> bool:
    """A Python function of ``torch._functorch`` (what a transform made for real returns): never inlined."""
    return of_type(target, types.FunctionType) and "/torch/_functorch/" in target.__code__.co_filename.replace(
        "\\", "/")


def run_functorch_for_real(tx: Tracer, fn: VariableTracker, args: list, kwargs: dict) -> None:
    _break(tx, f"{getattr(getattr(fn, 'fn', None), '__qualname__', 'a function')} is torch._functorch's own code (or "
               "a transform made outside the trace): it runs for real, never inlined")
