"""Exceptions made in the trace: ``raise ValueError(x)``, ``except E as e``, ``e.args``, ``e.add_note(n)``.

An exception the traced code makes (or a rule of ours raises for it, as CPython would: a ``KeyError`` of
``d[k]``) is an object with identity and state, like an instance of a user class: an
:class:`~stillframe.variables.objects.ObjectVariable` whose heap record is an
:class:`~stillframe.variables.objects.ExceptionEntry`. Its class, ``args``, instance attributes (``__notes__``
among them), chaining and traceback are modelled; the plan makes it afresh on every call from that record
(``runtime/rebuild.py``), as eager makes a new one on every call, so one call's exception is never another's::

    try:
        raise ValueError("bad", n)
    except ValueError as e:
        e.add_note("while loading")
        log.append(e)          # a new ValueError on each call, with one note

A traceback is the frames the exception was raised through in the trace (:class:`TracebackEntry`); the plan
gives the new exception one whose entries name the user's frames and lines (:mod:`~stillframe.runtime.trampoline`
frames). What the trace cannot answer exactly -- the traceback object itself, C state that is not a constant --
breaks the graph, so the step runs for real on the rebuilt exception. Raising an exception that exists outside
the trace (a live object) runs for real too: raising it writes its ``__traceback__`` and ``__context__``.
An exception group keeps the message and exceptions it was made with (``except*`` itself is not traced).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import functools
import types
from typing import TYPE_CHECKING, Any

from ..variables.base import (
    BuiltinVariable,
    ConstantVariable,
    DictEntry,
    ListVariable,
    PartialVariable,
    PythonObjectVariable,
    TupleVariable,
    UserMethodVariable,
    VariableTracker,
)
from ..variables.base import is_builtin_class
from ..variables.builder import is_constant, of_type, wrap
from ..variables.objects import ContainerMethodVariable, ExceptionEntry, ObjectVariable, TracebackEntry
from . import attrs, builtin_calls, calls, frames, known, objects

if TYPE_CHECKING:
    from ..errors import UserError
    from ..trace.interpreter import Tracer
    from ..trace.state import Frame

_UNSET = object()


# ------------------------------------------------------------------ classes
def c_base(cls: type) -> type:
    """The builtin exception class whose C layout instances of ``cls`` have (``ValueError`` for a user's
    ``class Bad(ValueError)``)."""
    return next(k for k in cls.__mro__ if is_builtin_class(k) and issubclass(k, BaseException))


def c_members(cls: type) -> tuple:
    """The C attributes instances of ``cls`` have beyond ``BaseException``'s (``StopIteration.value``,
    ``OSError.errno`` ...): ``()`` for most classes, whose C state is ``args`` alone."""
    return _builtin_members(c_base(cls))


@functools.lru_cache(maxsize=None)
def _builtin_members(base: type) -> tuple:  # (keyed by builtin classes only: no user class is kept alive)
    names = []
    for klass in base.__mro__:
        if klass in (BaseException, object):
            continue
        for name, attr in vars(klass).items():
            if isinstance(attr, (types.MemberDescriptorType, types.GetSetDescriptorType)) and \
                    name not in ("__weakref__", "__dict__") and name not in names:
                names.append(name)
    return tuple(names)


def _makes_no_python_calls(cls: type) -> bool:
    """Whether a bare instance of ``cls`` can be made and dropped at trace time without running user code (its
    ``__new__`` is C, and no class of the user's defines ``__del__``)."""
    return isinstance(cls.__new__, types.BuiltinFunctionType) and \
        not any("__del__" in vars(k) for k in cls.__mro__ if not is_builtin_class(k))


def clone_exception(template: BaseException) -> BaseException:
    """A new exception of ``template``'s class with its C state (``args`` and the C members), and nothing else:
    no instance attributes, chaining or traceback. Runs no user code (the class's C ``__new__`` only)."""
    cls = type(template)
    fresh = cls.__new__(cls, *template.args)
    for name in c_members(cls):
        descriptor = next(vars(k)[name] for k in cls.__mro__ if name in vars(k))
        value = getattr(template, name, _UNSET)
        if value is _UNSET or value is getattr(fresh, name, _UNSET):  # unset, or as the C code made it already
            continue  # (an unset C member reads None: left unset, as OSError's str tells them apart)
        try:
            descriptor.__set__(fresh, value)
        except (AttributeError, TypeError):  # read-only
            pass
    BaseException.args.__set__(fresh, template.args)
    return fresh


def fresh_exception(cls: type, template: BaseException | None) -> BaseException:
    """A new instance of ``cls`` with ``template``'s C state (``cls.__new__`` alone where it has none): what the
    plan starts a rebuilt exception from. Its ``args`` and the rest are set after."""
    return cls.__new__(cls) if template is None else clone_exception(template)


def is_exception(tx: Tracer, var: VariableTracker) -> bool:
    """Whether ``var`` is an exception made in the trace."""
    return isinstance(var, ObjectVariable) and isinstance(tx.heap(var.oid), ExceptionEntry)


def _is_exception_value(tx: Tracer, var: VariableTracker) -> bool:
    """An exception instance: made in the trace, or a live one."""
    return is_exception(tx, var) or isinstance(var, PythonObjectVariable) and of_type(var.value, BaseException)


def _new(tx: Tracer, cls: type, args: tuple, template: BaseException | None = None, **state: Any) -> ObjectVariable:
    oid = tx.new_id()
    tx.heap_set(oid, ExceptionEntry(cls, DictEntry(()), TupleVariable(tuple(args)), template, **state))
    return ObjectVariable(oid, cls)


def _constants(tx: Tracer, args: list, kwargs: dict, what: str) -> tuple[list, dict]:
    """The Python values of ``args`` / ``kwargs``: C state other than ``args`` is made by the class's own C code,
    which runs at trace time on constants only."""
    if not all(known.is_const(tx, v) for v in (*args, *kwargs.values())):
        tx.unsupported("unsupported_call", f"{what} with arguments that are not constants (its C state is made "
                       "from them)")
    return [known.const_value(tx, v) for v in args], {k: known.const_value(tx, v) for k, v in kwargs.items()}


def _args_of(values: tuple) -> tuple:
    return tuple(ConstantVariable(v) if is_constant(v) else PythonObjectVariable(v) for v in values)


# ------------------------------------------------------------------ making one
def construct(tx: Tracer, cls: type, args: list, kwargs: dict) -> ObjectVariable:
    """``cls(*args, **kwargs)`` for an exception class: ``BaseException.__new__`` (``args`` are the positional
    arguments), then the class's ``__init__`` (a Python one is inlined; a C one is :func:`c_init`)."""
    if not _makes_no_python_calls(cls) or type(cls) is not type:
        tx.unsupported("unsupported_call", f"constructing {cls.__qualname__} (a custom __new__ or __del__, or a "
                       "metaclass)")
    if issubclass(cls, BaseExceptionGroup):
        obj = _group(tx, cls, args, kwargs)
    elif c_members(cls):
        values, named = _constants(tx, args, kwargs, f"constructing {cls.__qualname__}")
        try:
            template = cls.__new__(cls, *values, **named)
        except Exception as e:  # the class's own refusal, as eager raises it
            tx.user_error(e)
        obj = _new(tx, type(template), _args_of(template.args), template)  # OSError(2, ...): FileNotFoundError
    else:
        obj = _new(tx, cls, tuple(args))
    init = obj.cls.__init__
    if isinstance(init, types.FunctionType):
        depth = len(tx.state.frames)
        frames.inline_call(tx, init, None, [obj, *args], kwargs)
        tx.run_until_return(depth)
    else:
        c_init(tx, init, obj, list(args), kwargs)
    return obj


def _group(tx: Tracer, cls: type, args: list, kwargs: dict) -> ObjectVariable:
    """``BaseExceptionGroup.__new__(cls, message, exceptions)``: its checks (and its choice of ``ExceptionGroup``
    where every exception is an ``Exception``) made by the C code itself, on stand-ins of the exceptions."""
    items = tuple(known.sequence_items(tx, args[1])) if len(args) == 2 and not kwargs and \
        not isinstance(args[1], ConstantVariable) else ()
    message = args[0] if args else None
    if not isinstance(message, ConstantVariable) or not all(_is_exception_value(tx, v) for v in items):
        tx.unsupported("unsupported_call", f"constructing {cls.__qualname__} from values not known at trace time")
    try:
        made = cls.__new__(cls, message.value, [_real_value(tx, v) for v in items], *args[2:], **kwargs)
    except Exception as e:  # BaseExceptionGroup's own checks, as eager raises them
        tx.user_error(e)
    return _new(tx, type(made), tuple(args), group=(message, TupleVariable(items)))


def _real_value(tx: Tracer, var: VariableTracker) -> BaseException:
    return stand_in(tx, var) if is_exception(tx, var) else var.value


def c_init(tx: Tracer, init: Any, obj: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
    """``K.__init__(obj, *args, **kwargs)`` for the C ``__init__`` of a builtin exception class ``K`` (reached by
    ``super().__init__(msg)`` in a user's ``__init__``, or by ``cls(...)``): ``BaseException``'s sets ``args``;
    one that makes more C state (``StopIteration``'s ``value``) runs on a copy of the template."""
    owner = getattr(init, "__objclass__", BaseException)
    if not is_exception(tx, obj) or not issubclass(obj.cls, owner):
        tx.unsupported("unsupported_call", f"{owner.__name__}.__init__ on a value that is not an exception made in "
                       "the trace")
    entry: ExceptionEntry = tx.heap(obj.oid)
    if not c_members(owner) or issubclass(owner, BaseExceptionGroup):  # BaseException's: it sets args
        if kwargs:
            tx.user_error(TypeError(f"{entry.cls.__name__}() takes no keyword arguments"))
        tx.heap_set(obj.oid, entry.replace(args=TupleVariable(tuple(args))))
        return ConstantVariable(None)
    values, named = _constants(tx, args, kwargs, f"{owner.__name__}.__init__")
    template = clone_exception(entry.template)
    try:
        init(template, *values, **named)
    except Exception as e:
        tx.user_error(e)
    tx.heap_set(obj.oid, entry.replace(args=TupleVariable(_args_of(template.args)), template=template))
    return ConstantVariable(None)


def from_real(tx: Tracer, exc: BaseException) -> ObjectVariable:
    """The exception a rule of ours raised for the user's code (``KeyError(k)`` of ``d[k]``), as a value of the
    trace; raised now, it is chained to the exception being handled, as CPython chains it."""
    cls = type(exc)
    if not _makes_no_python_calls(cls) or isinstance(exc, BaseExceptionGroup):
        tx.unsupported("unsupported_raise", f"a {cls.__name__} raised in the trace is not modelled (a custom __new__ "
                       "or __del__, or an exception group): the step runs for real")
    template = clone_exception(exc) if c_members(cls) else None
    attrs = DictEntry(tuple((k, ConstantVariable(v) if is_constant(v) else PythonObjectVariable(v))
                            for k, v in vars(exc).items()))
    obj = _new(tx, cls, _args_of(exc.args), template, suppress=exc.__suppress_context__)
    tx.heap_set(obj.oid, tx.heap(obj.oid).with_attrs(attrs))
    cause = exc.__cause__
    if cause is not None:
        set_chaining(tx, obj, "__cause__", from_real(tx, cause))
    if exc.__context__ is not None:
        set_chaining(tx, obj, "__context__", from_real(tx, exc.__context__))
    else:
        chain(tx, obj)
    return obj


def stand_in(tx: Tracer, var: ObjectVariable) -> BaseException:
    """A real exception of ``var``'s class (of its C base, where making the class's own could run user code), for
    stillframe's own uses of a ``UserError`` (``isinstance`` checks, messages); never the user's."""
    entry: ExceptionEntry = tx.heap(var.oid)
    cls = entry.cls if _makes_no_python_calls(entry.cls) else c_base(entry.cls)
    if entry.group is not None:
        message, items = entry.group
        real = cls.__new__(cls, message.value, [_real_value(tx, v) for v in items.items])
    else:
        real = fresh_exception(cls, entry.template if cls is entry.cls else None)
    if all(isinstance(a, ConstantVariable) for a in entry.args.items):
        BaseException.args.__set__(real, tuple(a.value for a in entry.args.items))
    return real


# ------------------------------------------------------------------ raising and catching
def raise_value(tx: Tracer, var: VariableTracker, cause: VariableTracker | None = None, *,
                reraise: bool = False) -> None:
    """``raise var`` (``raise var from cause`` where ``cause`` is given; a bare ``raise`` or a ``RERAISE`` where
    ``reraise``: no chaining, and no traceback entry for this frame). A class is instantiated, as CPython does."""
    if isinstance(var, (BuiltinVariable, PythonObjectVariable)) and of_type(_value(var), type):
        if not issubclass(_value(var), BaseException):
            tx.user_error(TypeError("exceptions must derive from BaseException"))
        made = calls.call_sync(tx, var, [], {})
        if not _is_exception_value(tx, made):
            tx.user_error(TypeError(f"calling {_value(var)!r} should have returned an instance of BaseException, "
                                    f"not {made.python_type()!r}"))
        var = made
    if not is_exception(tx, var):
        if isinstance(var, (PythonObjectVariable, ConstantVariable)) and of_type(var.value, BaseException):
            tx.unsupported("unsupported_raise", "raising an exception made outside the traced code: raising it "
                           "writes its __traceback__ and __context__, so the raise runs for real")
        tx.user_error(TypeError("exceptions must derive from BaseException"))
    if cause is not None:
        if isinstance(cause, (BuiltinVariable, PythonObjectVariable)) and of_type(_value(cause), type) and \
                issubclass(_value(cause), BaseException):
            made = calls.call_sync(tx, cause, [], {})
            if not _is_exception_value(tx, made) and cause_call_checked():
                tx.user_error(TypeError(f"calling {_value(cause)!r} should have returned an instance of "
                                        f"BaseException, not {made.python_type()!r}"))
            cause = made
        if not (isinstance(cause, ConstantVariable) and cause.value is None) and not _is_exception_value(tx, cause):
            tx.user_error(TypeError("exception causes must derive from BaseException"))
        set_chaining(tx, var, "__cause__", cause)
    if not reraise:
        chain(tx, var)
    tx.user_error(stand_in(tx, var), var=var, reraised=reraise)


class _MakesNone(BaseException):
    def __new__(cls):
        return None


@functools.cache
def cause_call_checked() -> bool:
    """Whether this Python's ``raise E from C`` refuses a class ``C`` whose call returns no exception with a
    TypeError (CPython 3.13's do_raise; 3.11 and 3.12 take what it returned, None too, for the cause). Found by
    trying it, as eager would."""
    try:
        raise IndexError from _MakesNone
    except TypeError:
        return True
    except IndexError:
        return False


#: CPython's TypeError for an ``except`` clause naming something other than exception classes.
HANDLER_CLASSES_ERROR = "catching classes that do not inherit from BaseException is not allowed"


def handler_classes_valid(classes: Any) -> bool:
    """Whether ``except classes:`` may name ``classes``: an exception class or a tuple of them, each judged by its
    real type (CPython's ``check_except_type_valid``; a ``__class__`` property is not read)."""
    return all(of_type(c, type) and issubclass(c, BaseException)
               for c in (classes if of_type(classes, tuple) else (classes,)))


def handler_matches(raised: type, classes: Any) -> bool:
    """Whether ``except classes:`` (valid: :func:`handler_classes_valid`) catches an exception of type ``raised``:
    by ``raised``'s MRO alone, as CPython's ``PyErr_GivenExceptionMatches``. Unlike ``issubclass``, no metaclass
    ``__subclasscheck__`` is asked: ``except A`` does not catch a ``ValueError`` that ``A.register`` (an ABC) made
    a virtual subclass."""
    return any(c in raised.__mro__ for c in (classes if of_type(classes, tuple) else (classes,)))


def _value(var: VariableTracker) -> Any:
    return var.fn if isinstance(var, BuiltinVariable) else var.value


def chain(tx: Tracer, var: ObjectVariable) -> None:
    """CPython's implicit chaining of ``var``, raised now: its ``__context__`` is the exception being handled
    (unless that is ``var`` itself); a link of the handled exception's own chain back to ``var`` is cut, so no
    cycle forms (``_PyErr_SetObject``)."""
    handled = tx.state.handling
    if handled is None or _same(handled, var):
        return
    link, seen = handled, set()
    while is_exception(tx, link) and link.oid not in seen:  # (a cycle the user made: CPython stops there too)
        seen.add(link.oid)
        entry: ExceptionEntry = tx.heap(link.oid)
        if entry.context is not None and _same(entry.context, var):
            tx.heap_set(link.oid, entry.replace(context=None))
            break
        link = entry.context
    entry = tx.heap(var.oid)
    tx.heap_set(var.oid, entry.replace(context=handled))


def _same(a: VariableTracker, b: VariableTracker) -> bool:
    if isinstance(a, ObjectVariable) and isinstance(b, ObjectVariable):
        return a.oid == b.oid
    return isinstance(a, PythonObjectVariable) and isinstance(b, PythonObjectVariable) and a.value is b.value


def traceback_entry(frame: Frame, index: int) -> TracebackEntry:
    """The traceback entry of an exception passing through ``frame`` at instruction ``index``."""
    inst = frame.code.instructions[index]
    module = frame.globals.get("__name__") if isinstance(frame.globals, dict) else None
    return TracebackEntry(frame.code.code, inst.lineno, inst.positions, module if isinstance(module, str) else None)


def caught(tx: Tracer, error: UserError, passed: list) -> ObjectVariable:
    """The exception of ``error`` as the value a traced ``except`` gets: made a value of the trace if a rule of
    ours raised it, with the frames it passed through (``passed``, innermost first) added to its traceback, as
    CPython adds one entry per frame it unwinds (``PyTraceBack_Here``)."""
    if error.var is None:
        error.var = from_real(tx, error.exc)
    if passed:
        entry: ExceptionEntry = tx.heap(error.var.oid)
        tx.heap_set(error.var.oid, entry.replace(traceback=tuple(reversed(passed)) + entry.traceback))
    return error.var


def stop_iteration_error(tx: Tracer, var: VariableTracker) -> VariableTracker:
    """PEP 479: a ``StopIteration`` leaving a generator becomes ``RuntimeError('generator raised
    StopIteration')`` caused by it (its ``__cause__`` and ``__context__``); another exception goes on as it is."""
    if not (is_exception(tx, var) and issubclass(var.cls, StopIteration)):
        return var
    error = _new(tx, RuntimeError, (ConstantVariable("generator raised StopIteration"),))
    set_chaining(tx, error, "__cause__", var)
    set_chaining(tx, error, "__context__", var)
    return error


# ------------------------------------------------------------------ attributes
def _c_descriptor(cls: type, name: str) -> Any:
    """``cls.name`` found in the MRO when it is a C attribute or method of a builtin exception class, else None
    (a user's property or method of the same name comes first in the MRO and wins, as in Python)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            attr = vars(klass)[name]
            owner = getattr(attr, "__objclass__", None)
            if is_builtin_class(klass) and isinstance(owner, type) and issubclass(owner, BaseException):
                return attr
            return None
    return None


def data_attr(tx: Tracer, obj: ObjectVariable, name: str) -> VariableTracker | None:
    """``obj.name`` for a C data attribute of an exception made in the trace (``args``, ``__context__``,
    ``__traceback__``, ``StopIteration.value`` ...), which wins over the instance dict; None for other names."""
    entry: ExceptionEntry = tx.heap(obj.oid)
    attr = _c_descriptor(entry.cls, name)
    if not isinstance(attr, (types.GetSetDescriptorType, types.MemberDescriptorType)) or name == "__dict__":
        return None
    if name == "args":
        return entry.args
    if name in ("__context__", "__cause__"):
        value = entry.context if name == "__context__" else entry.cause
        return ConstantVariable(None) if value is None else value
    if name == "__suppress_context__":
        return ConstantVariable(entry.suppress)
    if entry.group is not None and name in ("message", "exceptions"):
        return entry.group[name == "exceptions"]
    if name == "__traceback__":
        if not entry.traceback:
            return ConstantVariable(None)
        tx.unsupported("unsupported_attribute", "reading the __traceback__ of an exception raised in the trace: "
                       "the read runs for real, on the exception the plan makes (its frames are the user's)")
    try:
        value = getattr(entry.template, name)
    except AttributeError as e:  # unset C state (OSError.characters_written)
        tx.user_error(e)
    return ConstantVariable(value) if is_constant(value) else wrap(tx, value, None)


def is_c_method(attr: Any) -> bool:
    """Whether ``attr`` is a C method of a builtin exception class (``BaseException.add_note``,
    ``ValueError.__init__`` ...)."""
    return of_type(attr, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
        issubclass(attr.__objclass__, BaseException)


def method_attr(tx: Tracer, obj: ObjectVariable, name: str) -> VariableTracker | None:
    """``obj.name`` for a C method of an exception made in the trace (``add_note``, ``with_traceback``,
    ``__str__`` ...): bound to it as a partial, whose call a rule of :data:`METHOD_RULES` traces (another
    breaks the graph, and the partial, made for real, calls the method on the rebuilt exception)."""
    attr = _c_descriptor(tx.heap(obj.oid).cls, name)
    if is_c_method(attr):
        return PartialVariable(BuiltinVariable(attr), (obj,), ())
    return None


def set_attr(tx: Tracer, obj: ObjectVariable, name: str, value: VariableTracker) -> bool:
    """``obj.name = value`` for a C attribute of an exception made in the trace, with CPython's checks; False
    for other names (they go to the instance dict)."""
    entry: ExceptionEntry = tx.heap(obj.oid)
    attr = _c_descriptor(entry.cls, name)
    if not isinstance(attr, (types.GetSetDescriptorType, types.MemberDescriptorType)) or name == "__dict__":
        return False
    if name == "args":  # any iterable, made a tuple
        if isinstance(value, ConstantVariable) and not isinstance(value.value, (str, bytes)):
            tx.user_error(TypeError(f"'{type(value.value).__name__}' object is not iterable"))
        items = tuple(known.sequence_items(tx, value)) if not isinstance(value, ConstantVariable) else \
            tuple(ConstantVariable(c) for c in value.value)
        tx.heap_set(obj.oid, entry.replace(args=TupleVariable(items)))
    elif name in ("__context__", "__cause__"):
        if not (isinstance(value, ConstantVariable) and value.value is None) and not _is_exception_value(tx, value):
            what = "context" if name == "__context__" else "cause"
            tx.user_error(TypeError(f"exception {what} must be None or derive from BaseException"))
        set_chaining(tx, obj, name, value)
    elif name == "__suppress_context__":
        if not isinstance(value, ConstantVariable):
            tx.unsupported("unsupported_attribute", "setting __suppress_context__ to a value not known at trace time")
        if type(value.value) is not bool:
            tx.user_error(TypeError("attribute value type must be bool"))
        tx.heap_set(obj.oid, entry.replace(suppress=value.value))
    elif name == "__traceback__":
        set_traceback(tx, obj, value)
    elif entry.group is not None:
        tx.unsupported("unsupported_attribute", f"setting .{name} of an exception group")
    else:
        values, _ = _constants(tx, [value], {}, f"setting .{name} of {entry.cls.__name__}")
        template = clone_exception(entry.template)
        try:
            setattr(template, name, values[0])
        except Exception as e:
            tx.user_error(e)
        tx.heap_set(obj.oid, entry.replace(template=template, args=TupleVariable(_args_of(template.args))))
    return True


def set_chaining(tx: Tracer, obj: ObjectVariable, name: str, value: VariableTracker) -> None:
    """``obj.__context__ = value`` / ``obj.__cause__ = value`` (which also sets ``__suppress_context__``)."""
    entry: ExceptionEntry = tx.heap(obj.oid)
    value = None if isinstance(value, ConstantVariable) and value.value is None else value
    if name == "__cause__":
        tx.heap_set(obj.oid, entry.replace(cause=value, suppress=True))
    else:
        tx.heap_set(obj.oid, entry.replace(context=value))


def set_traceback(tx: Tracer, obj: ObjectVariable, value: VariableTracker) -> None:
    """``obj.__traceback__ = value``: ``None`` clears it; a traceback object is not modelled."""
    if isinstance(value, ConstantVariable) and value.value is None:
        tx.heap_set(obj.oid, tx.heap(obj.oid).replace(traceback=()))
        return
    if isinstance(value, ConstantVariable) or _is_exception_value(tx, value):
        tx.user_error(TypeError("__traceback__ must be a traceback or None"))
    tx.unsupported("unsupported_attribute", "setting the __traceback__ of an exception made in the trace to a "
                   "traceback object")


def refuse_delete(tx: Tracer, obj: ObjectVariable, name: str) -> None:
    """``del obj.name`` of a C attribute of an exception made in the trace: not modelled (CPython refuses most)."""
    if isinstance(_c_descriptor(tx.heap(obj.oid).cls, name), (types.GetSetDescriptorType,
                                                               types.MemberDescriptorType)):
        tx.unsupported("unsupported_attribute", f"deleting .{name} of an exception")


# ------------------------------------------------------------------ methods
def _self(tx: Tracer, args: list, method: str) -> ObjectVariable:
    if not args or not is_exception(tx, args[0]):
        tx.unsupported("unsupported_call", f"BaseException.{method} of a value that is not an exception made in "
                       "the trace")
    return args[0]


def _add_note(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """``e.add_note(note)``: appended to ``e.__notes__`` (a new list if it has none), with CPython's checks."""
    obj = _self(tx, args, "add_note")
    if kwargs or len(args) != 2:
        tx.user_error(TypeError(f"BaseException.add_note() takes exactly one argument ({len(args) - 1} given)"))
    note = args[1]
    if not isinstance(note, ConstantVariable):
        tx.unsupported("unsupported_call", "add_note() of a value not known at trace time")
    if not isinstance(note.value, str):
        tx.user_error(TypeError(f"note must be a str, not '{type(note.value).__name__}'"))
    notes = builtin_calls.attempt(tx, AttributeError, lambda: attrs.instance_attr(tx, obj, "__notes__"))
    if notes is None:
        objects.store_attr(tx, obj, "__notes__", tx.new_list((note,)))
    elif isinstance(notes, ListVariable):
        objects.call_container_method(tx, ContainerMethodVariable(notes, "append"), [note], {})
    elif isinstance(notes, ConstantVariable) or is_exception(tx, notes):
        tx.user_error(TypeError("Cannot add note: __notes__ is not a list"))
    else:
        tx.unsupported("unsupported_call", f"add_note() where __notes__ is a {notes.python_type().__name__}")
    return ConstantVariable(None)


def _with_traceback(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    """``e.with_traceback(tb)``: sets ``__traceback__`` and returns ``e`` itself."""
    obj = _self(tx, args, "with_traceback")
    if kwargs or len(args) != 2:
        tx.unsupported("unsupported_call", "with_traceback() with other than one argument")
    set_traceback(tx, obj, args[1])
    return obj


def text(tx: Tracer, fn: Any, obj: ObjectVariable) -> VariableTracker:
    """``str(e)`` / ``repr(e)``: a Python ``__str__`` / ``__repr__`` of the user's is traced; a C one runs at trace
    time on a real exception with the same C state, where that state is made of constants."""
    entry: ExceptionEntry = tx.heap(obj.oid)
    name = "__str__" if fn is str else "__repr__"
    method = next(vars(k)[name] for k in entry.cls.__mro__ if name in vars(k))
    if isinstance(method, types.FunctionType):
        result = calls.call_sync(tx, UserMethodVariable(method, obj), [], {})
        if isinstance(result, ConstantVariable) and isinstance(result.value, str):
            return ConstantVariable(fn(result.value) if fn is str else result.value)
        tx.unsupported("unsupported_call", f"{entry.cls.__name__}.{name} returned a value that is not a str constant")
    if getattr(method, "__objclass__", None) is None or not issubclass(method.__objclass__, BaseException) or \
            not _makes_no_python_calls(entry.cls) or \
            not all(isinstance(a, ConstantVariable) for a in entry.args.items):
        tx.unsupported("unsupported_call", f"{fn.__name__}() of an exception whose args are not constants")
    return ConstantVariable(fn(stand_in(tx, obj)))  # (of the class itself, its args all constants)


def _text_method(fn: Any) -> Any:
    def rule(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
        obj = _self(tx, args, fn.__name__)
        if kwargs or len(args) != 1:
            tx.unsupported("unsupported_call", f"__{fn.__name__}__ with arguments")
        return text(tx, fn, obj)

    return rule


def _init_rule(init: Any) -> Any:
    return lambda tx, args, kwargs: c_init(tx, init, _self(tx, args, "__init__"), list(args[1:]), kwargs)


def _method_rules() -> dict:
    """The C methods of builtin exception classes the trace runs: ``add_note``, ``with_traceback``, each class's
    ``__init__``, ``__str__`` and ``__repr__``."""
    rules: dict[Any, Any] = {BaseException.add_note: _add_note, BaseException.with_traceback: _with_traceback}
    pending = [BaseException]
    while pending:
        klass = pending.pop()
        pending.extend(klass.__subclasses__())
        if not is_builtin_class(klass):
            continue
        for name, make in (("__init__", _init_rule), ("__str__", lambda m: _text_method(str)),
                           ("__repr__", lambda m: _text_method(repr))):
            if name in vars(klass):
                rules[vars(klass)[name]] = make(vars(klass)[name])
    return rules


#: Rules for calling the C methods of exceptions made in the trace (``BaseException.add_note`` -> its rule).
METHOD_RULES: dict[Any, Any] = _method_rules()
