"""Continuations: the live state of a symbolic call stack at a graph break, and the one real step.

When tracing stops at an instruction it cannot capture (DESIGN invariant 6),
the plan's exit rebuilds every frame of the symbolic call stack as a
:class:`LiveFrame` of real Python values (tensors come from the graph's
outputs), and :meth:`Continuation.step` executes that one instruction for
real, with CPython's semantics for it. Tracing then resumes at the next
instruction: :func:`flatten` names every live value (``'0:x'`` is local ``x``
of the outermost frame, ``'1:s2'`` the third stack slot of the frame it
called), and the resumed trace reads them through those names, so it is
guarded and cached like any other entry, keyed by :meth:`Continuation.key`.

Values only the interpreter models get small real stand-ins that the resumed
trace recognises: :data:`NULL` (CPython's NULL stack marker),
:class:`ResumableIterator` (an iterator over a fixed list),
:class:`GradModeExit` (the ``__exit__`` of a grad-mode block).
"""

from __future__ import annotations

import builtins
import collections.abc
import operator
import types
from dataclasses import dataclass, field
from typing import Any

from ..bytecode.operators import BINARY_OPERATORS, COMPARE_OPERATORS
from ..bytecode.reader import Bytecode, Instruction
from ..variables.standins import NULL, ResumableIterator


@dataclass
class LiveFrame:
    """One frame of the call stack with real values: what ``Frame`` is with VariableTrackers."""

    code: Bytecode
    ip: int
    stack: list
    locals: dict
    cells: dict
    globals: dict
    globals_module: str | None
    kw_names: tuple = ()
    yields: list | None = None


@dataclass
class Continuation:
    """The live call stack at a graph break; ``frames[-1].ip`` is the instruction to execute for real."""

    frames: list
    reason: Any = None
    returned: Any = field(default=None)
    concrete: bool = False  # running instruction by instruction (no plan for where the stack stands)
    handling: Any = None  # the exception an `except` block of the user's code is handling, if any

    def key(self) -> tuple:
        """What resumed cache entries are keyed by: the code objects and instruction indexes of the stack."""
        return tuple((f.code.code, f.ip) for f in self.frames)

    def step(self) -> bool:
        """Execute the top frame's instruction for real. True once the outermost frame has returned
        (its value is then in ``returned``)."""
        frame = self.frames[-1]
        inst = frame.code.instructions[frame.ip]
        frame.ip += 1
        try:
            EXECUTORS[inst.opname](self, frame, inst)
        except Exception as exc:
            self._unwind(exc, inst.index)
        return not self.frames

    def _unwind(self, exc: Exception, index: int) -> None:
        """Send an exception raised by a real step to the innermost ``except``/``finally`` of the user's frames
        (their exception tables), as CPython would; with none, it reaches the caller, annotated with the
        user's lines it passed through."""
        while self.frames:
            frame = self.frames[-1]
            entry = frame.code.exception_handler(index)
            if entry is not None:
                del frame.stack[entry.depth:]
                if entry.lasti:
                    frame.stack.append(frame.code.instructions[index].offset)
                frame.stack.append(exc)
                frame.ip = entry.target
                self.concrete = True  # handlers run instruction by instruction
                return
            filename, line = frame.code.location(index)
            exc.add_note(f"  (stillframe) in the user's frame {frame.code.code.co_qualname} at {filename}:{line}")
            self.frames.pop()
            if self.frames:
                index = self.frames[-1].ip - 1
        raise exc

    def return_value(self, value: Any) -> None:
        frame = self.frames.pop()
        if frame.yields is not None:
            value = ResumableIterator(frame.yields)
        if self.frames:
            self.frames[-1].stack.append(value)
        else:
            self.returned = value


def flatten(frames: list) -> dict:
    """Name every live value of a call stack (the ``L`` of a resumed trace)."""
    L: dict[str, Any] = {}
    for i, f in enumerate(frames):
        for j, v in enumerate(f.stack):
            L[f"{i}:s{j}"] = v
        for name, v in f.locals.items():
            L[f"{i}:{name}"] = v
        for name, cell in f.cells.items():
            L[f"{i}:cell:{name}"] = cell
        if f.yields is not None:
            L[f"{i}:yields"] = f.yields
    return L


# --------------------------------------------------------------- real execution
_TRAMPOLINES: dict[tuple, Any] = {}


def _trampoline(frame: LiveFrame, kind: str) -> Any:
    """A one-line function whose code claims the user's file, line and function name.

    The real step calls (or raises) through it, so code that looks at its
    caller's frame -- ``warnings.warn``, ``logging``, tracebacks -- sees the
    user's ``file:line`` and function, as in eager.
    """
    code = frame.code.code
    return trampoline(code, frame.code.instructions[frame.ip - 1].lineno or code.co_firstlineno, kind)


def trampoline(code: types.CodeType, line: int, kind: str) -> Any:
    """:func:`_trampoline` for line ``line`` of ``code`` (also used to replay deferred logging calls)."""
    key = (code.co_filename, line, code.co_name, kind)
    fn = _TRAMPOLINES.get(key)
    if fn is None:
        body = "return ___fn(*___a, **___k)" if kind == "call" else "raise ___e"
        params = "___fn, ___a, ___k" if kind == "call" else "___e"
        text = "\n" * (line - 1) + f"def ___step({params}): {body}\n"
        namespace: dict = {}
        exec(compile(text, code.co_filename, "exec"), namespace)
        fn = namespace["___step"]
        fn.__code__ = fn.__code__.replace(co_name=code.co_name, co_qualname=code.co_qualname)
        _TRAMPOLINES[key] = fn
    return fn


def _call(cont: Continuation, frame: LiveFrame, fn: Any, args: list, kwargs: dict) -> None:
    frame.stack.append(_trampoline(frame, "call")(fn, args, kwargs))


def _CALL(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
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


def _CALL_FUNCTION_EX(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    kwargs = frame.stack.pop() if inst.arg & 1 else {}
    args = frame.stack.pop()
    fn = frame.stack.pop()
    below = frame.stack.pop()
    if below is not NULL:
        fn, args = below, (fn, *args)
    _call(cont, frame, fn, list(args), dict(kwargs))


def _unary(fn: Any) -> Any:
    def run(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
        frame.stack.append(fn(frame.stack.pop()))

    return run


def _BINARY_OP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    b = frame.stack.pop()
    a = frame.stack.pop()
    frame.stack.append(BINARY_OPERATORS[inst.argval](a, b))


def _COMPARE_OP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    b = frame.stack.pop()
    a = frame.stack.pop()
    frame.stack.append(COMPARE_OPERATORS[inst.argval](a, b))


def _CONTAINS_OP(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
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


def _FOR_ITER(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    try:
        frame.stack.append(next(frame.stack[-1]))
    except StopIteration:
        frame.stack.pop()
        frame.ip = inst.target


def _GET_ITER(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(iter(frame.stack.pop()))


def _UNPACK_SEQUENCE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    values = list(frame.stack.pop())
    if len(values) != inst.arg:
        if len(values) > inst.arg:
            raise ValueError(f"too many values to unpack (expected {inst.arg})")
        raise ValueError(f"not enough values to unpack (expected {inst.arg}, got {len(values)})")
    frame.stack.extend(reversed(values))


def _LOAD_ATTR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(getattr(frame.stack.pop(), inst.argval))


def _LOAD_METHOD(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.extend((NULL, getattr(frame.stack.pop(), inst.argval)))


def _STORE_ATTR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    obj = frame.stack.pop()
    value = frame.stack.pop()
    setattr(obj, inst.argval, value)


def _BINARY_SUBSCR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    key = frame.stack.pop()
    frame.stack.append(frame.stack.pop()[key])


def _STORE_SUBSCR(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    key = frame.stack.pop()
    container = frame.stack.pop()
    container[key] = frame.stack.pop()


def _FORMAT_VALUE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    spec = frame.stack.pop() if inst.arg & 0x04 else ""
    value = frame.stack.pop()
    convert = {0: None, 1: str, 2: repr, 3: ascii}[inst.arg & 0x03]
    frame.stack.append(format(convert(value) if convert else value, spec))


def _BUILD_STRING(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    parts = frame.stack[len(frame.stack) - inst.arg:]
    del frame.stack[len(frame.stack) - inst.arg:]
    frame.stack.append("".join(parts))


def _RAISE_VARARGS(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    if inst.arg == 0:
        raise cont.handling
    cause = frame.stack.pop() if inst.arg == 2 else None
    exc = frame.stack.pop()
    if isinstance(exc, type):
        exc = exc()
    if inst.arg == 2:
        exc.__cause__ = cause
    _trampoline(frame, "raise")(exc)


def _simple(fn: Any) -> Any:
    """An executor from a function of (frame, inst) that needs no continuation."""

    def run(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
        fn(frame, inst)

    return run


def _pop_n(frame: LiveFrame, n: int) -> list:
    if n == 0:
        return []
    values = frame.stack[-n:]
    del frame.stack[-n:]
    return values


def _load_fast(frame: LiveFrame, inst: Instruction) -> None:
    if inst.argval not in frame.locals:
        raise UnboundLocalError(f"cannot access local variable '{inst.argval}' where it is not associated with "
                                "a value")
    frame.stack.append(frame.locals[inst.argval])


def _load_global(frame: LiveFrame, inst: Instruction) -> None:
    import builtins

    if inst.push_null:
        frame.stack.append(NULL)
    name = inst.argval
    if name in frame.globals:
        frame.stack.append(frame.globals[name])
    elif hasattr(builtins, name):
        frame.stack.append(getattr(builtins, name))
    else:
        raise NameError(f"name '{name}' is not defined")


def _swap(frame: LiveFrame, inst: Instruction) -> None:
    frame.stack[-1], frame.stack[-inst.arg] = frame.stack[-inst.arg], frame.stack[-1]


def _build_map(frame: LiveFrame, inst: Instruction) -> None:
    flat = _pop_n(frame, 2 * inst.arg)
    frame.stack.append(dict(zip(flat[::2], flat[1::2])))


def _build_const_key_map(frame: LiveFrame, inst: Instruction) -> None:
    keys = frame.stack.pop()
    frame.stack.append(dict(zip(keys, _pop_n(frame, inst.arg))))


def _make_function(frame: LiveFrame, inst: Instruction) -> None:
    import types

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


def _make_cell(frame: LiveFrame, inst: Instruction) -> None:
    import types

    cell = types.CellType()
    if inst.argval in frame.locals:
        cell.cell_contents = frame.locals[inst.argval]
    frame.cells[inst.argval] = cell


def _load_deref(frame: LiveFrame, inst: Instruction) -> None:
    try:
        frame.stack.append(frame.cells[inst.argval].cell_contents)
    except ValueError:
        raise NameError(f"cannot access free variable '{inst.argval}' where it is not associated with a value "
                        "in enclosing scope") from None


def _store_deref(frame: LiveFrame, inst: Instruction) -> None:
    frame.cells[inst.argval].cell_contents = frame.stack.pop()


def _BEFORE_WITH(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    manager = frame.stack.pop()
    exit_ = type(manager).__exit__.__get__(manager)
    frame.stack.append(exit_)
    frame.stack.append(type(manager).__enter__(manager))


def _RETURN_VALUE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    cont.return_value(frame.stack.pop())


def _RETURN_CONST(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    cont.return_value(inst.argval)


def _YIELD_VALUE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    frame.yields.append(frame.stack.pop())
    frame.stack.append(None)


def _unpack_ex(frame: LiveFrame, inst: Instruction) -> None:
    before, after = inst.arg & 0xFF, inst.arg >> 8
    values = list(frame.stack.pop())
    if len(values) < before + after:
        raise ValueError(f"not enough values to unpack (expected at least {before + after}, got {len(values)})")
    middle = values[before:len(values) - after]
    frame.stack.extend(reversed(values[:before] + [middle] + values[len(values) - after:]))


def _delete_subscr(frame: LiveFrame, inst: Instruction) -> None:
    key = frame.stack.pop()
    del frame.stack.pop()[key]


def _binary_slice(frame: LiveFrame, inst: Instruction) -> None:
    stop, start = frame.stack.pop(), frame.stack.pop()
    frame.stack.append(frame.stack.pop()[start:stop])


def _store_slice(frame: LiveFrame, inst: Instruction) -> None:
    stop, start = frame.stack.pop(), frame.stack.pop()
    container = frame.stack.pop()
    container[start:stop] = frame.stack.pop()


def _import_name(frame: LiveFrame, inst: Instruction) -> None:
    fromlist = frame.stack.pop()
    level = frame.stack.pop()
    frame.stack.append(__import__(inst.argval, frame.globals, None, fromlist, level))


def _load_fast_and_clear(frame: LiveFrame, inst: Instruction) -> None:
    frame.stack.append(frame.locals.pop(inst.argval, NULL))


def _store_fast(frame: LiveFrame, inst: Instruction) -> None:
    value = frame.stack.pop()
    if value is NULL:
        frame.locals.pop(inst.argval, None)
    else:
        frame.locals[inst.argval] = value


def _intrinsic_1(frame: LiveFrame, inst: Instruction) -> None:
    if inst.argval == "INTRINSIC_LIST_TO_TUPLE":
        frame.stack.append(tuple(frame.stack.pop()))
    elif inst.argval == "INTRINSIC_UNARY_POSITIVE":
        frame.stack.append(+frame.stack.pop())
    else:
        raise NotImplementedError(inst.argval)


def _load_super_attr(frame: LiveFrame, inst: Instruction) -> None:
    self_ = frame.stack.pop()
    cls = frame.stack.pop()
    super_ = frame.stack.pop()
    attr = getattr(super_(cls, self_), inst.argval)
    if inst.push_null:
        frame.stack.append(NULL)
    frame.stack.append(attr)


def _PUSH_EXC_INFO(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    value = frame.stack.pop()
    frame.stack.append(cont.handling)
    cont.handling = value
    frame.stack.append(value)


def _POP_EXCEPT(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    cont.handling = frame.stack.pop()
    if cont.handling is None:
        cont.concrete = False  # out of the handler: tracing may resume from here


def _CHECK_EXC_MATCH(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    right = frame.stack.pop()
    frame.stack.append(isinstance(frame.stack[-1], right))


def _RERAISE(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    exc = frame.stack.pop()
    if inst.arg:
        frame.stack.pop()
    raise exc


def _WITH_EXCEPT_START(cont: Continuation, frame: LiveFrame, inst: Instruction) -> None:
    exc = frame.stack[-1]
    exit_fn = frame.stack[-4]
    frame.stack.append(exit_fn(type(exc), exc, exc.__traceback__))


def _match_class(frame: LiveFrame, inst: Instruction) -> None:
    """``case Cls(p0, p1, key=k)``: the matched attributes as a tuple, or ``None`` (CPython's MATCH_CLASS)."""
    names = frame.stack.pop()
    cls = frame.stack.pop()
    subject = frame.stack.pop()
    if not isinstance(subject, cls):
        frame.stack.append(None)
        return
    values = []
    match_self = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)
    if inst.arg:
        match_args = getattr(cls, "__match_args__", None)
        if match_args is None and cls in match_self and inst.arg == 1:
            values.append(subject)
        else:
            match_args = match_args or ()
            if inst.arg > len(match_args):
                raise TypeError(f"{cls.__name__}() accepts {len(match_args)} positional sub-patterns "
                                f"({inst.arg} given)")
            for name in match_args[:inst.arg]:
                if not hasattr(subject, name):
                    frame.stack.append(None)
                    return
                values.append(getattr(subject, name))
    for name in names:
        if not hasattr(subject, name):
            frame.stack.append(None)
            return
        values.append(getattr(subject, name))
    frame.stack.append(tuple(values))


def _match_keys(frame: LiveFrame, inst: Instruction) -> None:
    keys, subject = frame.stack[-1], frame.stack[-2]
    missing = object()
    values = [subject.get(k, missing) for k in keys]
    frame.stack.append(None if any(v is missing for v in values) else tuple(values))


def _is_none(v: Any) -> bool:
    return v is None


EXECUTORS = {
    "CALL": _CALL,
    "CALL_FUNCTION_EX": _CALL_FUNCTION_EX,
    "BINARY_OP": _BINARY_OP,
    "COMPARE_OP": _COMPARE_OP,
    "CONTAINS_OP": _CONTAINS_OP,
    "UNARY_NEGATIVE": _unary(operator.neg),
    "UNARY_POSITIVE": _unary(operator.pos),
    "UNARY_INVERT": _unary(operator.invert),
    "UNARY_NOT": _unary(operator.not_),
    "POP_JUMP_IF_TRUE": _jump_if(bool),
    "POP_JUMP_IF_FALSE": _jump_if(operator.not_),
    "POP_JUMP_IF_NONE": _jump_if(_is_none),
    "POP_JUMP_IF_NOT_NONE": _jump_if(lambda v: v is not None),
    "JUMP_IF_TRUE_OR_POP": _jump_if(bool, pop=False, keep_on_jump=True),
    "JUMP_IF_FALSE_OR_POP": _jump_if(operator.not_, pop=False, keep_on_jump=True),
    "FOR_ITER": _FOR_ITER,
    "GET_ITER": _GET_ITER,
    "UNPACK_SEQUENCE": _UNPACK_SEQUENCE,
    "LOAD_ATTR": _LOAD_ATTR,
    "LOAD_METHOD": _LOAD_METHOD,
    "STORE_ATTR": _STORE_ATTR,
    "DELETE_ATTR": _simple(lambda f, i: delattr(f.stack.pop(), i.argval)),
    "BINARY_SUBSCR": _BINARY_SUBSCR,
    "STORE_SUBSCR": _STORE_SUBSCR,
    "FORMAT_VALUE": _FORMAT_VALUE,
    "BUILD_STRING": _BUILD_STRING,
    "RAISE_VARARGS": _RAISE_VARARGS,
    "PUSH_EXC_INFO": _PUSH_EXC_INFO,
    "POP_EXCEPT": _POP_EXCEPT,
    "CHECK_EXC_MATCH": _CHECK_EXC_MATCH,
    "RERAISE": _RERAISE,
    "WITH_EXCEPT_START": _WITH_EXCEPT_START,
    "BEFORE_WITH": _BEFORE_WITH,
    "RETURN_VALUE": _RETURN_VALUE,
    "RETURN_CONST": _RETURN_CONST,
    "YIELD_VALUE": _YIELD_VALUE,
    "RETURN_GENERATOR": _simple(lambda f, i: f.stack.append(None)),
    "NOP": _simple(lambda f, i: None),
    "RESUME": _simple(lambda f, i: None),
    "PRECALL": _simple(lambda f, i: None),
    "COPY_FREE_VARS": _simple(lambda f, i: None),
    "KW_NAMES": _simple(lambda f, i: setattr(f, "kw_names", tuple(i.argval))),
    "LOAD_CONST": _simple(lambda f, i: f.stack.append(i.argval)),
    "LOAD_FAST": _simple(_load_fast),
    "LOAD_FAST_CHECK": _simple(_load_fast),
    "STORE_FAST": _simple(_store_fast),
    "LOAD_FAST_AND_CLEAR": _simple(_load_fast_and_clear),
    "LOAD_ASSERTION_ERROR": _simple(lambda f, i: f.stack.append(AssertionError)),
    "END_FOR": _simple(lambda f, i: _pop_n(f, 2)),
    "UNPACK_EX": _simple(_unpack_ex),
    "DELETE_SUBSCR": _simple(_delete_subscr),
    "BINARY_SLICE": _simple(_binary_slice),
    "STORE_SLICE": _simple(_store_slice),
    "IMPORT_NAME": _simple(_import_name),
    "IMPORT_FROM": _simple(lambda f, i: f.stack.append(getattr(f.stack[-1], i.argval))),
    "CALL_INTRINSIC_1": _simple(_intrinsic_1),
    "SET_UPDATE": _simple(lambda f, i: f.stack[-i.arg - 1].update(f.stack.pop())),
    "LOAD_SUPER_ATTR": _simple(_load_super_attr),
    "DELETE_FAST": _simple(lambda f, i: f.locals.pop(i.argval)),
    "LOAD_GLOBAL": _simple(_load_global),
    "STORE_GLOBAL": _simple(lambda f, i: f.globals.__setitem__(i.argval, f.stack.pop())),
    "LOAD_DEREF": _simple(_load_deref),
    "STORE_DEREF": _simple(_store_deref),
    "LOAD_CLOSURE": _simple(lambda f, i: f.stack.append(f.cells[i.argval])),
    "MAKE_CELL": _simple(_make_cell),
    "MAKE_FUNCTION": _simple(_make_function),
    "POP_TOP": _simple(lambda f, i: f.stack.pop()),
    "PUSH_NULL": _simple(lambda f, i: f.stack.append(NULL)),
    "COPY": _simple(lambda f, i: f.stack.append(f.stack[-i.arg])),
    "SWAP": _simple(_swap),
    "JUMP_FORWARD": _simple(lambda f, i: setattr(f, "ip", i.target)),
    "JUMP_BACKWARD": _simple(lambda f, i: setattr(f, "ip", i.target)),
    "BUILD_TUPLE": _simple(lambda f, i: f.stack.append(tuple(_pop_n(f, i.arg)))),
    "BUILD_LIST": _simple(lambda f, i: f.stack.append(_pop_n(f, i.arg))),
    "BUILD_SET": _simple(lambda f, i: f.stack.append(set(_pop_n(f, i.arg)))),
    "BUILD_MAP": _simple(_build_map),
    "BUILD_CONST_KEY_MAP": _simple(_build_const_key_map),
    "BUILD_SLICE": _simple(lambda f, i: f.stack.append(slice(*_pop_n(f, i.arg)))),
    "LIST_APPEND": _simple(lambda f, i: f.stack[-i.arg - 1].append(f.stack.pop())),
    "LIST_EXTEND": _simple(lambda f, i: f.stack[-i.arg - 1].extend(f.stack.pop())),
    "LIST_TO_TUPLE": _simple(lambda f, i: f.stack.append(tuple(f.stack.pop()))),
    "SET_ADD": _simple(lambda f, i: f.stack[-i.arg - 1].add(f.stack.pop())),
    "MAP_ADD": _simple(lambda f, i: f.stack[-i.arg - 2].__setitem__(*_pop_n(f, 2))),
    "DICT_UPDATE": _simple(lambda f, i: f.stack[-i.arg - 1].update(f.stack.pop())),
    "DICT_MERGE": _simple(lambda f, i: f.stack[-i.arg - 1].update(f.stack.pop())),
    "IS_OP": _simple(lambda f, i: f.stack.append((f.stack.pop() is f.stack.pop()) != bool(i.argval))),
    "GET_LEN": _simple(lambda f, i: f.stack.append(len(f.stack[-1]))),
    "MATCH_SEQUENCE": _simple(lambda f, i: f.stack.append(
        isinstance(f.stack[-1], collections.abc.Sequence) and not isinstance(f.stack[-1], (str, bytes, bytearray)))),
    "MATCH_MAPPING": _simple(lambda f, i: f.stack.append(isinstance(f.stack[-1], collections.abc.Mapping))),
    "MATCH_KEYS": _simple(_match_keys),
    "MATCH_CLASS": _simple(_match_class),
    "DELETE_DEREF": _simple(lambda f, i: delattr(f.cells[i.argval], "cell_contents")),
    "DELETE_GLOBAL": _simple(lambda f, i: f.globals.__delitem__(i.argval)),
    "LOAD_BUILD_CLASS": _simple(lambda f, i: f.stack.append(builtins.__build_class__)),
}

