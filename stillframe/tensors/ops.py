"""Tensor operations: run on fake tensors, record an FX node, bind results in the heap.

``call_tensor_op(tx, kind, target, args, kwargs)`` is the single path by which
a torch function, a ``Tensor`` method or a Python operator on tensors enters
the graph. ``kind`` is ``"call_function"`` (``target`` a callable) or
``"call_method"`` (``target`` a method name), as in FX.

Out-of-place ops run on the current fake tensors of their arguments. In-place
ops (which ops are in-place is decided by :func:`mutated_arguments`, a rule
table, and double-checked with the fakes' version counters) never touch those
fakes: they run on a *fresh world* reproducing the affected alias group
(:mod:`stillframe.tensors.meta`), and every member of the group gets a new
version. Autograd metadata therefore comes from torch's autograd itself, and a
checkpoint taken before the op still sees the tensors as they were.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import functools
import inspect
import numbers
import operator
import warnings
from typing import Any, Iterator

import torch
from .. import compat
import torch.nn.functional as F
from ..config import config
from ..errors import InternalError, RetraceSymbolic, Unsupported
from ..guards.guard import Guard
from ..guards.source import AttrSource, LiftedSource
from .aot_writes import (note_input_writes, note_view_writes, refuse_out_resizing_input, refuse_overlapping_write,
                         refuse_reading_aliases_of_written_inputs, refuse_writes_aot_cannot_take)
from .dtype_checks import alpha_refusal, cast_refusal
from .effects import (NOT_CONSTANT, aot_refusal, is_pure_query, known_effect, no_rule, query_checker,
                      raises_on_values)
from . import saved
from .meta import fresh_base, fresh_view
from .symbolic import fold_alpha, has_symbols, plain, wrap_symbolic
from ..variables.base import (
    ConstantVariable,
    DictVariable,
    LazyArgument,
    ListVariable,
    PythonObjectVariable,
    RangeVariable,
    SliceVariable,
    SymNodeVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
)
from ..variables.builder import is_constant, of_type, wrap


INPLACE_OPERATORS = {
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
    operator.ipow, operator.imatmul, operator.iand, operator.ior, operator.ixor, operator.ilshift,
    operator.irshift, operator.setitem,
}

# Functions that mutate buffers passed to them: target -> positions/kwarg names of the mutated tensors,
# and a predicate on (args, kwargs) saying whether they do so on this call.
_BATCH_NORM_STATS = ((1, "running_mean"), (2, "running_var"))
MUTATING_FUNCTIONS = {
    F.batch_norm: (_BATCH_NORM_STATS, lambda a, k: _arg(a, k, 5, "training", False)),
    torch.batch_norm: (_BATCH_NORM_STATS[:0] + ((3, "running_mean"), (4, "running_var")),
                       lambda a, k: _arg(a, k, 5, "training", False)),
    F.instance_norm: (_BATCH_NORM_STATS, lambda a, k: _arg(a, k, 5, "use_input_stats", True)),
    # max_norm renormalises the looked-up rows of the weight in place (torch.embedding_renorm_, under no_grad)
    F.embedding: (((1, "weight"),), lambda a, k: _arg(a, k, 3, "max_norm", None) is not None),
    # as F.embedding (embedding_bag(input, weight, offsets, max_norm, ...); found by a probe of nn.EmbeddingBag)
    F.embedding_bag: (((1, "weight"),), lambda a, k: _arg(a, k, 3, "max_norm", None) is not None),
}


@functools.lru_cache(maxsize=None)
def _inplace_position(target: Any) -> int | None:
    """Where a Python function's ``inplace`` parameter sits (``F.relu(input, inplace=False)``: 1,
    ``F.dropout(input, p, training, inplace)``: 3), or ``None``: its argument is passed by position as often
    as by name (``nn.Dropout.forward`` calls ``F.dropout(input, self.p, self.training, self.inplace)``)."""
    try:
        names = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return None
    return names.index("inplace") if "inplace" in names else None


def _inplace(target: Any, args: tuple, kwargs: dict) -> bool:
    """Whether ``target(*args, **kwargs)`` is called with ``inplace=True`` (by name or by position): it writes
    its first argument, as the ``torch.nn.functional`` activations and dropouts do."""
    if "inplace" in kwargs:
        return _as_const(kwargs["inplace"]) is True
    try:
        position = _inplace_position(target)
    except TypeError:  # an unhashable callable
        return False
    return position is not None and position < len(args) and _as_const(args[position]) is True


_BUILTIN = type(torch.add)


def _arg(args: tuple, kwargs: dict, index: int, name: str, default: Any) -> Any:
    if name in kwargs:
        return kwargs[name]
    if index < len(args):
        return args[index]
    return default


def _as_const(v: Any) -> Any:
    return v.value if isinstance(v, ConstantVariable) else v


#: The types of a schema argument that hold tensors an op may write (``Tensor(a!)``, ``Tensor(a!)[]``).
_TENSOR_TYPES = frozenset({"Tensor", "Optional[Tensor]", "List[Tensor]", "List[Optional[Tensor]]"})


@functools.lru_cache(maxsize=None)
def schema_writes(name: str) -> tuple[tuple[int, str], ...]:
    """The positional arguments ``(index, name)`` that some overload of ``aten::<name>`` writes, a tensor or a list
    of tensors, as its schema's alias annotations say (``_foreach_mul_(Tensor(a!)[] self, ...)``,
    ``_amp_update_scale_(Tensor(a!) self, Tensor(b!) growth_tracker, ...)``); the union over the overloads, ``out=``
    (keyword-only) aside; ``()`` for a name with no such op."""
    packet = getattr(torch.ops.aten, name, None) if name.isidentifier() else None
    if not isinstance(packet, compat.OpOverloadPacket):
        return ()
    return _written([getattr(packet, overload)._schema for overload in packet.overloads()])


def _written(schemas: list) -> tuple[tuple[int, str], ...]:
    """What :func:`schema_writes` says of the overloads whose schemas are ``schemas``."""
    plain = {i for schema in schemas for i, a in enumerate(schema.arguments) if str(a.type) == "Tensor"}
    found: set = set()
    for schema in schemas:
        for i, a in enumerate(schema.arguments):
            kind = str(a.type)
            if a.alias_info is not None and a.alias_info.is_write and not a.kwarg_only and kind in _TENSOR_TYPES \
                    and not (kind.startswith("List") and i in plain):  # (TorchScript's list.sort: aten::sort.Tensor)
                found.add((i, a.name))
    return tuple(sorted(found))


@functools.lru_cache(maxsize=None)
def _op_writes(op: Any) -> tuple[tuple[int, str], ...]:
    """What one ``OpOverload`` writes (a ``torch.library.custom_op`` with ``mutates_args``: its schema's)."""
    return _written([op._schema])


def _by_schema(tx: Any, name: str, target: Any, args: tuple, kwargs: dict) -> list:
    """The arguments ``schema_writes(name)`` names, a list's tensors one by one (``torch._foreach_add_``): the
    ops the name rules miss, those whose name starts with ``_`` or that write more than their first argument."""
    out: list = []
    for index, key in _op_writes(target) if isinstance(target, compat.OpOverload) else schema_writes(name):
        v = kwargs.get(key, args[index] if index < len(args) else None)
        if isinstance(v, ListVariable) and tx is not None:
            out.extend(tx.heap(v.oid).items)
        elif isinstance(v, TupleVariable):
            out.extend(v.items)
        else:
            out.append(v)
    return out


def _schema_rule(kind: str, target: Any) -> bool:
    """Whether what the call writes comes from the ATen schema (:func:`schema_writes`): a tensor method or a
    ``torch`` builtin that no name rule covers (their names end in ``_`` and do not start with one: those write
    their first argument alone, as ``add_``, or nothing eager's saved tensors check, as ``requires_grad_``)."""
    if isinstance(target, compat.OpOverload):
        return True
    name = target if kind == "call_method" else getattr(target, "__name__", "")
    if not isinstance(name, str) or (name.endswith("_") and not name.startswith("_")):
        return False
    return kind == "call_method" or isinstance(target, _BUILTIN) and getattr(target, "__module__", None) == "torch"


def mutated_arguments(kind: str, target: Any, args: tuple, kwargs: dict, tx: Any = None) -> list[TensorVariable]:
    """The tensor arguments the op writes to (in-place ops, ``inplace=True``, ``out=``, norm statistics, and what the
    ATen schema of a torch builtin says it writes: :func:`schema_writes`; ``tx`` reads the lists it writes)."""
    out: list[TensorVariable] = []
    name = target if kind == "call_method" else getattr(target, "__name__", "")
    first = args[0] if args else None
    if kind == "call_method":
        if (name.endswith("_") and not name.startswith("_")) or name in ("__setitem__", "__iadd__", "__isub__",
                                                                           "__imul__", "__itruediv__"):
            out.append(first)
        elif _schema_rule(kind, target):
            out.extend(_by_schema(tx, name, target, args, kwargs))
    elif target in INPLACE_OPERATORS:
        out.append(first)
    elif name.endswith("_") and not name.startswith("_") and isinstance(first, TensorVariable):
        out.append(first)
    elif _inplace(target, args, kwargs):
        out.append(first)
    elif target in MUTATING_FUNCTIONS:
        positions, active = MUTATING_FUNCTIONS[target]
        plain_args = tuple(_as_const(a) for a in args)
        plain_kwargs = {k: _as_const(v) for k, v in kwargs.items()}
        if active(plain_args, plain_kwargs):
            for index, key in positions:
                v = kwargs.get(key, args[index] if index < len(args) else None)
                out.append(v)
    elif _schema_rule(kind, target):
        out.extend(_by_schema(tx, name, target, args, kwargs))
    if "out" in kwargs:
        o = kwargs["out"]
        out.extend(o.items if isinstance(o, TupleVariable) else [o])
    return [v for v in out if isinstance(v, TensorVariable)]


# Deterministic factories whose result, with requires_grad=True, is a new leaf: made by the plan, not the graph.
LEAF_FACTORIES = {torch.ones, torch.zeros, torch.full, torch.empty, torch.tensor, torch.arange, torch.eye,
                  torch.linspace, torch.as_tensor}


def _lift_leaf_factory(tx: Any, target: Any, args: tuple, kwargs: dict) -> VariableTracker | None:
    """``torch.ones(3, requires_grad=True)``: a leaf the plan creates and passes in (see LiftedSource)."""
    if _as_const(kwargs.get("requires_grad")) is not True:
        return None
    if target not in LEAF_FACTORIES:  # e.g. torch.randn(..., requires_grad=True): made for real, in order
        tx.unsupported("autograd_leaf", f"{getattr(target, '__name__', target)}(..., requires_grad=True) makes a "
                       "new leaf, which no graph can return", ("the call runs for real, then tracing resumes",))
    try:
        plain_args = tuple(_plain(tx, a) for a in args)
        plain_kwargs = tuple((k, _plain(tx, v)) for k, v in kwargs.items())
    except _NotPlain:
        return None
    try:
        with tx.fake_context():
            fake = target(*plain_args, **dict(plain_kwargs))
    except (RuntimeError, TypeError, ValueError) as e:
        tx.user_error(e, traceable=False)
    source = LiftedSource(target, plain_args, plain_kwargs)
    node = tx.graph.placeholder(f"lifted_{getattr(target, '__name__', 'leaf')}", fake)
    var = tx.new_tensor(fake, node, source)
    tx.state = tx.state.replace(inputs=tx.state.inputs.append((source, var.tid)))
    tx.input_nodes[var.tid] = node
    return var


class _NotPlain(Exception):
    pass


# Constructors of a tensor from data: a NumPy scalar in it is not the Python number that the graph's code holds for
# it (_convert). Without a dtype it gives its own (torch.tensor(np.float64(1.5)) is float64, torch.tensor([np.int32(3)])
# int32, where 1.5 gives the default dtype and 3 int64); with an integer dtype, a NumPy float other than np.float64
# (a float subclass) raises TypeError; with a real dtype, a NumPy complex drops its imaginary part with a warning.
_DATA_CONSTRUCTORS = frozenset({torch.tensor, torch.as_tensor, torch.asarray})


def _is_data_constructor(target: Any) -> bool:
    try:
        return target in _DATA_CONSTRUCTORS
    except TypeError:  # (an unhashable callable)
        return False


def _numpy_data(tx: Any, what: str, data: VariableTracker, kwargs: dict, dtype: Any = None) -> dict:
    """``kwargs`` of a constructor of a tensor from ``data`` (``what``), with the dtype eager infers made explicit
    where ``data`` holds a NumPy scalar and neither ``kwargs`` nor ``dtype`` (``Tensor.new_tensor``'s own) names
    one. torch itself says what it makes of the constants, each symbolic number standing in as one of its type:
    where it raises or warns, or data holding a NumPy scalar is not all numbers (a tensor in a list), the call
    runs for real."""
    given = kwargs.get("dtype")
    if isinstance(given, ConstantVariable) and given.value is None:
        given = None
    if given is not None:
        if not (isinstance(given, ConstantVariable) and isinstance(given.value, torch.dtype)):
            if _holds_numpy_scalar(tx, data):
                tx.unsupported("numpy", f"{what} of NumPy scalars with a dtype the trace does not know",
                               RUNS_FOR_REAL)
            return kwargs
        dtype = given.value
    found: list = []

    def sample(var: VariableTracker) -> Any:
        if isinstance(var, LazyArgument):
            var = wrap(tx, var.value, var.source)
        if isinstance(var, ConstantVariable):
            if type(var.value).__module__ == "numpy":
                found.append(var.value)
            return var.value
        if isinstance(var, SymNodeVariable):
            return {torch.SymInt: 0, torch.SymFloat: 0.0, torch.SymBool: False}.get(type(var.value), var.value)
        if isinstance(var, TupleVariable):
            return [sample(v) for v in var.items]
        if isinstance(var, ListVariable):
            return [sample(v) for v in tx.list_items(var)]
        raise _NotPlain

    try:
        plain_data = sample(data)
    except _NotPlain:
        if not _holds_numpy_scalar(tx, data):
            return kwargs
        tx.unsupported("numpy", f"{what} of data mixing NumPy scalars with values whose dtype the trace cannot "
                       "infer", RUNS_FOR_REAL)
    if not found:
        return kwargs
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (a NumPy complex made real warns: the real call gives the warning)
            made = torch.tensor(plain_data, dtype=dtype)  # (a few constants, on the CPU: torch's own inference)
    except Exception:  # eager raises (or warns): the real call does
        tx.unsupported("numpy", f"{what} of NumPy scalars raises or warns in eager", RUNS_FOR_REAL)
    return kwargs if given is not None or dtype is not None else {**kwargs, "dtype": ConstantVariable(made.dtype)}


def _refuse_numpy_complex(tx: Any, what: str, args: tuple, kwargs: dict) -> None:
    """A NumPy complex scalar where torch takes a number (``x * np.complex64(1j)``): torch takes its real part (with
    a ComplexWarning), not the complex number the graph's code would hold; the call runs for real."""
    if any(_holds_numpy_scalar(tx, v, complex_only=True) for v in (*args, *kwargs.values())):
        tx.unsupported("numpy", f"{what} of a NumPy complex scalar, which torch takes as its real part",
                       RUNS_FOR_REAL)


def _holds_numpy_scalar(tx: Any, var: VariableTracker, complex_only: bool = False) -> bool:
    if isinstance(var, ConstantVariable):
        return type(var.value).__module__ == "numpy" and (
            not complex_only or isinstance(var.value, numbers.Complex) and not isinstance(var.value, numbers.Real))
    if isinstance(var, TupleVariable):
        return any(_holds_numpy_scalar(tx, v, complex_only) for v in var.items)
    if isinstance(var, ListVariable):
        return any(_holds_numpy_scalar(tx, v, complex_only) for v in tx.list_items(var))
    if isinstance(var, DictVariable):
        return any(_holds_numpy_scalar(tx, v, complex_only) for _, v in tx.dict_entry(var).items)
    return False


def _plain(tx: Any, var: VariableTracker) -> Any:
    if isinstance(var, ConstantVariable):
        return var.value
    if isinstance(var, TupleVariable):
        return tuple(_plain(tx, v) for v in var.items)
    if isinstance(var, ListVariable):
        return [_plain(tx, v) for v in tx.list_items(var)]
    raise _NotPlain


LEAVES_THE_GRAPH = {"numpy": "Tensor.numpy() hands the tensor's data to NumPy",
                    "__array__": "converting a tensor to a NumPy array reads its data",
                    "tolist": "Tensor.tolist() reads the tensor's values into Python",
                    "item": "Tensor.item() reads the tensor's value into Python"}


RUNS_FOR_REAL = ("the graph so far runs, the call runs for real, tracing resumes after it",)


def _captured_item(tx: Any, var: VariableTracker) -> VariableTracker:
    """``t.item()`` under ``capture_scalar_outputs``, as torch.compile captures it: a graph node whose value is
    an unbacked SymInt / SymFloat / SymBool of the trace's ShapeEnv (a trace without one is traced again with
    one). Python control flow on it still breaks the graph (the ShapeEnv cannot guard it)."""
    if tx.fake_mode.shape_env is None:
        raise RetraceSymbolic("Tensor.item() is captured as an unbacked symbol (capture_scalar_outputs)")
    if not isinstance(var, TensorVariable):
        tx.unsupported("data_dependent", LEAVES_THE_GRAPH["item"], RUNS_FOR_REAL)
    fake = to_fake(tx, var, {})
    try:
        with tx.fake_context():
            value = fake.item()
    except (RuntimeError, ValueError) as e:  # more than one element: the real call raises it
        tx.user_error(e, traceable=False)
    return wrap_symbolic(tx, value, _emit(tx, "call_method", "item", (var,), {}, value))


@contextlib.contextmanager
def _recording_warnings() -> Iterator[list]:
    """Record the warnings a fake op gives (the trace's are never the user's), with torch's ``warn_always`` on
    meanwhile: a ``TORCH_WARN_ONCE`` (``x.T`` of a 3-d tensor) given by the fake op would use up its once-per-
    process warning, and the real op, in the graph or run for real, would never give it to the user."""
    always = torch.is_warn_always_enabled()
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        torch.set_warn_always(True)
        try:
            yield warned
        finally:
            torch.set_warn_always(always)


def call_tensor_op(tx: Any, kind: str, target: Any, args: tuple, kwargs: dict) -> VariableTracker:
    """Record ``target(*args, **kwargs)`` in the graph and return the VT of its result."""
    # arguments not read yet (the values of a dict splatted with ``**``) are wrapped, and guarded, first: their
    # values decide what the op writes (``inplace=True``)
    args = tuple(wrap(tx, a.value, a.source) if isinstance(a, LazyArgument) else a for a in args)
    kwargs = {k: wrap(tx, v.value, v.source) if isinstance(v, LazyArgument) else v for k, v in kwargs.items()}
    if kind == "call_method" and target == "item" and config.capture_scalar_outputs:
        return _captured_item(tx, args[0])
    if kind == "call_method" and target in LEAVES_THE_GRAPH:
        tx.unsupported("numpy" if "NumPy" in LEAVES_THE_GRAPH[target] else "data_dependent",
                       LEAVES_THE_GRAPH[target], ("the graph so far runs, this step runs for real, tracing resumes",))
    effect = known_effect(kind, target)
    if effect is not None:
        if tx.functional_backend and target in _GRAD_HOOKS:  # (a target with an effect is hashable)
            _refuse_hook_inside_graph(tx, args[0] if args else None)
        tx.unsupported("effectful_call", effect, RUNS_FOR_REAL)
    if kind == "call_function" and target is torch.autograd.grad:
        _refuse_grad_through_input_history(tx)
    if kind == "call_method" and target == "type":
        args, kwargs = _legacy_type_names(args, kwargs)
    if kind == "call_function" and args and _is_data_constructor(target):
        kwargs = _numpy_data(tx, _describe(kind, target), args[0], kwargs)
    elif kind == "call_method" and target == "new_tensor" and len(args) > 1 and isinstance(args[0], TensorVariable):
        kwargs = _numpy_data(tx, _describe(kind, target), args[1], kwargs, tx.state.heap[args[0].tid].meta.dtype)
    else:
        _refuse_numpy_complex(tx, _describe(kind, target), args, kwargs)
    if kind == "call_method" and target == "new" and len(args) == 2 and isinstance(args[1], TupleVariable) and \
            args[1].cls is torch.Size:  # t.new(size): the graph's code would pass a plain tuple, which is data
        args = (args[0], *args[1].items)
    if kind == "call_function" and "requires_grad" in kwargs:
        lifted = _lift_leaf_factory(tx, target, args, kwargs)
        if lifted is not None:
            return lifted
    saved.refuse_if_saving_runs_for_real(tx, _describe(kind, target))
    if tx.functional_backend:
        refused = aot_refusal(target, lambda: (
            tuple(a.value if isinstance(a, ConstantVariable) else NOT_CONSTANT for a in args),
            [tx.state.heap[v.tid].meta.requires_grad for v in _fakes_vars(args, kwargs)],
            bool(kwargs))) if kind == "call_function" else None
        if refused is not None:
            tx.unsupported("unsupported_call", refused, RUNS_FOR_REAL)
        refuse_reading_aliases_of_written_inputs(tx, _fakes_vars(args, kwargs))
        args, kwargs = fold_alpha(tx, kind, target, args, kwargs)
    mutated = mutated_arguments(kind, target, args, kwargs, tx)
    fresh: dict[int, Any] = {}
    roots: list[int] = []
    views: list[int] = []
    if mutated:
        _refuse_write_beside_data(tx, mutated)
        roots, views = tx.alias_group({v.tid for v in mutated})
        note_input_writes(tx, kind, target, (*roots, *views))
        stale = {tid for tid in views if _stale_view(tx, tid)}
        with tx.fake_mode:
            for tid in roots:
                fresh[tid] = fresh_base(tx.state.heap[tid].meta)
            for tid in views:
                meta = tx.state.heap[tid].meta
                fresh[tid] = fresh_view(fresh[meta.base], meta, tid in stale)
    if mutated and tx.functional_backend:
        note_view_writes(tx, mutated)
        try:
            refuse_writes_aot_cannot_take(tx, kind, target, args, kwargs, roots, views, _describe(kind, target),
                                          mutated)
        except Unsupported:  # the write runs for real: what the trace saved of it must be saved for real first
            saved.check_write(tx, roots)  # (fuzz 45:68: amax saved t1, then the masked write into t1 breaks)
            raise
    if mutated and _overlapping_write(tx, mutated, args, kwargs):
        refused = _probe_overlap(tx, kind, target, args, kwargs)
        if refused is not None:
            tx.user_error(refused, traceable=False)  # runs for real: eager's error reaches the user's except
        if tx.functional_backend:
            refuse_overlapping_write(tx, _describe(kind, target))
    fake_args = tuple(to_fake(tx, a, fresh) for a in args)
    fake_kwargs = {k: to_fake(tx, v, fresh) for k, v in kwargs.items()}
    refused = alpha_refusal(kind, target, fake_args, fake_kwargs)
    if refused is None and mutated and args and isinstance(args[0], TensorVariable) and \
            any(v.tid == args[0].tid for v in mutated):  # (x.mul_(1.5) on an integer x: the fake kernel takes it)
        refused = cast_refusal(kind, target, fake_args, fake_kwargs, lambda thunk: _on_fakes(tx, thunk))
    if refused is not None:
        tx.user_error(refused, traceable=False)  # runs for real: eager's error reaches the user's except
    may_raise = raises_on_values(kind, target, fake_args, fake_kwargs)
    if may_raise:
        observer = tx.raise_observer()
        if observer is not None:  # run it for real: its error, if any, comes where eager raises it
            tx.unsupported("data_dependent", f"{_describe(kind, target)} raises if an index is out of range, "
                           f"which only the real values show; {observer}", RUNS_FOR_REAL)
    watched = [t for t in _fakes_in((fake_args, fake_kwargs)) if not t.is_inference()]  # no version counter
    versions = [t._version for t in watched]
    counters = {tid: _counter(fresh[tid]) for tid in roots}
    fn = getattr(fake_args[0], target) if kind == "call_method" else target
    call_args = fake_args[1:] if kind == "call_method" else fake_args
    saved_before = len(tx.saved_for_backward)
    try:
        with tx.fake_context(), saved.recording(tx) as saved_now, _recording_warnings() as warned:
            result = fn(*call_args, **fake_kwargs)
            written = [fresh[v.tid] for v in mutated if fresh[v.tid] is not result]  # (norm statistics)
            saved_now[:] = [t for t in saved_now if not any(t is w for w in written)]
        if mutated and saved_now and tx.functional_backend:  # (an input the write gives history: y.mul_(w))
            saved.refuse_write_saving_input(tx, _describe(kind, target), saved_now, [
                t for t in _fakes_in((fake_args, fake_kwargs)) if not any(t is f for f in fresh.values())], [
                tid for tid in (*roots, *views) if tid in tx.input_values and fresh[tid].requires_grad])
    except compat.DATA_DEPENDENT_ERRORS as e:
        if isinstance(e, compat.DynamicOutputShapeException) and config.capture_dynamic_output_shape_ops and \
                tx.fake_mode.shape_env is None:
            raise RetraceSymbolic(f"{_describe(kind, target)} has a data-dependent output shape, captured with "
                                  "unbacked sizes (capture_dynamic_output_shape_ops)") from None
        tx.unsupported("data_dependent", f"{_describe(kind, target)} depends on tensor data ({type(e).__name__})",
                       ("keep tensor values in tensors; Python control flow on them breaks the graph",))
    except (RuntimeError, TypeError, ValueError, IndexError, AssertionError, NotImplementedError, OverflowError) as e:
        # (torch's meta functions raise AssertionError for some argument errors: t_ on a 3-d tensor; a Python int
        # too big for the op's scalar type raises OverflowError when torch unpacks it: x + 2**64)
        if "data-dependent" in str(e) or "DataDependent" in type(e).__name__:
            tx.unsupported("data_dependent", f"{_describe(kind, target)} depends on tensor data")
        tx.user_error(e, traceable=False)  # a fake tensor's error: the real op decides (see UserError)
    if warned and tx.functional_backend:
        # a warning of torch's own (TORCH_WARN: new_tensor of a tensor, a deprecated overload) comes from the op's
        # Python binding each time it runs; a graph retraced to ATen ops (AOTAutograd) would never give it again
        tx.unsupported("effectful_call", f"{_describe(kind, target)} warns ({warned[0].category.__name__}: "
                       f"{str(warned[0].message)[:80]}): the real call gives the warning each time, as in eager",
                       RUNS_FOR_REAL)
    if tx.functional_backend and any(compat.lacks_derivative(t) for t in _fakes_in(result)):
        tx.unsupported("unsupported_call", f"{_describe(kind, target)} has no derivative (its result requires grad "
                       "through a node that raises at backward): AOTAutograd fails compiling a graph that needs it, "
                       "where eager raises only if a backward reaches it", RUNS_FOR_REAL)
    if mutated and tx.functional_backend:
        try:
            refuse_out_resizing_input(tx, kwargs, roots, views, fresh, _describe(kind, target))
        except Unsupported:  # the write runs for real (as refuse_writes_aot_cannot_take's)
            saved.check_write(tx, roots)
            raise
    if mutated and _schema_rule(kind, target):  # (the fake kernels of _foreach_mul_ & co. bump no version)
        written = [(t, v) for t, v in zip(watched, versions) if any(t is fresh[m.tid] for m in mutated)]
        if all(t._version == v for t, v in written):  # eager's moves the counter once per tensor in the list,
            for t, _ in written:  # twice for _foreach_add_([x, x]) or ([x, x.view(3)])
                compat.increment_version([t])
    for t, v in zip(watched, versions):
        if t._version != v and not any(t is f for f in fresh.values()):
            raise InternalError(f"{_describe(kind, target)} mutated a tensor stillframe did not know it writes")
    if any(t._version != v and any(t is f for f in fresh.values()) for t, v in zip(watched, versions)):
        saved.check_write(tx, roots)  # a write bumps the version counter (requires_grad_, detach_ do not)
    if not mutated:
        same = _returned_argument(args, kwargs, fake_args, fake_kwargs, result)
        if same is not None:
            return same
    if not mutated and not _contains_tensor(result):
        checker = query_checker(kind, target, bool(tx.state.autocast))
        if checker is not None and not kwargs and all(type(a) is ConstantVariable for a in args):
            tx.add_guard(Guard(None, "GLOBAL", ("query", (checker, tuple(a.value for a in args), result))))
            return wrap_constant_result(tx, result, kind, target)
        if not is_pure_query(kind, target):  # default deny: a fake's result shows shapes, never effects
            tx.unsupported("effectful_call", no_rule(_describe(kind, target), result), RUNS_FOR_REAL)
        if has_symbols(result):  # x.size(), x.numel() with dynamic shapes: computed in the graph
            return wrap_symbolic(tx, result, _emit(tx, kind, target, args, kwargs, result))
        return wrap_constant_result(tx, result, kind, target)
    if _shares_version(kind, target) and isinstance(result, torch.Tensor) and isinstance(args[0], TensorVariable):
        saved.record_shared_version(tx, result, to_fake(tx, args[0]))
    if tx.functional_backend and not mutated:
        saved.record_input_reads(tx, _fakes_vars(args, kwargs), result, saved_before)
    if tx.functional_backend:
        _refuse_reading_input_given_history(tx, _fakes_vars(args, kwargs), {v.tid for v in mutated}, result)
    prologue = _as_prologue(tx, kind, target, args, kwargs)
    node = _emit(tx, kind, target, args, kwargs, result) if prologue is None else prologue
    if may_raise:
        node.meta["raises_on_values"] = True  # kept even if unused (runtime/compiler._keep_raising_ops)
    if mutated and prologue is None:
        node.meta["writes"] = frozenset(roots)  # what it writes (runtime/input_grads.py: the roots' later reads)
    if mutated:
        # The op's node becomes the node of the tensor it returns (``x.add_(1)`` returns x); an op returning
        # something else (``setitem`` returns None) leaves every node as it was: the graph runs in order.
        returned = next((tid for tid, f in fresh.items() if result is f), None)
        # how far each group's counter moved (its views share it): eager's count (t._version), for the plan
        foreign = _foreign_op(target)
        moved = {tid: None if foreign else _counter(fresh[tid]) - before for tid, before in counters.items()}
        with torch.set_grad_enabled(tx.state.grad_enabled):  # autograd metadata as the op left it
            for tid in list(roots) + list(views):
                entry = tx.state.heap[tid]
                tx.bind_tensor(tid, entry.bump(fresh[tid], node if tid == returned else None,
                                               moved[tid if entry.meta.base is None else entry.meta.base]))
        if returned is not None:
            return TensorVariable(returned)
        tids = {id(f): tid for tid, f in fresh.items()}
        if type(result) in (list, tuple) and result and all(id(r) in tids for r in result):  # _foreach_mul_
            items = tuple(TensorVariable(tids[id(r)]) for r in result)
            return tx.new_list(items) if type(result) is list else TupleVariable(items)
        if not _contains_tensor(result):
            return wrap_constant_result(tx, result, kind, target)
    return wrap_result(tx, result, node)


# Calls that make autograd report a tensor's total gradient: its .grad (retain_grad) or a hook's argument.
_GRAD_HOOKS = frozenset({"retain_grad", "register_hook", torch.Tensor.retain_grad, torch.Tensor.register_hook})


def _refuse_hook_inside_graph(tx: Any, var: Any) -> None:
    """Before ``t.retain_grad()`` / ``t.register_hook(fn)`` runs for real on ``t``, an output of the graph so far
    that other ops of that graph read: on an AOTAutograd backend the graph is one autograd node, and ``t``'s slot
    of it receives only the gradient that reaches ``t`` directly, not the part that flows through the graph's other
    outputs computed from ``t`` (``t2 = y + x; t3 = t2 * 2; t2.retain_grad()``: eager's ``t2.grad`` is 3, the
    slot's 1; fuzz 39:530, torch.compile too). The frame is traced again with the op that made ``t`` run for real,
    so ``t`` enters the rest of the graph as an input and its gradient is eager's total."""
    if not isinstance(var, TensorVariable):
        return
    written = _input_write_sites(tx, var.tid)
    if written:  # an input the graph wrote: its readers in the graph after the write are the other uses
        raise saved.RetraceRunForReal(written, "writes a graph input that gets a gradient hook (or retain_grad) "
                                      "later, which must see the gradient of every use of its new value")
    node = tx.tensor(var).node
    if node is None or node.op == "placeholder" or "location" not in node.meta:
        return
    if any(user.op != "output" for user in node.users):
        raise saved.RetraceRunForReal(frozenset({node.meta["location"]}), "its result gets a gradient hook (or "
                                      "retain_grad) later, which must see the gradient of every use")


def _refuse_reading_input_given_history(tx: Any, tensors: list, written: set, result: Any) -> None:
    """Before an op that reads (``tensors``, TensorVariables; ``written``: the tids it writes, not counted as read) a
    tensor requiring grad that shares memory with a graph input this graph wrote or reshaped in place, the input now
    with autograd history (requiring grad, no leaf), and makes a result that requires grad: the write runs for real
    (``RetraceRunForReal``). In eager the input's new node (``CopySlices`` of ``y[..., 1] = w``) is on the path of the
    read's gradient, so a ``retain_grad()`` or a hook put on the input later, or ``torch.autograd.grad`` taken with
    respect to it, sees the gradient of every use of its new value. AOTAutograd gives the input its new value after the
    graph, by a ``copy_`` whose node only the input's own slot of the graph's outputs reaches: the read's gradient flows
    to the graph's inputs past it (fuzz 59:180: ``y.grad`` came out without the gradient of ``y.narrow(0, 0, 1) * 1.0``;
    torch.compile the same; with a ``mark_dirty`` Function as the write even a leaf's gradient came out wrong:
    tests/hop/test_autograd_ctx.py). The later call cannot be seen from this graph, so every such read counts. Run for
    real, the write gives the input eager's node, and the read takes the input as it is then. A leaf written under
    ``no_grad`` keeps its node (``AccumulateGrad``), which the read's gradient reaches through the graph: its writes
    stay in the graph."""
    if not (tx.input_writes or tx.input_reshapes) or isinstance(result, torch.Tensor) and result._is_view() or \
            not any(t.requires_grad for t in _fakes_in(result)):
        return
    locations: frozenset = frozenset()
    for var in tensors:
        if var.tid in written or not tx.state.heap[var.tid].meta.requires_grad:
            continue
        group = saved.root(tx, var.tid)
        for sites in (tx.input_writes, tx.input_reshapes):
            for tid, at in sites.items():
                meta = tx.state.heap[tid].meta
                if saved.root(tx, tid) == group and meta.requires_grad and not meta.is_leaf:
                    locations |= at
    if locations - tx.run_for_real:
        raise saved.RetraceRunForReal(locations, "writes a graph input, giving it autograd history, that a later op "
                                      "of the graph reads: eager's node of the write must see the gradient of "
                                      "every use of its new value")


def _input_write_sites(tx: Any, tid: int) -> frozenset:
    """Where this trace wrote (data or shape) a graph input that shares memory with tensor ``tid``."""
    root = saved.root(tx, tid)
    return frozenset().union(*(at for sites in (tx.input_writes, tx.input_reshapes) for written, at in sites.items()
                               if saved.root(tx, written) == root))


def _returned_argument(args: tuple, kwargs: dict, fake_args: tuple, fake_kwargs: dict,
                       result: Any) -> TensorVariable | None:
    """The tensor argument an out-of-place op returned itself, if any: ``torch.as_tensor(t)``, ``torch.asarray(t)``,
    ``t.to(t.dtype)``, ``t.type(t.type())``, ``t.contiguous()`` on a contiguous ``t`` return ``t`` (the same
    object, no copy: ATen's ``to`` / ``contiguous`` and ``torch/csrc/utils/tensor_new.cpp`` return ``self`` when
    nothing changes), and so does the op on its fake. The result is that argument's value, with no node."""
    for var, fake in (*zip(args, fake_args), *((kwargs[k], fake_kwargs[k]) for k in kwargs)):
        if isinstance(var, TensorVariable) and fake is result:
            return var
    return None


def _refuse_grad_through_input_history(tx: Any) -> None:
    """Break before ``torch.autograd.grad`` when a graph input that requires grad has history the fakes lack.

    - A view input's fake is rebuilt from its base's fake with ``as_strided`` (as torch's own fakeification
      does for dense views), so its fake history is ``AsStridedBackward``, not eager's (``TBackward`` for
      ``x.t()``): gradients through it get other strides on fakes than for real (contiguous where eager's
      engine returns an expanded tensor; fuzz 26:7523).
    - A non-leaf input's fake is a leaf: the history it has in eager (made before a graph break, or by the
      caller) is not in the fake autograd graph. A differentiated tensor that this history also reaches gets
      its gradient summed over more paths in eager, so it is a fresh tensor where the fake engine returns a
      view made under ``no_grad`` (``w @ y`` with ``y = y0 + w``, fuzz 39:218).

    Either way an in-place op on such a gradient would pass on the fake and raise only in the graph, or raise
    on the fake where eager runs. Run for real, the call gives the trace eager's gradients, which enter the
    resumed segment as inputs with their true geometry and aliasing."""
    for tid, value in tx.input_values.items():
        entry = tx.state.heap.get(tid)
        meta = getattr(entry, "meta", None)
        if meta is None or not meta.requires_grad or not isinstance(value, torch.Tensor):
            continue
        if meta.base is not None and value._base is not None:
            tx.unsupported("effectful_call", "torch.autograd.grad() differentiates through an input that is a "
                           "view: its fake history is rebuilt with as_strided, so the gradients' strides on "
                           "fakes may not be eager's", RUNS_FOR_REAL)
        if value.grad_fn is not None:
            tx.unsupported("effectful_call", "torch.autograd.grad() differentiates through an input with "
                           "autograd history made outside the graph, which the fakes do not have, so the "
                           "gradients' aliasing on fakes may not be eager's", RUNS_FOR_REAL)


# Methods that change only autograd metadata of a graph input: applied to the live input before the graph
# runs (the graph cannot carry them: AOTAutograd traces inputs with fixed requires_grad).
PROLOGUE_METHODS = {"requires_grad_", "detach_"}


def _as_prologue(tx: Any, kind: str, target: Any, args: tuple, kwargs: dict) -> Any:
    """Record ``input.requires_grad_()`` as a prologue call when the graph has not read the input yet.

    Returns the input's current node (the method returns its receiver) or ``None`` when the call must be a
    graph node instead.
    """
    if kind != "call_method" or target not in PROLOGUE_METHODS:
        return None
    var = args[0]
    entry = tx.state.heap[var.tid]
    symbolic_aot = tx.functional_backend and tx.fake_mode.shape_env is not None
    if entry.source is None or var.tid not in tx.input_values or entry.node is None or entry.node.users or \
            entry.meta.version != 0 or entry.meta.base is not None or _views_read(tx, var.tid) or symbolic_aot:
        # (symbolic_aot: AOTAutograd fakeifies the example inputs in the trace's own fake mode, whose memo holds
        # the input's fake as it entered, before the prologue: it would compile the graph for an input that
        # does not require grad; fuzz 28:242)
        # No graph can carry it (AOTAutograd traces inputs with fixed autograd metadata and returns outputs of
        # an autograd.Function, never new leaves): the graph so far runs, then the call itself for real.
        tx.unsupported("autograd_leaf", f"{target}() changes autograd metadata a graph cannot carry",
                       ("the graph before it runs, then the call itself, then tracing resumes",))
    plain = tuple(_as_const(a) for a in args[1:])
    plain_kwargs = {k: _as_const(v) for k, v in kwargs.items()}
    tx.state = tx.state.replace(prologue=tx.state.prologue.append((entry.source, target, plain, plain_kwargs)))
    return entry.node


def _foreign_op(target: Any) -> bool:
    """Whether ``target`` is an op outside ATen (a ``torch.library`` custom op): its fake kernel says nothing of
    the writes its real body makes (eager's ``add_into`` moves ``out``'s counter by 2, its fake by 1)."""
    return isinstance(target, compat.OpOverload) and target.namespace not in ("aten", "prims")


def _counter(fake: Any) -> int:
    """The version counter of ``fake``; 0 for an inference tensor, which has none."""
    return 0 if fake.is_inference() else fake._version


def _shares_version(kind: str, target: Any) -> bool:
    """Whether the op returns a tensor sharing its argument's version counter without being a view of it."""
    return target == "detach" if kind == "call_method" else target in (torch.detach, torch.Tensor.detach)


def _stale_view(tx: Any, tid: int) -> bool:
    """Whether view ``tid`` is stale (:func:`compat.is_stale_view`: eager refuses in-place ops on it as on a leaf
    that requires grad), asked of its fake, whose autograd state follows eager's. A graph input's fake is made
    stale when the live view is, and a guard keeps the answer (asking the live view each call costs a failed
    op, so only a plan whose in-place op depends on it asks)."""
    entry = tx.state.heap[tid]
    live = tx.input_values.get(tid) if entry.source is not None else None
    if live is not None and compat.grad_fn_made_on_read(live):
        stale = compat.is_stale_view(live)
        tx.add_guard(Guard(entry.source, "STALE_VIEW", stale))
    if not entry.meta.grad_fn_pending:
        return False
    with tx.fake_context():
        return compat.is_stale_view(entry.fake)


def _overlapping_write(tx: Any, mutated: list, args: tuple, kwargs: dict) -> bool:
    """Whether an in-place op writes into memory that overlaps itself (an expanded tensor) or that another
    argument views differently. Eager's TensorIterator refuses many such writes and a fake tensor does not
    (its meta kernels skip the overlap checks), so the real op decides: it runs for real, where its error, if
    any, reaches the user's ``except`` (raised by the graph, it would escape it, after the effects before it
    were lost)."""
    written = {v.tid: tx.state.heap[v.tid].meta for v in mutated}
    for meta in written.values():
        if any(size > 1 and stride == 0 for size, stride in zip(meta.shape, meta.stride)):
            return True
    roots = {meta.base if meta.base is not None else tid: meta for tid, meta in written.items()}
    for other in _fakes_vars(args, kwargs):
        if other.tid in written:
            continue
        meta = tx.state.heap[other.tid].meta
        root = meta.base if meta.base is not None else other.tid
        target = roots.get(root)
        if target is not None and (meta.shape, meta.stride, meta.storage_offset) != \
                (target.shape, target.stride, target.storage_offset):
            return True
    return False


def _probe_overlap(tx: Any, kind: str, target: Any, args: tuple, kwargs: dict) -> Exception | None:
    """Run the op for real on zero tensors with the arguments' geometry and aliasing (one small real storage per
    alias root) and return the error eager raises for it, if any: whether a write into overlapping memory is
    refused depends on the op and the overlap, not on values."""
    storages: dict[int, torch.Tensor] = {}

    def probe(var: VariableTracker) -> Any:
        if not isinstance(var, TensorVariable):
            return _convert(tx, var, probe)
        meta = tx.state.heap[var.tid].meta
        root = meta.base if meta.base is not None else var.tid
        if root not in storages:
            group = [e.meta for e in tx.state.heap.values() if getattr(e, "meta", None) is not None and
                     (e.meta.base == root) and e.meta.dtype == meta.dtype] + [tx.state.heap[root].meta]
            extent = max(m.storage_offset + sum((n - 1) * st for n, st in zip(m.shape, m.stride)) + 1
                         for m in group)
            storages[root] = torch.zeros(max(extent, 1), dtype=meta.dtype, device="cpu")
        return storages[root].as_strided(meta.shape, meta.stride, meta.storage_offset)

    try:
        real_args = tuple(probe(a) for a in args)
        real_kwargs = {k: probe(v) for k, v in kwargs.items()}
    except Exception:  # a probe we cannot build (another device, a dtype mix): the real op decides
        return RuntimeError(f"{_describe(kind, target)} writes into overlapping memory")
    fn = getattr(real_args[0], target) if kind == "call_method" else target
    try:
        with torch.no_grad():
            fn(*(real_args[1:] if kind == "call_method" else real_args), **real_kwargs)
    except (RuntimeError, IndexError, ValueError) as e:
        return e
    return None


def _fakes_vars(args: tuple, kwargs: dict) -> list:
    """The TensorVariables among an op's arguments (top level and inside tuples and lists)."""
    found: list = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, TensorVariable):
            found.append(a)
        elif isinstance(a, (TupleVariable,)):
            found.extend(v for v in a.items if isinstance(v, TensorVariable))
    return found


def _views_read(tx: Any, tid: int) -> bool:
    """Whether the graph has read a view of input ``tid`` (an input itself): a view sees its base's autograd
    metadata, so ``requires_grad_()`` moved before the graph would change what those reads computed."""
    for other in tx.state.heap.values():
        meta = getattr(other, "meta", None)
        if meta is not None and meta.base == tid and other.node is not None and other.node.users:
            return True
    return False


def _emit(tx: Any, kind: str, target: Any, args: tuple, kwargs: dict, val: Any) -> Any:
    fx_args = tuple(to_fx(tx, a) for a in args)
    fx_kwargs = {k: to_fx(tx, v) for k, v in kwargs.items()}
    if kind == "call_method":
        node = tx.graph.call_method(target, fx_args, fx_kwargs, val)
    else:
        node = tx.graph.call_function(target, fx_args, fx_kwargs, val)
    compat.bind_unbacked(tx.fake_mode, node, val)
    node.meta["location"] = saved.location(tx)  # the instruction that made it (see _refuse_hook_inside_graph)
    return node


def _describe(kind: str, target: Any) -> str:
    if kind == "call_method":
        return f"Tensor.{target}"
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))


def _on_fakes(tx: Any, thunk: Any) -> Any:
    """``thunk()`` as an op on the trace's fake tensors runs (fake mode, grad mode, autocast)."""
    with tx.fake_context():
        return thunk()


def _fakes_in(obj: Any) -> list:
    found: list = []

    def visit(o: Any) -> None:
        if isinstance(o, torch.Tensor):
            found.append(o)
        elif isinstance(o, (tuple, list)):
            for x in o:
                visit(x)
        elif isinstance(o, dict):
            for x in o.values():
                visit(x)

    visit(obj)
    return found


def _contains_tensor(obj: Any) -> bool:
    return bool(_fakes_in(obj))


def _refuse_write_beside_data(tx: Any, mutated: list) -> None:
    """An in-place write to storage that a ``.data`` input of the graph shares (the ``.data`` tensor itself, or the
    tensor it was read from) runs for real: the two are separate graph inputs that alias without being views of
    each other, which the backends cannot functionalize (AOTAutograd refuses such input mutations)."""
    data_inputs = [t for source, t in tx.state.inputs if isinstance(source, AttrSource) and source.attr == "data"]
    if not data_inputs:
        return
    shared = {compat.storage_key(tx.input_values[t]) for t in data_inputs if t in tx.input_values} - {None}
    for var in mutated:
        if compat.storage_key(tx.input_values.get(var.tid)) in shared:
            tx.unsupported("unsupported_attribute", "an in-place write to a tensor whose .data the graph also reads",
                           RUNS_FOR_REAL)


def to_fake(tx: Any, var: VariableTracker, fresh: dict | None = None) -> Any:
    """The value of ``var`` for running an op on fake tensors (``fresh`` overrides tensors by tid)."""
    if isinstance(var, TensorVariable):
        if fresh and var.tid in fresh:
            return fresh[var.tid]
        return tx.state.heap[var.tid].fake
    if isinstance(var, SymNodeVariable):
        return var.value
    return _convert(tx, var, lambda v: to_fake(tx, v, fresh))


def to_fx(tx: Any, var: VariableTracker) -> Any:
    """The FX argument for ``var``: a Node for tensors, the Python value for constants, containers mapped."""
    if isinstance(var, TensorVariable):
        node = tx.state.heap[var.tid].node
        if node is None:
            tx.unsupported("hidden_base", "reading the base of an input view that was not passed in")
        return node
    if isinstance(var, SymNodeVariable):
        return var.node
    return _convert(tx, var, lambda v: to_fx(tx, v))


_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)


def _legacy_type_names(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``t.type(torch.HalfTensor)`` as ``t.type("torch.HalfTensor")``: Tensor.type takes the class or its
    name alike, and the graph's code names the string."""
    def name(v: Any) -> Any:
        if isinstance(v, PythonObjectVariable) and type(v.value) is _LEGACY_TENSOR_TYPE:
            return ConstantVariable(f"{v.value.__module__}.{v.value.__name__}")
        return v
    return tuple(name(a) for a in args), {k: name(v) for k, v in kwargs.items()}


def _convert(tx: Any, var: VariableTracker, rec: Any) -> Any:
    if isinstance(var, LazyArgument):
        var = wrap(tx, var.value, var.source)
    if isinstance(var, ConstantVariable):
        value = var.value
        if type(value).__module__ == "numpy" and hasattr(value, "item"):
            # a NumPy scalar (np.int64(8)): torch takes it as the Python number it holds; the graph's code
            # cannot name numpy, so the Python number goes in
            return value.item()
        return value
    if isinstance(var, TupleVariable):
        items = tuple(rec(v) for v in var.items)
        if var.cls is torch.Size and not any(isinstance(v, torch.fx.Node) for v in items):
            return torch.Size(items)
        return items
    if isinstance(var, ListVariable):
        return [rec(v) for v in tx.list_items(var)]
    if isinstance(var, DictVariable):
        return {k: rec(v) for k, v in tx.dict_entry(var).items}
    if isinstance(var, SliceVariable):
        return slice(rec(var.start), rec(var.stop), rec(var.step))
    if isinstance(var, RangeVariable):
        return var.value
    if isinstance(var, PythonObjectVariable) and of_type(var.value, (torch.dtype, torch.device)):
        return var.value
    tx.unsupported("unsupported_argument", f"passing a {var.python_type().__name__} value to a tensor operation")


def wrap_result(tx: Any, result: Any, node: Any) -> VariableTracker:
    """VTs for the fake ``result`` of an op whose FX node is ``node`` (tuples become getitem nodes)."""
    if isinstance(result, torch.Tensor):
        return tx.new_tensor(result, node)
    if isinstance(result, (tuple, list)):
        items = []
        for i, r in enumerate(result):
            if isinstance(r, torch.Tensor) or _contains_tensor(r):
                item_node = tx.graph.call_function(operator.getitem, (node, i), {}, r)
                items.append(wrap_result(tx, r, item_node))
            elif has_symbols(r):
                items.append(wrap_symbolic(tx, r, tx.graph.call_function(operator.getitem, (node, i), {}, r)))
            else:
                items.append(wrap_constant_result(tx, r, "call_function", operator.getitem))
        if isinstance(result, list):
            return tx.new_list(tuple(items))
        return TupleVariable(tuple(items), type(result))
    return wrap_constant_result(tx, result, "call_function", None)


def wrap_constant_result(tx: Any, result: Any, kind: str, target: Any) -> VariableTracker:
    """A result with no tensor in it (``x.dim()``, ``x.size()``, ``x.is_contiguous()``): a constant."""
    if isinstance(result, torch.Size):
        return TupleVariable(tuple(ConstantVariable(int(s)) for s in result), torch.Size)
    if isinstance(result, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ConstantVariable(plain(result))  # one the ShapeEnv knows the value of (has_symbols said so)
    if isinstance(result, (tuple, list)):
        items = tuple(wrap_constant_result(tx, r, kind, target) for r in result)
        return TupleVariable(items, type(result)) if isinstance(result, tuple) else tx.new_list(items)
    if is_constant(result):
        return ConstantVariable(result)
    tx.unsupported("unsupported_result", f"{_describe(kind, target)} returned a {type(result).__name__}, "
                   "which stillframe cannot track")
