"""Whether a call of a builtin function, type or container method passes the arguments the real one accepts.

The trace models ``list``, ``dict``, ``tuple``, ``set``, ``deque`` and ``OrderedDict`` methods by rules
(:func:`stillframe.rules.objects.call_container_method`) that read only the arguments they use; CPython first
checks the call's arity and keywords against the method's own signature and raises ``TypeError`` before it
looks at the container (``[].pop(1, 2)`` is a TypeError, not "pop from empty list"; ``d.get()``, ``l.copy(1)``,
``d.clear(None)``, ``l.index(x=1)`` too). :func:`check` is that first step, for every such method in one place.

The accepted arity comes from the method's ``inspect.signature`` where CPython gives one (``list.index``:
``(self, value, start=0, stop=sys.maxsize, /)``), else from :data:`ARITY` (the methods whose C definitions carry
no text signature in 3.11). A call that does not fit raises the exact ``TypeError`` the real method raises: the
real method is called on a fresh empty instance of its builtin class with the same number of placeholder
arguments and keyword names (CPython checks counts before it converts or reads anything, so the message is
eager's own). Where that cannot be done (a class that cannot be made empty, a call that raised no TypeError) the
trace breaks and the real call runs.

:func:`check_construction` does it for the builtin iterators the trace models by a Python equivalent
(``map``, ``zip``, the ``itertools`` types; :mod:`stillframe.rules.polyfills`): CPython checks their arity and
converts their scalar arguments when they are called, before any item is asked for (``count(1, 2, 3)``,
``count("a")``, ``islice(it, -1)``, ``repeat(1, "a")`` raise at once). The real constructor is called with an
empty tuple for each iterable and None for each argument it only stores, so its error is eager's own.

:func:`check_call` does the same for the builtins the trace models by a rule (``list(sequence=[])``,
``set(x=1)``, ``tuple(1, 2)``: CPython raises before it reads the arguments, the rules read the ones they use):
the builtin types of :data:`EMPTY_SAFE` are called for real with placeholders for the message (they have no
effect), any other builtin breaks the graph and runs for real.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)
from ..own_builtins import BUILTINS

import builtins
import collections
import inspect
import itertools
import math
import types
from typing import Any

import torch

from ..tensors.symbolic import specialize
from ..variables.base import ConstantVariable, SymNodeVariable

__all__ = ["ARITY", "CONSTRUCTION", "EMPTY_SAFE", "check", "check_call", "check_construction", "positional"]

_ANY = math.inf

#: ``(class, method) -> (fewest positional arguments, most, whether keywords are accepted)`` for the methods of
#: builtin containers that have no ``inspect.signature`` (CPython 3.11, ``Objects/dictobject.c``, ``setobject.c``,
#: ``Modules/_collectionsmodule.c``: METH_NOARGS is 0, METH_O is 1, ``PyArg_UnpackTuple`` gives its bounds).
ARITY: dict[tuple[type, str], tuple[int, float, bool]] = {
    **{(cls, name): (0, 0, False) for cls in (dict, collections.OrderedDict)
       for name in ("clear", "copy", "items", "keys", "values")},
    **{(cls, "pop"): (1, 2, False) for cls in (dict, collections.OrderedDict)},
    **{(cls, "update"): (0, 1, True) for cls in (dict, collections.OrderedDict)},
    **{(cls, "__getitem__"): (1, 1, False) for cls in (list, dict, collections.OrderedDict)},
    **{(cls, name): (1, 1, False) for cls in (set, frozenset)
       for name in ("__contains__", "isdisjoint", "issubset", "issuperset", "symmetric_difference")},
    **{(cls, name): (0, _ANY, False) for cls in (set, frozenset) for name in ("difference", "intersection", "union")},
    **{(cls, "copy"): (0, 0, False) for cls in (set, frozenset)},
    **{(set, name): (1, 1, False) for name in ("add", "discard", "remove", "symmetric_difference_update")},
    **{(set, name): (0, 0, False) for name in ("clear", "pop")},
    **{(set, name): (0, _ANY, False) for name in ("difference_update", "intersection_update", "update")},
    **{(collections.deque, name): (0, 0, False) for name in ("clear", "copy", "__copy__", "pop", "popleft",
                                                             "reverse")},
    **{(collections.deque, name): (1, 1, False) for name in ("append", "appendleft", "count", "extend",
                                                             "extendleft", "remove")},
    (collections.deque, "index"): (1, 3, False),
    (collections.deque, "insert"): (2, 2, False),
    (collections.deque, "rotate"): (0, 1, False),
    (torch.Size, "numel"): (0, 0, False),
    **{(builtins, name): (0, 1, False) for name in ("set", "frozenset", "bool")},
    (builtins, "dict"): (0, 1, True),
    (builtins, "getattr"): (2, 3, False),
    (builtins, "slice"): (1, 3, False),
}

#: Builtins whose call with placeholder arguments has no effect (types that make an empty value, Argument Clinic
#: functions that check their arity before they run): called for real for an arity error's text.
EMPTY_SAFE = frozenset({list, tuple, set, frozenset, dict, bool, float, len, isinstance, issubclass, hasattr, abs,
                        callable, id, repr, ord, chr, hash, divmod, sum, enumerate, reversed, sorted, all, any, getattr,
                        setattr, delattr, slice})

_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType, types.FunctionType)


def defining_class(cls: type, name: str) -> tuple[type, Any] | tuple[None, None]:
    """The first class of ``cls``'s MRO that defines ``name``, and what it holds there."""
    for base in cls.__mro__:
        if name in vars(base):
            return base, vars(base)[name]
    return None, None


def _fits(base: Any, name: str, method: Any, positional: int, keywords: tuple, bound: bool = True) -> bool | None:
    """Whether ``positional`` arguments and ``keywords`` fit the method (``bound``: its signature's first
    parameter is the instance) or callable; None where its arity is not known."""
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        bounds = ARITY.get((base, name))
        if bounds is None:
            return None
        low, high, keyword_ok = bounds
        return low <= positional <= high and (keyword_ok or not keywords)
    try:
        signature.bind(*([None] * (positional + bound)), **dict.fromkeys(keywords))
    except TypeError:
        return False
    return True


def check(tx: Any, cls: type, name: str, args: list, kwargs: dict) -> None:
    """Raise eager's ``TypeError`` where ``cls.name(obj, *args, **kwargs)`` does not fit the real method's arity
    or keywords (CPython's argument parsing, before the method runs); return where it fits or is not known.

    Raises the user's ``TypeError`` (``"list.copy() takes no arguments (1 given)"``), or breaks the graph where
    the exact message cannot be had without the real container."""
    base, method = defining_class(cls, name)
    if base is None or not isinstance(method, _METHODS):
        return
    fits = _fits(base, name, method, len(args), tuple(kwargs))
    if fits is None or fits:
        return
    try:
        empty = base()
    except Exception:  # a class that cannot be made empty (a namedtuple): the real call decides
        empty = None
    if empty is not None:
        try:
            getattr(empty, name)(*([None] * len(args)), **dict.fromkeys(kwargs))
        except TypeError as e:
            tx.user_error(TypeError(*e.args))
        except Exception:  # another error than the arity's: the real call decides
            pass
    tx.unsupported("unsupported_call", f"{base.__name__}.{name} called with arguments its signature refuses")


def check_call(tx: Any, fn: Any, args: list, kwargs: dict) -> None:
    """Raise eager's ``TypeError`` where the builtin ``fn(*args, **kwargs)`` does not fit its arity or keywords;
    return where it fits or is not known.

    Raises the user's ``TypeError`` (``"list() takes no keyword arguments"``) for a builtin of :data:`EMPTY_SAFE`;
    breaks the graph for another builtin (the real call raises)."""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or BUILTINS.get(name) is not fn:  # (Python's own, whatever the user rebound)
        return
    fits = _fits(builtins, name, fn, len(args), tuple(kwargs), bound=False)
    if fits is None or fits:
        return
    if fn in EMPTY_SAFE:
        try:
            fn(*([None] * len(args)), **dict.fromkeys(kwargs))
        except TypeError as e:
            tx.user_error(TypeError(*e.args))
        except Exception:  # another error than the arity's: the real call decides
            pass
    elif fn in CONSTRUCTION:
        # map, filter, zip: no signature before Python 3.13, where their rules' probe gave eager's error; 3.13 has
        # one, refusing filter(None) here, and the probe (an empty tuple for each iterable) still gives the text
        check_construction(tx, fn, args, kwargs)
    tx.unsupported("unsupported_builtin", f"{name}() called with arguments its signature refuses: it runs for real")


def positional(cls: type, name: str, args: list, kwargs: dict) -> tuple[list, dict]:
    """``args`` and ``kwargs`` of a call of ``cls.name`` that :func:`check` passed, with the keywords that name
    positional parameters moved into place (``od.setdefault("g", default=9)`` is ``od.setdefault("g", 9)``), so
    the rules, which read arguments by position, read them all. Keyword-only ones (``sort(key=)``) stay keywords;
    where a parameter before one given by keyword is left out (its default is C's), the call is as it was."""
    if not kwargs:
        return args, kwargs
    base, method = defining_class(cls, name)
    try:
        parameters = list(inspect.signature(method).parameters.values())[1:]
    except (TypeError, ValueError):
        return args, kwargs
    moved, rest = list(args), dict(kwargs)
    for parameter in parameters[len(args):]:
        if parameter.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD or parameter.name not in rest:
            break
        moved.append(rest.pop(parameter.name))
    return moved, rest


#: What the builtin iterators modelled by a Python equivalent do with each argument when they are called, for
#: :func:`check_construction`: ``(positional roles, role of further positional arguments, keyword roles,
#: exceptions raised after the iterables are read)``. A role is ``"i"``, an iterable (read by the Python
#: equivalent: its ``iter()``'s errors come from there, in order); ``"c"``, a scalar CPython converts at once
#: (``count``'s numbers, ``islice``'s indices, ``repeat``'s ``times``, ``zip``'s ``strict``); ``"s"``, a value
#: only stored (a function, ``fillvalue``, ``permutations``' ``r``, which CPython checks after it read the
#: iterable: the Python equivalent checks it). ``combinations`` converts ``r`` at once (a TypeError there) but
#: refuses a negative one after reading the iterable (a ValueError its Python equivalent raises).
CONSTRUCTION: dict[Any, tuple[str, str | None, dict[str, str], tuple[type, ...]]] = {
    map: ("si", "i", {}, ()),
    filter: ("si", None, {}, ()),
    zip: ("", "i", {"strict": "c"}, ()),
    enumerate: ("ic", None, {"iterable": "i", "start": "c"}, ()),
    itertools.chain: ("", "i", {}, ()),
    itertools.chain.from_iterable: ("i", None, {}, ()),
    itertools.islice: ("i", "c", {}, ()),
    itertools.count: ("cc", None, {"start": "c", "step": "c"}, ()),
    itertools.repeat: ("sc", None, {"object": "s", "times": "c"}, ()),
    itertools.cycle: ("i", None, {}, ()),
    itertools.accumulate: ("is", None, {"iterable": "i", "func": "s", "initial": "s"}, ()),
    itertools.product: ("", "i", {"repeat": "c"}, ()),
    itertools.combinations: ("ic", None, {"iterable": "i", "r": "c"}, (ValueError,)),
    itertools.permutations: ("is", None, {"iterable": "i", "r": "s"}, ()),
    itertools.zip_longest: ("", "i", {"fillvalue": "s"}, ()),
    itertools.pairwise: ("i", None, {}, ()),
    itertools.starmap: ("si", None, {}, ()),
    itertools.groupby: ("is", None, {"iterable": "i", "key": "s"}, ()),
    itertools.takewhile: ("si", None, {}, ()),
    itertools.dropwhile: ("si", None, {}, ()),
    itertools.filterfalse: ("si", None, {}, ()),
    itertools.compress: ("ii", None, {"data": "i", "selectors": "i"}, ()),
}


def check_construction(tx: Any, fn: Any, args: list, kwargs: dict) -> None:
    """Raise eager's error where calling the builtin iterator ``fn`` with ``args`` and ``kwargs`` fails before it
    reads an iterable (its arity, its keywords, a scalar argument it converts); return where it does not.

    Each argument is passed to the real ``fn`` as :data:`CONSTRUCTION` says: an empty tuple for an iterable, None
    for a stored value, the constant itself for a converted scalar (a scalar that is not a constant, whose
    conversion may run user code, breaks the graph: the real call runs). The probe has no effect: the values it
    passes run no code."""
    spec = CONSTRUCTION.get(fn)
    if spec is None:
        return
    positional_roles, rest, keyword_roles, late = spec

    def probe(role: str | None, var: Any) -> Any:
        if role == "i":
            return ()
        if role == "c":
            if isinstance(var, ConstantVariable):
                return var.value
            if isinstance(var, SymNodeVariable):
                return specialize(tx, var)  # (the ShapeEnv guards the value, as const_value of a symbolic int does)
            tx.unsupported("unsupported_builtin", f"{fn.__name__}() of an argument that is not a constant: it "
                           "runs for real")
        return None

    probe_args = [probe(positional_roles[i] if i < len(positional_roles) else rest, v) for i, v in enumerate(args)]
    probe_kwargs = {k: probe(keyword_roles.get(k), v) for k, v in kwargs.items()}
    try:
        fn(*probe_args, **probe_kwargs)
    except Exception as e:  # (TypeError, ValueError, OverflowError of the arguments; raised as eager raises them)
        if not isinstance(e, late):
            tx.user_error(type(e)(*e.args))
