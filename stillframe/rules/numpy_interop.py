"""NumPy code on tensors' data, captured as torch.compile captures it: through ``torch._numpy``.

``t.numpy()`` in the trace is a :class:`NumpyArrayVariable`, an ndarray whose data is a tensor of the heap.
A NumPy function (``np.mean``, ``np.linalg.norm``), an ndarray method or attribute (``a.T``, ``a.copy()``) or
an operator on such arrays becomes one graph node whose target is a :class:`NumpyCall`: it wraps its tensor
arguments as ``torch._numpy`` ndarrays, calls ``torch._numpy``'s version of the function, and unwraps the
result. ``torch.from_numpy(a)`` gives back a tensor sharing the array's data; an array that escapes (returned,
or live at a graph break) is rebuilt as ``tensor.numpy()``.

Soundness: only what ``torch._numpy`` models exactly enters the graph. Functions that write (``out=``,
``np.copyto`` ...), in-place operators, the random module, ndarray inputs from outside the trace, subscripts,
and the truth of an array break the graph instead (they run for real with NumPy itself).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import operator
from typing import TYPE_CHECKING, Any

import torch

from .. import compat
from ..tensors.effects import PURE_QUERIES
from ..tensors.ops import call_tensor_op
from ..variables.base import (
    BuiltinVariable,
    ConstantVariable,
    ListVariable,
    NumpyArrayVariable,
    PartialVariable,
    PythonObjectVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
)

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer

tnp = compat.torch_numpy
if tnp is not None:
    import numpy as np
else:  # pragma: no cover - NumPy is optional: without it nothing here applies
    np = None


class NumpyCall:
    """The target of a NumPy graph node: ``torch._numpy``'s ``fn`` on the node's tensors as ndarrays."""

    def __init__(self, fn: Any, name: str):
        self.fn = fn
        self.__name__ = f"numpy_{name.replace('.', '_')}"
        self.__qualname__ = self.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.fn(*_tree(_as_array, args), **_tree(_as_array, kwargs))
        return _tree(_as_tensor, result)

    def __repr__(self) -> str:
        return self.__name__


def _tree(fn: Any, value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_tree(fn, v) for v in value)
    if isinstance(value, list):
        return [_tree(fn, v) for v in value]
    if isinstance(value, dict):
        return {k: _tree(fn, v) for k, v in value.items()}
    return fn(value)


def _as_array(value: Any) -> Any:
    return tnp.ndarray(value) if isinstance(value, torch.Tensor) else value


def _as_tensor(value: Any) -> Any:
    return value.tensor if isinstance(value, tnp.ndarray) else value


_CALLS: dict[Any, NumpyCall] = {}


def _numpy_call(key: Any, fn: Any, name: str) -> NumpyCall:
    call = _CALLS.get(key)
    if call is None:
        call = _CALLS[key] = NumpyCall(fn, name)
        PURE_QUERIES[call] = f"torch._numpy.{name}: computes on its arguments alone"
    return call


# NumPy functions that write into an argument, or read global state: never captured.
_WRITERS = {"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis", "random", "seterr", "errstate"}
# Whose 0-d result is an array, not a NumPy scalar (a reduction's 0-d result is a scalar, as NumPy returns).
_ARRAY_MAKERS = {"asarray", "array", "asanyarray", "ascontiguousarray", "copy", "reshape", "zeros", "ones", "empty",
                 "full", "zeros_like", "ones_like", "empty_like", "full_like", "transpose", "T", "real", "imag",
                 "squeeze", "ravel", "flatten", "astype", "atleast_1d"}
# ndarray methods captured: each returns a new array or a view, and writes nothing.
_METHODS = {"copy", "transpose", "reshape", "max", "min", "sum", "mean", "prod", "std", "var", "all", "any",
            "argmax", "argmin", "astype", "flatten", "ravel", "squeeze", "cumsum", "cumprod", "clip", "round",
            "dot", "swapaxes", "diagonal", "trace", "conj", "nonzero"}
_TENSOR_ATTRS = {"T", "real", "imag"}


def _functions() -> dict[int, tuple[Any, str]]:
    """id(NumPy function) -> (torch._numpy's, its dotted name), for numpy, numpy.linalg and numpy.fft."""
    table: dict[int, tuple[Any, str]] = {}
    for np_module, t_module, prefix in ((np, tnp, ""), (np.linalg, tnp.linalg, "linalg."), (np.fft, tnp.fft, "fft.")):
        for name in dir(t_module):
            if name.startswith("_") or name in _WRITERS:
                continue
            np_fn, t_fn = getattr(np_module, name, None), getattr(t_module, name)
            if callable(np_fn) and callable(t_fn) and not isinstance(np_fn, type) and not isinstance(t_fn, type):
                table[id(np_fn)] = (t_fn, prefix + name)
    for name in _METHODS:  # np.ndarray.copy(a, ...): what a bound method of an array calls
        if hasattr(np.ndarray, name) and hasattr(tnp.ndarray, name):
            table[id(getattr(np.ndarray, name))] = (getattr(tnp.ndarray, name), name)
    return table


FUNCTIONS = _functions() if np is not None else {}


def is_numpy_function(target: Any) -> bool:
    """Whether calling ``target`` is a NumPy function this module captures."""
    return id(target) in FUNCTIONS


def call_numpy(tx: Tracer, target: Any, args: list, kwargs: dict) -> VariableTracker | None:
    """``np.fn(*args)`` or ``array.method(*args)``: one graph node; its tensor results are arrays. ``None`` where
    no argument is an array or tensor of the trace (the call is left to the other rules)."""
    fn, name = FUNCTIONS[id(target)]
    if "out" in kwargs:
        tx.unsupported("numpy", f"np.{name}(out=...) writes into an array")
    flat = _flat(tx, [*args, *kwargs.values()])
    if not any(isinstance(a, (NumpyArrayVariable, TensorVariable)) for a in flat):
        return None
    for a in flat:
        if isinstance(a, TensorVariable):  # NumPy reads a tensor argument through Tensor.__array__, as numpy()
            tensor_numpy(tx, a, [], {})
    call = _numpy_call(fn, fn, name)
    result = call_tensor_op(tx, "call_function", call, tuple(_arg(tx, a) for a in args),
                            {k: _arg(tx, v) for k, v in kwargs.items()})
    return _as_arrays(tx, result, name)


def _flat(tx: Tracer, values: list) -> list:
    out = []
    for v in values:
        if isinstance(v, TupleVariable):
            out.extend(_flat(tx, list(v.items)))
        elif isinstance(v, ListVariable):
            out.extend(_flat(tx, list(tx.list_items(v))))
        else:
            out.append(v)
    return out


def _arg(tx: Tracer, var: VariableTracker) -> VariableTracker:
    """A VT as the graph takes it: an array as its tensor, a NumPy dtype or scalar type as its name."""
    if isinstance(var, NumpyArrayVariable):
        return TensorVariable(var.tid)
    if isinstance(var, TupleVariable):
        return TupleVariable(tuple(_arg(tx, v) for v in var.items), var.cls)
    if isinstance(var, ListVariable):
        return tx.new_list(tuple(_arg(tx, v) for v in tx.list_items(var)))
    value = getattr(var, "value", getattr(var, "fn", None))
    if isinstance(var, (PythonObjectVariable, ConstantVariable, BuiltinVariable)) and (
            isinstance(value, np.dtype) or any(value is t for t in (bool, int, float, complex)) or
            isinstance(value, type) and issubclass(value, np.generic)):
        return ConstantVariable(np.dtype(value).name)  # np.float64, bool, int: as NumPy reads them
    return var


def scalar_type(tx: Tracer, array: NumpyArrayVariable) -> type:
    """The Python type of an array VT: ``np.ndarray``, or the NumPy scalar type (``np.float32`` ...)."""
    if not array.scalar:
        return np.ndarray
    return np.dtype(str(tx.tensor(TensorVariable(array.tid)).meta.dtype).removeprefix("torch.")).type


def _as_arrays(tx: Tracer, result: VariableTracker, name: str) -> VariableTracker:
    if isinstance(result, TensorVariable):
        scalar = not tx.tensor(result).meta.shape and name.split(".")[-1] not in _ARRAY_MAKERS
        return NumpyArrayVariable(result.tid, scalar)
    if isinstance(result, TupleVariable):
        return TupleVariable(tuple(_as_arrays(tx, v, name) for v in result.items), result.cls)
    if isinstance(result, ListVariable):
        return tx.new_list(tuple(_as_arrays(tx, v, name) for v in tx.list_items(result)))
    return result


def tensor_numpy(tx: Tracer, tensor: TensorVariable, args: list, kwargs: dict) -> VariableTracker:
    """``t.numpy()``: the array sharing ``t``'s data (refused where eager refuses: a tensor that requires grad)."""
    if args or kwargs:
        tx.unsupported("numpy", "Tensor.numpy(force=...) runs for real")
    meta = tx.tensor(tensor).meta
    if meta.requires_grad:
        tx.user_error(RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                                   "instead."))
    if meta.device.type != "cpu":
        tx.unsupported("numpy", "Tensor.numpy() of a tensor that is not on the CPU")
    return NumpyArrayVariable(tensor.tid, False)


def from_numpy(tx: Tracer, array: NumpyArrayVariable) -> VariableTracker:
    """``torch.from_numpy(a)``: a new tensor sharing the array's data (an alias of its tensor)."""
    return call_tensor_op(tx, "call_function", torch.ops.aten.alias.default, (TensorVariable(array.tid),), {})


def array_attr(tx: Tracer, array: NumpyArrayVariable, name: str) -> VariableTracker:
    """An ndarray attribute: shape facts from the tensor's metadata, views (``T``, ``real``) as graph nodes, and
    the methods in :data:`_METHODS` bound for a later call."""
    meta = tx.tensor(TensorVariable(array.tid)).meta
    if any(not isinstance(s, int) for s in (*meta.shape, *meta.stride)):
        tx.unsupported("numpy", f"ndarray.{name} of an array with symbolic sizes")
    itemsize = torch.empty((), dtype=meta.dtype).element_size()
    facts = {"shape": tuple(meta.shape), "ndim": len(meta.shape), "size": int(torch.Size(meta.shape).numel()),
             "itemsize": itemsize, "strides": tuple(s * itemsize for s in meta.stride),
             "dtype": np.dtype(str(meta.dtype).removeprefix("torch.")), "nbytes": itemsize * torch.Size(meta.shape).numel()}
    if name in facts:
        value = facts[name]
        if isinstance(value, tuple):
            return TupleVariable(tuple(ConstantVariable(v) for v in value))
        return ConstantVariable(value)
    if name in _TENSOR_ATTRS:
        call = _numpy_call(("attr", name), operator.attrgetter(name), name)
        return _as_arrays(tx, call_tensor_op(tx, "call_function", call, (TensorVariable(array.tid),), {}), name)
    if name in _METHODS:  # bound as functools.partial(np.ndarray.name, array): real where it must be rebuilt
        return PartialVariable(PythonObjectVariable(getattr(np.ndarray, name)), (array,), ())
    tx.unsupported("numpy", f"ndarray.{name} is not captured")


_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
           "%": operator.mod, "**": operator.pow, "@": operator.matmul, "&": operator.and_, "|": operator.or_,
           "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift}
_COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
            ">=": operator.ge}


def binary(tx: Tracer, symbol: str, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    """``a <symbol> b`` where one side is an array: NumPy's operator (its type promotion), as one node."""
    fn = _BINARY.get(symbol) or _COMPARE.get(symbol)
    if fn is None:  # in place (``a += 1`` writes the array, and the tensor it shares data with)
        tx.unsupported("numpy", f"the operator {symbol} on an ndarray")
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):  # (found by a probe)
        tx.unsupported("numpy", f"the operator {symbol} between a tensor and an ndarray: the tensor's operator "
                       "makes a tensor (or NumPy's raises), where NumPy's arithmetic made an ndarray",
                       ("it runs for real, then tracing resumes",))
    call = _numpy_call(("op", symbol), fn, fn.__name__)
    return _as_arrays(tx, call_tensor_op(tx, "call_function", call, (_arg(tx, a), _arg(tx, b)), {}), fn.__name__)
