"""Parity tests for ``stillframe.bytecode``: the reader against ``dis`` and against CPython itself.

Each check reads a set of sample functions and compares every instruction
with what ``dis`` says about the same code object; one test also runs the
samples under ``sys.settrace`` and checks that every jump CPython takes lands
where ``target`` says.  On failure the message carries ``Bytecode.format()``.

Runs under pytest or standalone (``python3.13 tests/bytecode/test_reader.py``,
which needs neither pytest nor torch).  The package is loaded by path under a
private name: ``stillframe/__init__.py`` imports torch, ``stillframe.bytecode``
must not.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dis
import doctest
import importlib.util
import subprocess
import sys
import traceback
import types
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "stillframe" / "bytecode"
PY312 = sys.version_info >= (3, 12)
PY313 = sys.version_info >= (3, 13)


def load_bytecode_package(name: str = "_stillframe_bytecode_under_test") -> types.ModuleType:
    """``stillframe/bytecode`` imported by path as ``name``, leaving ``stillframe`` unimported."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, PACKAGE_DIR / "__init__.py", submodule_search_locations=[str(PACKAGE_DIR)]
    )
    assert spec is not None and spec.loader is not None, f"cannot load {PACKAGE_DIR}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


bytecode = load_bytecode_package()
reader = sys.modules[bytecode.__name__ + ".reader"]


# ---------------------------------------------------------------- samples


class Point:
    __match_args__ = ("x",)

    def __init__(self, x: int = 0) -> None:
        self.x = x


class ExitRaises:
    def __enter__(self) -> ExitRaises:
        return self

    def __exit__(self, *exc_info: object) -> None:
        raise ValueError("exit")


class Base:
    def method(self, k: int = 0) -> int:
        return k


class Derived(Base):
    attr = 5

    def method(self, k: int = 0) -> int:
        return super().method(k) + super(Derived, self).method() + super().attr


def s_call_kwargs(f, a):
    return f(a, 1, key=a, other=2)


def s_star_args(f, *args, **kwargs):
    return f(*args, **kwargs), f(1, *args), f(**kwargs, x=1)


def s_compare(a, b, c):
    return a < b <= c, a == b, a != c, a is None, a is not b, a in c, a not in c


def s_bool_ops(a, b):
    return (a and b) or (not a)


def s_jumps(x):
    if x > 0:
        y = 1
    elif x < 0:
        y = -1
    else:
        y = 0
    while x:
        x -= 1
        if x == 5:
            break
        if x == 7:
            continue
        y += 1
    return y


def s_loops(xs):
    total = 0
    for i, x in enumerate(xs):
        for y in range(x):
            total += i * y
    else:
        total -= 1
    return total


def s_try(f):
    try:
        r = f()
    except (ValueError, TypeError) as e:
        r = str(e)
    except KeyError:
        raise
    else:
        r += 1
    finally:
        f = None
    return r


def s_with(ctx, other):
    with ctx as a, other:
        return a


def s_comprehensions(xs):
    return (
        [x for x in xs if x],
        {x: x for x in xs},
        {x for x in xs},
        sum(x for x in xs),
        [y for x in xs for y in x],
    )


def s_closure(x):
    y = 1

    def inner(z):
        nonlocal y
        y += z
        return x + y

    return inner, lambda: y


def s_methods(obj, xs):
    xs.append(obj.attr)
    obj.attr = 3
    del obj.other
    return obj.method(1, k=2).chain()


def s_slicing(a, b):
    a[1:2] = b
    del a[::2]
    return a[1:], a[:-1], a[::2], a[b], a[1:2:3]


def s_unpack(t):
    a, *b, c = t
    x, y = a, c
    y, x = x, y
    return [*b, *t], (*t,), {**{}, "a": a}


def s_fstring(x):
    return f"{x!r:>10} {x} {x!s} {x:{x}}"


def s_global():
    global _G
    _G = 1
    del _G


def s_import():
    import os.path
    from json import dumps as d

    return os, d


def s_assert(x):
    assert x, "message"


def s_operators(a, b):
    c = a + b - a * b / a // b % a ** b @ a << b >> a & b | a ^ b
    c += a
    c -= a
    c *= a
    c /= a
    c //= a
    c %= a
    c **= a
    c @= a
    c <<= a
    c >>= a
    c &= a
    c |= a
    c ^= a
    return -c, +c, ~c, not c


def inner_gen():
    yield 1
    return 2


def s_generator(xs):
    r = yield from xs
    yield r


async def s_async(a, cm, it):
    async with cm as c:
        pass
    async for i in it:
        pass
    return await a, c, i


def s_match(p):
    match p:
        case [1, *rest]:
            return rest
        case {"k": v}:
            return v
        case Point(x=0):
            return 0
        case _:
            return None


def s_except_star(f):
    try:
        f()
    except* ValueError:
        pass


def s_class_body(y):
    class C:
        x = y
        z = x

        def m(self):
            return __class__

    return C


def generated_samples() -> list[types.FunctionType]:
    """Code that needs EXTENDED_ARG: > 256 constants, long jumps, a jump onto an EXTENDED_ARG."""
    consts = "\n".join(f"    v = {i}.5" for i in range(300))
    adds = "\n".join("            x = x + 1" for _ in range(300))
    source = (
        f"def many_consts():\n{consts}\n    try:\n        v = 300.5\n"
        f"    except Exception:\n        v = 301.5\n    return v\n"
        f"def long_jumps(x, xs):\n    for y in xs:\n        if x:\n{adds}\n    return x\n"
    )
    namespace: dict = {}
    exec(compile(source, "<generated>", "exec"), namespace)
    return [namespace["many_consts"], namespace["long_jumps"]]


SAMPLES = [value for name, value in list(globals().items()) if name.startswith("s_")]
SAMPLES += generated_samples() + [Derived.method]


def all_codes() -> list[types.CodeType]:
    """Every sample's code object and the code objects nested in it."""
    found: list[types.CodeType] = []
    stack = [f.__code__ for f in SAMPLES]
    while stack:
        code = stack.pop()
        found.append(code)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return found


# ---------------------------------------------------------------- helpers


def real_dis(code: types.CodeType) -> list[dis.Instruction]:
    """``dis``'s instructions less CACHE and EXTENDED_ARG: what the reader keeps."""
    return [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG")]


def check(condition: bool, bc, message: str) -> None:
    """Assert, printing the bytecode on failure (the parity-failure output)."""
    if not condition:
        raise AssertionError(f"{bc!r}: {message}\n{bc.format()}")


def expected_target_offset(code: types.CodeType, instr: dis.Instruction) -> int:
    """Where a jump lands, worked out from ``dis`` alone (see the reader's docstring)."""
    opnames = {i.offset: i.opname for i in dis.get_instructions(code)}
    offset = instr.argval
    # 3.12: the loop/send continues past END_FOR/END_SEND; 3.13's loop past END_FOR and POP_TOP
    markers = {"FOR_ITER": ["END_FOR", "POP_TOP"] if PY313 else ["END_FOR"], "SEND": ["END_SEND"]}
    skip = markers.get(instr.opname, [])
    while True:
        while opnames[offset] == "EXTENDED_ARG":
            offset += 2
        if not skip or opnames[offset] != skip[0]:
            return offset
        offset, skip = offset + 2, skip[1:]


def raw_at(code: types.CodeType) -> dict[int, dis.Instruction]:
    """``dis``'s instruction at each offset: the raw instruction a read instruction came from."""
    return {i.offset: i for i in real_dis(code)}


def first_index(bc) -> dict[int, int]:
    """Offset -> the index of the first instruction read from the raw instruction there."""
    found: dict[int, int] = {}
    for instr in bc.instructions:
        found.setdefault(instr.offset, instr.index)
    return found


def index_at_or_after(offsets: list[int], offset: int) -> int:
    return sum(1 for o in offsets if o < offset)


def expected_opname(instr: dis.Instruction) -> str:
    name = instr.opname
    if name.startswith(("POP_JUMP_FORWARD_IF_", "POP_JUMP_BACKWARD_IF_")):
        return "POP_JUMP_IF_" + name.split("_IF_", 1)[1]
    if name == "JUMP_BACKWARD_NO_INTERRUPT":
        return "JUMP_BACKWARD"
    if PY312 and name == "LOAD_ATTR" and instr.arg & 1:
        return "LOAD_METHOD"
    return name


#: 3.13 raw opname -> (opname, arg) of each instruction it is read as; ``arg`` is a function of dis's
#: instruction (the table in the reader's docstring, restated from CPython 3.13's ``dis`` documentation).
SPLIT_313 = {
    "LOAD_FAST_LOAD_FAST": (("LOAD_FAST", lambda i: i.arg >> 4), ("LOAD_FAST", lambda i: i.arg & 15)),
    "STORE_FAST_LOAD_FAST": (("STORE_FAST", lambda i: i.arg >> 4), ("LOAD_FAST", lambda i: i.arg & 15)),
    "STORE_FAST_STORE_FAST": (("STORE_FAST", lambda i: i.arg >> 4), ("STORE_FAST", lambda i: i.arg & 15)),
    "PUSH_NULL": (("PUSH_NULL", lambda i: None), ("SWAP", lambda i: 2)),
    "CALL_KW": (("CALL", lambda i: i.arg),),
    "TO_BOOL": (("NOP", lambda i: None),),
    "SET_FUNCTION_ATTRIBUTE": (("NOP", lambda i: None),),
    "CONVERT_VALUE": (("FORMAT_VALUE", lambda i: i.arg),),
    "FORMAT_SIMPLE": (("FORMAT_VALUE", lambda i: 0),),
    "FORMAT_WITH_SPEC": (("FORMAT_VALUE", lambda i: 4),),
    "END_FOR": (("POP_TOP", lambda i: None),),
}


def expected_reading(code: types.CodeType) -> list[tuple[dis.Instruction, str, int | None]]:
    """What the reader must make of ``code``: per instruction read, dis's raw instruction, opname and arg."""
    raw = real_dis(code)
    if not PY313:
        return [(i, expected_opname(i), i.arg) for i in raw]
    cells = set(code.co_cellvars) | set(code.co_freevars)
    reading = []
    for k, instr in enumerate(raw):
        if instr.opname in SPLIT_313:
            pieces = [(name, arg(instr)) for name, arg in SPLIT_313[instr.opname]]
        elif instr.opname == "LOAD_CONST" and k + 1 < len(raw) and raw[k + 1].opname == "CALL_KW":
            pieces = [("KW_NAMES", instr.arg)]
        elif instr.opname == "MAKE_FUNCTION":
            flags, j = 0, k + 1
            while j < len(raw) and raw[j].opname == "SET_FUNCTION_ATTRIBUTE":
                flags, j = flags | raw[j].arg, j + 1
            pieces = [("MAKE_FUNCTION", flags)]
        else:
            pieces = [(expected_opname(instr), instr.arg)]
        names = instr.argval if isinstance(instr.argval, tuple) and "_FAST_" in instr.opname else (instr.argval,)
        for (name, arg), argval in zip(pieces, names * len(pieces) if len(names) == 1 else names):
            if name == "LOAD_FAST" and argval in cells:  # 3.13 assembles LOAD_CLOSURE as LOAD_FAST
                name = "LOAD_CLOSURE"
            reading.append((instr, name, arg))
    return reading


# ---------------------------------------------------------------- tests


def test_instructions_match_dis():
    for code in all_codes():
        bc = bytecode.read(code)
        ours, theirs = bc.instructions, expected_reading(code)
        check(len(ours) == len(theirs), bc, f"{len(ours)} instructions, expected {len(theirs)}")
        for index, (mine, (real, opname, arg)) in enumerate(zip(ours, theirs)):
            where = f"instruction {index} ({real.opname} at {real.offset})"
            check(mine.index == index, bc, f"{where}: index {mine.index}")
            check(mine.offset == real.offset and mine.arg == arg, bc, f"{where}: offset/arg")
            check(mine.opname == opname, bc, f"{where}: opname {mine.opname}, expected {opname}")
            check(mine.positions == real.positions, bc, f"{where}: positions")
            check(mine.lineno == real.positions.lineno, bc, f"{where}: lineno {mine.lineno}")


def test_jump_targets_are_indexes_of_the_landing_instruction():
    for code in all_codes():
        bc = bytecode.read(code)
        raw, first = raw_at(code), first_index(bc)
        for mine in bc.instructions:
            real = raw[mine.offset]
            is_jump = real.opcode in dis.hasjrel or real.opcode in dis.hasjabs
            if not is_jump:
                check(mine.target is None, bc, f"{mine} has a target")
                continue
            landing = expected_target_offset(code, real)
            check(mine.target is not None, bc, f"{mine} has no target")
            check(bc.instructions[mine.target].offset == landing, bc, f"{mine}: lands at {landing}")
            check(mine.target == first[landing], bc, f"{mine}: lands inside a raw instruction")
            check(mine.argval == landing, bc, f"{mine}: argval {mine.argval} != {landing}")


def test_extended_arg_samples_exercise_retargeting():
    """The generated samples really have EXTENDED_ARG, including a jump onto one."""
    many_consts, long_jumps = generated_samples()
    for fn in (many_consts, long_jumps):
        raw = list(dis.get_instructions(fn.__code__))
        assert any(i.opname == "EXTENDED_ARG" for i in raw), fn.__name__
    raw = {i.offset: i.opname for i in dis.get_instructions(long_jumps.__code__)}
    jumps = [i for i in dis.get_instructions(long_jumps.__code__) if i.opcode in dis.hasjrel]
    assert any(raw[i.argval] == "EXTENDED_ARG" for i in jumps), "no jump lands on EXTENDED_ARG"
    bc = bytecode.read(many_consts.__code__)
    assert max(i.arg for i in bc.instructions if i.opname == "LOAD_CONST") > 255


def test_exception_table_matches_dis():
    parse = getattr(dis, "_parse_exception_table", None)
    for code in all_codes():
        bc = bytecode.read(code)
        decoded = [tuple(e) for e in reader.parse_exception_table(code)]
        if parse is not None:
            check(decoded == [tuple(e) for e in parse(code)], bc, "decoded table differs from dis")
        offsets = [i.offset for i in bc.instructions]
        expected = [
            bytecode.ExceptionTableEntry(
                index_at_or_after(offsets, start),
                index_at_or_after(offsets, end),
                index_at_or_after(offsets, target),
                depth,
                lasti,
            )
            for start, end, target, depth, lasti in decoded
        ]
        check(list(bc.exception_table) == expected, bc, "exception table")
        for index in range(len(bc.instructions)):
            covering = [e for e in expected if e.start <= index < e.end]
            check(len(covering) <= 1, bc, f"entries overlap at {index}")
            handler = bc.exception_handler(index)
            check(handler == (covering[0] if covering else None), bc, f"handler of {index}")


def test_exception_table_varint_decoding():
    """A hand-encoded entry: start 70, length 3, target 100 (code units), depth 2, lasti."""
    table = bytes([0x80 | 0x40 | 1, 6, 3, 0x40 | 1, 36, 5])
    fake = types.SimpleNamespace(co_exceptiontable=table)
    assert reader.parse_exception_table(fake) == [(140, 146, 200, 2, True)]


def test_push_null_matches_dis_argrepr():
    # dis writes "NULL + name" (3.11, 3.12) or "name + NULL" (3.13, where the NULL lies above the value).
    for code in all_codes():
        bc = bytecode.read(code)
        raw = raw_at(code)
        for mine in bc.instructions:
            real = raw[mine.offset]
            if real.opname == "LOAD_GLOBAL":
                expected = real.argrepr.startswith("NULL + ") or real.argrepr.endswith(" + NULL")
            elif real.opname in ("LOAD_ATTR", "LOAD_SUPER_ATTR"):
                expected = real.argrepr.startswith("NULL|self + ") or real.argrepr.endswith(" + NULL|self")
            else:
                expected = real.opname == "LOAD_METHOD"  # 3.11's own LOAD_METHOD
            check(mine.push_null == expected, bc, f"{mine}: push_null {mine.push_null}")
            if mine.opname == "LOAD_METHOD":
                check(mine.push_null, bc, f"{mine}: LOAD_METHOD without push_null")


def test_argvals():
    nb_ops = getattr(dis, "_nb_ops", None)
    conversions = {0: None, 1: str, 2: repr, 3: ascii}
    for code in all_codes():
        bc = bytecode.read(code)
        raw, first = raw_at(code), first_index(bc)
        for mine in bc.instructions:
            real = raw[mine.offset]
            op, arg = mine.opname, mine.arg
            if real.opcode in dis.hasname + dis.haslocal + dis.hasfree:
                name = real.argval
                if isinstance(name, tuple):  # a 3.13 pair: the first or second name
                    name = name[mine.index - first[mine.offset]]
                check(isinstance(mine.argval, str), bc, f"{mine}: name is not a str")
                check(mine.argval == name, bc, f"{mine}: name {name!r} expected")
            elif op in ("LOAD_CONST", "RETURN_CONST"):
                check(mine.argval is code.co_consts[arg], bc, f"{mine}: constant")
            elif op == "KW_NAMES":
                check(mine.argval == code.co_consts[arg], bc, f"{mine}: kw names")
                check(all(isinstance(n, str) for n in mine.argval), bc, f"{mine}: kw names")
            elif op == "COMPARE_OP":
                check(mine.argval in dis.cmp_op, bc, f"{mine}: comparison operator")
            elif op == "BINARY_OP":
                check(mine.argval == (nb_ops[arg][1] if nb_ops else real.argrepr), bc, str(mine))
            elif op.startswith("CALL_INTRINSIC_"):
                check(mine.argval.startswith("INTRINSIC_"), bc, f"{mine}: intrinsic name")
            elif op in ("IS_OP", "CONTAINS_OP"):
                check(mine.argval == arg and arg in (0, 1), bc, f"{mine}: negation flag")
            elif op == "FORMAT_VALUE":  # dis's (conversion, has a spec), on every version
                check(mine.argval == (conversions[arg & 3], bool(arg & 4)), bc, f"{mine}: conversion/spec")
            elif op in ("MAKE_FUNCTION", "SWAP"):
                check(mine.argval == arg, bc, f"{mine}: argval is not the arg")
            elif op in ("NOP", "POP_TOP", "PUSH_NULL"):
                check(mine.argval is None and arg is None, bc, f"{mine}: takes no argument")
            elif mine.target is None:
                check(mine.argval == real.argval, bc, f"{mine}: argval differs from dis")


def test_operators_are_symbols():
    bc = bytecode.read(s_operators.__code__)
    ops = {i.argval for i in bc.instructions if i.opname == "BINARY_OP"}
    assert ops >= {"+", "-", "*", "/", "//", "%", "**", "@", "<<", ">>", "&", "|", "^"}
    assert ops >= {"+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "<<=", ">>=", "&=", "|=", "^="}
    compare = bytecode.read(s_compare.__code__)
    compares = {i.argval for i in compare.instructions if i.opname == "COMPARE_OP"}
    assert compares == {"<", "<=", "==", "!="}


def test_normalized_names_never_leak():
    leaked = ("POP_JUMP_FORWARD_", "POP_JUMP_BACKWARD_", "INSTRUMENTED_", "CACHE", "EXTENDED_ARG")
    for code in all_codes():
        bc = bytecode.read(code)
        for instr in bc.instructions:
            check(not instr.opname.startswith(leaked), bc, f"{instr} leaked")
            check(instr.opname != "JUMP_BACKWARD_NO_INTERRUPT", bc, f"{instr} leaked")
            check(not (instr.opname == "LOAD_ATTR" and PY312 and instr.arg & 1), bc, str(instr))


def test_samples_cover_the_normalizations():
    """The samples contain every raw form the reader rewrites on the running version."""
    raw = {(i.opname, PY312 and i.opname == "LOAD_ATTR" and bool(i.arg & 1)) for c in all_codes()
           for i in dis.get_instructions(c)}
    names = {name for name, _ in raw}
    if PY313:
        wanted = set(SPLIT_313) | {"END_SEND", "CALL_INTRINSIC_1", "CALL_INTRINSIC_2", "RETURN_CONST",
                                   "LOAD_FAST_AND_CLEAR", "LOAD_SUPER_ATTR", "MAKE_FUNCTION"}
        assert ("LOAD_ATTR", True) in raw and ("LOAD_ATTR", False) in raw
        bool_compare = [i for c in all_codes() for i in dis.get_instructions(c)
                        if i.opname == "COMPARE_OP" and i.arg & 16]
        assert bool_compare, "no COMPARE_OP with 3.13's bool() bit"
        closures = [c for c in all_codes() for i in dis.get_instructions(c)
                    if i.opname == "LOAD_FAST" and i.argval in c.co_cellvars + c.co_freevars]
        assert closures, "no LOAD_FAST of a cell (3.13's LOAD_CLOSURE)"
        wanted |= {"EXTENDED_ARG", "SEND", "FOR_ITER", "LOAD_GLOBAL"}
    elif PY312:
        wanted = {"END_FOR", "END_SEND", "CALL_INTRINSIC_1", "CALL_INTRINSIC_2", "RETURN_CONST",
                  "LOAD_FAST_AND_CLEAR", "BINARY_SLICE", "STORE_SLICE", "LOAD_SUPER_ATTR"}
        assert ("LOAD_ATTR", True) in raw and ("LOAD_ATTR", False) in raw
    else:
        wanted = {"POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE", "LOAD_METHOD",
                  "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_IF_FALSE_OR_POP", "PRECALL"}
    if not PY313:
        wanted |= {"EXTENDED_ARG", "SEND", "FOR_ITER", "LOAD_GLOBAL", "KW_NAMES"}
    assert wanted <= names, sorted(wanted - names)


def test_super_attr_bits():
    bc = bytecode.read(Derived.method.__code__)
    supers = [i for i in bc.instructions if i.opname == "LOAD_SUPER_ATTR"]
    if not PY312:
        assert not supers
        return
    assert [(i.argval, i.push_null, bool(i.arg & 2)) for i in supers] == [
        ("method", True, False),  # super().method(k): zero-argument form, method load
        ("method", True, True),  # super(Derived, self).method(): two-argument form
        ("attr", False, False),  # super().attr: plain attribute
    ]


def test_for_iter_and_send_targets_skip_end_markers():
    for fn in (s_loops, s_generator):
        bc = bytecode.read(fn.__code__)
        for instr in bc.instructions:
            if instr.opname in ("FOR_ITER", "SEND"):
                before = bc.instructions[instr.target - 1].opname
                landing = bc.instructions[instr.target].opname
                check(before not in ("END_FOR", "END_SEND") or PY312, bc, str(instr))
                check(landing not in ("END_FOR", "END_SEND"), bc, str(instr))
                if PY313 and instr.opname == "FOR_ITER":  # 3.13's END_FOR, POP_TOP are both skipped
                    raw = raw_at(fn.__code__)
                    skipped = [raw[bc.instructions[instr.target - k].offset].opname for k in (2, 1)]
                    check(skipped == ["END_FOR", "POP_TOP"], bc, f"{instr}: skips {skipped}")


def run_traced(fn, *args) -> list[list[int]]:
    """Run ``fn`` under CPython, recording executed offsets of its code, one list per entry."""
    code, runs = fn.__code__, []

    def tracer(frame, event, arg):
        if frame.f_code is not code:
            return None
        if event == "call":
            frame.f_trace = tracer  # 3.13 turns opcode events on for a frame only once it has a tracer
            frame.f_trace_opcodes = True
            runs.append([])
        elif event == "opcode":
            runs[-1].append(frame.f_lasti)
        return tracer

    previous, here = sys.gettrace(), sys._getframe()
    # 3.12 enables opcode events at settrace() time only if some frame has
    # asked for them already; asking on this (untraced) frame arms that.
    here.f_trace_opcodes = True
    sys.settrace(tracer)
    here.f_trace_opcodes = False
    try:
        result = fn(*args)
        if isinstance(result, types.GeneratorType):
            list(result)
        elif asyncio.iscoroutine(result):
            result.close()
    except Exception:
        pass
    finally:
        sys.settrace(previous)
    return runs


def test_jumps_land_where_cpython_lands():
    """Parity with eager CPython: every taken jump or unwind goes to ``target``/the handler."""

    def fail():
        raise ValueError("boom")

    cases = [
        (s_jumps, 9), (s_jumps, 0), (s_jumps, 6), (s_loops, [1, 2, 3]),
        (s_try, fail), (s_try, lambda: 1), (s_try, lambda: {}[0]), (s_generator, inner_gen()),
        (s_comprehensions, [[1], [2]]), (s_bool_ops, 0, 1), (s_bool_ops, 1, 0),
        (s_except_star, fail), (s_match, {"k": 1}), (s_match, Point(0)),
        (s_with, contextlib.nullcontext(1), ExitRaises()),
    ]
    stop = {"RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE"}  # the run ends; a resume starts anew
    taken = dict.fromkeys([fn for fn, *_ in cases], 0)
    for fn, *args in cases:
        bc = bytecode.read(fn.__code__)
        # CPython runs a raw instruction read as two (3.13) as one: the step after it is past both.
        last = {instr.offset: instr.index for instr in bc.instructions}
        for run in run_traced(fn, *args):
            indexes = [bc.index_of_offset(offset) for offset in run]
            for first, there in zip(indexes, indexes[1:]):
                here = last[bc.instructions[first].offset]
                instr = bc.instructions[here]
                if there == here + 1 or instr.opname in stop:
                    continue
                taken[fn] += 1
                if instr.target is not None:
                    # 3.12 SEND runs END_SEND on its way to target (see the reader)
                    via_end_send = bc.instructions[there].opname == "END_SEND"
                    lands = there == instr.target or (via_end_send and there + 1 == instr.target)
                    check(lands, bc, f"{instr}: CPython went to {there}")
                else:
                    handler = bc.exception_handler(here)
                    check(handler is not None and handler.target == there, bc,
                          f"{instr}: CPython went to {there}, handler is {handler}")
    for fn, count in taken.items():
        bc = bytecode.read(fn.__code__)
        has_jumps = any(i.target is not None for i in bc.instructions)  # 3.11 comprehensions: none
        check(count > 0 or not has_jumps, bc, f"{fn.__name__}: no jump taken")


def test_index_of_offset():
    for code in all_codes():
        bc = bytecode.read(code)
        first = first_index(bc)
        for instr in bc.instructions:
            check(bc.index_of_offset(instr.offset) == first[instr.offset], bc, str(instr))
            check(instr.index == first[instr.offset] or bc.instructions[instr.index - 1].offset == instr.offset,
                  bc, f"{instr}: shares an offset with an instruction that is not just before it")
        raw = list(dis.get_instructions(code, show_caches=True))
        for before, after in zip(raw, raw[1:]):
            if before.opname == "EXTENDED_ARG" and after.opname != "EXTENDED_ARG":
                check(bc.index_of_offset(before.offset) == bc.index_of_offset(after.offset), bc,
                      f"EXTENDED_ARG at {before.offset}")
        for instr in raw:
            if instr.opname == "CACHE":
                try:
                    bc.index_of_offset(instr.offset)
                except KeyError:
                    continue
                check(False, bc, f"cache offset {instr.offset} has an index")


def test_read_is_cached_by_identity():
    code = s_call_kwargs.__code__
    assert bytecode.read(code) is bytecode.read(code)
    assert bytecode.read(code).code is code
    source = "def f(x):\n    return x + 1\n"
    first, second = (compile(source, name, "exec").co_consts[0] for name in ("a.py", "b.py"))
    assert first == second and first is not second  # code objects compare equal across files
    assert bytecode.read(first).code is first and bytecode.read(second).code is second
    assert bytecode.read(second).code.co_filename == "b.py"


def test_opnames_cover_everything_produced():
    produced = {i.opname for c in all_codes() for i in bytecode.read(c).instructions}
    assert produced <= bytecode.version_opnames(), sorted(produced - bytecode.version_opnames())
    assert bytecode.version_opnames() is bytecode.version_opnames(sys.version_info)
    assert bytecode.version_opnames((3, 11)) is bytecode.OPNAMES_311
    assert bytecode.version_opnames((3, 12)) is bytecode.OPNAMES_312
    assert bytecode.version_opnames((3, 13)) is bytecode.OPNAMES_313
    try:
        bytecode.version_opnames((3, 14))
    except ValueError as error:
        assert "3.11, 3.12 and 3.13" in str(error)
    else:
        raise AssertionError("3.14 has opnames")


def test_opnames_table_matches_running_dis():
    """OPNAMES for this version == dis's real opcodes, normalized (catches typos in the table)."""
    skip = {"CACHE", "EXTENDED_ARG", "RESERVED", "INTERPRETER_EXIT"}
    skip |= reader.NOT_EMITTED_313 if PY313 else set()
    real = {name for name, op in dis.opmap.items()
            if op < 256 and name not in skip and not name.startswith("INSTRUMENTED_")}
    normalized = {reader.RENAMES.get(name, name) for name in real}
    normalized |= {"LOAD_METHOD"} if PY312 else set()  # from LOAD_ATTR's method bit
    if PY313:  # 3.13's own forms are read as 3.12's (LOAD_FAST of a cell as LOAD_CLOSURE, names as KW_NAMES)
        normalized = {n for raw in normalized for n, _ in SPLIT_313.get(raw, ((raw, None),))}
        normalized |= {"LOAD_CLOSURE", "KW_NAMES"}
    assert normalized == bytecode.version_opnames(), sorted(normalized ^ bytecode.version_opnames())
    assert bytecode.OPNAMES_313 <= bytecode.OPNAMES_312, "3.13 reads into a form 3.12 does not have"
    for table in (bytecode.OPNAMES_311, bytecode.OPNAMES_312, bytecode.OPNAMES_313):
        raw_names = {n for n in table if "FORWARD_IF" in n or "BACKWARD_IF" in n or "NO_INT" in n}
        assert not raw_names, raw_names


def test_source_line_and_location():
    bc = bytecode.read(s_call_kwargs.__code__)
    call = next(i for i in bc.instructions if i.opname == "CALL")
    assert bc.source_line(call.index) == "return f(a, 1, key=a, other=2)"
    assert call.lineno == s_call_kwargs.__code__.co_firstlineno + 1
    assert bc.location(call.index) == (s_call_kwargs.__code__.co_filename, call.lineno)
    generated = bytecode.read(generated_samples()[0].__code__)
    assert generated.source_line(1) == ""  # no source for <generated>


def test_str_and_format():
    bc = bytecode.read(s_try.__code__)
    text = bc.format()
    lines = text.splitlines()
    assert len(lines) == 1 + len(bc.instructions) + 1 + len(bc.exception_table)
    for instr in bc.instructions:
        assert str(instr).startswith(f"{instr.index:>4} {instr.opname}")
        assert str(instr) in text
    jump = next(i for i in bc.instructions if i.target is not None)
    assert str(jump).endswith(f"-> {jump.target}")
    load = next(i for i in bc.instructions if i.opname == "LOAD_GLOBAL" and i.push_null)
    assert str(load) == f"{load.index:>4} LOAD_GLOBAL NULL + {load.argval}"


def test_reader_docstring_example():
    failures, attempted = doctest.testmod(reader)
    assert attempted > 0 and failures == 0


def test_imports_standard_library_only():
    for path in PACKAGE_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                stdlib = top in sys.stdlib_module_names or top == "__future__"
                assert stdlib, f"{path.name} imports {module}"
    probe = (
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        "import test_reader\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'stillframe' not in sys.modules, 'stillframe imported'\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


if __name__ == "__main__":
    tests = [(name, fn) for name, fn in list(globals().items()) if name.startswith("test_")]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
        except Exception:
            failed += 1
            print(f"FAILED {name}")
            traceback.print_exc()
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
