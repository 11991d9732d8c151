"""The real steps: one executor per opcode, run on live values when tracing stopped at that instruction.

:meth:`stillframe.runtime.live.Continuation.step` runs the executor of the
instruction a graph break stopped at (DESIGN invariant 6), with CPython's
semantics for it; the symbolic handler of the same opcode lives in
:mod:`stillframe.trace.ops`. Register with ``@executor("OPNAME")`` (the
function carries the opcode's name, as handlers do) or :func:`register` for an
executor made by a factory. Some opcodes have an executor and no handler:
an exception handler's instructions run only for real, one by one
(``Continuation.concrete``). A test lists the handlers without an executor,
each with its reason. Something an executor does not model raises
:class:`~stillframe.errors.InternalError`, which the continuation never
delivers to the user's ``except``.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import functools
import operator
import sys
import types
from typing import TYPE_CHECKING, Any, Callable

from ..bytecode.operators import BINARY_OPERATORS, COMPARE_OPERATORS
from ..bytecode.reader import OPNAMES_311, OPNAMES_312, OPNAMES_313, Instruction
from ..errors import InternalError
from ..guards.guard import builtins_of
from ..rules.exceptions import HANDLER_CLASSES_ERROR, cause_call_checked, handler_classes_valid, handler_matches
from ..rules.frames import unbound_cell_error
from ..variables.builder import of_type
from ..variables.standins import NULL
from .trampoline import call_through_frames, frame_trampoline

if TYPE_CHECKING:
    from .live import Continuation, LiveFrame

Executor = Callable[["Continuation", "LiveFrame", Instruction], None]
EXECUTORS: dict[str, Executor] = {}


def register(opname: str, fn: Executor) -> Executor:
    """Make ``fn`` the real step of ``opname`` (an opname the bytecode reader produces, with no executor yet)."""
    assert opname in OPNAMES_311 | OPNAMES_312 | OPNAMES_313, f"an executor for {opname}, which no supported CPython emits"
    assert opname not in EXECUTORS, f"two executors for {opname}"
    EXECUTORS[opname] = fn
    return fn


def executor(*opnames: str) -> Callable[[Executor], Executor]:
    """Register the decorated function for ``opnames``; it is named after the first (as ``@handler`` asserts)."""

    def decorate(fn: Executor) -> Executor:
        assert fn.__name__ == opnames[0], f"executor {fn.__name__} registered for {opnames[0]}"
        for opname in opnames:
            register(opname, fn)
        return fn

    return decorate


def _call(cont: Continuation, frame: LiveFrame, fn: Any, args: list, kwargs: dict) -> None:
    if cont.reroute is not None:
        fn = cont.reroute(fn)
    if fn is super and not args and not kwargs:
        args = _zero_argument_super(frame)
    elif type(fn) is types.BuiltinFunctionType and fn in _FRAME_READERS and not args and not kwargs:
        frame.stack.append(_FRAME_READERS[fn](frame))
        return
    elif (fn is eval or fn is exec) and 1 <= len(args) <= 3 and not kwargs and \
            (len(args) == 1 or args[1] is None):  # the caller's namespaces: the user's frame's, not stillframe's
        args = [args[0], frame.globals, args[2] if len(args) == 3 and args[2] is not None else _frame_locals(frame)]
    at = next((i for i, f in enumerate(cont.frames) if f is frame), None)  # (the callers: inlined frames)
    frames = cont.frames[:at + 1] if at is not None else [frame]
    if isinstance(cont.handling, BaseException):
        cont.chained = True
        frame.stack.append(_handling(cont.handling, functools.partial(call_through_frames, frames), fn, args,
                                     kwargs))
        return
    frame.stack.append(call_through_frames(frames, fn, args, kwargs))


def _handling(exc: BaseException, step: Callable, fn: Any, args: list, kwargs: dict) -> Any:
    """``step(fn, args, kwargs)`` made while ``exc`` is being handled, as the user's ``except`` block makes it:
    ``sys.exc_info()``, ``traceback.format_exc()`` and ``logging.exception`` see ``exc``, and an exception the
    call raises has it as ``__context__``. ``exc``'s traceback is left as it was."""
    tb = exc.__traceback__
    try:
        raise exc
    except BaseException:
        exc.__traceback__ = tb
        return step(fn, args, kwargs)


def _frame_locals(frame: LiveFrame) -> dict:
    """``locals()`` of the user's frame: its bound local variables, then its bound cell and free variables, in
    CPython's order (a real step's caller is stillframe's own frame, whose locals eager never shows)."""
    code = frame.code.code
    found = {}
    for name in dict.fromkeys(code.co_varnames + code.co_cellvars + code.co_freevars):
        if name in frame.cells:
            try:
                found[name] = frame.cells[name].cell_contents
            except ValueError:  # an empty cell: unbound
                pass
        elif name in frame.locals and frame.locals[name] is not NULL:
            found[name] = frame.locals[name]
    return found


#: Builtins that, called without arguments, read their caller's frame: answered from the user's frame.
_FRAME_READERS: dict = {locals: _frame_locals, vars: _frame_locals, globals: lambda frame: frame.globals,
                        dir: lambda frame: sorted(_frame_locals(frame))}


def _zero_argument_super(frame: LiveFrame) -> list:
    """The arguments a bare ``super()`` finds in its caller's frame: the ``__class__`` cell and the first
    argument. A real step's caller is stillframe's own frame, so they are read from the user's frame here,
    with CPython's errors where they are missing."""
    code = frame.code.code
    if code.co_argcount == 0:
        raise RuntimeError("super(): no arguments")
    first = code.co_varnames[0]
    if first in frame.cells:  # the first argument is captured by a closure: it lives in its cell
        try:
            obj = frame.cells[first].cell_contents
        except ValueError:
            raise RuntimeError("super(): arg[0] deleted") from None
    elif first in frame.locals:
        obj = frame.locals[first]
    else:
        raise RuntimeError("super(): arg[0] deleted")
    cell = frame.cells.get("__class__") if "__class__" in code.co_freevars else None
    if cell is None:
        raise RuntimeError("super(): __class__ cell not found")
    try:
        cls = cell.cell_contents
    except ValueError:
        raise RuntimeError("super(): empty __class__ cell") from None
    if not isinstance(cls, type):
        raise RuntimeError(f"super(): __class__ is not a type ({type(cls).__name__})")
    return [cls, obj]


@executor("CALL")
def CALL(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    argc = inst.arg
    args = frame.stack[len(frame.stack) - argc:] if argc else []
    del frame.stack[len(frame.stack) - argc:]
    second = frame.stack.pop()
    first = frame.stack.pop()
    if first is NULL:
        fn = second
    else:
        fn, args = first, [second, *args]
    kwargs = {}
    if frame.kw_names:
        n = len(frame.kw_names)
        kwargs = dict(zip(frame.kw_names, args[-n:]))
        args = args[:-n]
        frame.kw_names = ()
    _call(cont, frame, fn, args, kwargs)


@executor("CALL_FUNCTION_EX")
def CALL_FUNCTION_EX(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    kwargs = frame.stack.pop() if inst.arg & 1 else {}
    args = frame.stack.pop()
    fn = frame.stack.pop()
    below = frame.stack.pop()
    called = fn if below is NULL else below
    if not isinstance(args, tuple) and not hasattr(type(args), "__iter__") and \
            not hasattr(type(args), "__getitem__"):  # CPython's check_args_iterable
        raise TypeError(f"{function_str(called)} argument after * must be an iterable, not {type(args).__name__}")
    if below is not NULL:
        fn, args = below, (fn, *args)
    _call(cont, frame, fn, list(args), dict(kwargs))


def function_str(fn: Any) -> str:
    """How CPython names a callable in a call's argument errors (``_PyObject_FunctionStr``): ``module.qualname()``,
    without the module for builtins."""
    try:
        qualname = fn.__qualname__
    except AttributeError:
        return str(fn)
    module = getattr(fn, "__module__", None)
    if isinstance(module, str) and module != "builtins":
        return f"{module}.{qualname}()"
    return f"{qualname}()"


def _unary(fn: Any) -> Any:
    def run(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
        frame.stack.append(fn(frame.stack.pop()))

    return run


@executor("BINARY_OP")
def BINARY_OP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    b = frame.stack.pop()
    a = frame.stack.pop()
    frame.stack.append(BINARY_OPERATORS[inst.argval](a, b))


@executor("COMPARE_OP")
def COMPARE_OP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    b = frame.stack.pop()
    a = frame.stack.pop()
    frame.stack.append(COMPARE_OPERATORS[inst.argval](a, b))


@executor("CONTAINS_OP")
def CONTAINS_OP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    container = frame.stack.pop()
    item = frame.stack.pop()
    frame.stack.append((item in container) != bool(inst.argval))


def _jump_if(test: Any, pop: bool = True, keep_on_jump: bool = False) -> Any:
    def run(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
        value = frame.stack[-1]
        taken = test(value)
        if pop or not (taken and keep_on_jump):
            frame.stack.pop()
        if taken:
            frame.ip = inst.target

    return run


@executor("FOR_ITER")
def FOR_ITER(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    if not hasattr(type(frame.stack[-1]), "__next__"):  # (CPython calls the slot, not next(): its own message for
        # an iterator whose class lost its __next__ since GET_ITER, test_iter test_3720)
        raise TypeError(f"'{type(frame.stack[-1]).__name__}' object is not iterable")
    try:
        frame.stack.append(next(frame.stack[-1]))
    except StopIteration:
        frame.stack.pop()
        frame.ip = inst.target


@executor("GET_ITER")
def GET_ITER(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(iter(frame.stack.pop()))


@executor("UNPACK_SEQUENCE")
def UNPACK_SEQUENCE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.extend(reversed(unpack_iterable(frame.stack.pop(), inst.arg, None)))


def unpack_iterable(seq: Any, before: int, after: int | None) -> list:
    """CPython's ``unpack_iterable``: ``before`` items by ``next()``, then (``after`` None) the check that none is
    left, else the rest as a list with ``after`` items taken off its end into their own slots. A tuple or list
    is read as it is; nothing else's ``__len__`` is called before its items are (eager's order of effects)."""
    if type(seq) in (tuple, list) and after is None and len(seq) == before:
        return list(seq)
    try:
        it = iter(seq)
    except TypeError:
        if not hasattr(type(seq), "__iter__") and not hasattr(type(seq), "__getitem__"):
            raise TypeError(f"cannot unpack non-iterable {type(seq).__name__} object") from None
        raise
    items = []
    for _ in range(before):
        try:
            items.append(next(it))
        except StopIteration:
            if after is None:
                raise ValueError(f"not enough values to unpack (expected {before}, got {len(items)})") from None
            raise ValueError(f"not enough values to unpack (expected at least {before + after}, got "
                             f"{len(items)})") from None
    if after is None:
        try:
            next(it)
        except StopIteration:
            return items
        raise ValueError(f"too many values to unpack (expected {before})")
    rest = list(it)
    if len(rest) < after:
        raise ValueError(f"not enough values to unpack (expected at least {before + after}, got "
                         f"{before + len(rest)})")
    return items + [rest[:len(rest) - after]] + rest[len(rest) - after:]


@executor("LOAD_ATTR")
def LOAD_ATTR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(getattr(frame.stack.pop(), inst.argval))


@executor("LOAD_METHOD")
def LOAD_METHOD(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.extend((NULL, getattr(frame.stack.pop(), inst.argval)))


@executor("STORE_ATTR")
def STORE_ATTR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    obj = frame.stack.pop()
    value = frame.stack.pop()
    setattr(obj, inst.argval, value)


@executor("BINARY_SUBSCR")
def BINARY_SUBSCR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    key = frame.stack.pop()
    frame.stack.append(frame.stack.pop()[key])


@executor("STORE_SUBSCR")
def STORE_SUBSCR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    key = frame.stack.pop()
    container = frame.stack.pop()
    container[key] = frame.stack.pop()


@executor("FORMAT_VALUE")
def FORMAT_VALUE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    spec = frame.stack.pop() if inst.arg & 0x04 else ""
    value = frame.stack.pop()
    convert = {0: None, 1: str, 2: repr, 3: ascii}[inst.arg & 0x03]
    frame.stack.append(format(convert(value) if convert else value, spec))


@executor("BUILD_STRING")
def BUILD_STRING(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    parts = frame.stack[len(frame.stack) - inst.arg:]
    del frame.stack[len(frame.stack) - inst.arg:]
    frame.stack.append("".join(parts))


@executor("RAISE_VARARGS")
def RAISE_VARARGS(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    if inst.arg == 0:  # a bare `raise`: the exception the user's `except` handles, else the caller's (CPython's
        active = cont.handling if isinstance(cont.handling, BaseException) else sys.exc_info()[1]  # exc_info)
        if active is None:
            raise RuntimeError("No active exception to reraise")
        raise active
    cause = frame.stack.pop() if inst.arg == 2 else None
    exc = frame.stack.pop()
    if of_type(exc, type) and issubclass(exc, BaseException):  # (CPython's checks are by type: no __class__ read)
        made = exc()
        if not of_type(made, BaseException):
            raise TypeError(f"calling {exc!r} should have returned an instance of BaseException, not {type(made)!r}")
        exc = made
    if not of_type(exc, BaseException):
        raise TypeError("exceptions must derive from BaseException")
    if inst.arg == 2:
        if of_type(cause, type) and issubclass(cause, BaseException):  # `from C`: C() is the cause
            made = cause()
            if not of_type(made, BaseException) and cause_call_checked():
                raise TypeError(f"calling {cause!r} should have returned an instance of BaseException, "
                                f"not {type(made)!r}")
            cause = made
        elif cause is not None and not of_type(cause, BaseException):
            raise TypeError("exception causes must derive from BaseException")
        exc.__cause__ = cause
    if isinstance(cont.handling, BaseException) and cont.handling is not exc:
        exc.__context__ = cont.handling  # CPython's implicit chaining (the real raise below sees no handler)
    frame_trampoline(frame, "raise")(exc)


def pop_n(frame: LiveFrame, n: int) -> list:
    """The top ``n`` values of the live stack, popped, deepest first."""
    if n == 0:
        return []
    values = frame.stack[-n:]
    del frame.stack[-n:]
    return values


@executor("LOAD_FAST", "LOAD_FAST_CHECK")
def LOAD_FAST(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    if inst.argval not in frame.locals:
        raise UnboundLocalError(f"cannot access local variable '{inst.argval}' where it is not associated with "
                                "a value")
    frame.stack.append(frame.locals[inst.argval])


@executor("LOAD_GLOBAL")
def LOAD_GLOBAL(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    if inst.push_null:
        frame.stack.append(NULL)
    name = inst.argval
    value = frame.globals.get(name, _ABSENT)
    if value is _ABSENT:
        value = builtins_of(frame.globals).get(name, _ABSENT)  # the user's builtins, as rebound (not own_builtins)
    if value is _ABSENT:
        raise NameError(f"name '{name}' is not defined", name=name)
    frame.stack.append(value)


_ABSENT = object()


@executor("SWAP")
def SWAP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack[-1], frame.stack[-inst.arg] = frame.stack[-inst.arg], frame.stack[-1]


@executor("BUILD_MAP")
def BUILD_MAP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    flat = pop_n(frame, 2 * inst.arg)
    frame.stack.append(dict(zip(flat[::2], flat[1::2])))


@executor("BUILD_CONST_KEY_MAP")
def BUILD_CONST_KEY_MAP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    keys = frame.stack.pop()
    frame.stack.append(dict(zip(keys, pop_n(frame, inst.arg))))


@executor("MAKE_FUNCTION")
def MAKE_FUNCTION(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    code = frame.stack.pop()
    closure = frame.stack.pop() if inst.arg & 0x08 else None
    annotations = frame.stack.pop() if inst.arg & 0x04 else None
    kwdefaults = frame.stack.pop() if inst.arg & 0x02 else None
    defaults = frame.stack.pop() if inst.arg & 0x01 else None
    fn = types.FunctionType(code, frame.globals, code.co_name, defaults, closure)
    fn.__qualname__ = code.co_qualname
    fn.__kwdefaults__ = kwdefaults
    if annotations is not None:
        fn.__annotations__ = dict(zip(annotations[::2], annotations[1::2])) if isinstance(annotations, tuple) \
            else annotations
    frame.stack.append(fn)


@executor("MAKE_CELL")
def MAKE_CELL(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    cell = types.CellType()
    if inst.argval in frame.locals:
        cell.cell_contents = frame.locals[inst.argval]
    frame.cells[inst.argval] = cell


@executor("LOAD_DEREF")
def LOAD_DEREF(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    try:
        frame.stack.append(frame.cells[inst.argval].cell_contents)
        return
    except ValueError:  # (raised outside this handler: eager's error has no __context__)
        pass
    raise unbound_cell_error(frame.code.code, inst.argval)


@executor("STORE_DEREF")
def STORE_DEREF(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.cells[inst.argval].cell_contents = frame.stack.pop()


@executor("BEFORE_WITH")
def BEFORE_WITH(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    """CPython 3.11's BEFORE_WITH: ``__enter__`` and ``__exit__`` looked up on the type (bound through their
    ``__get__``), a missing one a ``TypeError`` naming the protocol; then ``__enter__()``."""
    manager = frame.stack.pop()
    enter = _lookup_special(manager, "__enter__")
    if enter is None:
        raise TypeError(f"'{type(manager).__name__}' object does not support the context manager protocol")
    exit_ = _lookup_special(manager, "__exit__")
    if exit_ is None:
        raise TypeError(f"'{type(manager).__name__}' object does not support the context manager protocol "
                        "(missed __exit__ method)")
    frame.stack.append(exit_)
    frame.stack.append(enter())


def _lookup_special(obj: Any, name: str) -> Any:
    """``_PyObject_LookupSpecial``: ``name`` found on ``type(obj)``'s MRO (never the instance), bound to ``obj``
    through its type's ``__get__``; None where no class has it."""
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            get = getattr(type(attr), "__get__", None)
            return attr if get is None else get(attr, obj, type(obj))
    return None


@executor("RETURN_VALUE")
def RETURN_VALUE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    cont.return_value(frame.stack.pop())


@executor("RETURN_CONST")
def RETURN_CONST(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    cont.return_value(inst.argval)


@executor("YIELD_VALUE")
def YIELD_VALUE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.yields.append(frame.stack.pop())
    frame.stack.append(None)


@executor("UNPACK_EX")
def UNPACK_EX(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.extend(reversed(unpack_iterable(frame.stack.pop(), inst.arg & 0xFF, inst.arg >> 8)))


@executor("DELETE_SUBSCR")
def DELETE_SUBSCR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    key = frame.stack.pop()
    del frame.stack.pop()[key]


@executor("BINARY_SLICE")
def BINARY_SLICE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    stop, start = frame.stack.pop(), frame.stack.pop()
    frame.stack.append(frame.stack.pop()[start:stop])


@executor("STORE_SLICE")
def STORE_SLICE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    stop, start = frame.stack.pop(), frame.stack.pop()
    container = frame.stack.pop()
    container[start:stop] = frame.stack.pop()


@executor("IMPORT_NAME")
def IMPORT_NAME(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    fromlist = frame.stack.pop()
    level = frame.stack.pop()
    # the __import__ of the frame's builtins, as CPython calls it: a user's hook or mock too (not own_builtins')
    import_ = builtins_of(frame.globals).get("__import__")
    if import_ is None:
        raise ImportError("__import__ not found")
    frame.stack.append(import_(inst.argval, frame.globals, None, fromlist, level))


@executor("LOAD_FAST_AND_CLEAR")
def LOAD_FAST_AND_CLEAR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(frame.locals.pop(inst.argval, NULL))


@executor("STORE_FAST")
def STORE_FAST(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    value = frame.stack.pop()
    if value is NULL:
        frame.locals.pop(inst.argval, None)
    else:
        frame.locals[inst.argval] = value


@executor("CALL_INTRINSIC_1")
def CALL_INTRINSIC_1(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    if inst.argval == "INTRINSIC_LIST_TO_TUPLE":
        frame.stack.append(tuple(frame.stack.pop()))
    elif inst.argval == "INTRINSIC_UNARY_POSITIVE":
        frame.stack.append(+frame.stack.pop())
    else:
        raise InternalError(f"no real step models {inst.argval}")


@executor("LOAD_SUPER_ATTR")
def LOAD_SUPER_ATTR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    self_ = frame.stack.pop()
    cls = frame.stack.pop()
    super_ = frame.stack.pop()
    if super_ is super:  # the zero-argument form's cls and self are the frame's __class__ and first argument
        bound = super(cls, self_)
    else:  # a shadowed global `super`: called as written, super() with no arguments, super(a, b) with two
        bound = super_(cls, self_) if inst.arg & 2 else super_()
    attr = getattr(bound, inst.argval)
    if inst.push_null:
        frame.stack.append(NULL)
    frame.stack.append(attr)


@executor("PUSH_EXC_INFO")
def PUSH_EXC_INFO(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    value = frame.stack.pop()
    frame.stack.append(cont.handling)
    cont.handling = value
    frame.stack.append(value)


@executor("POP_EXCEPT")
def POP_EXCEPT(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    cont.handling = frame.stack.pop()
    if cont.handling is None:
        cont.concrete = False  # out of the handler: tracing may resume from here


@executor("CHECK_EXC_MATCH")
def CHECK_EXC_MATCH(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    right = frame.stack.pop()
    if not handler_classes_valid(right):
        raise TypeError(HANDLER_CLASSES_ERROR)
    frame.stack.append(handler_matches(type(frame.stack[-1]), right))


@executor("RERAISE")
def RERAISE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    exc = frame.stack.pop()
    if inst.arg:
        frame.stack.pop()
    raise exc


@executor("WITH_EXCEPT_START")
def WITH_EXCEPT_START(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    exc = frame.stack[-1]
    exit_fn = frame.stack[-4]
    # called as the user's frame calls it, inside its handler: sys.exc_info() in __exit__ is ``exc`` (ExitStack
    # reads it to chain what its callbacks raise, as nested `with` statements would)
    _call(cont, frame, exit_fn, [type(exc), exc, exc.__traceback__], {})


@executor("MATCH_CLASS")
def MATCH_CLASS(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    """``case Cls(p0, p1, key=k)``: the matched attributes as a tuple, or ``None`` (CPython's MATCH_CLASS, run by a
    real ``match`` statement of the same shape: :func:`_real_match`)."""
    names = frame.stack.pop()
    cls = frame.stack.pop()
    subject = frame.stack.pop()
    fields = [f"_{i}" for i in range(inst.arg)] + [f"{name}=_{inst.arg + i}" for i, name in enumerate(names)]
    frame.stack.append(_real_match(f"ns.cls({', '.join(fields)})", inst.arg + len(names))(
        subject, types.SimpleNamespace(cls=cls)))


@executor("MATCH_KEYS")
def MATCH_KEYS(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    """``case {k0: p0, k1: p1}`` (the subject is a mapping with enough keys): the values as a tuple, or ``None``
    (CPython's MATCH_KEYS, duplicate keys a ValueError, run by a real ``match``: :func:`_real_match`)."""
    keys, subject = frame.stack[-1], frame.stack[-2]
    pattern = "{" + ", ".join(f"ns.k{i}: _{i}" for i in range(len(keys))) + "}"
    frame.stack.append(_real_match(pattern, len(keys))(subject, types.SimpleNamespace(
        **{f"k{i}": key for i, key in enumerate(keys)})))


@functools.lru_cache(maxsize=256)
def _real_match(pattern: str, captures: int) -> Callable[[Any, Any], tuple | None]:
    """A function ``(subject, ns) -> tuple | None`` that runs ``match subject: case <pattern>`` for real and returns
    the ``captures`` values the pattern bound to ``_0, _1, ...``, or ``None`` when it does not match: CPython's own
    MATCH_CLASS / MATCH_KEYS, with their errors (``__match_args__`` not a tuple, too many positional sub-patterns,
    an attribute given twice, a duplicate key) and messages, on every Python version. ``pattern`` reads the class
    and the keys from ``ns`` (value patterns). Its frames are dropped from user tracebacks, as stillframe's are."""
    values = ", ".join(f"_{i}" for i in range(captures)) + ("," if captures == 1 else "")
    source = (f"def real_match(subject, ns):\n    match subject:\n        case {pattern}:\n"
              f"            return ({values})\n")
    namespace: dict = {}
    exec(compile(source, _MATCH_FILENAME, "exec", dont_inherit=True), namespace)
    return namespace["real_match"]


_MATCH_FILENAME = __file__.rsplit(".", 1)[0] + "_match.py"  # inside the package: user_traceback drops its frames


def _is_none(v: Any) -> bool:
    return v is None


@executor("DELETE_ATTR")
def DELETE_ATTR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    delattr(frame.stack.pop(), inst.argval)


@executor("RETURN_GENERATOR")
def RETURN_GENERATOR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(None)


@executor("KW_NAMES")
def KW_NAMES(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    setattr(frame, "kw_names", tuple(inst.argval))


@executor("LOAD_CONST")
def LOAD_CONST(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(inst.argval)


@executor("LOAD_ASSERTION_ERROR")
def LOAD_ASSERTION_ERROR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(AssertionError)


@executor("END_FOR")
def END_FOR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    pop_n(frame, 2)


@executor("IMPORT_FROM")
def IMPORT_FROM(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(getattr(frame.stack[-1], inst.argval))


@executor("SET_UPDATE")
def SET_UPDATE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack[-inst.arg - 1].update(frame.stack.pop())


@executor("DELETE_FAST")
def DELETE_FAST(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    if frame.locals.pop(inst.argval, NULL) is NULL:
        raise UnboundLocalError(f"cannot access local variable '{inst.argval}' where it is not associated with "
                                "a value")


@executor("STORE_GLOBAL")
def STORE_GLOBAL(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.globals.__setitem__(inst.argval, frame.stack.pop())


register("UNARY_NEGATIVE", _unary(operator.neg))
register("UNARY_POSITIVE", _unary(operator.pos))
register("UNARY_INVERT", _unary(operator.invert))
register("UNARY_NOT", _unary(operator.not_))
register("POP_JUMP_IF_TRUE", _jump_if(bool))
register("POP_JUMP_IF_FALSE", _jump_if(operator.not_))
register("POP_JUMP_IF_NONE", _jump_if(_is_none))
register("POP_JUMP_IF_NOT_NONE", _jump_if(lambda v: v is not None))
register("JUMP_IF_TRUE_OR_POP", _jump_if(bool, pop=False, keep_on_jump=True))
register("JUMP_IF_FALSE_OR_POP", _jump_if(operator.not_, pop=False, keep_on_jump=True))

