"""Operators on VariableTrackers: binary and unary operators, comparisons, identity, ``in``."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import operator
import types

import torch
from ..bytecode.operators import BINARY_OPERATORS, COMPARE_OPERATORS
from ..guards.guard import Guard
from ..guards.source import AttrSource
from ..tensors.ops import call_tensor_op
from ..tensors import symbolic
from ..variables.base import (
    BuiltinVariable,
    ConstantVariable,
    DictVariable,
    NumpyArrayVariable,
    DictViewVariable,
    GeneratorVariable,
    IteratorVariable,
    LazyArgument,
    ListVariable,
    LiveIteratorVariable,
    NNModuleVariable,
    NestedFunctionVariable,
    PartialVariable,
    PythonObjectVariable,
    RangeVariable,
    SetVariable,
    DequeVariable,
    SliceVariable,
    SymNodeVariable,
    TensorMethodVariable,
    TensorVariable,
    TorchFunctionVariable,
    TupleVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from ..variables.base import HEAPTYPE_FLAG
from ..variables.kinds import CONTEXT_VALUES, INTERNAL
from ..variables.objects import ContainerMethodVariable, ObjectVariable, SuperVariable
from . import builtin_calls, known, live_dicts, numpy_interop, type_checks
from .protocol import Protocol
from .truthiness import truthiness


_DUNDERS = {"+": "__add__", "-": "__sub__", "*": "__mul__", "/": "__truediv__", "//": "__floordiv__",
            "%": "__mod__", "**": "__pow__", "@": "__matmul__", "&": "__and__", "|": "__or__", "^": "__xor__",
            "<<": "__lshift__", ">>": "__rshift__"}


def binary_op(tx, symbol, a, b):
    """``a <symbol> b`` on VTs (``symbol`` as ``dis`` spells it: ``'+'``, ``'+='`` ...)."""
    fn = BINARY_OPERATORS[symbol]
    if isinstance(a, NumpyArrayVariable) or isinstance(b, NumpyArrayVariable):
        return numpy_interop.binary(tx, symbol, a, b)
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        if not isinstance(a, TensorVariable) and symbol.endswith("=") and symbol != "==":
            fn = BINARY_OPERATORS[symbol[:-1]]  # int += tensor falls back to int + tensor
        return call_tensor_op(tx, "call_function", fn, (a, b), {})
    sequence_result = _sequence_operator(tx, symbol, a, b)
    if sequence_result is not None:
        return sequence_result
    if any(isinstance(v, DictViewVariable) and v.kind != "values" for v in (a, b)) and \
            symbol.rstrip("=") in ("|", "&", "-", "^"):
        return _view_operator(tx, fn, a, b)
    if (isinstance(a, SetVariable) or isinstance(b, SetVariable)) and \
            all(isinstance(v, SetVariable) or known.is_const(tx, v) for v in (a, b)):
        return _set_operator(tx, fn, symbol, a, b)
    if isinstance(a, SymNodeVariable) or isinstance(b, SymNodeVariable):  # arithmetic on symbolic sizes
        return symbolic.apply(tx, BINARY_OPERATORS[symbol[:-1]] if symbol.endswith("=") else fn, (a, b))
    if known.is_const(tx, a) and known.is_const(tx, b):
        return builtin_calls.fold(tx, fn, [a, b], {})
    dunder = _DUNDERS.get(symbol.rstrip("=") if symbol not in ("==",) else symbol)
    if dunder is not None:
        for obj, name, other in _dunder_calls(tx, a, b, dunder, symbol.endswith("=")):
            result = builtin_calls.call_dunder(tx, obj, name, [other])
            if result is not None and not (isinstance(result, ConstantVariable) and result.value is NotImplemented):
                return result
    tx.unsupported("unsupported_operator", f"the operator {symbol} on {a.python_type().__name__} and "
                   f"{b.python_type().__name__}")


def _dunder_calls(tx, a, b, dunder, inplace):
    """The methods CPython tries for ``a <op> b``, in its order (``binary_op1``): ``__iop__`` first in place, then
    ``a.__op__(b)`` and ``b.__rop__(a)``; the reflected method first when ``type(b)`` is a proper subclass of
    ``type(a)`` that overrides it (``V(1) + W(2)`` runs ``W.__radd__``), and never between operands of one type."""
    reflected = "__r" + dunder[2:]
    ta, tb = _type_of_value(tx, a), _type_of_value(tx, b)
    calls = [(a, "__i" + dunder[2:], b)] if inplace else []
    if tb is ta:
        return calls + [(a, dunder, b)]
    overrides = _class_lookup(tb, reflected) is not None and \
        _class_lookup(tb, reflected) is not _class_lookup(ta, reflected)
    if issubclass(tb, ta) and overrides:
        return calls + [(b, reflected, a), (a, dunder, b)]
    return calls + [(a, dunder, b), (b, reflected, a)]


def _class_lookup(cls, name):
    """``name`` in the ``__dict__`` of the first class of ``cls``'s MRO that has it (no metaclass ``__getattr__``,
    no descriptor bound), as CPython's ``_PyType_Lookup``; ``None`` where no class has it."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


_SEQUENCE_DUNDERS = ("__add__", "__radd__", "__iadd__", "__mul__", "__rmul__", "__imul__")
_OPERAND_TYPES = (int, bool, float, complex, type(None), tuple, list, torch.Size)


def _sequence_operator(tx, symbol, a, b):
    """``+`` and ``*`` (in place too) where a side is a tuple, ``torch.Size`` or list of the trace, as CPython runs
    them, or ``None`` where this does not model them (a user object on the other side: its dunders decide).

    ``torch.Size``'s ``nb_add`` comes first and gives a Size whenever both sides are tuples, so ``(1,) + x.shape``
    and ``() + x.shape`` are Sizes; then the left side's concat or repeat, then the right side's repeat
    (``2 * x.shape``: a Size, as its ``sq_repeat`` wraps the result); a named tuple's slots are the tuple's (a plain
    tuple). ``l += it`` extends the list in place with any iterable and ``l *= n`` repeats it in place (its identity
    kept). A failure raises CPython's TypeError, worded as CPython and torch word it."""
    op = symbol.rstrip("=")
    inplace = symbol != op
    if op not in ("+", "*") or not any(isinstance(v, (TupleVariable, ListVariable)) for v in (a, b)):
        return None
    if inplace and op == "+" and isinstance(a, ListVariable) and \
            not isinstance(_class_lookup(_type_of_value(tx, b), "__radd__"), types.FunctionType):
        tx.set_list_items(a, tx.list_items(a) + tuple(known.sequence_items(tx, b)))
        return a
    ta, tb = _operand_type(tx, a), _operand_type(tx, b)
    if ta is None or tb is None:
        return None
    if op == "+":
        if torch.Size in (ta, tb) and issubclass(ta, tuple) and issubclass(tb, tuple):
            return TupleVariable(_items(tx, a) + _items(tx, b), torch.Size)
        if (issubclass(ta, tuple) and issubclass(tb, tuple)) or (ta is list and tb is list):
            items = _items(tx, a) + _items(tx, b)
            for whole in (a, b):
                if ta is not list and isinstance(whole, TupleVariable) and whole.cls is tuple and \
                        len(items) == len(_items(tx, whole)):
                    return whole  # CPython's tuple concat returns an exact tuple itself when the other is empty
            return tx.new_list(items) if ta is list else TupleVariable(items)
        if ta is torch.Size:  # torch.Size's sq_concat words its own error
            tx.user_error(TypeError(f"can only concatenate tuple (not {_tp_name(tb)}) to torch.Size"))
        if ta in (tuple, list) or issubclass(ta, tuple):
            kind = "list" if ta is list else "tuple"
            tx.user_error(TypeError(f'can only concatenate {kind} (not "{_tp_name(tb)}") to {kind}'))
    else:
        for seq, count, seq_type, count_type in ((a, b, ta, tb), (b, a, tb, ta)):
            if not issubclass(seq_type, (tuple, list)):
                continue
            if not hasattr(count_type, "__index__"):
                tx.user_error(TypeError(f"can't multiply sequence by non-int of type '{_tp_name(count_type)}'"))
            n = operator.index(known.const_value(tx, count))
            if not -2 ** 63 <= n < 2 ** 63:
                tx.user_error(OverflowError(f"cannot fit '{_tp_name(type(n))}' into an index-sized integer"))
            items = _items(tx, seq) * n
            if seq_type is list:
                if inplace and seq is a and isinstance(a, ListVariable):
                    tx.set_list_items(a, items)
                    return a
                return tx.new_list(items)
            if n == 1 and isinstance(seq, TupleVariable) and seq.cls is tuple:
                return seq  # t * 1 of an exact tuple is t itself, as in CPython
            return TupleVariable(items, torch.Size if seq_type is torch.Size else tuple)
    tx.user_error(TypeError(f"unsupported operand type(s) for {symbol}: '{_tp_name(ta)}' and '{_tp_name(tb)}'"))


def _operand_type(tx, v):
    """The type of an operand of :func:`_sequence_operator` whose slots it models (a tuple, Size, list, number or
    ``None``), or ``None``: a user object, a string, a tuple class with its own operator methods ..."""
    if isinstance(v, (TupleVariable, ListVariable, SymNodeVariable)) or \
            (isinstance(v, ConstantVariable) and isinstance(v.value, _OPERAND_TYPES)):
        cls = _type_of_value(tx, v)
    else:
        return None
    if cls not in _OPERAND_TYPES and not (issubclass(cls, tuple) and not any(
            isinstance(_class_lookup(cls, name), types.FunctionType) for name in _SEQUENCE_DUNDERS)):
        return None
    return cls


def _items(tx, v):
    return tuple(known.sequence_items(tx, v))


def _tp_name(cls):
    """CPython's ``tp_name`` of ``cls``, which its operator errors print: the bare name of a class made by a class
    statement or of a builtin, the dotted name of a C type of a module (``torch.Size``)."""
    if cls.__flags__ & HEAPTYPE_FLAG or cls.__module__ == "builtins":
        return cls.__name__
    return f"{cls.__module__}.{cls.__name__}"


def _set_operator(tx, fn, symbol, a, b):
    """``|``, ``&``, ``-``, ``^`` (and in place) with a set made in the trace: a set result is a new traced set,
    or, in place, the same set with new members (its identity kept, as ``s |= t`` keeps it)."""
    left, right = (tx.set_values(v) if isinstance(v, SetVariable) else known.const_value(tx, v) for v in (a, b))
    try:
        value = fn(left, right)
    except Exception as e:  # the user's own error, as eager raises it
        tx.user_error(e)
    if type(value) is not set:
        return builtin_calls.fold(tx, lambda: value, [], {})
    if symbol.endswith("=") and isinstance(a, SetVariable):
        tx.set_set_values(a, value)
        return a
    return tx.new_set(value)


def _view_operator(tx, fn, a, b):
    """``d.keys() | e.keys()``, ``d.items() - s`` ...: a keys or items view is a set of its members, and the
    result a new set (as ``dict_keys.__or__`` gives), whichever side the view is on."""
    left, right = (_members(tx, v) for v in (a, b))
    try:
        value = fn(left, right)
    except Exception as e:  # the user's own error (an unhashable member ...), as eager raises it
        tx.user_error(e)
    return tx.new_set(value)


def _members(tx, v):
    if isinstance(v, SetVariable):
        return set(tx.set_values(v))
    if isinstance(v, (DictViewVariable, ListVariable, TupleVariable)):
        return {known.hash_key(tx, item) for item in known.sequence_items(tx, v)}
    return set(known.const_value(tx, v))


def _unary(tx, fn, name):
    v = tx.pop()
    if isinstance(v, TensorVariable):
        tx.push(call_tensor_op(tx, "call_function", fn, (v,), {}))
    elif isinstance(v, SymNodeVariable):
        tx.push(symbolic.apply(tx, fn, (v,)))
    elif known.is_const(tx, v):
        tx.push(builtin_calls.fold(tx, fn, [v], {}))
    else:
        result = builtin_calls.call_dunder(tx, v, _UNARY_DUNDERS[name], [])
        if result is None:
            tx.unsupported("unsupported_operator", f"unary {name} on a {v.python_type().__name__}")
        tx.push(result)


_UNARY_DUNDERS = {"-": "__neg__", "+": "__pos__", "~": "__invert__"}


def compare(tx, symbol, a, b):
    fn = COMPARE_OPERATORS[symbol]
    if isinstance(a, NumpyArrayVariable) or isinstance(b, NumpyArrayVariable):
        return numpy_interop.binary(tx, symbol, a, b)
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return call_tensor_op(tx, "call_function", fn, (a, b), {})
    if isinstance(a, SymNodeVariable) or isinstance(b, SymNodeVariable):  # symbolic: guarded when tested
        return symbolic.apply(tx, fn, (a, b))
    if symbol in ("==", "!=") and _eq_is_identity(tx, a) and _eq_is_identity(tx, b):  # (before the fold: an
        # iterator over constants folds to a new iterator per read, never equal to another)
        same = identical(tx, a, b)
        return ConstantVariable(same if symbol == "==" else not same)
    if known.is_const(tx, a) and known.is_const(tx, b):
        return builtin_calls.fold(tx, fn, [a, b], {})
    if isinstance(a, (ListVariable, TupleVariable)) and isinstance(b, (ListVariable, TupleVariable)):
        as_tuples = [TupleVariable(tuple(known.sequence_items(tx, v))) for v in (a, b)]
        return builtin_calls.fold(tx, fn, as_tuples, {})
    forward, reflected = (a, _COMPARE_DUNDERS[symbol], b), (b, _COMPARE_DUNDERS[_REFLECTED[symbol]], a)
    ta, tb = _type_of_value(tx, a), _type_of_value(tx, b)
    # CPython's do_richcompare: the reflected method first when type(b) is a proper subclass of type(a), whether
    # or not it overrides it (`V() < W()` runs W.__gt__ first)
    for obj, name, other in (reflected, forward) if tb is not ta and issubclass(tb, ta) else (forward, reflected):
        result = _rich_compare(tx, obj, name, other)
        if result is not None and not (isinstance(result, ConstantVariable) and result.value is NotImplemented):
            return result
    if symbol in ("==", "!=") and _eq_is_identity(tx, a, user_eq=True) and _eq_is_identity(tx, b, user_eq=True):
        same = identical(tx, a, b)  # both returned NotImplemented (or have no __eq__): Python compares identity
        return ConstantVariable(same if symbol == "==" else not same)
    tx.unsupported("unsupported_operator", f"comparing {a.python_type().__name__} {symbol} "
                   f"{b.python_type().__name__}")


_COMPARE_DUNDERS = {"<": "__lt__", "<=": "__le__", "==": "__eq__", "!=": "__ne__", ">": "__gt__", ">=": "__ge__"}


_REFLECTED = {"<": ">", "<=": ">=", "==": "==", "!=": "!=", ">": "<", ">=": "<="}


def _rich_compare(tx, obj, name, other):
    """``type(obj).<name>(obj, other)`` where it is Python code; ``__ne__`` inherited from ``object`` is
    ``not __eq__`` (NotImplemented passed through), as ``object.__ne__`` does."""
    result = builtin_calls.call_dunder(tx, obj, name, [other])
    if result is None and name == "__ne__" and getattr(_type_of_value(tx, obj), "__ne__", None) is object.__ne__:
        eq = builtin_calls.call_dunder(tx, obj, "__eq__", [other])
        if eq is not None and not (isinstance(eq, ConstantVariable) and eq.value is NotImplemented):
            return ConstantVariable(not truthiness(tx, eq))
        return eq
    return result


def _type_of_value(tx, v):
    return type_checks.python_type_of(tx, v)


def _eq_is_identity(tx, v, user_eq=False):
    """Whether ``==`` on ``v`` is identity: a function, or an object whose type keeps ``object``'s ``__eq__`` and
    ``__ne__`` (a builtin iterator, a generator). With ``user_eq``, a Python ``__eq__`` that returned
    NotImplemented also falls back to identity."""
    if isinstance(v, (UserFunctionVariable, TorchFunctionVariable, BuiltinVariable, IteratorVariable,
                      GeneratorVariable)):
        return True
    if not isinstance(v, (NNModuleVariable, PythonObjectVariable, ObjectVariable)):
        return False
    cls = _type_of_value(tx, v)
    if user_eq:
        return all(getattr(cls, name) is getattr(object, name) or isinstance(getattr(cls, name), types.FunctionType)
                   for name in ("__eq__", "__ne__"))
    return cls.__eq__ is object.__eq__ and cls.__ne__ is object.__ne__


def _no_identity(tx, v, reason):
    return None


#: ``identity(tx, v)``: a key equal for two VTs exactly when they are one live object (``a is b``), or ``None``
#: where the trace does not know the object's identity (values rebuilt per use: tuples, slices, ranges ...).
IDENTITY = Protocol("identity", _no_identity)
IDENTITY.rule(TensorVariable)(lambda tx, v: ("tensor", v.tid))
IDENTITY.rule(ListVariable, DictVariable, ObjectVariable, IteratorVariable, GeneratorVariable, SetVariable,
              DequeVariable)(
    lambda tx, v: ("heap", v.oid))
IDENTITY.rule(NNModuleVariable)(lambda tx, v: ("obj", id(v.module)))
IDENTITY.rule(PythonObjectVariable, ConstantVariable)(lambda tx, v: ("obj", id(v.value)))
IDENTITY.rule(UserFunctionVariable, TorchFunctionVariable, BuiltinVariable)(lambda tx, v: ("obj", id(v.fn)))
IDENTITY.refuse("an immutable value made in the trace has no identity of its own (tuples: _identical_tuples)",
                TupleVariable, SliceVariable, RangeVariable)
IDENTITY.refuse("a function, partial or bound method made in the trace: identity not tracked",
                NestedFunctionVariable, PartialVariable, UserMethodVariable, TensorMethodVariable,
                ContainerMethodVariable)
IDENTITY.refuse("a context object, iterator over live data or super() made in the trace: identity not tracked",
                *CONTEXT_VALUES, LiveIteratorVariable, SuperVariable)
IDENTITY.refuse("not a Python value (an internal stack or cell marker)", *INTERNAL)
IDENTITY.refuse("an argument is wrapped on its first read, before any `is`", LazyArgument)
IDENTITY.refuse("an ndarray of the trace: its identity is not tracked", NumpyArrayVariable)
IDENTITY.refuse("a dict view is made anew by each keys()/values()/items() call: identity not tracked",
                DictViewVariable)


def identical(tx, a, b) -> bool:
    """``a is b`` at trace time."""
    ka, kb = IDENTITY(tx, a), IDENTITY(tx, b)
    if ka is None or kb is None:
        if isinstance(a, TupleVariable) and isinstance(b, TupleVariable):
            return _identical_tuples(tx, a, b)
        if _maybe_one_number(a, b) or _maybe_one_number(b, a):
            tx.unsupported("unsupported_operator", "`is` between a symbolic number and a number: which objects "
                           "they are is not known (it runs for real)")
        if type(a) is not type(b):
            return False
        tx.unsupported("unsupported_operator", f"`is` between {a.python_type().__name__} values")
    if ka[0] == kb[0] == "obj" and (isinstance(a, PythonObjectVariable) or isinstance(b, PythonObjectVariable)):
        _guard_identity(tx, a, b, ka == kb)  # (an object made in the trace is no live one: no guard)
    return ka == kb


def _identical_tuples(tx, a, b) -> bool:
    """``a is b`` for two tuples: True for one VT (the rules that return a tuple itself, ``t[:]``, ``tuple(t)``, ``t +
    ()``, ``t * 1``, return its VT), for two reads of one source and for two empty tuples (CPython has one); False
    where they differ in length or in an item's identity; otherwise unknown (two tuples equal item by item may be one
    object or two), and the `is` runs for real."""
    if a is b or (a.source is not None and a.source == b.source):
        return True
    if a.cls is tuple and b.cls is tuple and not a.items and not b.items:
        return True  # CPython has one empty tuple (``() is ()``; ``case tuple(z)`` binds the subject itself)
    if a.cls is not b.cls or len(a.items) != len(b.items):
        return False
    for x, y in zip(a.items, b.items):
        kx, ky = IDENTITY(tx, x), IDENTITY(tx, y)
        if kx is not None and ky is not None and kx != ky:
            return False
    tx.unsupported("unsupported_operator", "`is` between two tuples of the same items: one object or two")


def _guard_identity(tx, a, b, same: bool) -> None:
    """Guard the answer of ``a is b`` where one side is a live object the builder guarded by its type alone (a
    sentinel, a config object): ``L['t'] is G['MISSING']`` (or ``is not``) where both were read from the frame,
    else the identity of the one that was. Two values of different types are never one (their types are guarded):
    ``obj is None`` needs no guard but obj's type."""
    if type(getattr(a, "value", None)) is not type(getattr(b, "value", None)):
        return
    if a.source is not None and b.source is not None:
        tx.add_guard(Guard(a.source, "SAME" if same else "NOT_SAME", b.source))
        return
    for var in (a, b):
        if var.source is not None and isinstance(var, PythonObjectVariable):
            tx.add_guard(Guard(var.source, "ID", id(var.value)))
            tx.keepalive.append(var.value)


def _maybe_one_number(a, b) -> bool:
    """Whether ``a`` is a symbolic number and ``b`` a number that may be the same object (an int that became
    symbolic after it changed between calls and the constant 1 read from a list are one object in eager when they
    are the same small int, or the same list item)."""
    return isinstance(a, SymNodeVariable) and isinstance(b, ConstantVariable) and \
        type(b.value) in (int, float, bool)


_ABSENT = object()


def _equal_is_identical(tx, var) -> bool:
    """Whether ``var == other`` is ``var is other`` for any ``other`` that does not override ``==`` itself: an
    object (live, or made in the trace) whose class keeps ``object``'s ``__eq__``."""
    return isinstance(var, (PythonObjectVariable, ObjectVariable)) and \
        type_checks.python_type_of(tx, var).__eq__ is object.__eq__


def _scalar(var) -> bool:
    """A builtin scalar constant: its ``__eq__`` answers NotImplemented to a foreign object (so ``==`` is ``is``)."""
    return isinstance(var, ConstantVariable) and type(var.value) in (int, float, str, bytes, bool, type(None))


def contains(tx, container, item) -> bool:
    """``item in container`` at trace time (Unsupported when it reads tensor data)."""
    tensor_key = live_dicts.key_of(tx, container, item)
    if tensor_key is not None:  # p in self.state
        return live_dicts.contains(tx, container, tensor_key)
    result = builtin_calls.call_dunder(tx, container, "__contains__", [item])
    if result is not None:
        return truthiness(tx, result)
    if isinstance(container, NNModuleVariable) and isinstance(container.module, (torch.nn.ModuleDict,
                                                                                   torch.nn.ParameterDict)):
        registry = "_modules" if isinstance(container.module, torch.nn.ModuleDict) else "_parameters"
        keys = getattr(container.module, registry)
        if container.source is not None:
            tx.add_guard(Guard(AttrSource(container.source, registry), "KEYS", tuple(keys)))
        return known.const_value(tx, item) in keys
    if isinstance(container, DictViewVariable):
        if container.kind == "keys":
            return contains(tx, container.mapping, item)
        return contains(tx, TupleVariable(known.view_items(tx, container)), item)
    if isinstance(container, DictVariable):
        key = known.hash_key(tx, item, container)
        found = tx.dict_lookup(container, key, _ABSENT) is not _ABSENT
    elif isinstance(container, SetVariable):
        key = known.hash_key(tx, item)
        try:
            found = key in tx.set_values(container)
        except TypeError as e:  # an unhashable item: Python's error
            tx.user_error(e)
    elif isinstance(container, (TupleVariable, ListVariable)) and _equal_is_identical(tx, item) and \
            all(_equal_is_identical(tx, v) or _scalar(v) for v in known.sequence_items(tx, container)):
        # (_FIELD_CLASSVAR, _FIELD_INITVAR) holding sentinels: == of objects no class in it overrides is `is`
        found = any(identical(tx, item, v) for v in known.sequence_items(tx, container))
    elif isinstance(container, TensorVariable) or isinstance(item, TensorVariable):
        if isinstance(container, TensorVariable):
            tx.unsupported("data_dependent", "`in` on a tensor reads its values")
        found = any(identical(tx, item, v) for v in known.sequence_items(tx, container)
                    if isinstance(v, TensorVariable))
        if not found and any(isinstance(v, TensorVariable) for v in known.sequence_items(tx, container)):
            tx.unsupported("data_dependent", "`in` compares a tensor by value")
    else:
        try:
            found = known.const_value(tx, item) in known.const_value(tx, container)
        except TypeError as e:  # ([k] in frozenset({1}): unhashable): Python's error, from the real step
            tx.user_error(e, traceable=False)
    return found
