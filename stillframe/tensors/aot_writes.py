"""In-place writes an AOTAutograd backend cannot take as eager makes them, and which inputs a graph writes.

On the ``eager`` backend a graph runs its in-place ops as they are, in order. AOTAutograd (``aot_eager``,
``inductor``) functionalizes the graph: every write becomes an out-of-place op, and a written graph input gets
its new value copied back (``copy_``, or ``as_strided_`` for its shape) after the graph. Some writes then
differ from eager's, or the backend refuses them (each found by the differential fuzzer on ``aot_eager``,
session 24). :func:`refuse_writes_aot_cannot_take` breaks the graph before such a write, and the write runs
for real. :func:`note_input_writes` records which inputs a graph writes, for ``CacheEntry.rerun_on_raise``.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import operator
from typing import Any

import torch

from .. import compat
from ..errors import RetraceRunForReal
from ..variables.base import ListVariable, TensorVariable, TupleVariable
from .effects import hashable_key
from .saved import location, sharing_version

RUNS_FOR_REAL = ("the graph before it runs, then the call itself, then tracing resumes",)


def refuse_writes_aot_cannot_take(tx: Any, kind: str, target: Any, args: tuple, kwargs: dict, roots: list,
                                  views: list, describe: str, mutated: list) -> None:
    """Break the graph before an in-place op (``describe``, writing the tensors ``mutated``, of alias ``roots`` and
    ``views``) that an AOTAutograd backend would get wrong or refuse; call only where ``tx.functional_backend``."""
    name = _method_name(kind, target)
    if _writes_a_memory_twice(tx, mutated):
        tx.unsupported("unsupported_call", f"{describe} writes two tensors sharing memory (one tensor twice, or a "
                       "view of it, in one list): AOTAutograd's functional form computes each new value from the "
                       "memory as it was before the op, so the last write wins where eager's writes add up "
                       "(torch._foreach_add_([x, x.view(3)], 1) added 1, eager 2; torch.compile the same)",
                       RUNS_FOR_REAL)
    if name in ("resize_", "resize_as_"):
        tx.unsupported("unsupported_call", f"{describe} resizes a tensor's storage: AOTAutograd's functionalization "
                       "refuses to grow one that it has made a view (torch.compile breaks here too)", RUNS_FOR_REAL)
    if name == "set_" and _set_touches_input(tx, args, roots, views):
        tx.unsupported("unsupported_call", f"{describe} makes a tensor share the storage of another where one of "
                       "them is a graph input: AOTAutograd refuses a set_ on an input that the graph also writes "
                       "through the other tensor (BackendCompilerFailed), and returns a tensor set_ to an input as "
                       "that input itself, where eager's is another object (torch.compile breaks at a set_ on an "
                       "input too)", RUNS_FOR_REAL)
    if name == "random_" and (len(args) > 1 or kwargs):
        tx.unsupported("unsupported_call", f"{describe} with bounds: AOTAutograd's graph names the overload "
                       "aten.random_.from, a Python keyword, and its code does not compile (torch.compile breaks "
                       "here too)", RUNS_FOR_REAL)
    if _masked_write(tx, kind, target, args):
        tx.unsupported("data_dependent", f"{describe} writes through a boolean mask: AOTAutograd turns it into "
                       "nonzero(), whose output shape depends on data",
                       ("the graph so far runs, this step runs for real, tracing resumes",))
    if _reshapes_input_requiring_grad(tx, kind, target, roots, views):
        tx.unsupported("autograd_leaf", f"{describe} changes the shape of a graph input that requires grad: "
                       "AOTAutograd applies it after the graph, outside the no_grad block that allowed it on a "
                       "leaf", RUNS_FOR_REAL)
    if _shape_only(kind, target) and not any(tid in tx.input_values for tid in (*roots, *views)):
        tx.unsupported("unsupported_call", f"{describe} changes the shape of a tensor the graph made: AOTAutograd "
                       "returns it as a view of the tensor before the change, made inside its autograd Function "
                       "(or under no_grad where nothing requires grad), and a later in-place write to it raises where "
                       "eager's tensor is no view (fuzz 53:72; fuzz 81:301, a write of a tensor requiring grad into "
                       "one that did not: 'A view was created in no_grad mode')", RUNS_FOR_REAL)
    if _shape_only(kind, target) and tx.fake_mode.shape_env is not None and \
            any(tid in tx.input_values for tid in (*roots, *views)):
        tx.unsupported("dynamic_shape", f"{describe} changes the shape of a graph input with symbolic sizes: "
                       "AOTAutograd makes an output view of it from its shape before the change, which the plan "
                       "could only remake with static sizes (fuzz 34:766; torch.compile breaks here too)",
                       RUNS_FOR_REAL)
    if _writes_reshaped_input(tx, kind, target, roots, views):
        tx.unsupported("unsupported_call", f"{describe} writes the data of a graph input whose shape the graph "
                       "changed in place: AOTAutograd loses the autograd history the write gives it", RUNS_FOR_REAL)
    if _shape_only(kind, target) and any(tid in tx.inputs_written for tid in (*roots, *views)):
        tx.unsupported("unsupported_call", f"{describe} changes the shape of a graph input whose data the graph "
                       "wrote: AOTAutograd's copy of the new data back into the input fails (fuzz 45:10: 'expand: "
                       "the requested shape has too few dimensions')", RUNS_FOR_REAL)
    if _writes_inference_input(tx, roots, views):
        tx.unsupported("unsupported_call", f"{describe} writes into an inference tensor (made under "
                       "torch.inference_mode) outside inference mode: eager raises there, and AOTAutograd raises "
                       "it while compiling (torch.compile breaks and raises eager's error)", RUNS_FOR_REAL)
    if _writes_input_overlapping_itself(tx, roots, views):
        tx.unsupported("unsupported_call", f"{describe} writes into a graph input whose memory overlaps itself (an "
                       "expand() made before the graph) through a view that does not: AOTAutograd's copy_ of the "
                       "new data back into the input refuses it ('more than one element of the written-to tensor "
                       "refers to a single memory location'; fuzz 70:25, torch.compile the same)", RUNS_FOR_REAL)
    if _writes_input_with_grad_hooks(tx, roots, views):
        tx.unsupported("unsupported_call", f"{describe} writes into a graph input that retains its grad or has a "
                       "gradient hook: AOTAutograd's copy_ after the graph would carry them, which the gradients "
                       "of the graph's own reads of the new value never pass", RUNS_FOR_REAL)
    if _writes_input_aliased_outside_its_views(tx, roots, views):
        tx.unsupported("unsupported_call", f"{describe} writes into a graph input that shares memory with another "
                       "input that is not a view of it (a detach(), .data): AOTAutograd refuses such input "
                       "mutations", RUNS_FOR_REAL)
    if _writes_aliased_inputs_of_mixed_leafness(tx, roots, views):
        tx.unsupported("unsupported_call", f"{describe} writes into graph inputs that share memory, a leaf and a "
                       "view of it that is not: AOTAutograd refuses to take them as inputs of one graph",
                       RUNS_FOR_REAL)
    if _gives_history_to_detached_input(tx, args, kwargs, roots, views):
        tx.unsupported("autograd_leaf", f"{describe} gives autograd history to a detach() the graph made of a graph "
                       "input: AOTAutograd takes it for a write into the input and its result for an alias of the "
                       "input, so the result lost the history (or the gradient reached the input, which eager's "
                       "detach() cuts; fuzz 68:203, torch.compile the same)", RUNS_FOR_REAL)
    direct = _inputs_written_through(tx, args, kwargs, roots, views)
    if _writes_two_aliased_inputs(tx, direct | tx.inputs_written_directly):
        tx.unsupported("unsupported_call", f"{describe} writes a graph input that requires grad and shares memory "
                       "with another input the graph writes (a tensor and a view of it, two views): AOTAutograd's "
                       "backward of such a graph fails ('outs_to_grad length (1) != tangents length (2)', fuzz "
                       "54:142; torch.compile fails too)", RUNS_FOR_REAL)
    tx.inputs_written_directly |= direct


def refuse_out_resizing_input(tx: Any, kwargs: dict, roots: list, views: list, fresh: dict, describe: str) -> None:
    """Break the graph at an ``out=`` write (``describe``, writing alias ``roots`` and ``views``, whose new fake
    tensors after the op are ``fresh``, by tid) that changes the shape of a graph input or of a view of one, as
    eager resizes ``out`` (``torch.add(x, 1, out=torch.empty(0))``): AOTAutograd copies the new value back into
    the input with ``copy_`` after the graph, which cannot change its shape (BackendCompilerFailed "expand: the
    requested shape has too few dimensions", found by a probe). The write runs for real instead. An ``out``
    made inside the graph is resized by the backend as eager resizes it; call only where
    ``tx.functional_backend``, after the op ran on fake tensors."""
    if "out" not in kwargs or not any(tid in tx.input_values for tid in roots):
        return
    if any(tuple(tx.state.heap[tid].fake.shape) != tuple(fresh[tid].shape) for tid in (*roots, *views)):
        tx.unsupported("unsupported_call", f"{describe} resizes its out= tensor, a graph input: AOTAutograd's "
                       "copy of the new value back into the input cannot change its shape", RUNS_FOR_REAL)


def refuse_reading_aliases_of_written_inputs(tx: Any, tensors: list) -> None:
    """Break before an op that reads a graph input (one of ``tensors``, TensorVariables) sharing memory with an
    input the graph already wrote, where AOTAutograd would refuse the two as inputs of one graph: a leaf and a
    view of it that is not (fuzz 31:33: ``w.sub_(...)`` under ``no_grad``, then ``w[0]`` made before the break
    is read), or two tensors that are not views of each other (31:26). The graph so far, which does not read
    it, runs; the op runs for real; the next graph takes both. Call only where ``tx.functional_backend``."""
    if not tx.inputs_written:
        return
    for var in tensors:
        tid = var.tid
        if tid in tx.input_values and tid not in tx.inputs_written and \
                any(_aliased_apart(tx, tid, w) for w in tx.inputs_written if w in tx.input_values):
            tx.unsupported("unsupported_call", "reads a graph input that shares memory with an input the graph "
                           "wrote, a leaf beside a view that is not or two tensors that are not views of each "
                           "other: AOTAutograd refuses them as inputs of one graph", RUNS_FOR_REAL)


def _aliased_apart(tx: Any, a: int, b: int) -> bool:
    """Whether inputs ``a`` and ``b`` share memory but not as AOTAutograd takes aliased inputs it sees mutated
    (views of one base, all leaves or none)."""
    key = compat.storage_key(tx.input_values[a])
    if key is None or key != compat.storage_key(tx.input_values[b]):
        return False
    ma, mb = tx.state.heap[a].meta, tx.state.heap[b].meta
    root_a = ma.base if ma.base is not None else a
    root_b = mb.base if mb.base is not None else b
    return root_a != root_b or ma.is_leaf != mb.is_leaf


def _writes_a_memory_twice(tx: Any, mutated: list) -> bool:
    """Whether two of the tensors an op writes (``mutated``, TensorVariables) belong to one alias group, or to
    groups that share memory through a ``detach()`` (``saved.sharing_version``)."""
    if len(mutated) < 2:
        return False
    seen: set = set()
    for var in mutated:
        base = tx.state.heap[var.tid].meta.base
        family = sharing_version(tx, {var.tid if base is None else base})
        if family & seen:
            return True
        seen |= family
    return False


def _writes_input_aliased_outside_its_views(tx: Any, roots: list, views: list) -> bool:
    """Whether a write touches a graph input sharing memory with another input outside its alias group (its
    roots and their views in the trace): one that is not a view of it (fuzz 31:26: ``t4 = w.detach()`` before
    a break, then ``w[1:] = t4[1:]``)."""
    family = set(roots) | set(views)
    written = [tid for tid in family if tid in tx.input_values]
    return any(_aliased_apart(tx, w, other) for w in written for other in tx.input_values
               if other not in family)


def refuse_output_views_of_aliased_written_inputs(tx: Any, gm: torch.fx.GraphModule) -> None:
    """Trace again with the op run for real that makes an output of ``gm`` that is a view of graph inputs sharing
    memory, one of which the graph writes (``t1 = w.unsqueeze(0)`` before a break, then ``w.neg_(); return
    t1.narrow(0, 0, 1)``). AOTAutograd takes such inputs through one synthetic base, and remakes the output
    after the graph by replaying the output's views, recorded from ``t1``, on that base (``w``): the shapes do
    not match, and its assertion "incorrect out shape after application of ViewMeta sequence" (or a wrong
    dimension error) reached the user (fuzz 54:146; torch.compile raises it too). Run for real, the view enters
    the rest of the graph as an input, which AOTAutograd returns as it is. Call only where
    ``tx.functional_backend``, on the finished graph (only the inputs it reads count)."""
    read = {node for node in gm.graph.nodes if node.op == "placeholder"}
    # (a float the shape policy made symbolic is an input too, a 0-dim tensor with no heap entry: not one of these)
    inputs = [tid for tid in tx.input_values if tid in tx.state.heap and tx.tensor_node_of_input(tid) in read]
    output = next((node for node in gm.graph.nodes if node.op == "output"), None)
    if output is None or not tx.inputs_written:
        return
    locations = set()
    for node in output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],):
        if not isinstance(node, torch.fx.Node) or node.op == "placeholder" or "location" not in node.meta:
            continue
        val = node.meta.get("val")
        tid = tx.tid_of_fake(val) if isinstance(val, torch.Tensor) else None
        if tid is None or tid in tx.input_values or tx.state.heap[tid].meta.base is None:
            continue
        group = [t for t in inputs if _root(tx, t) == tx.state.heap[tid].meta.base]
        if len(group) > 1 and any(t in tx.inputs_written for t in group):
            locations.add(node.meta["location"])
    if locations:
        raise RetraceRunForReal(frozenset(locations), "makes an output view of graph inputs that share memory, one "
                                "of which the graph writes: AOTAutograd remakes it after the graph from their "
                                "synthetic base with the views recorded from the other input, a wrong shape")


def _root(tx: Any, tid: int) -> int:
    base = tx.state.heap[tid].meta.base
    return tid if base is None else base


def refuse_overlapping_write(tx: Any, describe: str) -> None:
    """Break before a write into memory that overlaps itself or another argument (one eager allows):
    AOTAutograd functionalizes it, reading every argument before writing, where eager's kernel reads elements
    an earlier step of the same op already wrote (fuzz 28:459: ``y.sub_(y.diagonal())``, a silent difference);
    and it copies a written input back with ``copy_``, which refuses memory that overlaps itself (28:85)."""
    tx.unsupported("unsupported_call", f"{describe} writes into memory that overlaps itself or another "
                   "argument: eager's result depends on the order its kernel writes in, which AOTAutograd's "
                   "functional graph does not keep", RUNS_FOR_REAL)


# In-place ops that change only a tensor's shape, strides or storage offset, never its data.
SHAPE_ONLY_METHODS = frozenset({"unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_",
                                "as_strided_"})


def _method_name(kind: str, target: Any) -> str:
    """The name of the tensor method (or function) a node calls."""
    return target if kind == "call_method" else getattr(target, "__name__", "")


def _shape_only(kind: str, target: Any) -> bool:
    return _method_name(kind, target) in SHAPE_ONLY_METHODS


def note_input_writes(tx: Any, kind: str, target: Any, tids: tuple) -> None:
    """Record which graph inputs an in-place op touches, and whether it writes their data or only their shape
    (what ``CacheEntry.rerun_on_raise`` may undo: runtime/compiler._without_effects)."""
    touched = [tid for tid in tids if tid in tx.input_values]
    if not touched:
        return
    (tx.inputs_reshaped if _shape_only(kind, target) else tx.inputs_written).update(touched)
    if tx.functional_backend:  # where: the write runs for real if a later call needs (tensors/saved.py, ops.py)
        sites = tx.input_reshapes if _shape_only(kind, target) else tx.input_writes
        for tid in touched:
            sites.setdefault(tid, set()).add(location(tx))


_INDEX_WRITES = {operator.setitem, "__setitem__", "index_put_", torch.index_put_, torch.Tensor.index_put_}


def _masked_write(tx: Any, kind: str, target: Any, args: tuple) -> bool:
    """Whether ``target`` is an indexed write (``t[mask] = v``, ``index_put_``) through a boolean (or uint8)
    mask of a value ``v`` that requires grad, in grad mode: the gradient of ``v`` is the incoming gradient read
    through the mask, and AOTAutograd's decomposition of that calls ``nonzero`` (fuzz 28:0, ``y[y > 0] += k``:
    the backend failed and the frame ran instruction by instruction with a warning). A constant written through
    a mask needs no such gradient, and the backend takes it."""
    key = hashable_key(target)
    if key is None or key not in _INDEX_WRITES or (kind == "call_method") != isinstance(key, str) or len(args) < 3:
        return False
    value = args[2]
    if not tx.state.grad_enabled or not isinstance(value, TensorVariable) or \
            not tx.state.heap[value.tid].meta.requires_grad:
        return False
    index = args[1]
    items = index.items if isinstance(index, (TupleVariable, ListVariable)) else (index,)
    return any(isinstance(v, TensorVariable) and tx.state.heap[v.tid].meta.dtype in (torch.bool, torch.uint8)
               for v in items)


def _reshapes_input_requiring_grad(tx: Any, kind: str, target: Any, roots: list, views: list) -> bool:
    """Whether an ``unsqueeze_``-like op changes the shape of a graph input that requires grad (fuzz 28:202:
    ``w.unsqueeze_(0)`` under ``no_grad`` on a leaf; AOTAutograd's ``as_strided_`` after the graph raised "a
    leaf Variable that requires grad is being used in an in-place operation")."""
    return _shape_only(kind, target) and any(
        tid in tx.input_values and tx.state.heap[tid].meta.requires_grad for tid in (*roots, *views))


def _writes_reshaped_input(tx: Any, kind: str, target: Any, roots: list, views: list) -> bool:
    """Whether a data write touches a graph input that an ``unsqueeze_``-like op of this graph reshaped (fuzz
    28:432: ``y.transpose_(0, 1)`` under ``no_grad``, then ``y.sub_(x)`` with ``x`` requiring grad; AOTAutograd
    applied both after the graph and ``y`` did not require grad, where eager's ``y`` has a grad_fn)."""
    return not _shape_only(kind, target) and any(tid in tx.inputs_reshaped for tid in (*roots, *views))


def _writes_inference_input(tx: Any, roots: list, views: list) -> bool:
    """Whether a write touches a graph input that is an inference tensor while inference mode is off (``x`` made
    under ``torch.inference_mode()``, then ``x.add_(1)`` in the compiled function: eager raises "Inplace update to
    inference tensor outside InferenceMode is not allowed" at the write; on aot_eager the same error came out of
    the backend's compile as BackendCompilerFailed, found by a probe). The fake op does not raise it."""
    if torch.is_inference_mode_enabled():  # (guarded: the plan runs only where it is as traced)
        return False
    return any(isinstance(live := tx.input_values.get(tid), torch.Tensor) and live.is_inference()
               for tid in (*roots, *views))


def _set_touches_input(tx: Any, args: tuple, roots: list, views: list) -> bool:
    """Whether a ``set_`` writes a graph input (or a view of one), or makes its target share the storage of one
    (``t.set_(y)``, ``t.set_(y[0])``)."""
    if any(tid in tx.input_values for tid in (*roots, *views)):
        return True
    source = args[1] if len(args) > 1 else None
    return isinstance(source, TensorVariable) and source.tid in tx.state.heap and \
        (source.tid in tx.input_values or _root(tx, source.tid) in tx.input_values)


def _writes_input_overlapping_itself(tx: Any, roots: list, views: list) -> bool:
    """Whether a write touches a graph input (written or sharing its memory) whose memory overlaps itself: a
    dimension of more than one element with stride 0 (``g = y[0].expand(3, 3)``, a break, then ``g[1:2] += 1``,
    which eager allows: the written view does not overlap itself, as ops.py's overlap check reads it)."""
    return any(tid in tx.input_values and any(size > 1 and stride == 0 for size, stride in
                                              zip(tx.state.heap[tid].meta.shape, tx.state.heap[tid].meta.stride))
               for tid in (*roots, *views))


def _writes_input_with_grad_hooks(tx: Any, roots: list, views: list) -> bool:
    """Whether a write touches a graph input whose live tensor retains its grad or has tensor hooks (``h = x * 2;
    h.retain_grad()``, a break, then ``h.add_(1); h.sum().backward()``: eager's hooks move to the write's node and
    see the gradient of ``h.sum()``; on aot_eager ``h.grad`` stayed None, found by a probe)."""
    for tid in (*roots, *views):
        live = tx.input_values.get(tid)
        if isinstance(live, torch.Tensor) and (live.retains_grad or live._backward_hooks):
            return True
    return False


def _gives_history_to_detached_input(tx: Any, args: tuple, kwargs: dict, roots: list, views: list) -> bool:
    """Whether a write, with grad mode on, reads a tensor that requires grad (``t[0] = w``, ``t.add_(w)``) into
    a ``detach()`` the graph made of a graph input (``t = x.detach()``, or a view of one: the written alias group
    shares its version counter with the input's, ``saved.sharing_version``). Eager gives ``t`` the write's history
    and leaves ``x`` as it was; AOTAutograd functionalizes ``detach`` into an alias of ``x``, so it counts the
    write as one into ``x`` and returns ``t`` remade from ``x`` after the graph, without history, and the
    gradient of what the graph read of ``t`` after the write reached ``x`` (fuzz 68:203). A write without
    history is exact there (it only changes data)."""
    if not tx.state.grad_enabled:
        return False
    family = {*roots, *views}
    linked = sharing_version(tx, set(roots)) - set(roots)
    if not any(tid in tx.state.heap and _root(tx, tid) in linked for tid in tx.input_values):
        return False
    read = []
    for var in (*args, *kwargs.values()):
        read.extend(var.items if isinstance(var, (TupleVariable, ListVariable)) else (var,))
    return any(isinstance(var, TensorVariable) and var.tid not in family and tx.state.heap[var.tid].meta.requires_grad
               for var in read)


def _inputs_written_through(tx: Any, args: tuple, kwargs: dict, roots: list, views: list) -> set[int]:
    """The graph inputs an in-place op writes as AOTAutograd counts them mutated: each written argument that is
    an input, or a view the graph made of one (followed through the first arguments of the ops that made it
    back to the input). Where that finds none, every input the write touches."""
    inputs = {tid for tid in (*roots, *views) if tid in tx.input_values}
    if not inputs:
        return set()
    placeholders = {id(tx.tensor_node_of_input(tid)): tid for tid in inputs}
    written = set()
    for var in (*args, *kwargs.values()):
        if not isinstance(var, TensorVariable) or var.tid not in (*roots, *views):
            continue
        node = tx.state.heap[var.tid].node
        while isinstance(node, torch.fx.Node) and node.op != "placeholder":
            node = node.args[0] if node.args else None
        if not isinstance(node, torch.fx.Node) or id(node) not in placeholders:
            return inputs
        written.add(placeholders[id(node)])
    return written or inputs


def _writes_two_aliased_inputs(tx: Any, written: set[int]) -> bool:
    """Whether ``written`` holds two graph inputs of one alias group, one of which requires grad (fuzz 54:142:
    ``t4 = t2.narrow(0, 0, 1)`` before a break, then ``t4[1:] = t4; t2[t2 > 0] = 1.5``)."""
    groups: dict[int, list[int]] = {}
    for tid in written:
        base = tx.state.heap[tid].meta.base
        groups.setdefault(tid if base is None else base, []).append(tid)
    return any(len(group) > 1 and any(getattr(tx.input_values[tid], "requires_grad", False) or
                                       tx.state.heap[tid].meta.requires_grad for tid in group)
               for group in groups.values())


def _writes_aliased_inputs_of_mixed_leafness(tx: Any, roots: list, views: list) -> bool:
    """Whether a write touches a graph input that shares memory with another tensor that is, or may become, a
    graph input, some autograd leaves and some not (a leaf ``x`` and ``x[:, 1]``, both live across a break; the
    base of an input view is fakeified with it and is an input once the code reads it): AOTAutograd asserts that
    aliased inputs it sees mutated are all leaves or none (fuzz 28:87)."""
    inputs = [tid for tid in (*roots, *views) if tid in tx.input_values]
    if not inputs:
        return False
    group = set(inputs) | (set(roots) if any(tid in tx.input_values for tid in views) else set())
    return len({tx.state.heap[tid].meta.is_leaf for tid in group}) > 1


# View ops whose write-back AOTAutograd's functionalization makes with a scatter (``slice_scatter``,
# ``select_scatter``...): the base it remakes is a new tensor. Every other view op is undone by a view (``view``'s
# inverse is ``view``): the base after a write through it is remade as a view of the written view.
_SCATTERED_VIEWS = frozenset({operator.getitem, "__getitem__", "narrow", torch.narrow, "select", torch.select,
                              "diagonal", torch.diagonal, "as_strided", torch.as_strided, "split", torch.split,
                              "chunk", torch.chunk, "unbind", torch.unbind, "tensor_split", torch.tensor_split,
                              "split_with_sizes", "unfold", "hsplit", "vsplit", "dsplit"})


def note_view_writes(tx: Any, mutated: list) -> None:
    """Record each in-place write (to the TensorVariables ``mutated``) through a view of a tensor the graph made,
    for :func:`refuse_bases_remade_as_views`; call only where ``tx.functional_backend``."""
    for var in mutated:
        entry = tx.state.heap[var.tid]
        base = entry.meta.base
        if base is not None and base not in tx.input_values and entry.node is not None:
            tx.view_writes.append((base, entry.node, location(tx)))


def refuse_bases_remade_as_views(tx: Any, outputs: list) -> None:
    """Trace again with the writes run for real where the graph writes through a ``view``-like view of a tensor
    it made (``b = a.view(2, 2); b.fill_(7)``) and returns that tensor (a graph output: returned, or live at the
    break). AOTAutograd's functionalization remakes ``a`` as a view of the written ``b``, and returns it as a view
    made inside its autograd Function: eager's ``a`` is no view, and a later in-place op on it raised "Output 0
    of CompiledFunction is a view and is being modified inplace" (found by a probe; torch.compile the same).
    A write through a slice (``a[0].fill_(7)``) is remade with a scatter and stays in the graph."""
    if not tx.view_writes:
        return
    returned = set(outputs)
    locations = frozenset(where for base, node, where in tx.view_writes
                          if _base_node(tx, base) in returned and _remade_as_view(node))
    if locations:
        raise RetraceRunForReal(locations, "writes through a view of a tensor the graph made and returns: "
                                "AOTAutograd would return that tensor as a view")


def _base_node(tx: Any, tid: int) -> Any:
    entry = tx.state.heap.get(tid)
    return getattr(entry, "node", None)


def _remade_as_view(node: Any) -> bool:
    """Whether the chain of view ops from the written view's ``node`` (an FX node) up to its base begins, at the
    base, with a view op that functionalization undoes by a view (not in :data:`_SCATTERED_VIEWS`)."""
    step = None
    for _ in range(256):  # a bound against a malformed graph
        node = _before_writes(node)
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or not val._is_view() or not node.args or \
                not isinstance(node.args[0], torch.fx.Node):
            break
        step, node = node, node.args[0]
    if step is None:
        return False
    return hashable_key(step.target) not in _SCATTERED_VIEWS


_IN_PLACE_OPERATORS = ("iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor",
                       "ilshift", "irshift", "imatmul")
_WRITES_FIRST_ARGUMENT = frozenset({operator.setitem, "__setitem__",
                                    *(getattr(operator, n) for n in _IN_PLACE_OPERATORS),
                                    *(f"__{n}__" for n in _IN_PLACE_OPERATORS)})


def _before_writes(node: Any) -> Any:
    """The node whose tensor an in-place op's ``node`` wrote (what it aliases), through a chain of them."""
    while node.op in ("call_method", "call_function"):
        if isinstance(node.kwargs.get("out"), torch.fx.Node):
            node = node.kwargs["out"]
            continue
        name = _method_name(node.op, node.target)
        in_place = hashable_key(node.target) in _WRITES_FIRST_ARGUMENT or \
            name.endswith("_") and not name.startswith("_")
        if not in_place or not node.args or not isinstance(node.args[0], torch.fx.Node):
            break
        node = node.args[0]
    return node
