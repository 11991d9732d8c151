"""Guards: conditions on the caller's world under which a compiled plan is valid.

A :class:`Guard` is a frozen record ``(source, kind, expected)``. All guards of
one cache entry compile to a single Python function whose source can be
printed (``CacheEntry.guard_source``)::

    def ___guard(L, G, F):
        s0 = L['x']
        if not ___tensor_ok(s0, ___c[0]): return False
        s1 = L['n']
        if not (type(s1) is int and s1 == 3): return False
        return True

Every source is evaluated once per check (it is bound to a local ``sN``); a
guard whose source can no longer be evaluated (an attribute was deleted) fails
instead of raising. Guards come from the snapshot taken when a value entered
the trace (DESIGN invariant 5), never from its state after the traced code
mutated it.

Kinds (:data:`GUARD_KINDS` holds each one's check code and readable text):

=============  ==========================================================
``TYPE``       ``type(v) is expected`` (a class)
``WEAK_TYPE``  ``type(v) is expected()``: a class written in Python, held through a
               weak reference (:func:`held_weakly`)
``ID``         ``id(v) == expected`` (modules, functions, classes)
``EQUALS``     ``type(v) is type(expected) and v == expected`` (constants)
``IS``         ``v is expected`` (None, True, False, Ellipsis)
``LEN``        ``len(v) == expected`` (lists, tuples)
``KEYS``       ``list(v.keys()) == expected`` (dicts)
``HAS_KEY``    ``(key in v) is present`` (a dict the trace only looked a key up in)
``HAS_ITEM``   ``(<key source> in v) is present`` (a live dict looked up by a tensor key)
``TENSOR``     type, dtype, device, shape, stride, storage offset,
               requires_grad, is_leaf and view-ness as at entry (a ``None``
               size or stride is symbolic: the ``SHAPE`` guard checks it)
``SHAPE``      the ShapeEnv's guards on symbolic sizes, over the inputs' entry
               snapshots (``2 <= L['x'].size()[0]``)
``NO_HOOKS``   the module has no forward hooks or pre-hooks
``HOOKS``      the module's forward hooks and pre-hooks are the same objects
``STALE_VIEW`` whether a view input is one autograd treats as a leaf
               (``compat.is_stale_view``)
``SAME``       ``v is <other source>`` (one object reached two ways)
``ALIASING``   the storage-sharing pattern among argument tensors
``GLOBAL``     a global torch state (grad mode, default dtype)
=============  ==========================================================
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import builtins
import math
import re
import sys
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .. import compat
from .source import (AttrSource, BaseItemSource, BuiltinsSource, CallSource, DefaultSource, GetItemSource,
                     GlobalSource, GlobalsSource, KeyedItemSource, LiftedSource, ModuleMemberSource, SizeSource, Source)


@dataclass(frozen=True, slots=True)
class Guard:
    """One condition: ``kind`` (a key of :data:`GUARD_KINDS`) applied to the value at ``source`` (``None`` for
    global-state guards). ``origin`` is the user's ``file:line`` being traced when the guard was installed
    (``None`` for the guards every entry has); it is not part of the condition."""

    source: Source | None
    kind: str
    expected: Any = None
    origin: str | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple:
        src = self.source.name if self.source is not None else ""
        exp = self.expected
        if self.kind in ("SAME", "NOT_SAME"):
            exp = exp.name
        elif self.kind == "HAS_ITEM":
            exp = (exp[0].name, exp[1])
        elif self.kind in ("TENSOR", "ALIASING", "SHAPE"):
            exp = repr(exp)
        return (src, self.kind, exp if _hashable(exp) else repr(exp))


def describe(guard: Guard) -> str:
    """A guard as a readable Python-like expression, with the user's line that installed it (for reports and
    recompilation messages)."""
    if guard.kind not in GUARD_KINDS:
        raise ValueError(f"unknown guard kind {guard.kind}")
    name = guard.source.name if guard.source is not None else ""
    try:
        text = user_names(GUARD_KINDS[guard.kind].text(name, guard.expected))
    except ValueError:  # (an expected value with no text: an int past sys.get_int_max_str_digits(), test_int)
        text = f"{name}: {guard.kind} guard on a {type(guard.expected).__name__} too large to print"
    return text if guard.origin is None else f"{text}  (from {guard.origin})"


_RESUMED = re.compile(r"L\['(\d+:(?:cell:)?[^']+)'\]")


def user_names(text: str) -> str:
    """Guard text with the names of a resumed call stack as a user reads them, as torch.compile's resume
    functions name them: ``L['0:y']`` (local ``y`` of frame 0) is ``L['y']``, ``L['0:stack:4']`` (slot 4 of its
    value stack) is ``L['___stack4']``. The guard code itself keeps the full names."""
    return _RESUMED.sub(lambda match: f"L[{_user_local(match.group(1))!r}]", text)


def _user_local(local: str) -> str:
    """A name of a resumed call stack without its frame (``'0:y'`` is ``'y'``), a stack slot as torch names
    it (``'0:stack:4'`` is ``'___stack4'``; see ``runtime/live.stack_name``)."""
    parts = local.split(":")
    if len(parts) == 3 and parts[1] == "stack":
        return "___stack" + parts[2]
    return parts[1] if len(parts) == 3 and parts[1] == "yields" else parts[-1]


#: Types whose ``repr`` runs no code of the user's (a recompilation message may show them by it).
_PLAIN_REPR = frozenset({int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type, torch.dtype,
                         torch.device, torch.layout, torch.memory_format, torch.Size, types.FunctionType,
                         types.BuiltinFunctionType})


def _plain_repr(value: Any, depth: int = 0) -> bool:
    """Whether ``repr(value)`` runs no code of the user's: a value of :data:`_PLAIN_REPR`, or a small builtin
    container of them (a class's own ``__repr__`` does; so does a class's metaclass's, unless it is ``type``)."""
    cls = type(value)
    if cls in _PLAIN_REPR:
        return True
    if cls in (tuple, list, set, frozenset) and depth < 2 and len(value) <= 16:
        return all(_plain_repr(v, depth + 1) for v in value)
    if cls is dict and depth < 2 and len(value) <= 16:
        return all(_plain_repr(k, depth + 1) and _plain_repr(v, depth + 1) for k, v in value.items())
    return False


def actual(value: Any) -> str:
    """A live value as a recompilation message shows it beside the guard it failed: a tensor by what a
    TENSOR guard compares, a value whose ``repr`` runs no user code (:func:`_plain_repr`) by its (shortened) repr
    and type, anything else by its type alone. Eager runs no ``__repr__`` and reads no ``__class__`` of an
    argument: neither does a recompilation (issue 11 item 4; the type is ``type(value)``, not ``value.__class__``)."""
    if issubclass(type(value), torch.Tensor):
        strided = value.layout == torch.strided
        return (f"a {type(value).__name__}(dtype={value.dtype}, device={value.device}, shape={tuple(value.shape)}, "
                f"stride={tuple(value.stride()) if strided else None}, requires_grad={value.requires_grad}, "
                f"is_leaf={compat.is_leaf(value)})")
    text = repr(value) if _plain_repr(value) else f"<{type(value).__name__} object>"
    if len(text) > 80:
        text = text[:77] + "..."
    return text if type(value) in (int, float, bool, str, type(None)) else f"{text} ({type(value).__name__})"


def _hashable(x: Any) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


def tensor_signature(t: torch.Tensor, symbolic_sizes: tuple = (), symbolic_strides: tuple = ()) -> tuple:
    """What a TENSOR guard compares: type, dtype, device, shape, stride, storage offset, requires_grad, is_leaf, is-view.

    The sizes and strides at the positions flagged in ``symbolic_sizes`` / ``symbolic_strides`` are ``None``:
    symbolic ones, which the ``SHAPE`` guard checks.
    """
    strided = t.layout == torch.strided
    shape = tuple(t.shape)
    stride = tuple(t.stride()) if strided else None
    if any(symbolic_sizes):
        shape = tuple(None if d else n for n, d in zip(shape, symbolic_sizes))
    if any(symbolic_strides) and stride is not None:
        stride = tuple(None if d else n for n, d in zip(stride, symbolic_strides))
    return (
        type(t),
        t.dtype,
        t.device,
        shape,
        stride,
        t.storage_offset() if strided else 0,
        t.requires_grad,
        compat.is_leaf(t),
        t._base is not None,
    )


def is_symbolic_signature(expected: tuple) -> bool:
    """Whether a TENSOR guard's signature leaves some size or stride to the SHAPE guard."""
    return None in expected[3] or (expected[4] is not None and None in expected[4])


def _dims_ok(actual: tuple, expected: tuple) -> bool:
    return len(actual) == len(expected) and all(e is None or a == e for a, e in zip(actual, expected))


def _tensor_symbolic_ok(t: Any, expected: tuple) -> bool:
    """``_tensor_ok`` for a signature with symbolic (``None``) sizes or strides."""
    if type(t) is not expected[0]:
        return False
    strided = t.layout == torch.strided
    return (
        t.dtype is expected[1]
        and t.device == expected[2]
        and _dims_ok(tuple(t.shape), expected[3])
        and ((expected[4] is None and not strided) or (strided and _dims_ok(t.stride(), expected[4])))
        and (t.storage_offset() if strided else 0) == expected[5]
        and t.requires_grad is expected[6]
        and compat.is_leaf(t) is expected[7]
        and (t._base is not None) is expected[8]
    )


def _tensor_ok(t: Any, expected: tuple) -> bool:
    if type(t) is not expected[0]:
        return False
    strided = t.layout == torch.strided
    return (
        t.dtype is expected[1]
        and t.device == expected[2]
        and t.shape == expected[3]
        and (t.stride() if strided else None) == expected[4]
        and (t.storage_offset() if strided else 0) == expected[5]
        and t.requires_grad is expected[6]
        and compat.is_leaf(t) is expected[7]
        and (t._base is not None) is expected[8]
    )


def _extras_check(v: str, signature: tuple) -> str:
    """What torch's C++ tensor check does not compare, for the (strided) tensor at local ``v`` with
    ``tensor_signature`` ``signature``: storage offset, being a view, ``is_leaf``. Written out per tensor, with
    no call of a Python function: this runs on every call of a model with hundreds of parameters.

    ``is_leaf`` is read only where it says something: a tensor that is no view and requires no grad (which the C++
    check compares) is a leaf (its grad_fn would make it require grad), and of a tensor that is no view
    ``t.is_leaf`` makes nothing; a view's is read through :func:`compat.is_leaf` (reading it may make its
    grad_fn, or raise)."""
    offset, requires_grad, leaf, view = signature[5], signature[6], signature[7], signature[8]
    if view:
        return f"{v}.storage_offset() == {offset} and {v}._base is not None and ___is_leaf({v}) is {leaf!r}"
    check = f"{v}.storage_offset() == {offset} and {v}._base is None"
    return check if not requires_grad and leaf else f"{check} and {v}.is_leaf is {leaf!r}"


def tensor_examples(guards: list[Guard], L: dict, G: dict, F: Any) -> list | None:
    """The live tensors the ``TENSOR`` guards describe, evaluated on the ``L, G, F`` they were traced from,
    or ``None`` when one cannot be evaluated or no longer matches its guard."""
    gen = GuardCodegen()
    body: list[str] = []
    for guard in guards:
        if guard.kind != "TENSOR":
            continue
        v = gen.ref(guard.source)
        body.extend(gen.lines)
        gen.lines = []
        body.append(f"___found.append({v})")
    try:
        found = _collect(gen, body, "tensor examples", L, G, F)
    except Exception:
        return None
    expected = [g.expected for g in guards if g.kind == "TENSOR"]
    if len(found) != len(expected) or any(not _tensor_symbolic_ok(t, e) if is_symbolic_signature(e) else
                                           tensor_signature(t) != e for t, e in zip(found, expected)):
        return None
    return found


def aliasing_pattern(tensors: tuple) -> tuple:
    """For each tensor, the index of the first tensor sharing its storage (its own index if none)."""
    seen: dict[tuple, int] = {}
    pattern = []
    for i, t in enumerate(tensors):
        key = compat.storage_key(t)
        pattern.append(i if key is None else seen.setdefault(key, i))
    return tuple(pattern)


def hook_ids(m: torch.nn.Module) -> tuple:
    """Identity of a module's forward pre-hooks and forward hooks, in call order, and whether it has backward
    hooks (the HOOKS guard: a module call traced without them runs for real once one is registered)."""
    return (tuple((id(h), k in m._forward_pre_hooks_with_kwargs) for k, h in m._forward_pre_hooks.items()),
            tuple((id(h), k in m._forward_hooks_with_kwargs) for k, h in m._forward_hooks.items()),
            bool(m._backward_hooks or m._backward_pre_hooks))


#: Globals dicts that are no module's ``__dict__`` in ``sys.modules`` (code run by ``exec`` or ``runpy``, a
#: module under a name that another module holds), by the key :func:`globals_key` gave them. Held for good:
#: the plans that read them keep their functions (and so these dicts) alive anyway.
_NAMESPACES: dict[str, dict] = {}


def globals_key(globals_: dict) -> str:
    """The key ``___module_globals(key)`` finds the globals dict ``globals_`` by, in guards, fetches and
    rebuilt frames: its module's name where ``sys.modules`` holds that very dict, else a key of its own
    (a name alone would find another module's globals, or none: issue 11's ``NameError: name 'np'``)."""
    name = globals_.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is not None and getattr(module, "__dict__", None) is globals_:
        return name
    key = f"{name}@{id(globals_):x}"
    _NAMESPACES.setdefault(key, globals_)
    return key


def _module_globals(key: str) -> dict:
    namespace = _NAMESPACES.get(key)
    return namespace if namespace is not None else sys.modules[key].__dict__


def builtins_of(globals_: dict) -> dict:
    """The builtins namespace that code run with ``globals_`` looks a name up in when ``globals_`` lacks it: its
    ``__builtins__`` (a module's dict, or a dict), the ``builtins`` module's when it has none (CPython takes a
    function's at its creation, from its globals' ``__builtins__``: ``function.__builtins__``). Read by the trace's
    ``LOAD_GLOBAL``, the real steps' and the ``BuiltinsSource`` guards, so all three find what the user's code finds
    (not the copy stillframe's own code runs with, ``own_builtins``, unless the code is stillframe's)."""
    table = globals_.get("__builtins__", builtins)
    return table if isinstance(table, dict) else vars(table)


class OwnRef(weakref.ref):
    """A weak reference of stillframe's own (a cache entry watching an object it guards by identity, a routed
    optimizer): unlike the user's, it makes no one see when its object is collected (:func:`has_finalizer`)."""

    __slots__ = ()


def held_weakly(value: Any) -> bool:
    """Whether a cache entry holds ``value``, an object of the caller's that a guard or a rebuild names, through a
    weak reference: a function, or a class written in Python (not stillframe's own) or an instance of one that
    supports weak references. A cache entry holds no strong reference to the caller's objects
    (``runtime/entry.py``): eager holds none, so one would outlive eager's (a class made per call kept by a TYPE
    guard, its ``weakref.ref`` callback never run: test_weakref test_callback_in_cycle_resurrection)."""
    cls = type(value)
    if cls is types.FunctionType:
        return True
    is_class = issubclass(cls, type)  # (by its exact type: reads no __class__)
    owner = value if is_class else cls
    module = type.__dict__["__dict__"].__get__(owner).get("__module__")
    return bool(owner.__flags__ & _HEAPTYPE) and (is_class or cls.__weakrefoffset__ != 0) and \
        not (isinstance(module, str) and module.startswith("stillframe."))


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type()), not by C


def weak_type_guards(guards: list[Guard]) -> list[Guard]:
    """``guards`` as a cache entry keeps them: each ``TYPE`` guard on a class :func:`held_weakly` becomes a
    ``WEAK_TYPE`` guard, which fails once the class is gone (and the entry watches it: :func:`identity_checked`)."""
    return [Guard(g.source, "WEAK_TYPE", OwnRef(g.expected), g.origin) if g.kind == "TYPE" and
            held_weakly(g.expected) else g for g in guards]


def _class_name(ref: OwnRef) -> str:
    cls = ref()
    return "a class collected since" if cls is None else getattr(cls, "__qualname__", repr(cls))


_NOT_WATCHED = (type, types.ModuleType, types.FunctionType, types.CodeType, torch.Tensor)


def _observed_collection(value: Any) -> bool:
    """Whether someone other than stillframe and torch holds a weak reference to ``value`` (a ``weakref.ref``, a
    ``WeakValueDictionary`` or ``WeakSet`` entry, a ``weakref.finalize``): they see the moment it is collected.
    Classes, modules, functions and tensors are left out: CPython's subclass lists and ``abc`` caches, and torch's
    own caches (fake-tensor memos, ``torch.compile``'s, ``boolean_dispatched``), refer to them weakly, none but a tensor
    dies with a frame's reference, and telling the user's weak references to a tensor from torch's costs a scan per
    tensor per call. A bound method (Python's or C's, ``lst.append``) is watched: each is a new object, which dies
    with the frame's reference (test_weakref test_cfunction: ``del f`` left ``weakref.ref(f)()`` alive)."""
    if not weakref.getweakrefcount(value) or issubclass(type(value), _NOT_WATCHED):  # (reads no __class__)
        return False
    if issubclass(type(value), types.BuiltinFunctionType) and \
            issubclass(type(value.__self__), (types.ModuleType, type(None))):
        return False  # a module's C function (torch.zeros), not a bound method: it lives on in its module
    for ref in weakref.getweakrefs(value):
        if type(ref) is OwnRef or type(ref).__module__.startswith("torch"):
            continue
        if type(ref) in (weakref.ProxyType, weakref.CallableProxyType):
            return True  # a weakref.proxy: its attributes are its referent's (no __callback__ to read), the user's
        callback = ref.__callback__
        # (a finalize is its weak reference's callback: its function's module counts; by type: the user's
        # callback's __class__ is not read)
        if issubclass(type(callback), weakref.finalize):
            info = callback.peek()
            callback = info[1] if info is not None else None
        owner = getattr(callback, "__module__", None) or ""
        if not owner.startswith(("torch.", "stillframe.")):
            return True
    return False


def has_finalizer(value: Any) -> bool:
    """Whether collecting ``value`` runs code or is seen by the user's code: its type has ``__del__`` (a class of
    the user's that defines it, a generator, whose ``close()`` runs its ``finally`` and ``__exit__`` blocks, a file
    object ...), or the user holds a weak reference to it (a callback runs, ``ref()`` turns None, a weak
    container loses the entry)."""
    return getattr(type(value), "__del__", None) is not None or _observed_collection(value)


def finalizer_names(L: dict) -> frozenset:
    """The names of the live values in ``L`` that run code when collected (:func:`has_finalizer`)."""
    count = weakref.getweakrefcount
    return frozenset(name for name, value in L.items() if getattr(type(value), "__del__", None) is not None or
                     (count(value) and _observed_collection(value)))


def _global_hooks_empty() -> bool:
    from torch.nn.modules import module as _m

    return not (_m._global_forward_hooks or _m._global_forward_pre_hooks or _m._global_backward_hooks or
                _m._global_backward_pre_hooks)


def keyed_item(mapping: dict, key: Any) -> Any:
    """``mapping[key]`` without a ``defaultdict``'s ``__missing__`` (KeyedItemSource): ``KeyError`` if absent."""
    value = dict.get(mapping, key, _ABSENT)
    if value is _ABSENT:
        raise KeyError(key)
    return value


_ABSENT = object()


class GuardCodegen:
    """Renders sources as local variables of a generated function, each evaluated once."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, str] = {}
        self.consts: list[Any] = []

    def const(self, value: Any) -> str:
        self.consts.append(value)
        return f"___c[{len(self.consts) - 1}]"

    def ref(self, source: Source) -> str:
        key = source.name
        if key in self.names:
            return self.names[key]
        if isinstance(source, AttrSource):
            base = self.ref(source.base)
            expr = f"{base}.{source.attr}" if source.attr.isidentifier() else f"getattr({base}, {source.attr!r})"
        elif isinstance(source, LiftedSource):
            kwargs = "".join(f", {k}={self.const(v)}" for k, v in source.kwargs)
            expr = f"{self.const(source.factory)}(*{self.const(source.args)}{kwargs})"
        elif isinstance(source, SizeSource):
            expr = f"{self.ref(source.base)}.{source.method}()[{source.index}]"
        elif isinstance(source, CallSource):
            expr = f"{self.const(source.fn)}({self.ref(source.base)})"
        elif isinstance(source, ModuleMemberSource):
            expr = f"{self.ref(source.base)}.{source.registry}[{source.attr!r}]"
        elif isinstance(source, GetItemSource):
            index = source.index
            literal = type(index) in (int, str, bool, float, type(None)) or isinstance(index, slice)
            subscript = repr(index) if literal else self.const(index)
            expr = f"{self.ref(source.base)}[{subscript}]"
        elif isinstance(source, BaseItemSource):
            index = "" if source.index is None else f", {source.index!r}"
            method = "copy" if source.index is None else "__getitem__"
            expr = f"{self.const(source.builtin)}.{method}({self.ref(source.base)}{index})"
        elif isinstance(source, KeyedItemSource):
            expr = f"{self.const(keyed_item)}({self.ref(source.base)}, {self.ref(source.key)})"
        elif isinstance(source, GlobalSource) and source.module is not None:
            expr = f"{self._module_dict(source.module)}[{source.global_name!r}]"
        elif isinstance(source, GlobalsSource):
            return "G" if source.module is None else self._module_dict(source.module)
        elif isinstance(source, BuiltinsSource):
            expr = f"___builtins({self.ref(GlobalsSource(source.module))})"
        elif isinstance(source, DefaultSource):
            attr = "__kwdefaults__" if source.kwonly else "__defaults__"
            expr = f"{self.ref(source.function)}.{attr}[{source.index!r}]"
        else:
            expr = source.name
        name = f"s{len(self.names)}"
        self.names[key] = name
        self.lines.append(f"{name} = {expr}  # {key}")
        return name

    def _module_dict(self, module: str) -> str:
        """A name bound once to ``sys.modules[module].__dict__`` (shared by every global read from it)."""
        key = f"___module_globals({module!r})"
        if key not in self.names:
            self.names[key] = f"s{len(self.names)}"
            self.lines.append(f"{self.names[key]} = {key}")
        return self.names[key]

    def namespace(self) -> dict:
        return {
            "___c": self.consts,
            "___actual": actual,
            "___tensor_ok": _tensor_ok,
            "___tensor_symbolic_ok": _tensor_symbolic_ok,
            "___is_leaf": compat.is_leaf,
            "___is_stale_view": compat.is_stale_view,
            "___aliasing": aliasing_pattern,
            "___hook_ids": hook_ids,
            "___global_hooks_empty": _global_hooks_empty,
            "___default_device": compat.default_device_context,
            "___finalizer_names": finalizer_names,
            "___module_globals": _module_globals,
            "___builtins": builtins_of,
            "___same_value": same_value,
            "torch": torch,
            "math": math,  # the ShapeEnv's guards on a float say math.isnan(...)
        }


def _condition(gen: GuardCodegen, guard: Guard) -> str:
    if guard.kind not in GUARD_KINDS:
        raise ValueError(f"unknown guard kind {guard.kind}")
    v = gen.ref(guard.source) if guard.source is not None else ""
    return GUARD_KINDS[guard.kind].check(gen, v, guard.expected)


def _literal(gen: GuardCodegen, value: Any) -> str:
    """``value`` as Python source when its repr is exact, else a reference to it as a constant (an int past
    ``sys.get_int_max_str_digits()`` has no repr, nor could the guard's source spell it)."""
    if type(value) in (int, str, bool, bytes):
        try:
            return repr(value)
        except ValueError:
            pass
    return gen.const(value)


def _equals(gen: GuardCodegen, v: str, value: Any) -> str:
    """``v == value``, where a NaN float equals a NaN (as torch.compile guards a specialized NaN: the plan traced
    for it serves the next NaN, which ``==`` never would), and a zero float equals a zero of its sign only."""
    if type(value) is float and math.isnan(value):
        return f"math.isnan({v})"
    if type(value) is float and value == 0.0:  # -0.0 == 0.0, but str(), copysign and 1 / x tell them apart
        return f"({v} == 0.0 and math.copysign(1.0, {v}) == {math.copysign(1.0, value)!r})"
    if type(value) in (int, str, bool, bytes, float, type(None)):
        return f"{v} == {_literal(gen, value)}"
    return f"___same_value({v}, {gen.const(value)})"


def same_value(a: Any, b: Any) -> bool:
    """Whether two constants are one value to the program: ``==``, and also of one type all through (``(1, 2) ==
    (1.0, 2)``, ``slice(1, 2) == slice(True, 2)``), with a NaN equal to a NaN and a zero of one sign only
    (``complex(-0.0, 1) == 1j``: a plan traced for one served the other, CPython's test_complex)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1.0, a) == math.copysign(1.0, b))
    if type(a) is complex:
        return same_value(a.real, b.real) and same_value(a.imag, b.imag)
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if type(a) is slice:
        return same_value((a.start, a.stop, a.step), (b.start, b.stop, b.step))
    if type(a) in (frozenset, set):
        return len(a) == len(b) and all(any(same_value(x, y) for y in b) for x in a)
    return bool(a == b)


@dataclass(frozen=True)
class GuardKind:
    """One kind of guard: ``check(gen, v, expected)`` renders the condition on the source's local ``v`` as
    Python; ``text(name, expected)`` says it for a person (``name`` is the source, e.g. ``L['x']``)."""

    check: Callable[[GuardCodegen, str, Any], str]
    text: Callable[[str, Any], str]


#: Global states a ``GLOBAL`` guard can pin: name -> (check, text) of the state's value.
GLOBAL_STATES: dict[str, GuardKind] = {
    "grad_enabled": GuardKind(lambda gen, v, value: f"torch.is_grad_enabled() is {value!r}",
                              lambda name, value: f"torch.is_grad_enabled() == {value}"),
    "default_dtype": GuardKind(lambda gen, v, value: f"torch.get_default_dtype() is {gen.const(value)}",
                               lambda name, value: f"torch.get_default_dtype() == {value}"),
    "autocast_cpu": GuardKind(
        lambda gen, v, value: f"(torch.is_autocast_enabled('cpu'), torch.get_autocast_dtype('cpu')) == "
                              f"{gen.const(value)}",
        lambda name, value: f"(torch.is_autocast_enabled('cpu'), torch.get_autocast_dtype('cpu')) == {value}"),
    "default_device": GuardKind(lambda gen, v, value: f"___default_device() == {gen.const(value)}",
                                lambda name, value: f"the torch.device context is {value}"),
    "inference_mode": GuardKind(lambda gen, v, value: f"torch.is_inference_mode_enabled() is {value!r}",
                                lambda name, value: f"torch.is_inference_mode_enabled() == {value}"),
    "global_hooks": GuardKind(lambda gen, v, value: "___global_hooks_empty()",
                              lambda name, value: "no global module hooks"),
    # a query of process-wide state folded into the trace (effects.GUARDED_QUERIES): (checker, its constant
    # arguments, the value it returned)
    "query": GuardKind(lambda gen, v, value: f"{gen.const(value[0])}(*{gen.const(value[1])}) == {gen.const(value[2])}",
                       lambda name, value: f"{getattr(value[0], '__qualname__', value[0])}{value[1]!r} == {value[2]!r}"),
    # a resumed segment: which live values run code when collected (a generator, an object with __del__): the
    # trace breaks where it drops the last reference it holds to one of them (Tracer.watch_finalizers)
    "finalizers": GuardKind(lambda gen, v, value: f"___finalizer_names(L) == {gen.const(value)}",
                            lambda name, value: f"the live values run code when collected at "
                                                f"{sorted(_user_local(n) for n in value)}"),
    # a resumed segment: which locals of the call stack are bound (an ``if`` may have bound one only sometimes)
    "live_names": GuardKind(lambda gen, v, value: f"L.keys() == {gen.const(value)}",
                            lambda name, value: f"the live names are {sorted(_user_local(n) for n in value)}"),
}

#: What the call found, for the global states whose guard text names one expression: a recompile reason says
#: ``torch.is_grad_enabled() == True; got False`` (the checks above use the same expressions).
GLOBAL_ACTUALS: dict[str, str] = {
    "grad_enabled": "torch.is_grad_enabled()",
    "default_dtype": "torch.get_default_dtype()",
    "autocast_cpu": "(torch.is_autocast_enabled('cpu'), torch.get_autocast_dtype('cpu'))",
    "default_device": "___default_device()",
    "inference_mode": "torch.is_inference_mode_enabled()",
}


def _tensor_check(gen: GuardCodegen, v: str, exp: tuple) -> str:
    if is_symbolic_signature(exp):
        return f"___tensor_symbolic_ok({v}, {gen.const(exp)})"
    return f"___tensor_ok({v}, {gen.const(exp)})"


def _shape_check(gen: GuardCodegen, v: str, exp: tuple) -> str:
    """The ShapeEnv's expression with each ``___t{i}`` replaced by the local bound to the i-th source."""
    sources, expr = exp
    return _SHAPE_NAME.sub(lambda m: gen.ref(sources[int(m.group(1))]), expr)


def _shape_text(name: str, exp: tuple) -> str:
    sources, expr = exp
    return _SHAPE_NAME.sub(lambda m: sources[int(m.group(1))].name, expr)


_SHAPE_NAME = re.compile(r"___t(\d+)\b")


def _tensor_text(name: str, exp: tuple) -> str:
    cls, dtype, device, shape, stride, offset, rg, leaf, view = exp
    if is_symbolic_signature(exp):  # a symbolic size or stride reads "?": the SHAPE guards say what it may be
        shape, stride = (None if t is None else "(" + ", ".join("?" if n is None else str(n) for n in t)
                         + ("," if len(t) == 1 else "") + ")" for t in (shape, stride))
    return (f"{name} is a {cls.__name__}(dtype={dtype}, device={device}, shape={shape}, stride={stride}, "
            f"storage_offset={offset}, requires_grad={rg}, is_leaf={leaf}, is_view={view})")


#: ``id`` of each container a graph break's stand-in iterates with CPython's own iterator, and how many do
#: (``variables.standins.ResumableIterator._real``): a trace changing such a dict's keys runs the change for real.
ITERATED: dict = {}


def is_iterated(container: Any) -> bool:
    """Whether a live stand-in iterates ``container`` with CPython's own iterator (the ``ITERATED`` guard)."""
    return id(container) in ITERATED


#: Every guard kind: the one place its check code and its readable text are written.
GUARD_KINDS: dict[str, GuardKind] = {
    "TYPE": GuardKind(lambda gen, v, exp: f"type({v}) is {gen.const(exp)}",
                      lambda name, exp: f"type({name}) is {getattr(exp, '__qualname__', exp)}"),
    "WEAK_TYPE": GuardKind(lambda gen, v, exp: f"type({v}) is {gen.const(exp)}()",
                           lambda name, exp: f"type({name}) is {_class_name(exp)}"),
    "ID": GuardKind(lambda gen, v, exp: f"id({v}) == {exp}",
                    lambda name, exp: f"{name} is the object seen when tracing (id {exp})"),
    "EQUALS": GuardKind(lambda gen, v, exp: f"type({v}) is {gen.const(type(exp))} and {_equals(gen, v, exp)}",
                        lambda name, exp: f"{name} == {exp!r}"),
    "IS": GuardKind(lambda gen, v, exp: f"{v} is {exp!r}", lambda name, exp: f"{name} is {exp!r}"),
    "LEN": GuardKind(lambda gen, v, exp: f"len({v}) == {exp}", lambda name, exp: f"len({name}) == {exp}"),
    # a symbolic float a plan computes ``math.floor`` / ``math.cos`` ... of, where eager raises on an infinity (the
    # ShapeEnv's symbols are finite by assumption: it cannot say this)
    "FINITE": GuardKind(lambda gen, v, exp: f"math.isfinite({v})", lambda name, exp: f"{name} is finite"),
    "KEYS": GuardKind(lambda gen, v, exp: f"list({v}.keys()) == {gen.const(list(exp))}",
                      lambda name, exp: f"list({name}.keys()) == {list(exp)!r}"),
    # (key, present): one lookup, for a dict the trace only looked a key up in
    "HAS_KEY": GuardKind(lambda gen, v, exp: f"{_literal(gen, exp[0])} {'in' if exp[1] else 'not in'} {v}",
                         lambda name, exp: f"({exp[0]!r} in {name}) is {exp[1]!r}"),
    # (key source, present): a live dict looked up by a live key (KeyedItemSource), ``in`` never calls __missing__
    "HAS_ITEM": GuardKind(lambda gen, v, exp: f"({gen.ref(exp[0])} {'in' if exp[1] else 'not in'} {v})",
                          lambda name, exp: f"({exp[0].name} in {name}) is {exp[1]!r}"),
    "TENSOR": GuardKind(_tensor_check, _tensor_text),
    # whether a loop iterates the dict with CPython's own iterator (a plan replaying a change of its keys must not)
    "ITERATED": GuardKind(lambda gen, v, exp: f"{gen.const(is_iterated)}({v}) is {exp!r}",
                          lambda name, exp: f"{name} is {'' if exp else 'not '}iterated by a loop across a break"),
    # whether a view input is stale (compat.is_stale_view), for a plan whose in-place op depends on it
    "STALE_VIEW": GuardKind(lambda gen, v, exp: f"___is_stale_view({v}) is {exp!r}",
                            lambda name, exp: f"{name} is {'' if exp else 'not '}a view that autograd treats as a "
                                              "leaf (made before its base took history)"),
    # (sources, an expression over ___t0, ___t1 ...): one of the ShapeEnv's guards on the inputs' symbolic sizes
    "SHAPE": GuardKind(_shape_check, _shape_text),
    "NO_HOOKS": GuardKind(lambda gen, v, exp: f"not ({v}._forward_hooks or {v}._forward_pre_hooks or "
                                              f"{v}._backward_hooks or {v}._backward_pre_hooks)",
                          lambda name, exp: f"{name} has no forward or backward hooks"),
    "HOOKS": GuardKind(lambda gen, v, exp: f"___hook_ids({v}) == {exp!r}",
                       lambda name, exp: f"{name} has the same forward hooks"),
    "SAME": GuardKind(lambda gen, v, exp: f"{v} is {gen.ref(exp)}", lambda name, exp: f"{name} is {exp.name}"),
    "NOT_SAME": GuardKind(lambda gen, v, exp: f"{v} is not {gen.ref(exp)}",
                          lambda name, exp: f"{name} is not {exp.name}"),
    "ALIASING": GuardKind(
        lambda gen, v, exp: f"___aliasing(({', '.join(gen.ref(s) for s in exp[0])},)) == {exp[1]!r}",
        lambda name, exp: f"storage sharing among {', '.join(s.name for s in exp[0])} is {exp[1]}"),
    "GLOBAL": GuardKind(lambda gen, v, exp: GLOBAL_STATES[exp[0]].check(gen, v, exp[1]),
                        lambda name, exp: GLOBAL_STATES[exp[0]].text(name, exp[1])),
}


def compile_guards(guards: list[Guard], verbose: bool = False,
                   examples: list | None = None) -> tuple[Callable[..., Any], str]:
    """Compile guards into ``check(L, G, F) -> bool`` and return it with its printable source.

    With ``verbose`` the function instead returns ``None`` when every guard
    holds and otherwise the text of the first one that fails (for
    recompilation reports).

    ``examples``: the live tensors the ``TENSOR`` guards describe, in their
    order (see :func:`tensor_examples`). With them the tensor checks are one
    call of torch's C++ check plus one tuple comparison for what it does not
    cover (storage offset, ``is_leaf``, being a view), instead of one Python
    call per tensor.
    """
    gen = GuardCodegen()
    body: list[str] = []
    batch = None
    if not verbose and examples:
        signatures = [g.expected for g in guards if g.kind == "TENSOR"]
        if any(is_symbolic_signature(e) for e in signatures):
            batch = compat.tensor_guards(examples, [list(e[3]) for e in signatures],
                                         [list(e[4]) if e[4] is not None else None for e in signatures])
        else:
            batch = compat.tensor_guards(examples)
    batched: list[str] = []
    for guard in guards:
        before = len(gen.lines)
        if batch is not None and guard.kind == "TENSOR":
            batched.append(gen.ref(guard.source))
            body.extend(gen.lines[before:])
            del gen.lines[before:]
            continue
        cond = _condition(gen, guard)
        body.extend(gen.lines[before:])
        del gen.lines[before:]
        failed = repr(describe(guard)) if verbose else "False"
        if verbose and guard.source is not None:  # what the call passed, beside what the guard expected
            failed += f" + '; got ' + ___actual({gen.ref(guard.source)})"
        elif verbose and guard.kind == "GLOBAL" and guard.expected[0] in GLOBAL_ACTUALS:
            failed += f" + '; got ' + str({GLOBAL_ACTUALS[guard.expected[0]]})"
        body.append(f"if not ({cond}): return {failed}")
    if batched:
        body.append(f"if not {gen.const(batch)}.check({''.join(f'{r}, ' for r in batched)}): return False")
        signatures = [g.expected for g in guards if g.kind == "TENSOR"]
        body.extend(f"if not ({_extras_check(r, e)}): return False" for r, e in zip(batched, signatures))
    text = "def ___guard(L, G, F):\n"
    text += "    try:\n        pass\n" if not body else "    try:\n"
    text += "".join(f"        {line}\n" for line in body)
    text += "    except Exception as e:\n        return " + ("f'evaluating a guard raised {e!r}'" if verbose
                                                                else "False") + "\n"
    text += "    return " + ("None" if verbose else "True") + "\n"
    ns = gen.namespace()
    exec(compile(text, "<stillframe guards>", "exec"), ns)
    return ns.pop("___guard"), text  # popped: the function and its globals form no reference cycle


def identity_checked(guards: list[Guard], L: dict, G: dict, F: Any) -> list:
    """The live objects whose ``id()`` the guards compare: the value of each ``ID`` guard, each hook of a
    ``HOOKS`` guard; and the class of each ``WEAK_TYPE`` guard, which the entry holds weakly.

    Called once, when a cache entry is made (on the same ``L, G, F`` it was
    traced from), so the entry can watch them with weak references: an id is
    only an identity while its object lives (see
    :func:`stillframe.runtime.entry.watch`). A source that cannot be
    evaluated, or whose value no longer has the guarded id, is skipped.
    """
    classes = [cls for cls in (g.expected() for g in guards if g.kind == "WEAK_TYPE") if cls is not None]
    gen = GuardCodegen()
    body: list[str] = []
    for guard in guards:
        if guard.kind not in ("ID", "HOOKS"):
            continue
        v = gen.ref(guard.source)
        lines, gen.lines = gen.lines, []
        if guard.kind == "ID":
            lines.append(f"if id({v}) == {guard.expected}: ___found.append({v})")
        else:
            lines.append(f"if ___hook_ids({v}) == {guard.expected!r}: "
                         f"___found.extend([*{v}._forward_pre_hooks.values(), *{v}._forward_hooks.values()])")
        body += ["try:", *(f"    {line}" for line in lines), "except Exception:", "    pass"]
    return classes + (_collect(gen, body, "identity", L, G, F) if body else [])


def source_values(sources: list[Source], L: dict, G: dict, F: Any) -> list:
    """The live value at each of ``sources`` on ``L, G, F`` (``None`` for one that cannot be evaluated)."""
    gen = GuardCodegen()
    body: list[str] = []
    for source in sources:
        v = gen.ref(source)
        lines, gen.lines = gen.lines, []
        body += ["try:", *(f"    {line}" for line in lines), f"    ___found.append({v})", "except Exception:",
                 "    ___found.append(None)"]
    return _collect(gen, body, "sources", L, G, F) if body else []


def _collect(gen: GuardCodegen, body: list[str], what: str, L: dict, G: dict, F: Any) -> list:
    """Run generated ``body`` (statements over guard sources that append to ``___found``) once on
    ``L, G, F``; the values it collected."""
    text = "def ___collect(L, G, F, ___found):\n" + "".join(f"    {line}\n" for line in body)
    ns = gen.namespace()
    exec(compile(text, f"<stillframe {what}>", "exec"), ns)
    found: list = []
    ns.pop("___collect")(L, G, F, found)
    return found
