"""Comparing two values as a user would observe them: the walker behind :func:`stillframe.check.compare`.

:class:`Walker` compares an eager value with a compiled one recursively (tensors by type, dtype, shape,
significant strides, device, layout, ``requires_grad``, ``is_leaf``, ``grad_fn is None``, values within
tolerances, and aliasing of inputs; containers by structure; scalars by value) and appends one line per
difference. The helpers label inputs by identity and by storage, so a result that aliases an input on one
side must alias the same input on the other.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
import dataclasses
import math
import types
from typing import Any

import torch

from ..variables.builder import of_type

SCALARS = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device,
           torch.layout, torch.memory_format, slice, range, type(Ellipsis), type(NotImplemented))
_MAX_VALUE_LINES = 6


class Walker:
    """Compares two values recursively and appends one line per difference to ``out``.

    With ``ids`` (pairs of id->label maps for the eager and the compiled inputs)
    it also checks identity structure: an object that is an input, a module
    attribute, or an earlier part of the result on one side must be the
    corresponding one on the other.
    """

    def __init__(self, rtol, atol, out, ids, storages, *, inputs=False, grads=False):
        self.rtol, self.atol, self.out = rtol, atol, out
        self.ids = ids
        self.storages = storages
        self.inputs = inputs
        self.grads = grads
        self.seen: tuple[dict, dict] = ({}, {})
        self.visited: set[tuple[int, int]] = set()

    def mismatch(self, path, text):
        self.out.append(f"{path}: {text}")

    def compare(self, e, c, path: str):
        if self.ids is not None and _has_identity(e) | _has_identity(c):
            e_label = self._label(e, path, 0)
            c_label = self._label(c, path, 1)
            if e_label != c_label:
                self.mismatch(path, f"identity differs: eager returns {e_label}, compiled returns {c_label}")
            elif e_label != "a new object":
                return  # the same input / module attribute / earlier output on both sides
        if (id(e), id(c)) in self.visited:
            return
        self.visited.add((id(e), id(c)))

        if of_type(e, torch.Tensor) or of_type(c, torch.Tensor):
            if not (of_type(e, torch.Tensor) and of_type(c, torch.Tensor)):
                self.mismatch(path, f"eager {short(e)}, compiled {short(c)}")
            else:
                self._tensor(e, c, path)
            return
        if type(e) is not type(c):
            self.mismatch(path, f"type differs: eager {qualname(type(e))} {short(e)}, "
                                f"compiled {qualname(type(c))} {short(c)}")
            return
        if type(e).__module__ == "numpy" and hasattr(e, "dtype") and hasattr(e, "shape"):
            # an ndarray or NumPy scalar: its dtype and shape, then its values as a (contiguous) tensor's
            if (e.dtype, e.shape) != (c.dtype, c.shape):
                self.mismatch(path, f"eager {e.dtype} {e.shape}, compiled {c.dtype} {c.shape}")
            else:
                self._tensor(torch.as_tensor(e.copy()), torch.as_tensor(c.copy()), path)
            return
        if of_type(e, torch.Size) or of_type(e, SCALARS):
            if not _scalar_equal(e, c):
                self.mismatch(path, f"eager {e!r}, compiled {c!r}")
        elif of_type(e, (tuple, list, collections.deque)):
            if of_type(e, collections.deque) and e.maxlen != c.maxlen:
                self.mismatch(path, f"deque maxlen differs: eager {e.maxlen}, compiled {c.maxlen}")
            if len(e) != len(c):
                self.mismatch(path, f"length differs: eager {len(e)}, compiled {len(c)}")
                return
            fields = getattr(type(e), "_fields", None)
            for i, (ei, ci) in enumerate(zip(e, c)):
                sub = f"{path}.{fields[i]}" if fields and i < len(fields) else f"{path}[{i}]"
                self.compare(ei, ci, sub)
        elif of_type(e, dict) and any(of_type(k, torch.Tensor) for k in (*e, *c)):
            # tensor keys are two different objects on the two sides: compared in order, as tensors
            if len(e) != len(c):
                self.mismatch(path, f"dict length differs: eager {len(e)}, compiled {len(c)}")
                return
            for i, (ek, ck) in enumerate(zip(e, c)):
                self.compare(ek, ck, f"{path}.keys()[{i}]")
                self.compare(e[ek], c[ck], f"{path}.values()[{i}]")
        elif of_type(e, dict):
            if list(e) != list(c):
                self.mismatch(path, f"dict keys differ: eager {list(e)!r}, compiled {list(c)!r}")
                return
            for key in e:
                self.compare(e[key], c[key], f"{path}[{key!r}]")
        elif of_type(e, (set, frozenset)):
            self._set(e, c, path)
        elif of_type(e, (collections.abc.KeysView, collections.abc.ValuesView, collections.abc.ItemsView)):
            self.compare(list(e), list(c), f"list({path})")  # dict_values has no ==; a view is what it lists now
        elif of_type(e, torch.nn.Module):
            pass  # a module that is not an input/attribute of ours: its type matched; state is compared elsewhere
        elif of_type(e, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)):
            if e != c and getattr(e, "__qualname__", None) != getattr(c, "__qualname__", None):
                self.mismatch(path, f"eager {e!r}, compiled {c!r}")
        elif of_type(e, BaseException):  # its arguments, chaining and traceback, then attributes (notes)
            self.compare(e.args, c.args, f"{path}.args")
            for name in ("__cause__", "__context__"):
                ev, cv = getattr(e, name), getattr(c, name)
                if type(ev) is not type(cv):
                    self.mismatch(path, f"{name} differs: eager {short(ev)}, compiled {short(cv)}")
            if e.__suppress_context__ != c.__suppress_context__ or \
                    (e.__traceback__ is None) != (c.__traceback__ is None):
                self.mismatch(path, f"eager suppress_context={e.__suppress_context__}, traceback "
                                    f"{e.__traceback__ is not None}; compiled {c.__suppress_context__}, "
                                    f"{c.__traceback__ is not None}")
            self._attributes(e, c, path)
        elif of_type(e, collections.abc.Iterator) and type(e).__module__ == "builtins" and \
                hasattr(type(e), "__reduce__"):  # a C iterator (range_iterator, list_iterator): what it has left
            self.compare(_iterator_rest(e), _iterator_rest(c), f"{path} (what it has left)")  # not consumed
        elif hasattr(e, "__dict__") and (type(e).__eq__ is object.__eq__ or dataclasses.is_dataclass(e)):
            self._attributes(e, c, path)  # (a dataclass's __eq__ compares its fields as tuples: tensors refuse)
        else:
            try:
                equal = bool(e == c)
            except Exception as exc:
                self.mismatch(path, f"cannot compare {qualname(type(e))} values: {exc}")
                return
            if not equal:
                self.mismatch(path, f"eager {e!r}, compiled {c!r}")

    def _attributes(self, e, c, path: str):
        e_vars, c_vars = vars(e), vars(c)
        if list(e_vars) != list(c_vars):
            self.mismatch(path, f"attributes differ: eager {list(e_vars)}, compiled {list(c_vars)}")
            return
        for key in e_vars:
            self.compare(e_vars[key], c_vars[key], f"{path}.{key}")

    def _set(self, e, c, path: str):
        """Sets: equal members; tensor members (hashed by identity, so iterated in no fixed order) are matched by
        what they are (the same input on both sides) or, for new tensors, by their values."""
        e_tensors = [m for m in e if of_type(m, torch.Tensor)]
        c_tensors = [m for m in c if of_type(m, torch.Tensor)]
        if not e_tensors and not c_tensors:
            if e != c:
                self.mismatch(path, f"eager {e!r}, compiled {c!r}")
            return
        if {m for m in e if not of_type(m, torch.Tensor)} != {m for m in c if not of_type(m, torch.Tensor)} \
                or len(e_tensors) != len(c_tensors):
            self.mismatch(path, f"set members differ: eager {e!r}, compiled {c!r}")
            return

        def order(tensors, side):
            labels = [self.ids[side].get(id(t), "a new object") if self.ids is not None else "a new object"
                      for t in tensors]
            return sorted(zip(labels, tensors), key=lambda lt: (lt[0], tuple(lt[1].shape),
                                                                 lt[1].detach().flatten().tolist()))

        for i, ((el, et), (cl, ct)) in enumerate(zip(order(e_tensors, 0), order(c_tensors, 1))):
            self.compare(et, ct, f"{path}{{tensor {i}}}")

    def _label(self, obj, path, side: int) -> str:
        if not _has_identity(obj):
            return "a new object"
        label = self.ids[side].get(id(obj))
        if label is not None:
            return label
        seen = self.seen[side]
        if id(obj) in seen:
            return f"the same object as {seen[id(obj)]}"
        seen[id(obj)] = path
        return "a new object"

    def _tensor(self, e: torch.Tensor, c: torch.Tensor, path: str):
        if type(e) is not type(c):
            self.mismatch(path, f"tensor type differs: eager {qualname(type(e))}, compiled {qualname(type(c))}")
        checks = [("dtype", e.dtype, c.dtype), ("shape", tuple(e.shape), tuple(c.shape)),
                  ("device", e.device, c.device), ("layout", e.layout, c.layout)]
        if not self.grads:
            checks += [(name, _autograd_read(e, name), _autograd_read(c, name))
                       for name in ("requires_grad", "is_leaf", "grad_fn is None")]
        for name, ev, cv in checks:
            if ev != cv:
                self.mismatch(path, f"{name} differs: eager {ev}, compiled {cv}")
        same_shape = tuple(e.shape) == tuple(c.shape)
        strided = e.layout == torch.strided and c.layout == torch.strided
        if strided and same_shape and not self.grads:
            if not _strides_equal(e, c, exact=self.inputs):
                self.mismatch(path, f"stride differs: eager {e.stride()}, compiled {c.stride()}")
            if self.inputs and e.storage_offset() != c.storage_offset():
                self.mismatch(path, f"storage_offset differs: eager {e.storage_offset()}, "
                                    f"compiled {c.storage_offset()}")
        if self.storages is not None and strided:
            e_alias = _aliases(e, self.storages[0])
            c_alias = _aliases(c, self.storages[1])
            if e_alias != c_alias:
                self.mismatch(path, f"aliasing differs: eager shares storage with {e_alias or 'no input'}, "
                                    f"compiled with {c_alias or 'no input'}")
        if same_shape and e.dtype == c.dtype and e.device == c.device and "meta" not in (e.device.type,):
            self._values(e, c, path)

    def _values(self, e, c, path):
        exact = not (e.is_floating_point() or e.is_complex())
        rtol, atol = (0.0, 0.0) if exact else (self.rtol, self.atol)
        try:
            torch.testing.assert_close(c.detach(), e.detach(), rtol=rtol, atol=atol, equal_nan=True,
                                       check_device=False, check_dtype=False, check_layout=False,
                                       check_stride=False)
        except AssertionError as err:
            lines = [line for line in str(err).splitlines() if line.strip()][:_MAX_VALUE_LINES]
            self.mismatch(path, "values differ: " + "\n".join(lines))


# ---------------------------------------------------------------- helpers


def tensors_of(obj, path, _seen=None):
    """Yield ``(path, tensor)`` for every tensor inside nested tuples, lists and dicts (first occurrence)."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen:
        return
    if of_type(obj, torch.Tensor):
        seen.add(id(obj))
        yield path, obj
    elif of_type(obj, (tuple, list, collections.deque)):
        seen.add(id(obj))
        for i, item in enumerate(obj):
            yield from tensors_of(item, f"{path}[{i}]", seen)
    elif of_type(obj, dict):
        seen.add(id(obj))
        for key, item in obj.items():
            yield from tensors_of(item, f"{path}[{key!r}]", seen)


def arg_tensors(args, kwargs):
    """Yield ``(path, tensor)`` for every tensor among the call's arguments (``args[0]``, ``kwargs['y'][1]``)."""
    seen: set[int] = set()
    for i, item in enumerate(args):
        yield from tensors_of(item, f"args[{i}]", seen)
    for key, item in kwargs.items():
        yield from tensors_of(item, f"kwargs[{key!r}]", seen)


def _has_identity(obj) -> bool:
    """Whether identity of ``obj`` is observable and meaningful (mutable or user objects, not scalars or tuples)."""
    return not of_type(obj, (*SCALARS, tuple, torch.Size, types.FunctionType, types.BuiltinFunctionType,
                                types.MethodType, type, types.ModuleType))


def identity_labels(args, kwargs, module) -> dict[int, str]:
    """Map the ``id`` of every input object with identity (and of every module tensor) to its name."""
    labels: dict[int, str] = {}

    def visit(obj, path):
        if not _has_identity(obj) and not of_type(obj, tuple):
            return
        if _has_identity(obj):
            if id(obj) in labels:
                return
            labels[id(obj)] = f"input {path}"
        if of_type(obj, (tuple, list, collections.deque)):
            for i, item in enumerate(obj):
                visit(item, f"{path}[{i}]")
        elif of_type(obj, dict):
            for key, item in obj.items():
                visit(item, f"{path}[{key!r}]")

    if module is not None:
        for name, sub in module.named_modules():
            labels.setdefault(id(sub), f"self.{name}" if name else "self")
        for name, t in [*module.named_parameters(), *module.named_buffers()]:
            labels.setdefault(id(t), f"self.{name}")
    for i, arg in enumerate(args):
        visit(arg, f"args[{i}]")
    for key, arg in kwargs.items():
        visit(arg, f"kwargs[{key!r}]")
    return labels


def storage_labels(args, kwargs, module) -> dict[int, list[str]]:
    """Map the data pointer of every input (and module tensor) storage to the names that use it."""
    named = list(arg_tensors(args, kwargs))
    if module is not None:
        named += [(f"self.{n}", t) for n, t in [*module.named_parameters(), *module.named_buffers()]]
    storages: dict[int, list[str]] = {}
    for name, t in named:
        ptr = _storage_ptr(t)
        if ptr:
            storages.setdefault(ptr, []).append(name)
    return storages


def _storage_ptr(t: torch.Tensor) -> int:
    if t.layout != torch.strided or t.device.type == "meta":
        return 0
    try:
        storage = t.untyped_storage()
        return storage.data_ptr() if storage.nbytes() else 0
    except (RuntimeError, NotImplementedError):
        return 0


def _aliases(t: torch.Tensor, storages: dict[int, list[str]]) -> str:
    return ", ".join(storages.get(_storage_ptr(t), []) if _storage_ptr(t) else [])


def _strides_equal(e: torch.Tensor, c: torch.Tensor, *, exact: bool) -> bool:
    """Compare strides of dims that matter: a dim of size 1 (or an empty tensor) may have any stride.

    ``exact`` (used for inputs after the call) compares every stride.
    """
    if exact:
        return e.stride() == c.stride()
    if e.numel() == 0:
        return True
    return all(size <= 1 or se == sc for size, se, sc in zip(e.shape, e.stride(), c.stride()))


def _scalar_equal(e, c) -> bool:
    if of_type(e, float) and math.isnan(e):
        return of_type(c, float) and math.isnan(c)
    if of_type(e, complex):
        return e == c or (math.isnan(abs(e)) and math.isnan(abs(c)))
    return e == c


def tolerances(rtol, atol):
    """``(rtol, atol)`` for ``torch.testing.assert_close``: its dtype defaults where both are ``None``."""
    if rtol is None and atol is None:
        return None, None
    return (0.0 if rtol is None else rtol), (0.0 if atol is None else atol)


def qualname(cls) -> str:
    """``module.QualName`` of a class, without the module for builtins."""
    module = getattr(cls, "__module__", "")
    return cls.__qualname__ if module in ("builtins", "") else f"{module}.{cls.__qualname__}"


def _iterator_rest(it: Any) -> Any:
    """What the C iterator ``it`` (a range's, list's, tuple's) has left, read off its ``__reduce__`` without
    consuming it: ``seq[index:]`` (a range stays a range); its reduce value itself for any other kind."""
    reduced = it.__reduce__()
    if len(reduced) >= 2 and reduced[0] is iter and len(reduced[1]) == 1:
        seq = reduced[1][0]
        return seq[reduced[2]:] if len(reduced) > 2 else seq
    return reduced[1:]


def short(value) -> str:
    """A one-line description of a value for a mismatch message (a tensor by its metadata)."""
    if of_type(value, torch.Tensor):
        return f"{type(value).__name__}(shape={tuple(value.shape)}, dtype={value.dtype})"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _autograd_read(t: torch.Tensor, name: str) -> Any:
    """``t.requires_grad``, ``t.is_leaf`` or ``t.grad_fn is None``; where the read raises, as eager's does for a
    view made under ``no_grad`` whose base was then written in grad mode (fuzz 32:672), the error's text, so the
    two sides' errors are compared as values."""
    try:
        return t.grad_fn is None if name == "grad_fn is None" else getattr(t, name)
    except RuntimeError as e:
        return f"RuntimeError: {e}"
