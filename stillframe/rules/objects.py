"""User objects and side effects: instances made in the trace, attribute writes, container methods.

Mutations of objects that outlive the call are *recorded*, never performed at
trace time (DESIGN invariant 3): ``state.side_effects`` maps a target
(``("attr", id(obj), name)``, also a traced tensor's ``.grad`` (``rules/tensor_attrs.py``),
``("attr_del", id(obj), name)`` for a del before a write,
``("list", oid)``, ``("dict", oid)``,
``("global", module, name)``) to ``(order, payload)``. Reads inside the trace
see the recorded value; after the graph runs, the plan replays them on the real
objects in the order they were first made (``runtime.compiler.ResultCodegen``).

Objects created during the trace (``Point(x, y)`` of a user class) are heap
entries (:class:`ObjectEntry`): attribute writes just bind a new entry, and an
object that escapes (returned, stored on ``self``) is rebuilt by the plan with
``cls.__new__`` and its final attributes.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import torch

import types
import weakref
from typing import Any
from ..errors import UserError
from ..guards.guard import Guard
from ..guards.source import AttrSource, CallSource, GetItemSource
from ..variables.base import (
    HEAPTYPE_FLAG,
    BuiltinVariable,
    ConstantVariable,
    DictEntry,
    DictVariable,
    DictViewVariable,
    LazyArgument,
    ListVariable,
    SetVariable,
    TensorKey,
    DequeVariable,
    NNModuleVariable,
    NestedFunctionVariable,
    PythonObjectVariable,
    RangeVariable,
    SymNodeVariable,
    TensorVariable,
    TupleVariable,
    UserFunctionVariable,
    VariableTracker,
    same_key,
)
from ..variables.builder import is_constant, of_type, wrap
from . import arity, calls, exceptions, known, tensor_attrs
from .deques import deque_method
from . import operators
from .operators import identical
from .truthiness import truthiness
from .type_checks import python_type_of
from ..variables.objects import ContainerMethodVariable
from ..variables.objects import DELETED
from ..variables.objects import ExceptionEntry, ObjectEntry
from ..variables.objects import ObjectVariable
from ..variables.objects import dict_base
from ..variables.objects import storage_of


def record_side_effect(tx: Any, key: tuple, payload: Any) -> None:
    """Record (or update) the pending mutation ``key``; its replay order is that of its first recording."""
    existing = tx.state.side_effects.get(key)
    order = existing[0] if existing is not None else tx.new_id()
    tx.state = tx.state.replace(side_effects=tx.state.side_effects.set(key, (order, payload)))


def real_object(var: VariableTracker) -> Any:
    return var.module if isinstance(var, NNModuleVariable) else var.value


def pending_attr(tx: Any, var: VariableTracker, name: str) -> VariableTracker | None:
    """The value an earlier traced ``obj.name = v`` wrote, if any."""
    if not tx.state.side_effects:
        return None
    hit = tx.state.side_effects.get(("attr", id(real_object(var)), name))
    if hit is not None and hit[1][1] is DELETED:
        deleted_attr_missing(tx, var, name)
        tx.user_error(AttributeError(f"'{type(real_object(var)).__name__}' object has no attribute '{name}'"))
    return hit[1][1] if hit is not None else None


def deleted_attr_missing(tx: Any, var: VariableTracker, name: str) -> None:
    """A read of ``obj.name`` after the trace deleted the live object's own ``name``: eager then finds the class's
    (a class attribute, a method, ``__getattr__``), which the trace cannot read past the instance dict the pending
    deletion has not emptied yet, so that read runs for real after the deletion; with none, it is missing (guarded)."""
    real = real_object(var)
    cls = type(real)
    effects = tx.state.side_effects
    # a class's own deleted: its bases' is found (`del B.foo` reveals the abstract A.foo)
    bases = real.__mro__[1:] if of_type(real, type) else ()
    if _static_lookup_type(cls, name) is not MISSING or hasattr(cls, "__getattr__") or \
            any(effects.get(("attr", id(klass), name)) is not None for klass in cls.__mro__) or \
            any(name in vars(klass) or effects.get(("attr", id(klass), name)) is not None for klass in bases):
        tx.unsupported("side_effect", f"reading .{name} after deleting the instance's own: the class's is found",
                       ("the deletion is made first and the read runs for real",))
    guard_not_on_class(tx, var, real, name)


def guard_not_on_class(tx: Any, var: VariableTracker, obj: Any, name: str) -> None:
    """Guard that no class in the MRO of the live object read from ``var.source`` has gained ``name`` (a class
    attribute set after the trace found none: ``getattr(obj, name, default)`` must then find it, as eager does).
    The classes a user wrote only: a C type's dict cannot change."""
    if var.source is None or of_type(obj, (type, types.ModuleType)):
        return
    mro = AttrSource(CallSource(var.source, type), "__mro__")  # (its real class: obj.__class__ may be another)
    for i, klass in enumerate(type(obj).__mro__):
        if klass.__flags__ & HEAPTYPE_FLAG:
            tx.add_guard(Guard(AttrSource(GetItemSource(mro, i), "__dict__"), "HAS_KEY", (name, False)))


#: The types of ``weakref.proxy(obj)``: every attribute read, write and deletion goes to the referent, which the
#: trace knows by another identity (its writes are keyed by the object's id), so each runs for real.
WEAK_PROXY_TYPES = (weakref.ProxyType, weakref.CallableProxyType)


def refuse_weak_proxy(tx: Any, obj: VariableTracker, what: str) -> None:
    """Break the graph at ``what`` (an attribute access) on a ``weakref.proxy``: see :data:`WEAK_PROXY_TYPES`."""
    if isinstance(obj, PythonObjectVariable) and type(obj.value) in WEAK_PROXY_TYPES:
        tx.unsupported("unsupported_attribute", f"{what} of a weakref.proxy: its referent's attribute")


def store_attr(tx: Any, obj: VariableTracker, name: str, value: VariableTracker) -> None:
    """``obj.name = value`` on a VT (through the class's own ``__setattr__`` when it defines one)."""
    refuse_weak_proxy(tx, obj, f"assigning .{name}")
    if name == "__class__":  # (the class decides every later lookup, and CPython checks the layouts agree)
        tx.unsupported("side_effect", "assigning an object's __class__", ("the assignment runs for real",))
    if isinstance(obj, ObjectVariable):
        setter = _static_lookup_type(obj.cls, "__setattr__")
        if isinstance(setter, types.FunctionType):
            calls.call_sync(tx, UserFunctionVariable(setter), [obj, ConstantVariable(name), value], {})
            return
        if setter is not object.__setattr__:  # another callable (``__setattr__ = dict.__setitem__``): called as is
            calls.call_sync(tx, wrap(tx, setter, None), [obj, ConstantVariable(name), value], {})
            return
        object_setattr(tx, obj, name, value)
        return
    if isinstance(obj, NestedFunctionVariable) and obj.attrs is not None:
        if name.startswith("__") and name not in FUNCTION_SLOTS and name != "__wrapped__":
            tx.unsupported("side_effect", f"assigning .{name} of a function made in the trace")
        store = DictVariable(obj.attrs)
        tx.set_dict_entry(store, tx.dict_entry(store).set(function_attr_key(name), value))
        return
    _store_outside_attr(tx, obj, name, value)


def object_setattr(tx: Any, obj: VariableTracker, name: str, value: VariableTracker) -> None:
    """``object.__setattr__(obj, name, value)``: data descriptors (see :func:`data_descriptor`) first, else the
    instance dict
    (or a slot: a ``__slots__`` class without ``__dict__`` refuses any other name, as Python does)."""
    if isinstance(obj, ObjectVariable):
        entry: ObjectEntry = tx.heap(obj.oid)
        if descriptor_set(tx, data_descriptor(entry.cls, name), obj, name, value):
            return
        if isinstance(entry, ExceptionEntry) and exceptions.set_attr(tx, obj, name, value):
            return  # args, __context__, __cause__ ... of an exception made in the trace
        refused = slots_refuse(entry.cls, name, write=True) if entry.cls.__dictoffset__ == 0 else None
        if refused is not None:
            tx.user_error(refused)
        tx.heap_set(obj.oid, entry.with_attrs(entry.attrs.set(name, value)))
        return
    tx.unsupported("side_effect", f"object.__setattr__ on a {obj.python_type().__name__} value")


def slots_refuse(cls: type, name: str, *, write: bool) -> AttributeError | None:
    """The ``AttributeError`` Python raises writing ``name`` (or reading it, unset) on an instance of ``cls``
    through ``object``'s own attribute protocol; ``None`` where it raises none. Found by trying it on a bare
    instance (``object.__new__``, no ``__init__`` run), so the message is this Python's own."""
    try:
        probe = object.__new__(cls)
    except TypeError:  # a class object.__new__ cannot make (a builtin base): no answer
        return None
    try:
        if write:
            object.__setattr__(probe, name, None)
        else:
            object.__getattribute__(probe, name)
    except AttributeError as e:
        return e
    return None


def _store_outside_attr(tx: Any, obj: VariableTracker, name: str, value: VariableTracker) -> None:
    if isinstance(obj, (NNModuleVariable, PythonObjectVariable)):
        real = real_object(obj)
        if descriptor_set(tx, data_descriptor(type(real), name), obj, name, value):
            return
        setter = getattr(type(real), "__setattr__", object.__setattr__)
        import torch

        if setter not in (object.__setattr__, torch.nn.Module.__setattr__):
            tx.unsupported("side_effect", f"{type(real).__name__} defines __setattr__")
        if of_type(real, type) or not hasattr(real, "__dict__"):
            if not of_type(real, type):
                tx.unsupported("side_effect", f"assigning .{name} of a {type(real).__name__}")
        _refuse_c_attribute(tx, real, name, "assigning", (types.GetSetDescriptorType,))
        key = ("attr", id(real), name)
        deleted = tx.state.side_effects.get(key)
        if deleted is not None and deleted[1][1] is DELETED:
            # ``del obj.a`` then ``obj.a = v``: eager re-inserts ``a`` at the end of the instance dict, so the
            # replay deletes it where the del was, and sets it anew where this write is (fuzz 27:2128)
            tx.state = tx.state.replace(side_effects=tx.state.side_effects.delete(key).set(
                ("attr_del", id(real), name), deleted))
        record_side_effect(tx, key, (obj, value))
        tx.keepalive.append(real)
        return
    if isinstance(obj, TensorVariable):
        tensor_attrs.store_tensor_attr(tx, obj, name, value)
        return
    tx.unsupported("side_effect", f"assigning .{name} of a {obj.python_type().__name__} value")


def _refuse_c_attribute(tx: Any, real: Any, name: str, doing: str, kinds: tuple) -> None:
    """Unsupported (the write or delete runs for real) when ``name`` is a C descriptor of one of ``kinds`` on
    ``real``'s type: a getset (``C.__bases__``, ``C.__qualname__``, ``obj.__dict__``, a function's ``__code__``, a
    generator's ``__name__``) or, deleted, a slot's member descriptor. Its setter or deleter is C code that checks
    the value and may refuse (``del C.__bases__``, ``obj.__dict__ = None``: TypeError) or deletes what the trace
    does not model (a slot of an object that also has a ``__dict__``), so it cannot be deferred to a replay after
    the graph, where the user's ``except`` would not see the error (test_descr test_mutable_bases, test_qualname,
    test_set_dict; test_generators test_name). A member descriptor of a C type counts whatever ``kinds`` says: it
    may be read-only (a module's ``__dict__``, a function's ``__globals__``: assigning raises ``AttributeError:
    readonly attribute``), which nothing public tells (test_descr test_set_dict on 3.13, where ``module`` uses
    ``object.__setattr__``); a slot of a class written in Python is a member that any value may be assigned to."""
    found = _static_lookup_type(type(real), name)
    if isinstance(found, kinds) or isinstance(found, types.MemberDescriptorType) and \
            not found.__objclass__.__flags__ & _HEAPTYPE:
        tx.unsupported("side_effect", f"{doing} .{name} of a {type(real).__name__} (a C descriptor)",
                       (f"the {'deletion' if doing == 'deleting' else 'assignment'} runs for real",))


def data_descriptor(cls: type, name: str) -> Any:
    """``cls.name`` (found in the MRO, statically) when it is a data descriptor written in Python: a ``property``,
    or an instance of a class that defines ``__set__`` or ``__delete__``; else ``MISSING``. Such a descriptor wins
    over the instance dict when the attribute is read, written or deleted (CPython's
    ``_PyObject_GenericGetAttrWithDict`` / ``_PyObject_GenericSetAttrWithDict``). Slots and other C descriptors
    are modelled apart."""
    attr = _static_lookup_type(cls, name)
    return attr if is_python_data_descriptor(attr) else MISSING


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type()), not by C


def is_python_data_descriptor(attr: Any) -> bool:
    """Whether ``attr`` is a ``property`` or an instance of a Python class that has ``__set__`` or ``__delete__``.

    Any such attribute counts, whatever it is (a function, or a callable object such as a ``Mock``), as CPython's
    ``tp_descr_set`` slot does; :func:`descriptor_call` traces a function and breaks the graph on anything else."""
    return of_type(attr, property) or bool(type(attr).__flags__ & _HEAPTYPE) and any(
        getattr(type(attr), m, None) is not None for m in ("__set__", "__delete__"))


def descriptor_call(tx: Any, attr: Any, method: str, args: list) -> VariableTracker:
    """``type(attr).<method>(attr, *args)`` for a Python data descriptor's ``__get__`` / ``__set__`` /
    ``__delete__``, traced; one its class lacks raises ``AttributeError(method)``, as CPython's
    ``slot_tp_descr_set`` does."""
    fn = getattr(type(attr), method, None)
    if fn is None:
        tx.user_error(AttributeError(method))
    if not isinstance(fn, types.FunctionType):
        tx.unsupported("unsupported_attribute", f"{type(attr).__name__}.{method} is not written in Python")
    return calls.call_sync(tx, UserFunctionVariable(fn), [wrap(tx, attr, None), *args], {})


def descriptor_set(tx: Any, desc: Any, obj: VariableTracker, name: str, value: VariableTracker) -> bool:
    """``obj.name = value`` through the data descriptor ``desc`` (from :func:`data_descriptor`), traced;
    ``False`` when there is none."""
    if desc is MISSING:
        return False
    if of_type(desc, property):
        _call_setter(tx, desc, obj, name, value)
    else:
        descriptor_call(tx, desc, "__set__", [obj, value])
    return True


def _descriptor_delete(tx: Any, desc: Any, obj: VariableTracker, name: str) -> bool:
    """``del obj.name`` through the data descriptor ``desc``, traced; ``False`` when there is none."""
    if desc is MISSING:
        return False
    if not of_type(desc, property):
        descriptor_call(tx, desc, "__delete__", [obj])
        return True
    if desc.fdel is None:
        tx.user_error(AttributeError(f"property '{name}' of '{obj.python_type().__name__}' object has no deleter"))
    calls.call_sync(tx, UserFunctionVariable(desc.fdel), [obj], {})
    return True


def _call_setter(tx: Any, prop: property, obj: VariableTracker, name: str, value: VariableTracker) -> None:
    """``obj.name = value`` through a property: its Python setter runs in the trace."""
    if prop.fset is None:
        tx.user_error(AttributeError(f"property '{name}' of '{obj.python_type().__name__}' object has no setter"))
    calls.call_sync(tx, UserFunctionVariable(prop.fset), [obj, value], {})


def delete_attr(tx: Any, obj: VariableTracker, name: str) -> None:
    """``del obj.name``: on an object made in the trace, or recorded (and replayed) on an outside object."""
    refuse_weak_proxy(tx, obj, f"deleting .{name}")
    deleter = _static_lookup_type(obj.cls, "__delattr__") if isinstance(obj, ObjectVariable) else None
    if isinstance(deleter, types.FunctionType):  # the class's own __delattr__ runs in the trace
        calls.call_sync(tx, UserFunctionVariable(deleter), [obj, ConstantVariable(name)], {})
        return
    if deleter is not None and deleter is not object.__delattr__:  # another callable (``= dict.__delitem__``)
        calls.call_sync(tx, wrap(tx, deleter, None), [obj, ConstantVariable(name)], {})
        return
    if isinstance(obj, ObjectVariable):
        entry: ObjectEntry = tx.heap(obj.oid)
        if _descriptor_delete(tx, data_descriptor(entry.cls, name), obj, name):
            return
        if isinstance(entry, ExceptionEntry):
            exceptions.refuse_delete(tx, obj, name)
        if entry.attrs.get(name, MISSING) is MISSING:
            tx.user_error(_missing_on_delete(entry.cls, name))
        attrs = DictEntry(tuple((k, v) for k, v in entry.attrs.items if k != name))
        tx.heap_set(obj.oid, entry.with_attrs(attrs))
        return
    if isinstance(obj, (NNModuleVariable, PythonObjectVariable)) and obj.source is not None:
        real = real_object(obj)
        if type(getattr(type(real), "__delattr__", None)) is not type(object.__delattr__) and \
                getattr(type(real), "__delattr__") is not torch_module_delattr():
            tx.unsupported("side_effect", f"{type(real).__name__} defines __delattr__")
        if _descriptor_delete(tx, data_descriptor(type(real), name), obj, name):
            return
        _refuse_c_attribute(tx, real, name, "deleting", C_DATA_DESCRIPTORS)
        pending = pending_attr(tx, obj, name)  # (raises AttributeError where the trace deleted it already)
        if pending is None and isinstance(obj, PythonObjectVariable) and _own_dict(real) is not None:
            present = name in _own_dict(real)  # a class attribute of that name is not deleted: AttributeError
            tx.add_guard(Guard(AttrSource(obj.source, "__dict__"), "HAS_KEY", (name, present)))
            if not present:
                tx.user_error(_missing_on_delete(type(real), name, real))
        elif pending is None and not hasattr(real, name):
            tx.user_error(_missing_on_delete(type(real), name, real))
        record_side_effect(tx, ("attr", id(real), name), (obj, DELETED))
        tx.keepalive.append(real)
        return
    tx.unsupported("side_effect", f"deleting .{name} of a {obj.python_type().__name__} value")


def _missing_on_delete(cls: type, name: str, real: Any = None) -> AttributeError:
    """The AttributeError of ``del obj.name`` when the instance of ``cls`` has no such attribute, as CPython's
    ``_PyObject_GenericSetAttrWithDict`` words it: an empty slot is its bare name; a class attribute of an
    instance without ``__dict__`` is read-only; a class (``real``, when it is one) is "type object 'A'"; anything
    else "has no attribute"."""
    if of_type(real, type):
        return AttributeError(f"type object '{real.__name__}' has no attribute '{name}'")
    found = _static_lookup_type(cls, name)
    if isinstance(found, types.MemberDescriptorType):  # an empty __slots__ slot: member_delete's message
        return AttributeError(name)
    if cls.__dictoffset__ == 0 and found is not MISSING:
        return AttributeError(f"'{cls.__name__}' object attribute '{name}' is read-only")
    return AttributeError(f"'{cls.__name__}' object has no attribute '{name}'")


def _own_dict(real: Any) -> dict | None:
    """The live object's instance dict, read without running its class's code; None where it has none."""
    try:
        own = object.__getattribute__(real, "__dict__")
    except (AttributeError, TypeError):
        return None
    return own if type(own) is dict else None


def torch_module_delattr() -> Any:
    import torch

    return torch.nn.Module.__delattr__


def new_object(tx: Any, cls: type) -> ObjectVariable:
    if getattr(cls, "__del__", None) is not None:
        # a traced object is never collected, so its __del__ would never run: made for real, it is collected as
        # eager's is, and the trace breaks where it drops its last reference (Tracer.watch_finalizers)
        tx.unsupported("unsupported_call", f"constructing {cls.__qualname__}, whose __del__ runs when it is "
                       "collected: it is made for real")
    storage = tx.new_dict(()).oid if dict_base(cls) is not None else None
    oid = tx.new_id()
    tx.heap_set(oid, ObjectEntry(cls, DictEntry(()), storage))
    if storage is not None:  # (its views are iterated as the instance's: builtin_calls.watched_iterator)
        tx.state = tx.state.replace(memo=tx.state.memo.set(("storage_owner", storage), (oid, cls)))
    return ObjectVariable(oid, cls)


# ------------------------------------------------------------- container methods
def sort_keys(tx: Any, items: tuple, key: VariableTracker | None) -> list:
    """The Python sort key of each item: the item itself, or ``key(item)`` traced (both must be constants)."""
    if key is None or (isinstance(key, ConstantVariable) and key.value is None):
        return [known.const_value(tx, v) for v in items]
    return [known.const_value(tx, calls.call_sync(tx, key, [v], {})) for v in items]


def _list_sort_keys(tx: Any, obj: VariableTracker, items: tuple, key: VariableTracker | None) -> tuple[list, bool]:
    """``lst.sort(key=key)``'s keys, and whether the key function put something into the list: CPython's
    ``list_sort`` empties the list while it sorts (a key function sees it empty), puts back what it held after
    (what the key function wrote is dropped; a key's error leaves the list as it was), and raises ValueError "list
    modified during sort" where the list was written to and has items (test_sort test_key_with_mutation). A write
    that left it empty (an append then a pop, or a clear, which CPython tells apart) breaks the graph: the real
    sort decides."""
    if key is None or (isinstance(key, ConstantVariable) and key.value is None):
        return sort_keys(tx, items, key), False
    tx.set_list_items(obj, ())
    emptied = tx.heap(obj.oid)
    try:
        keys = sort_keys(tx, items, key)
    except UserError:
        tx.set_list_items(obj, items)
        raise
    if tx.heap(obj.oid) is emptied:
        tx.set_list_items(obj, items)
        return keys, False
    if not tx.list_items(obj):
        tx.unsupported("unsupported_call", "list.sort's key function wrote to the list and left it empty")
    return keys, True


def _reorder(tx: Any, obj: DictVariable, entry: DictEntry, name: str, args: list, kwargs: dict) -> VariableTracker:
    """``od.move_to_end(key, last=True)`` and ``popitem(last=True)``: the item moves to (or leaves) one end."""
    last = bool(known.const_value(tx, kwargs.get("last", args[-1] if args[1 if name == "move_to_end" else 0:]
                                                else ConstantVariable(True))))
    items = list(entry.items)
    if name == "popitem":
        if not items:
            tx.user_error(KeyError("popitem(): dictionary is empty"))  # dict's (OrderedDict: no "popitem(): ")
        key, value = items.pop(-1 if last else 0)
        tx.set_dict_entry(obj, DictEntry(tuple(items), entry.source))
        return TupleVariable((known.key_variable(key), value))
    key = known.hash_key(tx, args[0], obj)
    index = next((i for i, (k, _) in enumerate(items) if same_key(k, key)), None)
    if index is None:
        tx.user_error(KeyError(key))
    item = items.pop(index)
    items.insert(len(items) if last else 0, item)
    tx.set_dict_entry(obj, DictEntry(tuple(items), entry.source))
    return ConstantVariable(None)


def call_container_method(tx: Any, method: ContainerMethodVariable, args: list, kwargs: dict) -> VariableTracker:
    """Rules for the methods of traced lists, dicts and tuples; mutations bind new heap entries. A call whose
    arity or keywords the real method refuses raises its TypeError first (:func:`arity.check`)."""
    obj, name = method.obj, method.name
    cls = python_type_of(tx, method.owner if method.owner is not None else obj)
    arity.check(tx, cls, name, args, kwargs)
    args, kwargs = arity.positional(cls, name, args, kwargs)
    if method.owner is not None and name == "copy" and arity.defining_class(cls, name)[0] is not dict:
        # OrderedDict.copy, defaultdict.copy make one of the instance's class (dict.copy, inherited, a plain dict)
        tx.unsupported("unsupported_call", f"{cls.__name__}.copy() makes a {cls.__name__}: it runs for real")
    if isinstance(obj, SetVariable):
        return _set_method(tx, obj, name, args, kwargs)
    if isinstance(obj, DequeVariable):
        return deque_method(tx, obj, name, args, kwargs)
    if isinstance(obj, ListVariable) and name in ("append", "extend"):
        tx.append_to_list(obj, (args[0],) if name == "append" else tuple(known.sequence_items(tx, args[0])))
        return ConstantVariable(None)
    if isinstance(obj, ListVariable) and name == "clear" and not args:
        tx.set_list_items(obj, ())  # the result does not depend on the items: they are not read (nor guarded)
        return ConstantVariable(None)
    if isinstance(obj, ListVariable):
        items = list(tx.list_items(obj))
        result: VariableTracker = ConstantVariable(None)
        if name == "append":
            items.append(args[0])
        elif name == "extend":
            items.extend(known.sequence_items(tx, args[0]))
        elif name == "insert":
            items.insert(known.const_value(tx, args[0]), args[1])
        elif name == "pop":
            index = known.const_value(tx, args[0]) if args else -1
            if not items:
                tx.user_error(IndexError("pop from empty list"))
            try:
                result = items.pop(index)
            except IndexError as e:
                tx.user_error(e)
        elif name == "remove":
            index = _index_of(tx, items, args[0])
            if index is None:
                tx.user_error(ValueError("list.remove(x): x not in list"))
            items.pop(index)
        elif name == "clear":
            items.clear()
        elif name == "reverse":
            items.reverse()
        elif name == "sort":
            if args:
                tx.user_error(TypeError("sort() takes no positional arguments"))
            keys, modified = _list_sort_keys(tx, obj, tuple(items), kwargs.get("key"))
            reverse = bool(known.const_value(tx, kwargs.get("reverse", ConstantVariable(False))))
            items = [items[i] for i in sorted(range(len(items)), key=lambda i: keys[i], reverse=reverse)]
            if modified:
                tx.set_list_items(obj, tuple(items))
                tx.user_error(ValueError("list modified during sort"))
        elif name == "copy":
            return tx.new_list(tuple(items))
        elif name == "index":
            index = _index_of(tx, items, args[0], args[1:])
            if index is None:
                tx.user_error(ValueError(f"{known.const_value(tx, args[0])!r} is not in list"))
            return ConstantVariable(index)
        elif name == "count":
            return ConstantVariable(sum(1 for v in items if _same_value(tx, v, args[0])))
        else:
            tx.unsupported("unsupported_call", f"list.{name}")
        tx.set_list_items(obj, tuple(items))
        return result
    if isinstance(obj, DictVariable) and name in ("get", "__getitem__", "__contains__") and args:
        key = known.hash_key(tx, args[0], obj)  # one key looked up: only its presence is guarded
        found = tx.dict_lookup(obj, key, MISSING)
        if name == "get":
            default = args[1] if len(args) > 1 else ConstantVariable(None)
            return default if found is MISSING else found
        if name == "__contains__":
            return ConstantVariable(found is not MISSING)
        if found is MISSING:
            tx.user_error(KeyError(key))
        return found
    if isinstance(obj, DictVariable):
        entry = tx.dict_entry(obj)
        if name in ("keys", "values", "items"):
            if args or kwargs:
                tx.user_error(TypeError(f"dict.{name}() takes no arguments ({len(args)} given)"))
            return DictViewVariable(obj, name)
        if name == "get":
            key = known.hash_key(tx, args[0], obj)
            default = args[1] if len(args) > 1 else ConstantVariable(None)
            found = entry.get(key, MISSING)
            return default if found is MISSING else found
        if name in ("pop", "setdefault"):
            key = known.hash_key(tx, args[0], obj)
            found = entry.get(key, MISSING)
            if name == "setdefault":
                if found is not MISSING:
                    return found
                value = args[1] if len(args) > 1 else ConstantVariable(None)
                tx.set_dict_entry(obj, entry.set(key, value))
                return value
            if found is MISSING:
                if len(args) > 1:
                    return args[1]
                tx.user_error(KeyError(key))
            tx.set_dict_entry(obj, DictEntry(tuple((k, v) for k, v in entry.items if not (
                same_key(k, key))), entry.source))
            return found
        if name in ("update", "__init__"):  # dict.__init__(self, pairs, **kw) adds as update does
            for k, v in (update_pairs(tx, args[0]) if args else ()):
                entry = entry.set(k, v)
            for k, v in kwargs.items():
                entry = entry.set(k, v)
            tx.set_dict_entry(obj, entry)
            return ConstantVariable(None)
        if name == "clear":
            tx.set_dict_entry(obj, DictEntry((), entry.source))
            return ConstantVariable(None)
        if name in ("move_to_end", "popitem"):  # OrderedDict's (popitem also dict's, which takes no argument)
            return _reorder(tx, obj, entry, name, args, kwargs)
        if name == "copy":
            return tx.new_dict(entry.items)
        if name in ("__len__", "__iter__", "__setitem__", "__delitem__"):
            return _dict_dunder(tx, obj, entry, name, args)
        tx.unsupported("unsupported_call", f"dict.{name}")
    if isinstance(obj, TupleVariable):
        if name == "index":
            index = _index_of(tx, list(obj.items), args[0], args[1:])
            if index is None:
                tx.user_error(ValueError("tuple.index(x): x not in tuple"))
            return ConstantVariable(index)
        if name == "count":
            return ConstantVariable(sum(1 for v in obj.items if _same_value(tx, v, args[0])))
        if name == "_asdict" and hasattr(obj.cls, "_fields"):
            return tx.new_dict(tuple(zip(obj.cls._fields, obj.items)))
        if name == "_replace" and hasattr(obj.cls, "_fields"):
            items = list(obj.items)
            for k, v in kwargs.items():
                items[obj.cls._fields.index(k)] = v
            return TupleVariable(tuple(items), obj.cls)
        if name == "numel" and obj.cls is torch.Size and not args and not kwargs:
            product: VariableTracker = ConstantVariable(1)
            for size in obj.items:  # traced arithmetic: symbolic sizes multiply in the graph
                product = operators.binary_op(tx, "*", product, size)
            return product
    tx.unsupported("unsupported_call", f"{obj.python_type().__name__}.{name}")


MISSING = object()


#: Methods of ``set`` that change it in place (the rest return a value and leave it alone), called by name too
#: (``s.__init__(iterable)`` empties it and adds the items; ``s.__ior__(t)`` updates it and returns it).
_SET_MUTATORS = frozenset({"add", "discard", "remove", "pop", "clear", "update", "difference_update",
                           "intersection_update", "symmetric_difference_update", "__init__", "__ior__", "__iand__",
                           "__isub__", "__ixor__"})


#: Methods of ``set`` whose argument is one member (the rest take iterables of members).
_SET_ELEMENT_ARGS = frozenset({"add", "discard", "remove", "__contains__"})


def _set_method(tx: Any, obj: SetVariable, name: str, args: list, kwargs: dict) -> VariableTracker:
    """A method of a traced set, run on a copy of its members; a mutation binds the set's new members, a set
    result (``union``, ``copy`` ...) is a new traced set."""
    values = tx.set_values(obj)
    const_args = [tx.set_values(a) if isinstance(a, SetVariable) else
                  {known.hash_key(tx, v) for v in known.sequence_items(tx, a)} if name not in _SET_ELEMENT_ARGS else
                  known.hash_key(tx, a)
                  for a in args]
    if kwargs:
        tx.user_error(TypeError(f"set.{name}() takes no keyword arguments"))
    method = getattr(set, name, None)
    if method is None:
        tx.user_error(AttributeError(f"'set' object has no attribute '{name}'"))
    try:
        result = method(values, *const_args)
    except Exception as e:  # KeyError from remove/pop, TypeError for an unhashable member: the user's
        tx.user_error(e)
    if name in _SET_MUTATORS:
        tx.set_set_values(obj, values)
    if result is values:  # (s.__ior__(t) returns s itself)
        return obj
    if type(result) is set:
        return tx.new_set(result)
    if type(result) is TensorKey:  # set.pop() of a tensor member
        return known.key_variable(result)
    return ConstantVariable(result) if is_constant(result) or result is None else wrap(tx, result, None)


def update_pairs(tx: Any, other: VariableTracker) -> tuple:
    """The ``(key, value)`` pairs ``dict.update(other)`` adds: a dict's items, else each element of an iterable
    of pairs (with Python's errors for an element that is not a pair)."""
    if isinstance(other, DictVariable):
        return tx.dict_entry(other).items
    storage = storage_of(tx, other)
    cls = other.python_type()
    if storage is not None and all(getattr(cls, m) is getattr(dict_base(cls), m) for m in ("keys", "__getitem__")):
        return tx.dict_entry(storage).items  # a dict subclass read as a mapping through dict's own methods
    if hasattr(cls, "keys"):  # another mapping: Python reads it through keys() and [key]
        tx.unsupported("unsupported_call", f"dict.update with a {other.python_type().__name__}")
    pairs = []
    for i, element in enumerate(known.sequence_items(tx, other)):
        if isinstance(element, (TupleVariable, ListVariable)):
            pair = tuple(known.sequence_items(tx, element))
        elif known.is_const(tx, element) and isinstance(known.const_value(tx, element), (str, bytes, tuple)):
            pair = tuple(ConstantVariable(c) for c in known.const_value(tx, element))
        else:
            tx.user_error(TypeError(f"cannot convert dictionary update sequence element #{i} to a sequence"))
        if len(pair) != 2:
            tx.user_error(ValueError(f"dictionary update sequence element #{i} has length {len(pair)}; 2 is required"))
        pairs.append((known.hash_key(tx, pair[0]), pair[1]))
    return tuple(pairs)


def _dict_dunder(tx: Any, obj: DictVariable, entry: DictEntry, name: str, args: list) -> VariableTracker:
    """``dict.__len__(d)``, ``__iter__``, ``__setitem__``, ``__delitem__`` called by name (``super().__setitem__(k, v)``
    in a subclass); ``__getitem__`` and ``__contains__`` are lookups (see call_container_method)."""
    if name == "__len__":
        return ConstantVariable(len(entry.items))
    if name == "__iter__":
        return tx.new_iterator(tuple(known.key_variable(k) for k, _ in entry.items))
    key = known.hash_key(tx, args[0], obj)
    if name == "__setitem__":
        tx.set_dict_entry(obj, entry.set(key, args[1]))
        return ConstantVariable(None)
    if entry.get(key, MISSING) is MISSING:  # __delitem__
        tx.user_error(KeyError(key))
    tx.set_dict_entry(obj, DictEntry(tuple((k, v) for k, v in entry.items if not (same_key(k, key))),
                                     entry.source, entry.live))
    return ConstantVariable(None)


def _same_value(tx: Any, a: VariableTracker, b: VariableTracker) -> bool:
    """Whether the item ``a`` equals ``b`` as ``list.count`` / ``index`` / ``remove`` (and tuple's) test it:
    CPython's ``PyObject_RichCompareBool(a, b, Py_EQ)``, identity first, then ``a == b``, which runs a user
    class's ``__eq__`` (traced)."""
    if known.is_const(tx, a) and known.is_const(tx, b):  # (identity first: [nan].count(nan) is 1)
        value_a, value_b = known.const_value(tx, a), known.const_value(tx, b)
        return value_a is value_b or value_a == value_b
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        if identical(tx, a, b):
            return True
        tx.unsupported("data_dependent", "comparing tensors by value in a list method")
    if identical(tx, a, b):
        return True
    if _python_eq(tx, a) or _python_eq(tx, b):
        return truthiness(tx, operators.compare(tx, "==", a, b))
    return False


def _python_eq(tx: Any, v: VariableTracker) -> bool:
    """Whether ``v`` is an object whose class's ``__eq__`` is written in Python."""
    return isinstance(v, (ObjectVariable, PythonObjectVariable, NNModuleVariable)) and \
        isinstance(getattr(python_type_of(tx, v), "__eq__", None), types.FunctionType)


def _index_of(tx: Any, items: list, value: VariableTracker, bounds: tuple | list = ()) -> int | None:
    """The first index of ``value`` in ``items[start:stop]`` as ``list.index(value, start, stop)`` and tuple's find
    it (``bounds``: the ``start, stop`` given, CPython's ``_PyEval_SliceIndexNotNone`` bounds, negative ones counted
    from the end and clipped to the items); None where it is absent. Only the items within the bounds are compared.

    Raises the user's TypeError for a bound that is not an integer (``[].index(x, None)``), as eager does."""
    limits = [known.const_value(tx, b) for b in bounds]
    try:
        [].index(None, *limits)  # CPython's own conversion of the bounds (an empty list: nothing is compared)
    except TypeError as e:
        tx.user_error(TypeError(*e.args))
    except ValueError:
        pass
    start, stop, _ = slice(*(limits + [None, None])[:2]).indices(len(items))
    for i in range(start, stop):
        if _same_value(tx, items[i], value):
            return i
    return None


# ------------------------------------------------------------- copy.deepcopy
def deepcopy_var(tx: Any, var: VariableTracker, memo: dict) -> VariableTracker:
    """``copy.deepcopy(var)`` in the trace: fresh traced containers and objects holding copies, shared
    references copied once (``memo``, keyed like deepcopy's own by identity), atoms (constants, classes,
    functions) kept, as ``copy.deepcopy`` does for plain data. Tensors and modules are not copied here
    (their deepcopy makes new storage and parameters): the call breaks the graph and runs for real.
    """
    if isinstance(var, LazyArgument):
        # read now: the copy must hold today's value even if the trace later writes to the original
        var = wrap(tx, var.value, var.source)
    if isinstance(var, (ConstantVariable, RangeVariable, UserFunctionVariable, NestedFunctionVariable,
                        BuiltinVariable, SymNodeVariable)):  # a symbolic int or float is immutable: itself
        return var
    if isinstance(var, TupleVariable):
        return TupleVariable(tuple(deepcopy_var(tx, v, memo) for v in var.items), var.cls)
    key = ("oid", getattr(var, "oid", None)) if isinstance(var, (ListVariable, DictVariable, ObjectVariable)) \
        else ("id", id(var.value)) if isinstance(var, PythonObjectVariable) else None
    if key is not None and key in memo:
        return memo[key]
    if isinstance(var, ListVariable):
        new = tx.new_list(())
        memo[key] = new
        tx.set_list_items(new, tuple(deepcopy_var(tx, v, memo) for v in tx.list_items(var)))
        return new
    if isinstance(var, DictVariable):
        new = tx.new_dict(())
        memo[key] = new
        tx.set_dict_entry(new, DictEntry(tuple((k, deepcopy_var(tx, v, memo)) for k, v in tx.dict_entry(var).items)))
        return new
    if isinstance(var, ObjectVariable):
        entry: ObjectEntry = tx.heap(var.oid)
        _check_plain_data_class(tx, entry.cls)
        new = new_object(tx, entry.cls)
        memo[key] = new
        attrs = DictEntry(tuple((k, deepcopy_var(tx, v, memo)) for k, v in entry.attrs.items))
        new_entry: ObjectEntry = tx.heap(new.oid)
        tx.heap_set(new.oid, new_entry.with_attrs(attrs))
        if entry.storage is not None:
            items = tuple((k, deepcopy_var(tx, v, memo)) for k, v in tx.heap(entry.storage).items)
            tx.heap_set(new_entry.storage, DictEntry(items))
        return new
    if isinstance(var, PythonObjectVariable):
        import types as _types

        value = var.value
        if of_type(value, (type, _types.FunctionType, _types.BuiltinFunctionType, _types.ModuleType)):
            return var  # deepcopy keeps these
        return _deepcopy_outside(tx, var, memo, key)
    tx.unsupported("unsupported_call", f"copy.deepcopy of a {var.python_type().__name__} value")


def _check_plain_data_class(tx: Any, cls: type) -> None:
    """deepcopy of instances of ``cls`` is ``cls.__new__`` plus a deep copy of ``__dict__`` (no hooks). A class
    with a ``__getattr__`` is not plain: ``copy.deepcopy`` looks ``__deepcopy__`` up with ``getattr`` on the
    instance, and ``__getattr__`` answers for it. (A ``__getattribute__`` that hides ``__reduce_ex__`` is not
    modelled: a config's aliasing ``__getattribute__`` is copied as plain data.)"""
    plain = (not hasattr(cls, "__deepcopy__") and cls.__reduce_ex__ is object.__reduce_ex__
             and not hasattr(cls, "__getattr__")
             and cls.__reduce__ is object.__reduce__ and getattr(cls, "__getstate__", object.__getstate__)
             is object.__getstate__ and not hasattr(cls, "__setstate__") and cls.__new__ is object.__new__
             and dict_base(cls) is None and not any("__slots__" in vars(k) for k in cls.__mro__[:-1]))
    if not plain:
        tx.unsupported("unsupported_call", f"copy.deepcopy of a {cls.__name__} (it customizes copying or pickling)")


def _deepcopy_outside(tx: Any, var: PythonObjectVariable, memo: dict, key: tuple) -> VariableTracker:
    """deepcopy of an object that exists outside the trace: its ``__dict__`` is read (and guarded) through
    ``obj.__dict__[name]``, then copied into a new traced instance."""
    value = var.value
    cls = type(value)
    _check_plain_data_class(tx, cls)
    if var.source is None or not hasattr(value, "__dict__"):
        tx.unsupported("unsupported_call", f"copy.deepcopy of a {cls.__name__} that stillframe cannot name")
    if any(k[0] in ("attr", "attr_del") and k[1] == id(value) for k in tx.state.side_effects.keys()):
        tx.unsupported("unsupported_call", f"copy.deepcopy of a {cls.__name__} written to earlier in the trace")
    dict_source = AttrSource(var.source, "__dict__")
    state = vars(value)
    tx.add_guard(Guard(dict_source, "KEYS", tuple(state)))
    new = new_object(tx, cls)
    memo[key] = new
    attrs = DictEntry(tuple((k, deepcopy_var(tx, wrap(tx, v, GetItemSource(dict_source, k)), memo))
                            for k, v in state.items()))
    tx.heap_set(new.oid, tx.heap(new.oid).with_attrs(attrs))
    return new


#: Function attributes that are slots, not ``__dict__`` entries (what ``functools.wraps`` copies, mostly).
FUNCTION_SLOTS = ("__name__", "__qualname__", "__doc__", "__module__", "__type_params__", "__annotations__")


def function_attr_key(name: str) -> Any:
    """The key under which a function made in the trace stores attribute ``name`` (slots apart from __dict__)."""
    return ("slot", name) if name in FUNCTION_SLOTS else name


C_DATA_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)


def _static_lookup_type(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING


def _static_lookup(obj: Any, name: str) -> Any:
    """Python's attribute lookup order, without running user code: ``('instance'|'class', value)`` or MISSING."""
    cls_attr = _static_lookup_type(type(obj), name)
    if cls_attr is not MISSING and (hasattr(type(cls_attr), "__set__") or hasattr(type(cls_attr), "__delete__")) \
            and not of_type(cls_attr, property):
        return ("class", cls_attr)
    if of_type(cls_attr, property):
        return ("class", cls_attr)
    inst = getattr(obj, "__dict__", None)
    if inst is not None and name in inst:
        return ("instance", inst[name])
    if cls_attr is not MISSING:
        return ("class", cls_attr)
    return MISSING
