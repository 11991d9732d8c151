"""A differential fuzzer: random programs run eagerly and compiled, every observable compared (issue 11).

Each program (:mod:`stillframe.check.programs`) is executed twice, in two fresh module namespaces, one for
each side; ``f`` of the second is compiled. Both are called three times with changing inputs (the third call
sometimes with a new size), through :func:`stillframe.check.compare` (return value, dtype, shape, stride,
``requires_grad``, ``is_leaf``, aliasing, inputs after the call, gradients, exception type and message, eager
fallbacks), and after each call this module also compares what ``compare`` does not see: the outside state the
program mutates (``OUT``, ``STATE``, ``OBJ``, ``CNT``, ``HOLD``, the module ``MOD`` and optimizer ``OPT``), the
text printed to ``BUF``, and ``.grad`` of the inputs and of the tensors returned.

Usage::

    python -m stillframe.check.fuzz --count 200 --seed 1 --compiler stillframe
    python -m stillframe.check.fuzz --count 200 --seed 1 --compiler torch   # torch.compile(backend="eager")
    python -m stillframe.check.fuzz --replay program.py --compiler stillframe
    python -m stillframe.check.fuzz --count 200 --backend aot_eager                  # what AOTAutograd is handed

prints one line per finding and a summary; each finding's reproducer (minimized when ``--minimize``) is the
program text, runnable with ``--replay``. Outcome kinds: ``divergence`` (an observable differs),
``internal`` (an exception of the compiler's own reached the caller), ``fallback`` (stillframe ran a frame
eagerly and warned), ``hang`` (a call passed ``--timeout`` seconds).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import argparse
import ast
import collections
import contextlib
import logging
import os
import re
import signal
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch

import stillframe

from .. import compat
from .parity import compare
from .programs import FAMILIES, Program, generate, load
from .values import Walker, identity_labels, tensors_of

__all__ = ["COMPILERS", "Finding", "Summary", "check_program", "compiler_for", "fuzz", "main", "minimize"]

CALLS = 3
#: Outcomes of one program; ``torch_assert``: eager itself failed one of torch's internal asserts (not a finding);
#: ``generator_error``: the program generator itself failed (reported; the run goes on).
#: ``checker_error``: comparing the program's runs failed in the checker itself (reported; the run goes on).
#: ``state_leak``: the compiler left a torch dispatch mode active (every later tensor op of the process would be
#: fake); the checker pops it, so the programs after it are checked on a clean process.
KINDS = ("ok", "divergence", "internal", "fallback", "hang", "torch_assert", "generator_error", "checker_error",
         "state_leak")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(stillframe.__file__))) + os.sep + "stillframe" + os.sep
_CHECK = _PACKAGE + "check" + os.sep


def _stillframe(fn, backend="eager"):
    return stillframe.compile(fn, backend=backend)


def _torch(fn, backend="eager"):
    # torch.compile logs each fake-tensor failure it recovers from; the fuzzer reports outcomes, not logs
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    return torch.compile(fn, backend=backend)


def _reset_torch():
    torch.compiler.reset()


# name -> (compile a function (fn, backend=), reset that compiler's caches between programs)
COMPILERS: dict[str, tuple[Callable, Callable]] = {
    "stillframe": (_stillframe, stillframe.reset),
    "torch": (_torch, _reset_torch),
}


def compiler_for(name: str, backend: str = "eager") -> tuple[Callable, Callable]:
    """``(compile, reset)`` for a compiler of :data:`COMPILERS` with a backend (``eager``, ``aot_eager``, ...)."""
    compile_fn, reset = COMPILERS[name]
    return (lambda fn: compile_fn(fn, backend=backend)), reset


@dataclass
class Finding:
    """What one program gave: ``kind`` is ``ok``, ``divergence``, ``internal``, ``fallback`` or ``hang``."""

    program: Program
    kind: str
    mismatches: list[str] = field(default_factory=list)
    eager: tuple = ()  # per call: the type name of the exception eager raised, or "returned"

    def format(self) -> str:
        lines = [f"== {self.kind} in program {self.program.seed}:{self.program.index}"]
        for mismatch in self.mismatches[:12]:
            first, *rest = mismatch.splitlines() or [""]
            lines += [f"  - {first}", *(f"      {line}" for line in rest[:6])]
        if len(self.mismatches) > 12:
            lines.append(f"  ... {len(self.mismatches) - 12} more")
        lines += ["-- reproducer:", self.program.source.rstrip(), "-- end"]
        return "\n".join(lines)


@dataclass
class Summary:
    """Counts of outcomes and of the construct families the programs contained."""

    compiler: str
    count: int = 0
    kinds: collections.Counter = field(default_factory=collections.Counter)
    families: collections.Counter = field(default_factory=collections.Counter)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0

    def format(self) -> str:
        kinds = ", ".join(f"{k}={self.kinds[k]}" for k in KINDS)
        fams = " ".join(f"{f}={self.families[f]}" for f in FAMILIES)
        return (f"{self.count} programs on {self.compiler} in {self.seconds:.1f}s: {kinds}\n"
                f"families: {fams}")


class _Hang(BaseException):
    """A call ran past the timeout (a BaseException, so no ``except Exception`` of the program or compiler eats it)."""


@contextlib.contextmanager
def _deadline(seconds: float):
    if not seconds or not hasattr(signal, "setitimer"):
        yield
        return

    def alarm(signum, frame):
        raise _Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def check_program(program: Program, compiler="stillframe", *, timeout: float = 60.0) -> Finding:
    """Run ``program`` eagerly and compiled ``CALLS`` times, comparing every observable; classify the outcome.

    A dispatch mode left active afterwards (a timeout's exception can cut a compiler's exit short) is a
    ``state_leak`` (kept as the kind of a hang) and is popped."""
    try:
        finding = _check_program(program, compiler, timeout)
    except Exception as exc:  # the checker failed: on fake tensors, when a mode was left on by the compiler
        if not compat.active_dispatch_modes():
            raise
        finding = Finding(program, "state_leak", [f"checking failed: {type(exc).__name__}: {str(exc)[:120]}"])
    leaked = compat.pop_dispatch_modes()
    if leaked:
        finding.mismatches.append(f"left active after the calls: {', '.join(leaked)} (popped)")
        if finding.kind != "hang":
            finding.kind = "state_leak"
    return finding


def _check_program(program: Program, compiler, timeout: float) -> Finding:
    compile_fn, reset = _resolve(compiler)
    reset()
    eager_ns, comp_ns = program.namespace(), program.namespace()
    compiled = compile_fn(comp_ns["f"])
    mismatches: list[str] = []
    eager_errors: list[BaseException] = []
    eager: list[str] = []
    internal = fallback = False
    try:
        with _deadline(timeout), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # compare() records the StillframeWarnings it needs by itself
            for call in range(CALLS):
                made: list = []

                modes: list = []

                def make_args(call=call, made=made, modes=modes):
                    modes.append(torch.is_grad_enabled())  # the second: grad mode as the eager call left it
                    args = eager_ns["make_args"](call)
                    made.append(args)
                    return args

                report = compare(eager_ns["f"], make_args, compiled=compiled, seed=1000 * call,
                                 check_aliasing=True)
                found = [f"call {call}: {m}" for m in report.mismatches if not _benign(m)]
                fallback |= any("StillframeWarning" in m for m in report.mismatches)
                internal |= _is_internal(report.compiled_results[-1])
                outcome = report.eager_results[-1]
                eager.append(type(outcome).__name__ if isinstance(outcome, BaseException) else "returned")
                if isinstance(outcome, BaseException):
                    eager_errors.append(outcome)
                _compare_outside(eager_ns, comp_ns, made, report, found, call)
                if len(modes) == 2 and modes[1] != torch.is_grad_enabled():
                    found.append(f"call {call}: grad mode after the call: eager {modes[1]}, "
                                 f"compiled {torch.is_grad_enabled()}")
                torch.set_grad_enabled(True)
                mismatches += found
    except _Hang:
        return Finding(program, "hang", mismatches + ["a call ran past the timeout"])
    finally:
        reset()
        torch.set_grad_enabled(True)
    if not mismatches:
        return Finding(program, "ok")
    if any("INTERNAL ASSERT FAILED" in str(r) for r in eager_errors):
        return Finding(program, "torch_assert", mismatches, tuple(eager))  # eager hit one of torch's own asserts
    diverged = any("StillframeWarning" not in m for m in mismatches)
    kind = "internal" if internal else "divergence" if diverged else "fallback"
    return Finding(program, kind, mismatches, tuple(eager))


def _benign(mismatch: str) -> bool:
    """A fallback warning that only says a recompile limit was hit: by design, as torch.compile's own limit."""
    lines = mismatch.splitlines()
    return lines[0].startswith("unexpected StillframeWarning") and all("cache_size_limit" in l for l in lines[1:])


def _resolve(compiler):
    if isinstance(compiler, str):
        return COMPILERS[compiler]
    if isinstance(compiler, tuple):
        return compiler
    return compiler, (lambda: None)


def _is_internal(outcome) -> bool:
    """Whether ``outcome`` is an exception of the compiler's own: its type, or the frame that raised it, is ours."""
    if not isinstance(outcome, BaseException):
        return False
    module = type(outcome).__module__ or ""
    if module.startswith(("stillframe", "torch._dynamo", "torch._inductor")):
        return True
    tb, last = outcome.__traceback__, None
    while tb is not None:
        last, tb = tb.tb_frame.f_code.co_filename, tb.tb_next
    if last is None:
        return False
    return last.startswith("<stillframe") or last.startswith(_PACKAGE) and not last.startswith(_CHECK)


def _compare_outside(eager_ns, comp_ns, made, report, out, call):
    """Outside state, printed text and ``.grad`` of inputs and results: what ``compare`` does not look at."""
    prefix = f"call {call}: "
    found: list[str] = []
    ids = (identity_labels(made[0], {}, None), identity_labels(made[1], {}, None)) if len(made) == 2 else None
    walker = Walker(1.3e-6, 1e-5, found, ids, None)
    for name in ("OUT", "STATE", "TOTAL"):
        if name in eager_ns:
            walker.compare(eager_ns[name], comp_ns.get(name), name)
    for name in ("OBJ", "CNT", "HOLD"):
        if name in eager_ns:
            walker.compare(vars(eager_ns[name]), vars(comp_ns[name]), name)
    if "MOD" in eager_ns:
        walker.compare(_training_state(eager_ns), _training_state(comp_ns), "MOD")
    e_text, c_text = eager_ns["BUF"].getvalue(), comp_ns["BUF"].getvalue()
    if e_text != c_text:
        found.append(f"printed text differs:\neager:\n{e_text}compiled:\n{c_text}")
    grads = Walker(1.3e-6, 1e-5, found, None, None)
    if len(made) == 2:
        for i, (e, c) in enumerate(zip(made[0], made[1])):
            if isinstance(e, torch.Tensor) and isinstance(c, torch.Tensor):
                _compare_grad(grads, e, c, f"args[{i}].grad")
    e_res, c_res = report.eager_results[-1], report.compiled_results[-1]
    if isinstance(e_res, BaseException) and isinstance(c_res, BaseException):
        for what in ("__cause__", "__context__", "__suppress_context__"):
            e_val, c_val = _described(getattr(e_res, what)), _described(getattr(c_res, what))
            if e_val != c_val:
                found.append(f"exception {what} differs: eager {e_val}, compiled {c_val}")
    if not isinstance(e_res, BaseException) and not isinstance(c_res, BaseException):
        e_ts, c_ts = list(tensors_of(e_res, "result")), list(tensors_of(c_res, "result"))
        if len(e_ts) == len(c_ts):
            for (path, e), (_, c) in zip(e_ts, c_ts):
                _compare_grad(grads, e, c, f"{path}.grad")
    out.extend(prefix + m for m in found)


def _training_state(ns) -> dict:
    """What a program's module ``MOD`` and optimizer ``OPT`` hold: parameters, gradients, buffers, mode, how many
    hooks of each kind, and the optimizer's per-parameter state (its momentum buffers)."""
    module, opt = ns["MOD"], ns.get("OPT")
    return {"parameters": dict(module.named_parameters()),
            "grads": {n: p.grad for n, p in module.named_parameters()},
            "buffers": dict(module.named_buffers()), "training": module.training,
            "hooks": (len(module._forward_hooks), len(module._forward_pre_hooks)),
            "optimizer": [dict(state) for state in opt.state.values()] if opt is not None else []}


def _described(value):
    return f"{type(value).__name__}: {value}" if isinstance(value, BaseException) else value


def _compare_grad(walker: Walker, e: torch.Tensor, c: torch.Tensor, path: str):
    eg, cg = e.grad, c.grad
    if (eg is None) != (cg is None):
        walker.mismatch(path, f"eager {'None' if eg is None else 'a tensor'}, "
                              f"compiled {'None' if cg is None else 'a tensor'}")
    elif eg is not None:
        walker.compare(eg, cg, path)


# ---------------------------------------------------------------- minimizing a reproducer


def minimize(finding: Finding, compiler="stillframe", *, budget: int = 60, timeout: float = 5.0) -> Finding:
    """Delete statements (outermost first, at most ``budget`` re-runs) while the program still shows the finding.

    A deletion is kept when the smaller program gives the same kind of finding, eager raises (or returns) as
    it did on each call, and the first mismatch reads the same (:func:`_key`); ``make_args`` and the counter
    step of each ``while`` loop are never deleted.
    """
    tree = ast.parse(finding.program.source)
    header = "\n".join(line for line in finding.program.source.splitlines() if line.startswith("# "))
    best, tries, removed = finding, 0, set()
    slots = _statements(tree)
    progress = True
    while progress and tries < budget:
        progress = False
        for stmts, stmt, ancestors in slots:
            if tries >= budget:
                break
            if id(stmt) in removed or removed & ancestors or not any(s is stmt for s in stmts):
                continue
            i = next(j for j, s in enumerate(stmts) if s is stmt)
            if len(stmts) == 1:
                stmts[0] = ast.Pass()
            else:
                del stmts[i]
            tries += 1
            source = header + "\n" + ast.unparse(ast.fix_missing_locations(tree)) + "\n"
            result = _try(load(source, best.program.seed, best.program.index), compiler, timeout)
            same = result is not None and result.kind == finding.kind and result.eager == finding.eager
            if same and _key(finding) in {_key(result, j) for j in range(len(result.mismatches))}:
                best, progress = result, True
                removed.add(id(stmt))
            elif len(stmts) == 1 and isinstance(stmts[0], ast.Pass) and stmts[0] is not stmt:
                stmts[0] = stmt
            else:
                stmts.insert(i, stmt)
    return best


def _try(program: Program, compiler, timeout: float) -> Finding | None:
    try:
        return check_program(program, compiler, timeout=timeout)
    except Exception:  # a candidate the fuzzer cannot even run is not a smaller reproducer
        return None


def _key(finding: Finding, i: int = 0) -> str:
    """What a reproducer must keep showing: its ``i``-th mismatch's first words, call and numbers left out."""
    if not finding.mismatches:
        return ""
    text = re.sub(r"^call \d+: ", "", finding.mismatches[i].splitlines()[0])
    return re.sub(r"\d+", "#", text)[:48]


def _statements(tree: ast.Module) -> list[tuple[list, ast.stmt, frozenset]]:
    """``(list holding it, statement, ids of enclosing statements)`` for the statements of every ``def`` but
    ``make_args``, outermost first; the first statement of a ``while`` body (its counter step) is left out."""
    found: list[tuple[list, ast.stmt, frozenset, int]] = []

    def visit(node, ancestors, depth):
        for name in ("body", "orelse", "finalbody", "handlers"):
            stmts = getattr(node, name, None)
            if not isinstance(stmts, list):
                continue
            for i, stmt in enumerate(stmts):
                inner = ancestors | {id(stmt)}
                if isinstance(stmt, ast.stmt) and not (isinstance(node, ast.While) and name == "body" and i == 0):
                    found.append((stmts, stmt, ancestors, depth))
                visit(stmt, inner, depth + 1)

    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name != "make_args":
            if node.name != "f":
                found.append((tree.body, node, frozenset(), -1))  # a whole helper, tried first
            visit(node, frozenset({id(node)}), 0)
    found.sort(key=lambda item: item[3])
    return [(stmts, stmt, ancestors) for stmts, stmt, ancestors, _ in found]


# ---------------------------------------------------------------- the driver


def fuzz(count: int, seed: int = 0, compiler="stillframe", *, start: int = 0, timeout: float = 60.0,
         minimize_budget: int = 0, report: Callable[[str], None] | None = None, name: str | None = None) -> Summary:
    """Generate and check programs ``start .. start+count-1`` of ``seed``; ``report`` gets each finding's text."""
    name = name or (compiler if isinstance(compiler, str) else "custom")
    summary = Summary(name)
    began = time.perf_counter()
    for index in range(start, start + count):
        try:
            program = generate(seed, index)
        except Exception as exc:  # a fault of the generator: reported, and the run goes on
            summary.kinds["generator_error"] += 1
            if report is not None:
                report(f"== generator_error in program {seed}:{index}: {type(exc).__name__}: {exc}")
            continue
        try:
            finding = check_program(program, compiler, timeout=timeout)
        except Exception as exc:  # a fault of the checker (parity's gradient bookkeeping): reported, run goes on
            summary.kinds["checker_error"] += 1
            if report is not None:
                report(f"== checker_error in program {seed}:{index}: {type(exc).__name__}: {exc}")
            continue
        if finding.kind == "hang":  # a slow call on a loaded machine is no hang: once more, with more time
            finding = check_program(program, compiler, timeout=4 * timeout)
        if finding.kind not in ("ok", "hang", "torch_assert") and minimize_budget:
            finding = minimize(finding, compiler, budget=minimize_budget, timeout=min(timeout, 5.0))
        summary.count += 1
        summary.kinds[finding.kind] += 1
        summary.families.update(program.families)
        if finding.kind not in ("ok", "torch_assert"):
            summary.findings.append(finding)
            if report is not None:
                report(finding.format())
    summary.seconds = time.perf_counter() - began
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stillframe.check.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100, help="programs to generate and check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="index of the first program")
    parser.add_argument("--compiler", choices=sorted(COMPILERS), default="stillframe")
    parser.add_argument("--backend", default="eager", help="the backend both compilers hand graphs to")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per program before it counts as a hang")
    parser.add_argument("--minimize", type=int, default=60, metavar="TRIES",
                        help="re-runs spent shrinking each reproducer (0: none)")
    parser.add_argument("--replay", metavar="FILE", help="check one reproducer file instead of generating")
    parser.add_argument("--show", action="store_true", help="print each generated program's source")
    args = parser.parse_args(argv)

    def emit(text: str):
        print(text, flush=True)

    compiler = compiler_for(args.compiler, args.backend)

    if args.replay:
        with open(args.replay) as fh:
            finding = check_program(load(fh.read()), compiler, timeout=args.timeout)
        print(finding.format() if finding.kind != "ok" else "ok")
        return 0 if finding.kind == "ok" else 1
    if args.show:
        for index in range(args.start, args.start + args.count):
            print(generate(args.seed, index).source)
        return 0
    summary = fuzz(args.count, args.seed, compiler, start=args.start, timeout=args.timeout,
                   minimize_budget=args.minimize, report=emit, name=f"{args.compiler} (backend {args.backend})")
    print(summary.format(), flush=True)
    return 0 if not summary.findings else 1


if __name__ == "__main__":
    sys.exit(main())
