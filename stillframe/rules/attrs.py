"""Attribute reads on VariableTrackers (``LOAD_ATTR`` / ``LOAD_METHOD`` / ``getattr``).

Live objects (modules, user objects, Python modules) are read with Python's
own lookup order, statically (``type(obj).__mro__`` and the instance dict, as
``inspect.getattr_static`` does) so no user code runs at trace time: data
descriptors such as ``property`` are inlined, functions found on the class
become bound methods, and plain values are wrapped with an ``AttrSource`` and
guarded. ``nn.Module`` parameters, buffers and submodules come from
``_parameters`` / ``_buffers`` / ``_modules`` as ``Module.__getattr__`` does.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import dataclasses
import functools
import operator
import types
from typing import Any

import torch
from ..guards.guard import Guard
from ..guards.source import AttrSource, BaseItemSource, CallSource, GetItemSource
from ..variables.base import (
    AttrsView,
    BuiltinVariable,
    ConstantVariable,
    DictEntry,
    DictVariable,
    NumpyArrayVariable,
    DictViewVariable,
    GeneratorVariable,
    IteratorVariable,
    LazyArgument,
    LiveIteratorVariable,
    ListVariable,
    NNModuleVariable,
    NestedFunctionVariable,
    PartialVariable,
    PythonObjectVariable,
    RangeVariable,
    SetVariable,
    DequeVariable,
    SliceVariable,
    TensorMethodVariable,
    TorchFunctionVariable,
    TensorVariable,
    TupleVariable,
    UserFunctionVariable,
    UserMethodVariable,
    VariableTracker,
)
from ..variables.builder import TRUSTED_MODULES, is_constant, of_type, shows_other_class, wrap
from ..variables.kinds import CONTEXT_VALUES, INTERNAL
from ..variables.objects import (DELETED, ContainerMethodVariable, DICT_BASES, ExceptionEntry, ObjectVariable,
                                 SuperVariable, storage_of)
from . import calls, exceptions, frames, nn_modules, numpy_interop, type_checks
from .protocol import Protocol
from .disable import compiled_original
from .objects import (MISSING, _static_lookup, _static_lookup_type, data_descriptor, deleted_attr_missing,
                      descriptor_call, function_attr_key, guard_not_on_class, is_python_data_descriptor, pending_attr,
                      real_object, refuse_weak_proxy, slots_refuse)
from .tensor_attrs import tensor_attr, tensor_instance_attr



# Tensor attributes that are views computed by a property: recorded as ``getattr`` nodes.


def getattr_var(tx: Any, obj: VariableTracker, name: str) -> VariableTracker:
    """``obj.name`` as a VT; a missing attribute raises the user's AttributeError (the :data:`GETATTR` table)."""
    if name == "__class__" and not isinstance(obj, (TensorVariable, PythonObjectVariable)):
        cls = type_checks.python_type_of(tx, obj)
        if not shows_other_class(cls):
            return PythonObjectVariable(cls)
    return GETATTR(tx, obj, name)


def _attribute_refused(tx: Any, obj: VariableTracker, reason: str, name: str) -> VariableTracker:
    tx.unsupported("unsupported_attribute", f"reading .{name} of a {obj.python_type().__name__} value: {reason}")


#: ``obj.name``, one rule per VariableTracker kind (issue 10: this was an isinstance ladder ending in a break).
GETATTR = Protocol("getattr", _attribute_refused)


@GETATTR.rule(TensorVariable)
def _tensor_getattr(tx: Any, obj: TensorVariable, name: str) -> VariableTracker:
    return tensor_attr(tx, obj, name)


@GETATTR.rule(NNModuleVariable, PythonObjectVariable)
def _live_getattr(tx: Any, obj: VariableTracker, name: str) -> VariableTracker:
    written = pending_attr(tx, obj, name)
    if written is not None:
        return written
    if isinstance(obj, NNModuleVariable):
        return nn_modules.module_attr(tx, obj, name)
    # (its referent's attribute, which the trace may have written to (o.foo = 2, pending): the live read would miss
    # that write; it runs for real, after the writes before it)
    refuse_weak_proxy(tx, obj, f"reading .{name}")
    getattribute = type(obj.value).__getattribute__
    if of_type(getattribute, types.FunctionType) and not issubclass(type(obj.value), type):  # (modules too)
        return calls.call_sync(tx, UserFunctionVariable(getattribute), [obj, ConstantVariable(name)], {})
    return object_attr(tx, obj, obj.value, name)


GETATTR.refuse("the methods of a dict view (isdisjoint, mapping) are not modelled", DictViewVariable)
GETATTR.rule(NumpyArrayVariable)(lambda tx, obj, name: numpy_interop.array_attr(tx, obj, name))


@GETATTR.rule(ObjectVariable)
def _object_getattr(tx: Any, obj: ObjectVariable, name: str) -> VariableTracker:
    getattribute = obj.cls.__getattribute__
    if of_type(getattribute, types.FunctionType):  # the class's own lookup runs in the trace
        return calls.call_sync(tx, UserFunctionVariable(getattribute), [obj, ConstantVariable(name)], {})
    return instance_attr(tx, obj, name)


@GETATTR.rule(ListVariable, DictVariable, TupleVariable, SetVariable, DequeVariable)
def _container_getattr(tx: Any, obj: VariableTracker, name: str) -> VariableTracker:
    if isinstance(obj, DequeVariable) and name == "maxlen":
        return ConstantVariable(obj.maxlen)
    if isinstance(obj, TupleVariable) and obj.cls is not tuple:
        fields = getattr(obj.cls, "_fields", None) or getattr(obj.cls, "__match_args__", None)
        if fields and name in fields:
            return obj.items[list(fields).index(name)]
        desc = data_descriptor(obj.cls, name)
        if desc is not MISSING and hasattr(type(desc), "__get__"):  # a @property written in the NamedTuple
            return _bind_found(tx, obj, None, name, ("class", desc), None)
        if name == "__dict__" and obj.cls.__dictoffset__:  # the instance's own dict, which the trace does not model
            tx.unsupported("unsupported_attribute", f"reading .__dict__ of a {obj.cls.__name__}",
                           ("the read runs for real",))
        class_attr = getattr(obj.cls, name, MISSING)
        if class_attr is not MISSING and not callable(class_attr):
            return wrap(tx, class_attr, None)  # _fields, _field_defaults ...
        method = _python_method_of(obj.cls, name)
        if of_type(method, staticmethod):  # a method written in a NamedTuple subclass: traced
            return wrap(tx, method.__func__, None)
        if of_type(method, classmethod):
            return bind_classmethod(tx, method, wrap(tx, obj.cls, None))
        if of_type(method, types.FunctionType):
            return UserMethodVariable(method, obj)
    if hasattr(obj.python_type(), name):
        return ContainerMethodVariable(obj, name)
    tx.user_error(AttributeError(f"'{obj.python_type().__name__}' object has no attribute '{name}'", name=name))


def _python_method_of(cls: type, name: str) -> Any:
    """The function, staticmethod or classmethod ``name`` written in a tuple subclass (the first class in its MRO
    that defines it, before ``tuple``), or ``None``: the ones ``collections.namedtuple`` makes (``_replace`` ...)
    have their own rules."""
    for klass in cls.__mro__:
        if klass is tuple:
            return None
        attr = klass.__dict__.get(name, MISSING)
        if attr is not MISSING:
            fn = getattr(attr, "__func__", attr)
            if not of_type(fn, types.FunctionType) or fn.__module__ == "collections":
                return None
            return attr
    return None


@GETATTR.rule(ConstantVariable)
def _constant_getattr(tx: Any, obj: ConstantVariable, name: str) -> VariableTracker:
    try:
        value = getattr(obj.value, name)
    except AttributeError as e:
        tx.user_error(e)
    if callable(value) and not of_type(value, type):
        return PythonObjectVariable(value)
    return wrap(tx, value, None)


@GETATTR.rule(BuiltinVariable)
def _builtin_getattr(tx: Any, obj: BuiltinVariable, name: str) -> VariableTracker:
    try:
        value = getattr(obj.fn, name)
    except AttributeError as e:  # getattr(object, name, default) honours its default
        tx.user_error(e)
    if value is object.__setattr__ or value is object.__getattribute__:  # rules of their own
        return BuiltinVariable(value)
    return wrap(tx, value, None)


@GETATTR.rule(NestedFunctionVariable)
def nested_function_attr(tx: Any, fn: NestedFunctionVariable, name: str) -> VariableTracker:
    """An attribute of a function made in the trace: what the trace set on it, else what its code says."""
    if fn.attrs is not None:
        written = tx.dict_lookup(DictVariable(fn.attrs), function_attr_key(name), MISSING)
        if written is not MISSING:
            return written
        if name == "__dict__":
            return DictVariable(fn.attrs)  # the function's __dict__ is that store (slots kept out of it)
    code = fn.code
    if name == "__name__":
        return ConstantVariable(code.co_name)
    if name == "__qualname__":
        return ConstantVariable(fn.qualname)
    if name == "__module__":
        return ConstantVariable(fn.globals.get("__name__"))
    if name == "__doc__":
        doc = code.co_consts[0] if code.co_consts and isinstance(code.co_consts[0], str) else None
        return ConstantVariable(doc)
    if name == "__type_params__":
        return TupleVariable(())
    if name == "__defaults__":
        return TupleVariable(tuple(fn.defaults)) if fn.defaults else ConstantVariable(None)
    if name == "__code__":  # the code object MAKE_FUNCTION was given: immutable, its co_* fields are constants
        return wrap(tx, code, None)
    if (hasattr(types.FunctionType, name) or name in _FUNCTION_SLOTS) and name not in _FUNCTION_UNREAD:
        # every function has it (__globals__, __closure__, __kwdefaults__ ...): not modelled, read for real
        return _attribute_refused(tx, fn, "this attribute of a function made in the trace is not modelled", name)
    tx.user_error(AttributeError(f"'function' object has no attribute '{name}'"))


#: Attributes every function has that ``hasattr(types.FunctionType, name)`` does not show (instance slots).
_FUNCTION_SLOTS = frozenset({"__globals__", "__closure__", "__builtins__"})
#: Read as absent (AttributeError), so that ``functools.wraps`` applied in the trace skips them and the graph goes
#: on: ``__dict__`` where the trace set no attribute, ``__annotations__`` (not kept by the trace).
_FUNCTION_UNREAD = frozenset({"__dict__", "__annotations__"})


@GETATTR.rule(UserFunctionVariable)
def _function_getattr(tx: Any, obj: UserFunctionVariable, name: str) -> VariableTracker:
    """``__name__``, ``__defaults__``, ``__wrapped__`` ... read off the live function."""
    if not hasattr(obj.fn, name):
        tx.user_error(AttributeError(f"'function' object has no attribute '{name}'"))
    return wrap(tx, getattr(obj.fn, name), AttrSource(obj.source, name) if obj.source is not None else None)


@GETATTR.rule(SliceVariable)
def _slice_getattr(tx: Any, obj: SliceVariable, name: str) -> VariableTracker:
    if name in ("start", "stop", "step"):
        return getattr(obj, name)
    if hasattr(slice, name):
        return _attribute_refused(tx, obj, "slice methods are not traced", name)
    tx.user_error(AttributeError(f"'slice' object has no attribute '{name}'"))


@GETATTR.rule(RangeVariable)
def _range_getattr(tx: Any, obj: RangeVariable, name: str) -> VariableTracker:
    if name in ("start", "stop", "step"):
        return ConstantVariable(getattr(obj.value, name))
    if hasattr(range, name):
        return _attribute_refused(tx, obj, "range methods other than len/iter/index are not traced", name)
    tx.user_error(AttributeError(f"'range' object has no attribute '{name}'"))


#: The attributes of a partial made in the trace: read from what it was made with.
_PARTIAL_FIELDS = {"func": lambda tx, p: p.fn, "args": lambda tx, p: TupleVariable(p.args),
                   "keywords": lambda tx, p: tx.new_dict(tuple(p.kwargs))}


@GETATTR.rule(PartialVariable)
def _partial_getattr(tx: Any, obj: PartialVariable, name: str) -> VariableTracker:
    if name in _PARTIAL_FIELDS:
        return _PARTIAL_FIELDS[name](tx, obj)
    if hasattr(functools.partial, name):
        return _attribute_refused(tx, obj, "a partial's methods are not traced", name)
    tx.user_error(AttributeError(f"'functools.partial' object has no attribute '{name}'"))


GETATTR.refuse("a bound method's __self__/__func__ are not modelled as attributes", UserMethodVariable)
GETATTR.refuse("the attributes of a method or function of a container, tensor or torch are not modelled",
               ContainerMethodVariable, TensorMethodVariable, TorchFunctionVariable)
GETATTR.refuse("the methods of iterators and generators are reached through next()/send() rules, not attributes",
               IteratorVariable, LiveIteratorVariable, GeneratorVariable)
GETATTR.refuse("the attributes of a grad-mode or autocast context object are not modelled", *CONTEXT_VALUES)
GETATTR.refuse("not a Python value (an internal stack or cell marker): never the object of an attribute read",
               *INTERNAL)
GETATTR.refuse("an argument not wrapped yet is wrapped before any attribute read", LazyArgument)


def plain_getattr(tx: Any, obj: VariableTracker, name: str) -> VariableTracker:
    """``object.__getattribute__(obj, name)``: Python's lookup without the class's ``__getattribute__``."""
    if isinstance(obj, ObjectVariable):
        return instance_attr(tx, obj, name)
    if isinstance(obj, PythonObjectVariable) and not issubclass(type(obj.value), (type, types.ModuleType)):
        written = pending_attr(tx, obj, name)
        return written if written is not None else object_attr(tx, obj, obj.value, name)
    return getattr_var(tx, obj, name)


def instance_attr(tx: Any, obj: Any, name: str) -> VariableTracker:
    """An attribute of an object created during the trace: a data descriptor on its class, then its own attributes,
    then its class (``object.__getattribute__``'s order)."""
    entry = tx.heap(obj.oid)
    exception = isinstance(entry, ExceptionEntry)
    if exception:  # args, __context__, __traceback__ ...: C data descriptors, before the instance dict
        found = exceptions.data_attr(tx, obj, name)
        if found is not None:
            return found
    desc = data_descriptor(entry.cls, name)
    if desc is not MISSING and hasattr(type(desc), "__get__"):  # one without __get__ yields to the instance dict
        return _bind_found(tx, obj, None, name, ("class", desc), None)
    own = entry.attrs.get(name, MISSING)
    if own is not MISSING:
        return own
    if exception:  # add_note, with_traceback, __str__ ...: C methods
        found = exceptions.method_attr(tx, obj, name)
        if found is not None:
            return found
    if name == "__dict__" and entry.cls.__dictoffset__ == 0:  # __slots__ all the way: no instance dict
        tx.user_error(AttributeError(f"'{entry.cls.__name__}' object has no attribute '__dict__'"))
    if name == "__dict__":  # a read-only snapshot: writing through it is refused (see set_dict_entry)
        view = tx.new_dict(entry.attrs.items)
        tx.heap_set(view.oid, tx.heap(view.oid)._with_live(AttrsView(obj.oid)))
        return view
    found = _static_lookup_type(entry.cls, name)
    if of_type(found, types.MemberDescriptorType) and not hasattr(entry.cls, "__getattr__"):
        refused = slots_refuse(entry.cls, name, write=False)  # a slot never assigned in the trace: unset
        if refused is not None:
            tx.user_error(refused)
    if entry.storage is not None and _defined_by_dict_base(entry.cls, name):
        return ContainerMethodVariable(DictVariable(entry.storage), name, obj)  # self.keys() of a dict subclass
    if found is MISSING:
        if hasattr(entry.cls, "__getattr__"):
            return _class_getattr(tx, obj, entry.cls, name)
        tx.user_error(AttributeError(f"'{entry.cls.__name__}' object has no attribute '{name}'", name=name))
    return _bind_found(tx, obj, None, name, ("class", found), None)


def _defined_by_dict_base(cls: type, name: str) -> bool:
    """Whether ``cls.name`` resolves to a C method of dict / OrderedDict (acting on an instance's dict part)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass in DICT_BASES
    return False


@GETATTR.rule(SuperVariable)
def super_attr(tx: Any, sup: Any, name: str) -> VariableTracker:
    """``super().name``: look ``name`` up in the MRO after ``sup.cls``, bound as ``super`` binds it.

    The MRO is that of the object's type, or of the object itself where it is a subclass of ``sup.cls``
    (``super()`` in a classmethod, ``super(C, C)``): then what is found binds to no instance, as on the class.
    """
    self_var = sup.self_var
    if isinstance(self_var, LazyArgument):
        self_var = wrap(tx, self_var.value, self_var.source)
    owner = self_var.value if isinstance(self_var, PythonObjectVariable) and of_type(self_var.value, type) and \
        issubclass(self_var.value, sup.cls) else None
    start = owner if owner is not None else _type_of(tx, self_var)
    mro = start.__mro__
    if sup.cls not in mro:
        value = self_var.value if isinstance(self_var, PythonObjectVariable) else \
            self_var.fn if isinstance(self_var, BuiltinVariable) else None
        tx.user_error(type_checks.super_refusal(sup.cls, _type_of(tx, self_var), value))
    for klass in mro[mro.index(sup.cls) + 1:]:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            if owner is not None:
                return _bind_to_class(tx, self_var, owner, name, attr)
            if of_type(attr, classmethod):  # bound to the object's type, not to the object
                return bind_classmethod(tx, attr, wrap(tx, start, None))
            sup = SuperVariable(sup.cls, self_var)
            if klass is dict and isinstance(sup.self_var, PythonObjectVariable):
                return _builtin_base_read(tx, sup.self_var, name)
            if attr is object.__setattr__ or attr is object.__getattribute__:
                # super().__setattr__(k, v) / super().__getattribute__(k): the plain store or lookup
                return PartialVariable(BuiltinVariable(attr), (sup.self_var,), ())
            storage = storage_of(tx, sup.self_var)
            if storage is not None and klass in DICT_BASES:
                # super().__setitem__(k, v) in a dict subclass
                return ContainerMethodVariable(storage, name, via_super=(sup.self_var, attr))
            if attr is object.__init__:  # super().__init__(...): object_init's argument check, no effect
                return UserMethodVariable(object_init, sup.self_var)
            if attr is torch.nn.Module.__init__ and isinstance(sup.self_var, NNModuleVariable):
                return PythonObjectVariable(_noop)
            if exceptions.is_exception(tx, sup.self_var) and exceptions.is_c_method(attr):
                return PartialVariable(BuiltinVariable(attr), (sup.self_var,), ())  # super().__init__(msg)
            return _bind_found(tx, sup.self_var, None, name, ("class", attr), None)
    tx.user_error(AttributeError(f"'super' object has no attribute '{name}'"))


def _bind_to_class(tx: Any, cls_var: VariableTracker, cls: type, name: str, attr: Any) -> VariableTracker:
    """``attr``, found on a base of the class ``cls`` by ``super(C, cls).name``, as ``attr.__get__(None, cls)``."""
    if of_type(attr, classmethod):
        return bind_classmethod(tx, attr, cls_var)
    if of_type(attr, staticmethod):
        return wrap(tx, attr.__func__, None)
    if of_type(attr, types.FunctionType):
        return wrap(tx, attr, None)
    if of_type(attr, types.ClassMethodDescriptorType):  # a C classmethod (autograd.Function's apply ...)
        return PythonObjectVariable(attr.__get__(None, cls))
    if of_type(attr, (types.MethodDescriptorType, types.WrapperDescriptorType)):  # unbound on a class
        return wrap(tx, attr, None)
    if not hasattr(type(attr), "__get__"):
        return wrap(tx, attr, None)
    tx.unsupported("unsupported_attribute", f"super().{name}: the descriptor {type(attr).__name__} on a class")


#: Methods of ``dict`` that only read: ``super().get(key)`` inside a dict subclass (a registry, a config).
_DICT_READS = frozenset({"get", "__getitem__", "__contains__", "keys", "values", "items", "__len__", "__iter__",
                         "copy"})


def _builtin_base_read(tx: Any, obj: PythonObjectVariable, name: str) -> VariableTracker:
    """``super().name`` on an outside instance of a ``dict`` subclass, for a method of ``dict`` that only reads.

    The instance's contents are read as a plain dict (its keys guarded, each value read through
    ``dict.__getitem__`` so the subclass's overrides are not involved); writing through ``super()`` is
    not traced (it would have to be replayed on the live object bypassing its overrides).
    """
    if name not in _DICT_READS or obj.source is None:
        tx.unsupported("unsupported_attribute", f"super().{name} of a {type(obj.value).__name__} (a dict subclass)")
    key = ("as_dict", obj.source.name)
    var = tx.state.memo.get(key)
    if var is None:
        value = obj.value
        keys = tuple(dict.keys(value))
        if not all(is_constant(k) for k in keys):
            tx.unsupported("dict_keys", "a dict whose keys are not Python constants")
        tx.add_guard(Guard(BaseItemSource(obj.source, dict, None), "KEYS", keys))
        items = tuple((k, wrap(tx, dict.__getitem__(value, k), BaseItemSource(obj.source, dict, k))) for k in keys)
        oid = tx.new_id()
        tx.heap_set(oid, DictEntry(items, None, None))
        var = DictVariable(oid)
        tx.state = tx.state.replace(memo=tx.state.memo.set(key, var))
    return ContainerMethodVariable(var, name)


def bind_classmethod(tx: Any, method: classmethod, cls_var: VariableTracker) -> VariableTracker:
    """``method.__get__(None, cls)`` of a ``classmethod``: its function bound to the class. CPython 3.11's
    ``cm_descr_get`` chains to the wrapped object's own ``__get__`` (``@classmethod @property``), which is not
    modelled: anything but a plain function is a graph break, and the access runs for real."""
    if not of_type(method.__func__, types.FunctionType):
        tx.unsupported("unsupported_attribute", f"a classmethod wrapping a {type(method.__func__).__name__}")
    return UserMethodVariable(method.__func__, cls_var)


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def object_init(obj, *args, **kwargs):
    """``object.__init__(obj, *args, **kwargs)`` as CPython's ``object_init`` (Objects/typeobject.c), in Python for
    the trace to inline: no effect; excess arguments raise TypeError when the type overrides ``__init__``, or
    overrides neither ``__init__`` nor ``__new__``. Builtins only: the trace never reads this module's globals."""
    cls = type(obj)
    if (args or kwargs) and (cls.__init__ is not object.__init__ or cls.__new__ is object.__new__):
        owner = "object" if cls.__init__ is not object.__init__ else cls.__name__
        raise TypeError(f"{owner}.__init__() takes exactly one argument (the instance to initialize)")


def _type_of(tx: Any, var: VariableTracker) -> type:
    return type_checks.python_type_of(tx, var)


def has_attr(tx: Any, obj: VariableTracker, name: str) -> bool:
    """``hasattr(obj, name)`` for values whose lookup runs no user code, guarded so that the answer still holds."""
    if isinstance(obj, NNModuleVariable):
        m = obj.module
        for registry in ("_parameters", "_buffers", "_modules"):
            present = name in m.__dict__.get(registry, {})
            if obj.source is not None:
                tx.add_guard(Guard(AttrSource(obj.source, registry), "HAS_KEY", (name, present)))
            if present:
                return True
        return _has_static(tx, obj, m, name)
    if isinstance(obj, PythonObjectVariable):
        written = tx.state.side_effects.get(("attr", id(real_object(obj)), name)) if tx.state.side_effects else None
        if written is not None:  # an earlier traced obj.name = v (or del obj.name), not yet on the live object
            if written[1][1] is DELETED:
                deleted_attr_missing(tx, obj, name)  # breaks the graph where the class may have it
                return False
            return True
        return _has_static(tx, obj, obj.value, name)
    if isinstance(obj, TensorVariable):
        return hasattr(torch.Tensor, name) or tensor_instance_attr(tx, obj, name) is not MISSING
    if isinstance(obj, ConstantVariable):
        return hasattr(obj.value, name)
    if isinstance(obj, PartialVariable):  # no instance attributes: setattr on a traced partial is refused
        return name in _PARTIAL_FIELDS or hasattr(functools.partial, name)
    tx.unsupported("unsupported_attribute", f"hasattr() on a {obj.python_type().__name__} value")


@dataclasses.dataclass(frozen=True)
class SlotIsSet:
    """Whether a ``__slots__`` member holds a value on an object (reading an unset one raises AttributeError):
    the function of the guard that keeps what the trace found."""

    member: types.MemberDescriptorType

    @property
    def __name__(self) -> str:
        return f"slot_is_set[{self.member.__name__}]"

    def __call__(self, obj: Any) -> bool:
        try:
            self.member.__get__(obj, type(obj))
        except AttributeError:
            return False
        return True


def slot_is_set(tx: Any, var: VariableTracker, obj: Any, member: types.MemberDescriptorType) -> bool:
    """Whether the live ``obj``'s slot ``member`` is assigned, guarded when ``var`` has a source."""
    present = SlotIsSet(member)(obj)
    if var.source is not None:
        tx.add_guard(Guard(CallSource(var.source, SlotIsSet(member)), "EQUALS", present))
    return present


def _has_static(tx: Any, var: VariableTracker, value: Any, name: str) -> bool:
    found = _static_lookup(value, name)
    if found is not MISSING and found[0] == "class" and of_type(found[1], types.MemberDescriptorType) and \
            not issubclass(type(value), (type, types.ModuleType)) and not slot_is_set(tx, var, value, found[1]):
        if hasattr(type(value), "__getattr__"):
            tx.unsupported("unsupported_attribute", f"hasattr() of an unset slot of a {type(value).__name__} "
                           "with __getattr__")
        return False
    if found is MISSING:
        guard_not_on_class(tx, var, value, name)
    if found is MISSING or found[0] == "class":
        guard_not_shadowed(tx, var, value, name)
    elif var.source is not None:
        tx.add_guard(Guard(AttrSource(var.source, "__dict__"), "HAS_KEY", (name, True)))
    return found is not MISSING


def object_attr(tx: Any, var: PythonObjectVariable, value: Any, name: str) -> VariableTracker:
    src = AttrSource(var.source, name) if var.source is not None else None
    # (classified by type: isinstance() of a proxy would run its __class__, user code)
    if issubclass(type(value), types.ModuleType):
        if not hasattr(value, name):
            tx.user_error(AttributeError(f"module '{value.__name__}' has no attribute '{name}'", name=name))
        return wrap(tx, getattr(value, name), src, trusted=any(value is m for m in TRUSTED_MODULES))
    if issubclass(type(value), type):
        found = _static_lookup_type(value, name)
        if found is MISSING:
            if name in ("__name__", "__qualname__", "__module__", "__doc__", "__mro__", "__bases__") or \
                    _static_lookup_type(type(value), name) is not MISSING:  # the metaclass's: Foo.__subclasses__
                try:
                    found = getattr(value, name)
                except AttributeError as e:  # a class made where globals had no __name__ has no __module__
                    tx.user_error(e)
                return wrap(tx, found, src)
            tx.user_error(AttributeError(f"type object '{value.__name__}' has no attribute '{name}'", name=name))
        if of_type(found, staticmethod):
            return wrap(tx, found.__func__, src)
        if of_type(found, classmethod):
            return bind_classmethod(tx, found, var)
        module = getattr(value, "__module__", None)
        return wrap(tx, getattr(value, name), src, trusted=isinstance(module, str) and module.startswith("torch"))
    if name == "__get__" and issubclass(type(value), (types.GetSetDescriptorType, types.MemberDescriptorType)) and \
            issubclass(torch.Tensor, value.__objclass__):
        # torch.Tensor.shape.__get__(t) reads t.shape; which descriptor it is, is guarded by identity
        if var.source is not None:
            tx.add_guard(Guard(var.source, "ID", id(value)))
        return PythonObjectVariable(operator.attrgetter(value.__name__))
    if name == "__dict__" and tx.state.side_effects and any(
            key[0] == "attr" and key[1] == id(value) for key in tx.state.side_effects.keys()):
        tx.unsupported("side_effect", "reading the __dict__ of an object whose attributes the trace wrote: the "
                       "writes are made first", ("the read runs for real",))
    found = _static_lookup(value, name)
    if src is not None and found is not MISSING and found[0] == "instance" and \
            of_type(type(value).__getattribute__, types.FunctionType):
        # guarded as obj.__dict__[name]: one call of the class's own __getattribute__ per guard check, not one
        # per attribute (a transformers config is read dozens of times)
        src = GetItemSource(AttrSource(var.source, "__dict__"), name)
    if found is MISSING:
        guard_not_shadowed(tx, var, value, name)
        guard_not_on_class(tx, var, value, name)
        if hasattr(type(value), "__getattr__"):
            return _class_getattr(tx, var, type(value), name)
        tx.user_error(AttributeError(f"'{type(value).__name__}' object has no attribute '{name}'", name=name))
    return _bind_found(tx, var, value, name, found, src)


def _class_getattr(tx: Any, var: VariableTracker, cls: type, name: str) -> VariableTracker:
    """``cls.__getattr__(obj, name)``, traced, as ``object.__getattribute__`` calls it when ordinary lookup finds
    nothing (its reads are guarded as it makes them)."""
    hook = cls.__getattr__
    if not of_type(hook, types.FunctionType):
        tx.unsupported("unsupported_attribute", f"{cls.__name__} defines __getattr__ in C")
    return calls.call_sync(tx, UserMethodVariable(hook, var), [ConstantVariable(name)], {})


def guard_not_shadowed(tx: Any, var: VariableTracker, obj: Any, name: str) -> None:
    """Guard that the live object read from ``var.source`` still has no instance attribute ``name``: what the trace
    found on its class (a method, or nothing at all) is what a call finds, until the instance gets its own
    (``module.forward = ...``, ``cfg.flag = True`` after a ``getattr(cfg, "flag", False)``)."""
    if var.source is None or issubclass(type(obj), (type, types.ModuleType)):
        return
    try:
        object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):  # no instance dict (__slots__): nothing can shadow the class
        lookup = type(obj).__getattribute__
        # unless a C __getattribute__ other than object's keeps one elsewhere: a threading.local's, per thread
        if lookup is object.__getattribute__ or not of_type(lookup, types.WrapperDescriptorType) or \
                not of_type(getattr(obj, "__dict__", None), dict):
            return
    tx.add_guard(Guard(AttrSource(var.source, "__dict__"), "HAS_KEY", (name, False)))


def _bind_found(tx: Any, var: VariableTracker, obj: Any, name: str, found: tuple, src: Any) -> VariableTracker:
    where, attr = found
    if where == "instance":
        return wrap(tx, attr, src)
    # found on the class
    if not (of_type(attr, property) or hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")):
        guard_not_shadowed(tx, var, obj, name)  # an instance attribute set later would be found first
    if of_type(attr, property):
        if attr.fget is None:
            tx.user_error(AttributeError(f"property '{name}' has no getter"))
        depth = len(tx.state.frames)
        frames.inline_call(tx, attr.fget, None, [var], {})
        return tx.run_until_return(depth)
    if of_type(attr, staticmethod):
        return wrap(tx, attr.__func__, None)
    if of_type(attr, classmethod):  # bound to the class (of an object made in the trace, obj is None)
        return bind_classmethod(tx, attr, PythonObjectVariable(type(obj) if obj is not None else _type_of(tx, var)))
    if of_type(attr, types.FunctionType):
        return UserMethodVariable(attr, var)
    wrapped = compiled_original(attr)
    if wrapped is not None and of_type(wrapped[1], types.FunctionType):  # a compiled method: inlined
        return UserMethodVariable(wrapped[1], var)
    if hasattr(type(attr), "__get__") and not of_type(attr, (int, float, str, bool, tuple, type(None))):
        if is_python_data_descriptor(attr):  # its __get__ runs in the trace
            return descriptor_call(tx, attr, "__get__", [var, PythonObjectVariable(_type_of(tx, var))])
        if of_type(attr, types.MemberDescriptorType) and obj is not None and not slot_is_set(tx, var, obj, attr):
            if hasattr(type(obj), "__getattr__"):
                return _class_getattr(tx, var, type(obj), name)
            try:
                getattr(obj, name)
            except AttributeError as e:  # a __slots__ member never assigned: Python's own message
                tx.user_error(e)
        if hasattr(type(attr), "__set__"):  # slots members and other data descriptors: read the live value
            return wrap(tx, getattr(obj, name), src)
        if of_type(attr, functools._lru_cache_wrapper) and obj is not None:
            # a cached function used as a method (transformers' Logger.warning_once): bound for real
            return PythonObjectVariable(attr.__get__(obj, type(obj)))
        if of_type(attr, types.MethodDescriptorType) and obj is not None and src is not None:
            # a C method of a live object (deque.append): bound for real, guarded by its type, name and owner;
            # a call of it is the one graph break (the attribute read was a second)
            return wrap(tx, getattr(obj, name), src)
        tx.unsupported("unsupported_attribute", f"the descriptor {type(attr).__name__} at .{name}")
    return wrap(tx, attr, None) if src is None else wrap(tx, getattr(obj, name), src)


