"""Builtins on VariableTrackers: one rule per builtin (``BUILTIN_RULES``), constant folding, class construction.

``call_builtin`` looks a builtin up in the table; ``fold`` evaluates a pure
function on constants (``FOLDABLE``); ``const_value`` reads what a VT
stands for (``type_checks.python_type_of`` its type). Calls back into :mod:`.calls` go through the
module object (getattr, call and setattr recurse as Python's object model does).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from typing import TYPE_CHECKING

import abc
import collections
import contextlib
import enum
import math
import operator
import sys
import types
from typing import Any, Callable, NoReturn

import torch
from ..errors import UserError
from ..guards.guard import Guard
from ..variables.base import (
    AutocastVariable,
    BuiltinVariable,
    ConstantVariable,
    DictEntry,
    NumpyArrayVariable,
    DictVariable,
    DictViewVariable,
    GeneratorVariable,
    LiveIteratorVariable,
    GradModeVariable,
    IteratorVariable,
    ListVariable,
    NNModuleVariable,
    PythonObjectVariable,
    RangeItems,
    RangeVariable,
    SetVariable,
    TensorKey,
    DequeVariable,
    SliceVariable,
    SymNodeVariable,
    TensorVariable,
    TupleVariable,
    UserFunctionVariable,
    UserMethodVariable,
    VariableTracker,
)
from ..variables.base import is_builtin_class
from ..variables.builder import of_type, shows_other_class, wrap
from ..variables.objects import (ContainerMethodVariable, ObjectVariable, SuperVariable, dict_base, storage_of)
from ..tensors import symbolic
from ..tensors.ops import call_tensor_op
# known first: it imports the lower rules modules by name, and they reach it as a module object
from .known import const_value, hash_key, is_const, key_variable, sequence_items
from .attrs import (
    _defined_by_dict_base,
    getattr_var,
    has_attr,
    plain_getattr,
)
from .containers import subscript
from .context import set_grad_mode
from .generators import resume
from .imports import import_builtin
from .objects import (
    call_container_method,
    delete_attr,
    MISSING,
    new_object,
    object_setattr,
    _static_lookup_type,
    store_attr,
    update_pairs,
)
from .operators import binary_op
from .truthiness import truthiness
from ..variables.builder import load_local

from . import arity, calls, exceptions, frames, live_dicts, nn_modules, polyfills, type_checks

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer



def _missing(tx: Tracer, obj: VariableTracker, cls: type, storage: DictVariable,
             key: VariableTracker) -> VariableTracker:
    """``d[key]`` of a key a dict subclass lacks: ``dict.__getitem__`` calls the class's ``__missing__`` (a Python
    one is traced; ``defaultdict``'s stores and returns ``default_factory()``, or raises ``KeyError``)."""
    missing = _static_lookup_type(cls, "__missing__")  # (not cls.__missing__: a descriptor's __get__ runs later)
    if isinstance(missing, types.FunctionType):
        return calls.call_sync(tx, UserMethodVariable(missing, obj), [key], {})
    if missing is not collections.defaultdict.__missing__:
        tx.unsupported("unsupported_call", f"{cls.__name__}.__missing__ is not Python")
    factory = getattr_var(tx, obj, "default_factory")
    if isinstance(factory, ConstantVariable) and factory.value is None:
        tx.user_error(KeyError(const_value(tx, key)))
    value = calls.call_sync(tx, factory, [], {})
    call_container_method(tx, ContainerMethodVariable(storage, "__setitem__"), [key, value], {})
    return value


#: The dunders of torch's container modules that read their registries (``len(ml)``, ``ml[i]``, ``iter(ml)``,
#: ``k in md``): the rules that answer them read the live module.
_REGISTRY_DUNDERS = frozenset({"__len__", "__getitem__", "__iter__", "__contains__"})


def call_dunder(tx: Tracer, obj: VariableTracker, name: str, args: list,
                kwargs: dict | None = None) -> VariableTracker | None:
    """Call ``type(obj).<name>`` when it is a Python function (a user class's ``__len__``, ``__add__`` ...).

    Returns ``None`` when the type has no such Python method.
    """
    if not isinstance(obj, (ObjectVariable, PythonObjectVariable, NNModuleVariable)):
        return None
    cls = type_checks.python_type_of(tx, obj)
    storage = storage_of(tx, obj)
    if storage is not None and name == "__getitem__" and _static_lookup_type(cls, "__missing__") is not MISSING and \
            tx.dict_lookup(storage, const_value(tx, args[0]), MISSING) is MISSING:
        return _missing(tx, obj, cls, storage, args[0])
    if storage is not None and _defined_by_dict_base(cls, name):  # len(out), out[k], iter(out) of a dict subclass
        return call_container_method(tx, ContainerMethodVariable(storage, name), list(args), kwargs or {})
    if is_builtin_class(cls) or cls.__module__.startswith("torch."):
        if isinstance(obj, NNModuleVariable) and name in _REGISTRY_DUNDERS:  # (their rules read the live module)
            nn_modules.guard_registry_read(tx, obj, name)
        return None
    method = getattr(cls, name, None)
    if method is None and name not in _NONE_MEANS_ABSENT and any(name in vars(k) for k in cls.__mro__):
        blocked(tx, cls, name)
    if not isinstance(method, types.FunctionType):
        return None
    return calls.call_sync(tx, UserMethodVariable(method, obj), list(args), kwargs or {})


#: Dunders a class sets to None to say it has none, with a protocol of its own that reads that None (``__hash__ =
#: None``: unhashable, checked where hashing is modelled; ``__contains__``: ``in`` then tries iteration).
_NONE_MEANS_ABSENT = frozenset({"__hash__", "__contains__"})

#: What CPython raises for a dunder a class set to None, where it is not calling None (``'NoneType' object is not
#: callable``: ``__bool__ = None``, ``__iadd__ = None``, ``__len__ = None``, a binary operator's, ``__next__``'s).
_BLOCKED = {"__iter__": "'{}' object is not iterable", "__reversed__": "'{}' object is not reversible"}


def blocked(tx: Tracer, cls: type, name: str) -> NoReturn:
    """Raise CPython's TypeError for calling ``cls.name`` where the class set it to None (``class A: __bool__ =
    None`` makes ``bool(A())`` raise; it does not fall back to ``__len__``, nor ``x += 1`` to ``__add__``)."""
    tx.user_error(TypeError(_BLOCKED.get(name, "'NoneType' object is not callable").format(cls.__name__)))


def checked_len(tx: Tracer, result: VariableTracker) -> int:
    """The length a Python ``__len__`` returned, checked as CPython's ``slot_sq_length`` checks it.

    The result goes through ``__index__`` (``True`` is 1); raises the user's TypeError "'float' object cannot be
    interpreted as an integer", ValueError "__len__() should return >= 0", or OverflowError for a length past
    ``sys.maxsize``. A result that is not a constant (a tensor, a user object with ``__index__``) is a graph break.
    """
    if not isinstance(result, ConstantVariable):
        tx.unsupported("unsupported_call", "__len__ returned a value that is not a Python constant")
    value = result.value
    if not isinstance(value, int):
        tx.user_error(TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer"))
    if value < 0:
        tx.user_error(ValueError("__len__() should return >= 0"))
    if value > sys.maxsize:
        tx.user_error(OverflowError("cannot fit 'int' into an index-sized integer"))
    return int(value)


def _len(tx: Tracer, var: VariableTracker) -> int:
    result = call_dunder(tx, var, "__len__", [])
    if result is not None:
        return checked_len(tx, result)
    if isinstance(var, TupleVariable):
        return len(var.items)
    if isinstance(var, (ListVariable, DequeVariable)):
        return len(tx.list_items(var))
    if isinstance(var, DictVariable):
        return len(tx.dict_entry(var).items)
    if isinstance(var, DictViewVariable):
        return len(tx.dict_entry(var.mapping).items)
    if isinstance(var, NumpyArrayVariable) and not var.scalar:
        var = TensorVariable(var.tid)  # len(array): its first dimension
    if isinstance(var, SetVariable):
        return len(tx.heap(var.oid).values)
    if isinstance(var, TensorVariable):
        shape = tx.tensor(var).meta.shape
        if not shape:
            tx.user_error(TypeError("len() of a 0-d tensor"))
        return int(shape[0])  # a symbolic size is specialized (the ShapeEnv guards it)
    if isinstance(var, NNModuleVariable) and hasattr(var.module, "__len__"):
        nn_modules.guard_registry_read(tx, var, "len()")
        return len(var.module)
    if isinstance(var, (ConstantVariable, PythonObjectVariable)) and var.source is None and \
            of_type(var.value, types.MappingProxyType):
        return len(var.value)  # inspect.signature(f).parameters
    if isinstance(var, PythonObjectVariable) and of_type(var.value, (dict, list, tuple, set, frozenset)):
        if live_dicts.written(tx, var):
            tx.unsupported("unsupported_call", f"len() of a {type(var.value).__name__} the trace wrote into (it "
                           "runs for real, after the writes)")
        if var.source is not None:  # a container subclass (OrderedDict ...): its length is guarded, not its items
            tx.add_guard(Guard(var.source, "LEN", len(var.value)))
        return len(var.value)
    value = const_value(tx, var)
    try:
        return len(value)
    except TypeError as e:  # len(5): "object of type 'int' has no len()"
        tx.user_error(e)


def _issubclass(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return fold(tx, issubclass, args, kwargs)


def attribute_name(tx: Tracer, var: VariableTracker) -> str:
    """The name ``getattr``, ``hasattr``, ``setattr``, ``delattr`` (and ``object``'s ``__setattr__`` /
    ``__getattribute__``) are given: a str, else CPython's TypeError "attribute name must be string, not 'int'"
    (test_builtin test_hasattr, test_delattr: hasattr(sys, 1) answered False, delattr raised AttributeError)."""
    name = const_value(tx, var)
    if not isinstance(name, str):
        tx.user_error(TypeError(f"attribute name must be string, not '{type(name).__name__}'"))
    return name


def _setattr(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    store_attr(tx, args[0], attribute_name(tx, args[1]), args[2])
    return ConstantVariable(None)


def call_builtin(tx: Tracer, fn: Any, args: list, kwargs: dict) -> None:
    """``fn(*args, **kwargs)`` for a builtin: first CPython's check of the arity and keywords
    (:func:`arity.check_call`), then its rule, a fold on constants, or a graph break."""
    arity.check_call(tx, fn, args, kwargs)
    rule = BUILTIN_RULES.get(fn)
    if rule is not None:
        return tx.push(rule(tx, args, kwargs))
    if isinstance(fn, type) and issubclass(fn, BaseException):
        return tx.push(exceptions.construct(tx, fn, args, kwargs))
    if fn in (str, repr) and len(args) == 1 and not kwargs and exceptions.is_exception(tx, args[0]):
        return tx.push(exceptions.text(tx, fn, args[0]))
    if all(is_const(tx, a) for a in args) and all(is_const(tx, v) for v in kwargs.values()) and fn in FOLDABLE:
        return tx.push(fold(tx, fn, args, kwargs))
    if fn in (str, repr) and len(args) == 1 and not kwargs and isinstance(args[0], PythonObjectVariable) and \
            of_type(args[0].value, (type, types.FunctionType, types.ModuleType)) and \
            (not of_type(args[0].value, type) or type(args[0].value).__repr__ is type.__repr__):
        # a class, function or module: fixed by its type/identity guards, and so is its text
        return tx.push(ConstantVariable(fn(args[0].value)))
    if fn in (str, repr) and len(args) == 1 and not kwargs and isinstance(args[0], UserFunctionVariable) and \
            args[0].source is not None:
        # a function's text names it and its address: fixed once its identity is (a closure made afresh on
        # each call is otherwise guarded by its code alone)
        tx.add_guard(Guard(args[0].source, "ID", id(args[0].fn)))
        return tx.push(ConstantVariable(fn(args[0].fn)))
    tx.unsupported("unsupported_builtin", f"the builtin {getattr(fn, '__name__', fn)} is not supported here")


def fold(tx: Tracer, fn: Any, args: list, kwargs: dict) -> VariableTracker:
    """Evaluate a pure function on constants at trace time (errors become the user's exception); one that torch
    computes on a SymInt / SymFloat (``math.sqrt``, ``round``, ``max``) stays symbolic (:func:`symbolic.call`)."""
    traced = None if kwargs else symbolic.call(tx, fn, args)
    if traced is not None:
        return traced
    if fn in _SYMBOLIC_REDUCTIONS:
        reduced = _symbolic_reduce(tx, fn, args, kwargs)
        if reduced is not None:
            return reduced
    const_args = [const_value(tx, a) for a in args]  # outside the try: an Unsupported here is ours, not the user's
    const_kwargs = {k: const_value(tx, v) for k, v in kwargs.items()}
    try:
        value = fn(*const_args, **const_kwargs)
    except Exception as e:  # the user's own error, raised exactly as eager would
        tx.user_error(e)
    return _const_result(tx, value)


#: Reductions of an iterable that stay symbolic over symbolic sizes (``sum(x.shape)``, ``math.prod(x.shape)``):
#: their operator and where their ``start`` is (positional index or ``None``, keyword, default).
_SYMBOLIC_REDUCTIONS = {sum: ("+", 1, 0), math.prod: ("*", None, 1)}


def _symbolic_reduce(tx: Tracer, fn: Any, args: list, kwargs: dict) -> VariableTracker | None:
    """``sum`` / ``math.prod`` of a tuple or list holding symbolic ints, as their Python definition computes it:
    ``start``, then the operator with each item in order, kept symbolic (:func:`binary_op`) instead of
    specializing every size; ``None`` where it does not apply (no symbolic item, or items that are not ints)."""
    op, start_index, default = _SYMBOLIC_REDUCTIONS[fn]
    if not args or not isinstance(args[0], (TupleVariable, ListVariable)) or set(kwargs) - {"start"}:
        return None
    positional_start = start_index is not None and len(args) > start_index
    if len(args) > (2 if start_index is not None else 1) or (positional_start and kwargs):
        return None
    items = tuple(sequence_items(tx, args[0]))
    start = args[start_index] if positional_start else kwargs.get("start", ConstantVariable(default))
    values = (start, *items)
    if not any(isinstance(v, SymNodeVariable) for v in items) or not all(
            isinstance(v, SymNodeVariable) and isinstance(v.value, torch.SymInt) or
            isinstance(v, ConstantVariable) and type(v.value) is int for v in values):
        return None
    acc = start
    for v in items:
        acc = binary_op(tx, op, acc, v)
    return acc


def _const_result(tx: Tracer, value: Any) -> VariableTracker:
    if isinstance(value, range):
        return RangeVariable(value)
    if isinstance(value, tuple):
        return TupleVariable(tuple(_const_result(tx, v) for v in value), type(value))
    if isinstance(value, list):
        return tx.new_list(tuple(_const_result(tx, v) for v in value))
    if isinstance(value, slice):
        return SliceVariable(ConstantVariable(value.start), ConstantVariable(value.stop), ConstantVariable(value.step))
    return ConstantVariable(value)


def _tuple_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if not args:
        return TupleVariable(())
    if isinstance(args[0], TupleVariable) and args[0].cls is tuple:
        return args[0]  # tuple(t) of an exact tuple is t itself, as in CPython
    return TupleVariable(hinted_items(tx, args[0]))


def _list_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return tx.new_list(hinted_items(tx, args[0]) if args else ())


def hinted_items(tx: Tracer, seq: VariableTracker) -> tuple:
    """The items ``list(seq)`` / ``tuple(seq)`` take. Of a user object whose class defines ``__len__`` or
    ``__length_hint__`` in Python, CPython takes ``iter(seq)`` first, then asks ``seq`` for a length hint (the
    preallocation of ``PyObject_LengthHint``: its ``__len__``, a TypeError from it ignored, else its
    ``__length_hint__``, whose result is checked), then steps the iterator: the hint's effects and errors are the
    user's (test_descr test_special_method_lookup)."""
    if isinstance(seq, (ObjectVariable, PythonObjectVariable)):
        cls = type_checks.python_type_of(tx, seq)
        length = _static_lookup_type(cls, "__len__")
        hint = _static_lookup_type(cls, "__length_hint__")
        if not is_builtin_class(cls) and (isinstance(length, types.FunctionType) or hint is not MISSING):
            it = iterator_of(tx, seq)
            if not isinstance(length, types.FunctionType) or \
                    attempt(tx, TypeError, lambda: ConstantVariable(checked_len(tx, call_dunder(tx, seq, "__len__",
                                                                                                 [])))) is None:
                _length_hint(tx, seq, hint)
            return tuple(sequence_items(tx, it))
    return tuple(sequence_items(tx, seq))


def _length_hint(tx: Tracer, seq: VariableTracker, hint: Any) -> None:
    """``type(seq).__length_hint__(seq)`` checked as ``PyObject_LengthHint`` checks it (its value is not used)."""
    if hint is MISSING:
        return
    if not isinstance(hint, types.FunctionType):
        tx.unsupported("unsupported_call", "a __length_hint__ that is not a Python function")
    result = calls.call_sync(tx, UserMethodVariable(hint, seq), [], {})
    if not isinstance(result, ConstantVariable):
        tx.unsupported("unsupported_call", "__length_hint__ returned a value that is not a Python constant")
    value = result.value
    if value is NotImplemented:
        return
    if not isinstance(value, int):
        tx.user_error(TypeError(f"__length_hint__ must be an integer, not {type(value).__name__}"))
    if value < 0:
        tx.user_error(ValueError("__length_hint__() should return >= 0"))


def _dict_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    items = list(update_pairs(tx, args[0])) if args else []
    items.extend(kwargs.items())
    entry = DictEntry(())
    for k, v in items:
        entry = entry.set(k, v)
    return tx.new_dict(entry.items)


def attempt(tx: Tracer, exc_type: type, step: Callable[[], VariableTracker]) -> VariableTracker | None:
    """``step()``, or ``None`` when it raises the user's ``exc_type``: ``getattr(o, n, default)``, ``hasattr``,
    ``next(it, default)``. What the step did before it raised stays done, as in eager (a ``__getattr__`` that
    counts its calls, then raises AttributeError; a generator that appends, then returns): only the frames it
    left are dropped, and the exception being handled is the caller's again (:meth:`Tracer.leave_frames`)."""
    token = tx.checkpoint()
    try:
        return step()
    except UserError as e:
        if not isinstance(e.exc, exc_type) or not e.traceable:
            raise
        tx.leave_frames(token)
        return None


def _getattr(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    obj, name = args[0], attribute_name(tx, args[1])
    if len(args) == 3:
        found = attempt(tx, AttributeError, lambda: getattr_var(tx, obj, name))
        return args[2] if found is None else found
    return getattr_var(tx, obj, name)


def _hasattr(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    obj, name = args[0], attribute_name(tx, args[1])
    if isinstance(obj, NNModuleVariable) and nn_modules.registries_written(tx, obj.module):
        return ConstantVariable(attempt(tx, AttributeError, lambda: getattr_var(tx, obj, name)) is not None)
    if isinstance(obj, ObjectVariable) or isinstance(obj, PythonObjectVariable) and (
            _looks_up_in_python(obj.value) or _getter_in_python(obj.value, name)):
        # hasattr is getattr that catches AttributeError (a live object's __getattr__ or property runs, as in eager)
        return ConstantVariable(attempt(tx, AttributeError, lambda: getattr_var(tx, obj, name)) is not None)
    return ConstantVariable(has_attr(tx, obj, name))


def _getter_in_python(value: Any, name: str) -> bool:
    """Whether ``value.name`` is found on its class as a ``property`` or a descriptor whose ``__get__`` is written
    in Python: reading it runs that code, which may raise AttributeError (then ``hasattr`` is False; test_descr
    test_properties)."""
    if of_type(value, (type, types.ModuleType)):
        return False
    attr = _static_lookup_type(type(value), name)
    return of_type(attr, property) or isinstance(getattr(type(attr), "__get__", None), types.FunctionType)


def _looks_up_in_python(value: Any) -> bool:
    """Whether an attribute lookup on ``value`` may run user code: its class defines ``__getattr__`` or its own
    ``__getattribute__``."""
    cls = type(value)
    if of_type(value, types.ModuleType):  # (a module's own __getattr__ is looked up statically: attrs.has_attr)
        return False
    return getattr(cls, "__getattr__", None) is not None or \
        getattr(cls, "__getattribute__", object.__getattribute__) is not object.__getattribute__


def iterator_of(tx: Tracer, seq: VariableTracker, builtin: bool = False) -> VariableTracker:
    """``iter(seq)``: an iterator is its own; a user class's ``__iter__`` is called once (a generator method stays
    lazy, stepped one item per ``next`` as eager steps it); anything else is a heap iterator over its items.
    ``builtin``: for the builtin ``iter()`` itself, which returns an iterator object with a ``__next__`` of its
    own as it is (a ``for`` loop steps it through :func:`polyfills.drive`)."""
    if isinstance(seq, (IteratorVariable, GeneratorVariable, LiveIteratorVariable)):
        return seq
    watched = watched_iterator(tx, seq, "iter")
    if watched is not None:
        return watched
    empty = live_dicts.empty_view_iterator(tx, seq)  # iter(od.values()) of an empty live mapping
    if empty is not None:
        return empty
    made = checked_iterator(tx, call_dunder(tx, seq, "__iter__", []))
    if isinstance(made, (IteratorVariable, GeneratorVariable, LiveIteratorVariable)):
        return made
    if builtin and made is not None and has_python_next(made):
        return made
    if made is not None and has_python_next(made):  # an iterator object: stepped by its __next__, one per item
        return calls.call_sync(tx, UserFunctionVariable(polyfills.drive), [made], {})
    seq = seq if made is None else made
    if isinstance(seq, RangeVariable):  # its items made as they are read: a loop may leave range(10**9) early
        return tx.new_iterator(RangeItems(seq.value))
    view = container_view(seq)
    if view is not None:  # reads the container at each next, as CPython's listiterator / dictiter / setiter
        return tx.new_container_iterator(seq.mapping if isinstance(seq, DictViewVariable) else seq, view)
    return tx.new_iterator(tuple(sequence_items(tx, seq)), cls=iterator_type(tx, iter, seq))


def checked_iterator(tx: Tracer, made: VariableTracker | None) -> VariableTracker | None:
    """What a class's ``__iter__`` returned (None: the class has none), checked as CPython's ``iter()`` checks it:
    TypeError "iter() returned non-iterator of type 'X'" where its type has no ``__next__`` (an ``__iter__`` that
    returns ``self`` of a class without one; iterating that as a sequence again recursed without end)."""
    if made is not None and not hasattr(type_checks.python_type_of(tx, made), "__next__"):
        tx.user_error(TypeError(f"iter() returned non-iterator of type "
                                f"'{type_checks.python_type_of(tx, made).__name__}'"))
    return made


def iterator_type(tx: Tracer, fn: Any, seq: VariableTracker) -> type | None:
    """The type of eager's ``fn(seq)`` (``fn``: ``iter`` or ``reversed``) for a sequence whose iterator holds its
    items: a constant's own (``iter("ab")``: ``str_ascii_iterator``), a tuple's, a range's; None otherwise (the
    iterator's default, ``tuple_iterator``)."""
    if isinstance(seq, TupleVariable):
        value: Any = ()
    elif isinstance(seq, RangeVariable):
        value = seq.value
    elif is_const(tx, seq):
        value = const_value(tx, seq)
    else:
        return None
    try:
        return type(fn(value))
    except Exception:  # (not iterable: the items' rule raised already)
        return None


def watched_iterator(tx: Tracer, seq: VariableTracker, fn: str) -> VariableTracker | None:
    """``iter(seq)`` (``fn == "iter"``) or ``reversed(seq)`` of a container whose CPython iterator sees it change
    (``deque``'s and ``OrderedDict``'s state, a dict's size, values read afresh) and which the trace does not follow
    item by item: a deque, an instance of a dict subclass (``OrderedDict``, ``defaultdict``) iterated by its base's
    ``__iter__``, an ``OrderedDict``'s views, a dict or a dict view reversed. A watched iterator holds its items
    (``Tracer.new_watched_iterator``); ``None`` for any other ``seq``."""
    view, container, oid = "", seq, None
    if isinstance(seq, DequeVariable):
        oid = seq.oid
    elif isinstance(seq, ObjectVariable):
        storage = storage_of(tx, seq)
        if storage is None or not _defined_by_dict_base(seq.cls, "__reversed__" if fn == "reversed" else "__iter__"):
            return None
        oid = storage.oid
    elif isinstance(seq, DictViewVariable):
        owner = _storage_owner(tx, seq.mapping.oid)
        if owner is None and fn == "iter":
            return None
        view, container, oid = f".{seq.kind}()", owner or seq.mapping, seq.mapping.oid
    elif isinstance(seq, DictVariable) and fn == "reversed":
        oid = seq.oid
    if oid is None:
        return None
    items = tuple(sequence_items(tx, seq)) if not isinstance(seq, ObjectVariable) else \
        tuple(key_variable(k) for k, _ in tx.dict_entry(DictVariable(oid)).items)
    return tx.new_watched_iterator(items[::-1] if fn == "reversed" else items, container, oid, view, fn)


def _storage_owner(tx: Tracer, oid: int) -> ObjectVariable | None:
    """The instance of a dict subclass made in the trace whose dict part is ``heap[oid]``, if any."""
    owner = tx.state.memo.get(("storage_owner", oid))
    return None if owner is None else ObjectVariable(*owner)


def container_view(seq: VariableTracker) -> str | None:
    """What an iterator over the heap container ``seq`` reads (``IteratorEntry.view``), or ``None`` where ``seq``
    cannot change while it is iterated (a tuple, a range, a string ...): that iterator holds its items."""
    if isinstance(seq, ListVariable):
        return "list"
    if isinstance(seq, DictVariable):
        return "keys"
    if isinstance(seq, DictViewVariable):
        return seq.kind
    if isinstance(seq, SetVariable):
        return "set"
    return None


def has_python_next(var: VariableTracker) -> bool:
    """Whether ``var`` is an object made in the trace whose class defines ``__next__`` in Python."""
    return isinstance(var, ObjectVariable) and isinstance(_static_lookup_type(var.cls, "__next__"),
                                                          types.FunctionType)


def _iter(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if len(args) != 1 or kwargs:
        tx.unsupported("unsupported_builtin", "iter() with a sentinel")
    return iterator_of(tx, args[0], builtin=True)  # (iter(obj) is what obj.__iter__ returns, often obj itself)


def _bool_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return ConstantVariable(truthiness(tx, args[0]) if args else False)


#: ``int(n)`` / ``float(n)`` of a symbolic number, kept symbolic as torch.compile keeps it (``int()`` of a SymFloat
#: truncates: ``torch.sym_int``), instead of specializing it.
_SYMBOLIC_CONVERSIONS = {int: {torch.SymInt: None, torch.SymFloat: torch.sym_int},
                         float: {torch.SymFloat: None, torch.SymInt: torch.sym_float}}


def _scalar_of(kind: type) -> Callable:
    def rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
        if args and isinstance(args[0], TensorVariable):
            tx.unsupported("data_dependent", f"{kind.__name__}() of a tensor reads its value",
                           ("keep the value in a tensor",))
        if len(args) == 1 and not kwargs and isinstance(args[0], SymNodeVariable) and \
                type(args[0].value) in _SYMBOLIC_CONVERSIONS[kind]:
            convert = _SYMBOLIC_CONVERSIONS[kind][type(args[0].value)]
            return args[0] if convert is None else symbolic.apply(tx, convert, (args[0],))
        return fold(tx, kind, args, kwargs)

    return rule


def _slice(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    parts = list(args) + [ConstantVariable(None)] * (3 - len(args))
    if len(args) == 1:
        parts = [ConstantVariable(None), args[0], ConstantVariable(None)]
    return SliceVariable(*parts)


def _sum(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    items = sequence_items(tx, args[0])
    start = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    if any(isinstance(v, TensorVariable) for v in items):
        acc = start
        for v in items:
            acc = binary_op(tx, "+", acc, v)
        return acc
    return fold(tx, sum, [TupleVariable(tuple(items)), start], {})


def _abs(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if isinstance(args[0], TensorVariable):
        return call_tensor_op(tx, "call_function", operator.abs, (args[0],), {})
    return fold(tx, abs, args, kwargs)


def _type(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    if len(args) != 1:
        tx.unsupported("unsupported_builtin", "type() with three arguments")
    return PythonObjectVariable(type_checks.python_type_of(tx, args[0]))


def _callable(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    v = args[0]
    if isinstance(v, PythonObjectVariable):
        return ConstantVariable(callable(v.value))
    if isinstance(v, NNModuleVariable):
        return ConstantVariable(callable(v.module))
    # what callable() itself asks: does the type (not its metaclass) define __call__
    return ConstantVariable(any("__call__" in vars(k) for k in type_checks.python_type_of(tx, v).__mro__))


def _id(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """``id(obj)`` of an object the plan already checks by identity (a module reached from outside, a class or a
    Python module): the same number on every call the plan runs for. Other objects' ids change from call to call
    (or do not exist yet, for objects made in the trace), so that ``id()`` breaks the graph."""
    if len(args) != 1 or kwargs:
        tx.user_error(TypeError(f"id() takes exactly one argument ({len(args)} given)"))
    var = args[0]
    if isinstance(var, NNModuleVariable) and var.source is not None:
        return ConstantVariable(id(var.module))
    if isinstance(var, PythonObjectVariable) and var.source is not None and \
            of_type(var.value, (type, types.ModuleType)):
        return ConstantVariable(id(var.value))
    tx.unsupported("unsupported_builtin", "id() of a traced value")


def _isinstance(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """``isinstance(obj, classinfo)`` (:func:`type_checks.isinstance_rule`), where an entry of ``classinfo`` that is
    no class (``isinstance(x, 5)``; no ``__instancecheck__`` and no ``__bases__``) raises CPython's TypeError when
    the check reaches it: after the entries before it, tried in order, did not match."""
    if len(args) == 2 and not kwargs:
        flat = _flat_classinfo(const_value(tx, args[1]))
        bad = next((i for i, c in enumerate(flat) if _not_classinfo(c)), None)
        if bad is not None:
            if bad and truthiness(tx, type_checks.isinstance_rule(
                    tx, [args[0], TupleVariable(tuple(wrap(tx, c, None) for c in flat[:bad]))], {})):
                return ConstantVariable(True)
            try:
                isinstance(None, flat[bad])  # (no user code: a value with neither __instancecheck__ nor __bases__)
            except TypeError as e:  # "isinstance() arg 2 must be a type, a tuple of types, or a union"
                tx.user_error(e)
    return type_checks.isinstance_rule(tx, args, kwargs)


def _flat_classinfo(classinfo: Any) -> list:
    """The entries of a (nested) tuple ``classinfo``, in the order ``isinstance`` tries them."""
    if type(classinfo) is tuple:
        return [c for item in classinfo for c in _flat_classinfo(item)]
    return [classinfo]


def _not_classinfo(c: Any) -> bool:
    """Whether ``isinstance`` refuses ``c`` as a class (CPython's ``object_isinstance`` / ``check_class``)."""
    if of_type(c, type) or any("__instancecheck__" in vars(k) for k in type(c).__mro__):  # (on its type only)
        return False
    if type(c) in (int, float, complex, str, bytes, bool, type(None)) or of_type(c, types.FunctionType):
        return True
    return False  # (anything else is left to the rule)


def _len_rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """``len(obj)``; of a tensor (or an ndarray), its first size as ``t.size(0)`` gives it: a SymInt with dynamic
    shapes (backed or unbacked), not a number specialized (and guarded) for each new size."""
    if kwargs:
        tx.user_error(TypeError("len() takes no keyword arguments"))
    if len(args) != 1:
        tx.user_error(TypeError(f"len() takes exactly one argument ({len(args)} given)"))
    var = args[0]
    if isinstance(var, NumpyArrayVariable) and not var.scalar:
        var = TensorVariable(var.tid)
    if isinstance(var, TensorVariable):
        entry = tx.tensor(var)
        if not entry.meta.shape:
            tx.user_error(TypeError("len() of a 0-d tensor"))
        return symbolic.size_of(tx, entry, 0)
    return ConstantVariable(_len(tx, var))


BUILTIN_RULES: dict[Any, Callable] = {
    len: _len_rule,
    isinstance: _isinstance,
    getattr: _getattr,
    hasattr: _hasattr,
    iter: _iter,
    tuple: _tuple_of,
    list: _list_of,
    dict: _dict_of,
    bool: _bool_of,
    int: _scalar_of(int),
    float: _scalar_of(float),
    slice: _slice,
    sum: _sum,
    abs: _abs,
    type: _type,
    callable: _callable,
    id: _id,
}

FOLDABLE = {str, round, divmod, pow, issubclass, repr, ord, chr, hash, format}


def _apply_getter(tx: Tracer, getter: Any, obj: VariableTracker) -> VariableTracker:
    """``operator.itemgetter(...)(obj)`` / ``attrgetter(...)(obj)`` on a VT (the keys are constants)."""
    kind, keys = getter.__reduce__()[0], getter.__reduce__()[1]

    def one(key: Any) -> VariableTracker:
        if kind is operator.itemgetter:
            return subscript(tx, obj, ConstantVariable(key))
        value = obj
        for part in key.split("."):
            value = getattr_var(tx, value, part)
        return value

    results = [one(k) for k in keys]
    return results[0] if len(results) == 1 else TupleVariable(tuple(results))


def _grad_mode_manager(tx: Tracer, cls: Any, args: list, kwargs: dict) -> VariableTracker:
    if cls is torch.no_grad:
        return GradModeVariable(False)
    if cls is torch.enable_grad:
        return GradModeVariable(True)
    mode = bool(const_value(tx, args[0] if args else kwargs["mode"]))
    previous = tx.state.grad_enabled
    set_grad_mode(tx, mode)  # set_grad_enabled(b) takes effect when called, even outside a `with`
    return GradModeVariable(mode, applied=True, previous=previous)


def _autocast(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    names = ("device_type", "dtype", "enabled", "cache_enabled")
    values = dict(zip(names, (const_value(tx, a) for a in args)))
    values.update({k: const_value(tx, v) for k, v in kwargs.items()})
    device_type = values["device_type"]
    dtype = values.get("dtype") or torch.get_autocast_dtype(device_type)
    return AutocastVariable((device_type, dtype, values.get("enabled", True), values.get("cache_enabled")))


GRAD_MODE_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)

#: CPython's ``Py_TPFLAGS_DISALLOW_INSTANTIATION``: a C type without ``tp_new`` (``functools.KeyWrapper``, the type
#: of ``cmp_to_key(f)``): calling it raises "cannot create 'functools.KeyWrapper' instances".
_DISALLOW_INSTANTIATION = 1 << 7


def construct(tx: Tracer, cls: type, args: list, kwargs: dict) -> VariableTracker:
    """``cls(*args, **kwargs)`` for a user class: a named tuple, or a new heap object whose ``__init__`` is inlined."""
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        fields = cls._fields
        defaults = getattr(cls, "_field_defaults", {})
        values = dict(zip(fields, args))
        values.update(kwargs)
        missing = [f for f in fields if f not in values and f not in defaults]
        if missing or len(args) > len(fields):
            fold(tx, cls, args, kwargs)  # raises eager's TypeError
        items = tuple(values[f] if f in values else wrap(tx, defaults[f], None) for f in fields)
        return TupleVariable(items, cls)
    if issubclass(cls, contextlib._GeneratorContextManagerBase) and not tx.lazy_generators:
        # its generator must run lazily, step by step with the `with` body: made and driven for real
        tx.unsupported("generator_context_manager", f"{cls.__name__}: a @contextmanager generator runs for real",
                       ("the body of the `with` block is still traced",))
    if isinstance(cls, enum.EnumMeta):
        return fold(tx, cls, args, kwargs)
    if issubclass(cls, BaseException):
        return exceptions.construct(tx, cls, args, kwargs)
    if cls.__flags__ & _DISALLOW_INSTANTIATION:  # (its __new__ reads as object's; CPython refuses: the real call)
        tx.unsupported("unsupported_call", f"{cls.__qualname__} cannot be instantiated (the real call raises)")
    new_ok = cls.__new__ is object.__new__ or (dict_base(cls) is not None and cls.__new__ is dict.__new__)
    if not new_ok or type(cls) not in (type, abc.ABCMeta):
        tx.unsupported("unsupported_call", f"constructing {cls.__qualname__} (custom __new__ or metaclass)")
    if cls.__new__ is object.__new__ and getattr(cls, "__abstractmethods__", None):
        try:  # object.__new__ refuses a class with abstract methods: its own check, run on placeholders
            object.__new__(cls, *[None] * len(args), **dict.fromkeys(kwargs))
        except TypeError as e:
            tx.user_error(e)
    obj = new_object(tx, cls)
    init = cls.__init__
    if init is collections.defaultdict.__init__:  # defaultdict(default_factory=None, /, *dict_args, **kwargs)
        factory = args[0] if args else ConstantVariable(None)
        if not (isinstance(factory, ConstantVariable) and factory.value is None) and \
                not _callable(tx, [factory], {}).value:
            tx.user_error(TypeError("first argument must be callable or None"))
        store_attr(tx, obj, "default_factory", factory)
        args, init = args[1:], dict.__init__
    base_init = dict_base(cls).__init__ if dict_base(cls) is not None else None
    if init is base_init and (args or kwargs):  # dict.__init__(pairs, **kwargs): dict.update's rule
        if cls.__setitem__ is not dict_base(cls).__setitem__:  # it stores through the class's own __setitem__
            tx.unsupported("unsupported_call", f"constructing {cls.__qualname__} with dict.__init__ arguments")
        if len(args) > 1:
            tx.user_error(TypeError(f"{cls.__name__} expected at most 1 argument, got {len(args)}"))
        call_container_method(tx, ContainerMethodVariable(storage_of(tx, obj), "update"), list(args), kwargs)
        return obj
    if init is object.__init__ or init is base_init:
        if args or kwargs:
            tx.user_error(TypeError(f"{cls.__name__}() takes no arguments"))
        return obj
    if not isinstance(init, types.FunctionType):
        tx.unsupported("unsupported_call", f"constructing {cls.__qualname__}: its __init__ is not Python")
    depth = len(tx.state.frames)
    frames.inline_call(tx, init, None, [obj, *args], kwargs)
    returned = tx.run_until_return(depth)
    if not (isinstance(returned, ConstantVariable) and returned.value is None):  # CPython's type_call check
        tx.user_error(TypeError(f"__init__() should return None, not "
                                f"'{type_checks.python_type_of(tx, returned).__name__}'"))
    return obj


def _super(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """``super(cls, obj)`` and the zero-argument ``super()`` of a method, as CPython's ``super_init``: TypeError
    for keyword arguments, more than two arguments, or an ``obj`` that is neither an instance nor a subclass of
    ``cls``; RuntimeError for ``super()`` in a method without arguments. ``super(cls)`` is a graph break."""
    if kwargs:
        tx.user_error(TypeError("super() takes no keyword arguments"))
    if len(args) > 2:
        tx.user_error(TypeError(f"super() expected at most 2 arguments, got {len(args)}"))
    if len(args) == 2:
        cls, obj = const_value(tx, args[0]), args[1]
        if not isinstance(cls, type):
            tx.user_error(TypeError(f"super() argument 1 must be a type, not {type(cls).__name__}"))
        return checked_super(tx, cls, obj)
    if len(args) == 1:
        tx.unsupported("unsupported_builtin", "super(cls): an unbound super object")
    frame = tx.frame
    cell = frame.cells.get("__class__")
    names = frame.code.code.co_varnames
    if cell is None or not names:
        tx.unsupported("unsupported_builtin", "super() outside a method")
    if frame.code.code.co_argcount == 0:
        tx.user_error(RuntimeError("super(): no arguments"))
    cls = cell[1].cell_contents if isinstance(cell, tuple) else const_value(tx, tx.heap(cell).contents)
    if not isinstance(cls, type):
        tx.user_error(RuntimeError("super(): __class__ is not a type"))
    return checked_super(tx, cls, load_local(tx, names[0]))


def checked_super(tx: Tracer, cls: type, obj: VariableTracker) -> VariableTracker:
    """``super(cls, obj)`` judged as CPython's supercheck judges it, for ``super(C, o)``, ``super()`` and 3.12's
    ``LOAD_SUPER_ATTR``: by ``obj``'s real type; where that is no subclass of ``cls`` and ``obj`` shows another
    class, the call runs for real (CPython reads ``obj.__class__`` there). Raises the user's TypeError otherwise."""
    value = obj.value if isinstance(obj, PythonObjectVariable) else obj.fn if isinstance(obj, BuiltinVariable) else None
    if not issubclass(type_checks.python_type_of(tx, obj), cls) and \
            not (of_type(value, type) and issubclass(value, cls)):
        if isinstance(obj, PythonObjectVariable) and shows_other_class(type(value)):
            # CPython's supercheck then reads obj.__class__ (user code, which may name a subclass of cls)
            tx.unsupported("unsupported_call", "super(C, obj) of an object whose __class__ is its own: CPython "
                           "reads it", ("the call runs for real",))
        tx.user_error(type_checks.super_refusal(cls, type_checks.python_type_of(tx, obj), value))
    return SuperVariable(cls, obj)


def _object_setattr(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    object_setattr(tx, args[0], attribute_name(tx, args[1]), args[2])
    return ConstantVariable(None)


def _object_getattribute(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    return plain_getattr(tx, args[0], attribute_name(tx, args[1]))


def _delattr(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    delete_attr(tx, args[0], attribute_name(tx, args[1]))
    return ConstantVariable(None)


def _next(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    gen = args[0]
    if isinstance(gen, IteratorVariable):
        item = tx.iterator_next(gen)
        if item is not None:
            return item
        if len(args) == 2:
            return args[1]
        tx.user_error(StopIteration())
    if has_python_next(gen):  # the class's own __next__, traced
        if len(args) == 2:
            item = attempt(tx, StopIteration, lambda: call_dunder(tx, gen, "__next__", []))
            return args[1] if item is None else item
        return call_dunder(tx, gen, "__next__", [])
    if not isinstance(gen, GeneratorVariable):
        tx.unsupported("unsupported_builtin", f"next() of a {gen.python_type().__name__} value")
    if len(args) == 2:  # next(gen, default)
        item = attempt(tx, StopIteration, lambda: resume(tx, gen))
        if item is None:
            tx.heap_set(gen.oid, tx.heap(gen.oid).finished())  # rolled back to before the call: it has finished
            return args[1]
        return item
    return resume(tx, gen)


BUILTIN_RULES[next] = _next
BUILTIN_RULES[__import__] = import_builtin
BUILTIN_RULES[delattr] = _delattr
BUILTIN_RULES[object.__setattr__] = _object_setattr
BUILTIN_RULES[object.__getattribute__] = _object_getattribute
BUILTIN_RULES[super] = _super
BUILTIN_RULES[issubclass] = _issubclass
BUILTIN_RULES[setattr] = _setattr


def _set_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """``set(iterable)``: a traced set of constants (members that are not constants break the graph)."""
    items = sequence_items(tx, args[0]) if args else ()
    return tx.new_set(_hashable(tx, v) for v in items)


def _frozenset_of(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """``frozenset(iterable)``: immutable, so a constant; of a frozenset (exactly), that frozenset itself, as
    CPython's ``frozenset_new`` returns it (``frozenset(s) is s``)."""
    if args and is_const(tx, args[0]) and type(const_value(tx, args[0])) is frozenset:
        return args[0]
    items = sequence_items(tx, args[0]) if args else ()
    members = frozenset(_hashable(tx, v) for v in items)
    if any(type(m) is TensorKey for m in members):
        tx.unsupported("not_constant", "a frozenset of tensors (frozensets made in the trace are constants)")
    return ConstantVariable(members)


def _hashable(tx: Tracer, var: VariableTracker) -> Any:
    """A set member: a constant or a tensor (by identity), with Python's TypeError where it is unhashable."""
    value = hash_key(tx, var)
    try:
        hash(value)
    except TypeError as e:
        tx.user_error(e)
    return value


BUILTIN_RULES[set] = _set_of
BUILTIN_RULES.update(exceptions.METHOD_RULES)  # e.add_note(n), super().__init__(msg) of an exception ...
BUILTIN_RULES[frozenset] = _frozenset_of


