"""``type(x)`` and ``isinstance(x, cls)`` on VariableTrackers, answered as Python's object model answers them.

:func:`python_type_of` is the Python type a VT stands for (a graph input tensor's own subclass, a module's class);
:func:`isinstance_rule` is the ``isinstance`` builtin, including torch's legacy tensor and storage classes
(``torch.FloatTensor``, ``torch.BoolStorage``) and user metaclasses' ``__instancecheck__``, which is traced.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import types
from typing import TYPE_CHECKING, Any

import torch
from ..guards.guard import Guard
from ..guards.source import AttrSource
from ..variables.base import (ConstantVariable, LazyArgument, NNModuleVariable, NumpyArrayVariable,
                              PythonObjectVariable, TensorVariable, VariableTracker)
from ..variables.builder import of_type, wrap
from . import attrs, calls, known, numpy_interop, truthiness

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


def python_type_of(tx: Tracer, var: VariableTracker) -> type:
    if isinstance(var, LazyArgument):
        var = wrap(tx, var.value, var.source)
    if isinstance(var, ConstantVariable):
        return type(var.value)
    if isinstance(var, TensorVariable):
        entry = tx.tensor(var)
        if entry.source is not None and var.tid in tx.input_values:
            return type(tx.input_values[var.tid])
        return torch.Tensor
    if isinstance(var, (NNModuleVariable,)):
        return type(var.module)
    if isinstance(var, PythonObjectVariable):
        return type(var.value)
    if isinstance(var, NumpyArrayVariable):
        return numpy_interop.scalar_type(tx, var)
    return var.python_type()


def isinstance_rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if kwargs:
        tx.user_error(TypeError("isinstance() takes no keyword arguments"))
    if len(args) != 2:
        tx.user_error(TypeError(f"isinstance expected 2 arguments, got {len(args)}"))
    obj, classes = args
    cls = known.const_value(tx, classes)
    for c in _flat_classes(cls):
        if type(c) is _LEGACY_TENSOR_TYPE and isinstance(obj, TensorVariable):
            # torch.FloatTensor, torch.LongTensor ...: a check of dtype and device, which the tensor guard fixes
            if isinstance(tx.tensor(obj).fake, c):
                return ConstantVariable(True)
            continue
        check = getattr(type(c), "__instancecheck__", None)
        if type(c) is _LEGACY_STORAGE_TYPE:
            if _legacy_storage_check(tx, obj, c):
                return ConstantVariable(True)
            continue
        if isinstance(check, types.FunctionType) and (not type(c).__module__.startswith(_FOLDED_METACLASSES) or
                                                      check.__module__ == "typing"):
            # a user metaclass's own __instancecheck__ decides, traced (ABCMeta and torch's own are answered by
            # the class relation below, as they answer; typing's are not: isinstance(x, Any) raises TypeError, a
            # Protocol checks the instance's own attributes, or refuses where it is not @runtime_checkable)
            result = calls.call_sync(tx, wrap(tx, check, None), [wrap(tx, c, None), obj], {})
            if truthiness.truthiness(tx, result):
                return ConstantVariable(True)
            continue
        if of_type(c, type) and isinstance_type(python_type_of(tx, obj), c, tx, obj):
            return ConstantVariable(True)
        if of_type(c, type) and _shown_class_check(tx, obj, c):
            return ConstantVariable(True)
        if not of_type(c, type) and not any("__instancecheck__" in vars(k) for k in type(c).__mro__):
            # CPython's abstract protocol: ``c.__bases__`` and ``obj.__class__``, user code, walked by
            # abstract_issubclass; not modelled
            tx.unsupported("unsupported_call", "isinstance() against an object that is no class (its __bases__)",
                           ("the check runs for real",))
        if not of_type(c, type):
            return ConstantVariable(isinstance_type(python_type_of(tx, obj), cls, tx, obj))  # Python's TypeError
    return ConstantVariable(False)


#: The metaclass of torch's legacy tensor types (``torch.FloatTensor`` ...).
_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)
_FOLDED_METACLASSES = ("abc", "_py_abc", "typing", "torch", "builtins", "enum")
#: The metaclass of torch's legacy storage classes (``torch.BoolStorage`` ...).
_LEGACY_STORAGE_TYPE = type(torch.BoolStorage)


def _legacy_storage_check(tx: Tracer, obj: VariableTracker, cls: type) -> bool:
    """``isinstance(s, torch.BoolStorage)``: the class itself, or a plain ``TypedStorage`` of that class's dtype and
    device (as the metaclass's ``__instancecheck__`` answers); the storage's dtype and device are guarded."""
    t = python_type_of(tx, obj)
    if issubclass(t, cls):
        return True
    if t is not torch.TypedStorage or not isinstance(obj, PythonObjectVariable):
        return False
    storage = obj.value
    if obj.source is not None:
        tx.add_guard(Guard(AttrSource(obj.source, "dtype"), "EQUALS", storage.dtype))
        tx.add_guard(Guard(AttrSource(AttrSource(obj.source, "device"), "type"), "EQUALS", storage.device.type))
    return isinstance(storage, cls)


def _shown_class_check(tx: Tracer, obj: VariableTracker, cls: type) -> bool:
    """CPython's ``object_isinstance`` (and ``ABCMeta.__instancecheck__``): when ``type(obj)`` is not a subclass of
    ``cls``, ``obj.__class__`` is tried; it differs from the type only where a class defines its own ``__class__``
    or ``__getattribute__`` (a proxy). A ``__class__`` that is not a class answers False."""
    t = python_type_of(tx, obj)
    if not attrs.shows_other_class(t):
        return False
    shown = attrs.getattr_var(tx, obj, "__class__")
    if not known.is_const(tx, shown):
        tx.unsupported("unsupported_call", "isinstance() of an object whose __class__ is not a constant")
    value = known.const_value(tx, shown)
    return of_type(value, type) and value is not t and issubclass(value, cls)


def _flat_classes(cls: Any) -> list:
    """The classes ``isinstance(x, cls)`` tries, in order: nested tuples flattened; a union as itself."""
    if of_type(cls, tuple):
        return [c for part in cls for c in _flat_classes(part)]
    return [cls]


def isinstance_type(t: type, cls: Any, tx: Tracer, obj: VariableTracker) -> bool:
    if isinstance(obj, TensorVariable) and not (of_type(cls, type) and issubclass(torch.Tensor, cls)):
        if cls is torch.nn.Parameter or (of_type(cls, tuple) and torch.nn.Parameter in cls):
            return issubclass(t, cls)
    return issubclass(t, cls)


def super_refusal(cls: type, obj_type: type, value: Any = None) -> TypeError:
    """The TypeError of ``super(cls, obj)`` where ``obj`` (of type ``obj_type``; ``value`` where it is a class) is
    neither an instance nor a subclass of ``cls``, in this Python's own words (3.13 names both types: "obj
    (instance of list) is not an instance or subtype of type (C)."). Found by trying it on a stand-in: the class
    itself, or an instance of a class named as ``obj_type`` is (its C name, module-qualified outside builtins)."""
    if of_type(value, type):
        probe: Any = value
    else:
        heap = obj_type.__flags__ & (1 << 9)  # Py_TPFLAGS_HEAPTYPE: tp_name is __name__
        name = obj_type.__name__ if heap or obj_type.__module__ == "builtins" else \
            f"{obj_type.__module__}.{obj_type.__qualname__}"
        probe = type(name, (), {})()
    try:
        super(cls, probe)
    except TypeError as e:
        return TypeError(*e.args)
    return TypeError("super(type, obj): obj must be an instance or subtype of type")
