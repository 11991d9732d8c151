"""``stillframe demo``: compile three programs, show what was captured, and check each against eager.

The programs are the two bugs that motivated stillframe and a small model:

1. ``skew_symmetric`` (seeds/001): a sliced assignment ``matrix[:, rows, cols] = vec``
   into a ``torch.zeros`` tensor makes ``matrix`` require grad in eager; the
   function asserts so while it is being traced. Forward and backward.
2. ``transpose_add`` (seeds/000): ``x.t_(); y.t_(); return (x + y,)``. The
   guards describe the inputs as they entered the trace, not as the in-place
   ops left them, so three calls with fresh inputs compile exactly once.
3. ``gpt`` (examples/gpt.py): a 2-layer GPT, forward with targets, then
   backward; every parameter's gradient is compared with eager.

For each program the demo prints every cache entry's FX graph and guards, the
compile counters, and the parity report of :func:`stillframe.check.compare`.
A program passes when parity holds, nothing fell back to eager, and it was
captured whole (one graph) and compiled once. The exit status is 0 when all
pass, 1 otherwise. Results are compared at ``torch.testing.assert_close``'s
default tolerances on the ``eager`` and ``aot_eager`` backends, and at
``rtol = atol = 1e-4`` on the others (see :func:`tolerances`).

Example::

    $ stillframe demo --backend eager --only transpose_add
"""

from __future__ import annotations
from .own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import copy
import importlib.util
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

import torch

import stillframe
from .check.parity import compare

GUARD_LINES = 40  # guard source longer than this is cut unless --full
RULE = "=" * 78

# Backends that run the captured ops as recorded are held to torch.testing.assert_close's
# defaults. Others (inductor) fuse and reorder float arithmetic: on the GPT their float32
# gradients differ from eager by about 2e-5, exactly as under torch.compile with the same
# backend, so they are compared at rtol = atol = 1e-4.
EXACT_BACKENDS = ("eager", "aot_eager")
LOOSE_TOLERANCE = 1e-4


def tolerances(backend: Any) -> tuple[float | None, float | None]:
    """``(rtol, atol)`` for comparing results of ``backend`` with eager; ``(None, None)``: the defaults."""
    if isinstance(backend, str) and backend in EXACT_BACKENDS:
        return None, None
    return LOOSE_TOLERANCE, LOOSE_TOLERANCE


# ---------------------------------------------------------------------------
# The programs
# ---------------------------------------------------------------------------


def skew_symmetric(vec, block_size):
    """seeds/001: ``requires_grad`` must survive ``matrix[:, rows, cols] = vec``."""
    batch_size = vec.shape[0]
    matrix = torch.zeros(batch_size, block_size, block_size, device=vec.device, dtype=vec.dtype)
    rows, cols = torch.triu_indices(block_size, block_size, 1)
    matrix[:, rows, cols] = vec
    if torch.is_grad_enabled():
        assert vec.requires_grad
        assert matrix.requires_grad  # failed under torch.compile (torch 2.8), holds in eager
    matrix = matrix - matrix.transpose(-2, -1)
    return matrix


def skew_symmetric_args():
    # compare() seeds torch before each make_args call: both sides get the same values
    return (torch.randn(2, 10, requires_grad=True), 5)


class TransposeAdd(torch.nn.Module):
    """seeds/000: in-place ``t_()`` on graph inputs; guards must still pass on the next call."""

    def forward(self, x, y):
        x.t_()
        y.t_()
        return (x + y,)


def transpose_add_args():
    return (torch.randn(3, 3), torch.randn(3, 3))  # new values on every call (compare() seeds per call)


def load_example(name: str):
    """Import ``examples/<name>.py`` from the source checkout this package runs from.

    ``examples/`` is not part of the installed package, so the demo finds it
    beside the ``stillframe/`` folder (an editable install or a checkout).
    """
    module_name = f"_stillframe_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = Path(__file__).resolve().parent.parent / "examples" / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the demo runs from a source checkout (pip install -e .)")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def gpt_model():
    return load_example("gpt").make_model(seed=0)


def gpt_args():
    return load_example("gpt").make_batch(batch=4, seq=32, seed=0)


@dataclass(frozen=True)
class Program:
    """One demo program: what to compile, how to call it, and what to expect."""

    name: str
    title: str
    build: Callable[[], Any]  # the function, or a fresh nn.Module
    make_args: Callable[[], tuple]  # fresh arguments for one call
    calls: int = 1
    grad: bool = True
    expect_compiles: int | None = 1  # cache entries expected after all calls; None: any number
    expect_graphs: int | None = 1  # graphs handed to the backend (1: captured whole, no graph break)


PROGRAMS = (
    Program(
        "skew_symmetric",
        "seeds/001: sliced assignment keeps requires_grad (forward + backward)",
        lambda: skew_symmetric,
        skew_symmetric_args,
    ),
    Program(
        "transpose_add",
        "seeds/000: in-place t_() on inputs, 3 calls with fresh inputs, compiles once",
        TransposeAdd,
        transpose_add_args,
        calls=3,
        grad=False,  # t_() on a leaf that requires grad is an error in eager too
    ),
    Program(
        "gpt",
        "examples/gpt.py: 2-layer GPT, forward with targets + backward",
        gpt_model,
        gpt_args,
    ),
)


# ---------------------------------------------------------------------------
# Running one program
# ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What happened to one program; ``failures`` is empty when it passed."""

    program: Program
    compiles: int = 0
    counters: dict = field(default_factory=dict)
    parity: str = "-"
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def run_program(program: Program, backend: Any, out: TextIO, full: bool = False) -> Outcome:
    """Compile ``program``, compare it with eager, print what was captured; never raises."""
    rtol, atol = tolerances(backend)
    tolerance = "assert_close defaults" if rtol is None else f"rtol={rtol:g} atol={atol:g}"
    grad = "yes" if program.grad else "no"
    print(f"backend={_backend_name(backend)}  calls={program.calls}  grad={grad}  tolerance: {tolerance}", file=out)

    outcome = Outcome(program)
    stillframe.reset()
    start = time.perf_counter()
    try:
        fn = program.build()
        target = copy.deepcopy(fn) if isinstance(fn, torch.nn.Module) else fn
        compiled = stillframe.compile(target, backend=backend)
        report = compare(
            fn, program.make_args, compiled=compiled, calls=program.calls, grad=program.grad, rtol=rtol, atol=atol
        )
        entries = compiled.cache_entries()
    except Exception as error:  # the demo reports a crash in any program and goes on with the next
        outcome.seconds = time.perf_counter() - start
        first_line = (str(error).splitlines() or [""])[0]
        outcome.failures.append(f"crashed: {type(error).__name__}: {first_line}"[:100])
        print("\n" + traceback.format_exc().rstrip(), file=out)
        return outcome
    outcome.seconds = time.perf_counter() - start
    outcome.counters = {key: stillframe.counters[key] for key in ("traces", "graphs", "fallbacks", "cache_hits")}
    outcome.compiles = len(entries)

    for i, entry in enumerate(entries):
        _show_entry(i, entry, out, full)

    print("\ncompiles: " + _plural(outcome.compiles, "cache entry", "cache entries"), file=out)
    print("counters: " + "  ".join(f"{k}={v}" for k, v in outcome.counters.items()), file=out)
    for record in report.warnings:
        print(f"warning:  {record.message}", file=out)
    if report.ok:
        compared = "return values, requires_grad, input mutations" + (", gradients" if program.grad else "")
        print(f"parity:   ok ({compared} match eager)", file=out)
    else:
        print(f"parity:   {_plural(len(report.mismatches), 'MISMATCH', 'MISMATCHES')}", file=out)
        for mismatch in report.mismatches:
            first, *rest = mismatch.splitlines() or [""]
            print(f"  - {first}", file=out)
            for line in rest:
                print(f"    {line}", file=out)

    outcome.parity = "ok" if report.ok else "MISMATCH"
    if not report.ok:
        outcome.failures.append("parity")
    eager_entries = sum(1 for entry in entries if entry.eager)
    if outcome.counters["fallbacks"] or eager_entries:
        outcome.failures.append("fell back to eager")
    if program.expect_compiles is not None and outcome.compiles != program.expect_compiles:
        outcome.failures.append(f"expected {program.expect_compiles} compile(s), got {outcome.compiles}")
    if program.expect_graphs is not None and outcome.counters["graphs"] != program.expect_graphs:
        outcome.failures.append(f"expected {program.expect_graphs} graph(s), got {outcome.counters['graphs']}")
    return outcome


def _show_entry(i: int, entry, out: TextIO, full: bool) -> None:
    if entry.eager or entry.graph_module is None:
        print(f"\n-- cache entry {i}: runs eagerly (the trace was unsupported) --", file=out)
    else:
        print(f"\n-- cache entry {i}: FX graph --", file=out)
        print(entry.graph_module.code.strip(), file=out)
    print(f"\n-- cache entry {i}: guards --", file=out)
    lines = entry.guard_source.rstrip("\n").splitlines()
    if not full and len(lines) > GUARD_LINES:
        hidden = len(lines) - GUARD_LINES
        lines = lines[:GUARD_LINES] + [f"... {hidden} more lines (--full shows them)"]
    print("\n".join(lines), file=out)


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


# ---------------------------------------------------------------------------
# The whole demo
# ---------------------------------------------------------------------------


def run_demo(backend: Any = "inductor", only: list[str] | None = None, full: bool = False, out: TextIO | None = None) -> int:
    """Run the programs named in ``only`` (all when None); print a summary; return the exit status."""
    out = sys.stdout if out is None else out
    programs = [p for p in PROGRAMS if only is None or p.name in only]
    outcomes = []
    for n, program in enumerate(programs, 1):
        print(f"\n{RULE}\n[{n}/{len(programs)}] {program.name}: {program.title}\n{RULE}", file=out)
        outcome = run_program(program, backend, out, full)
        outcomes.append(outcome)
        print(f"\n=> {'PASS' if outcome.ok else 'FAIL: ' + '; '.join(outcome.failures)}", file=out, flush=True)
    print(file=out)
    print(format_summary(outcomes, backend), file=out, flush=True)
    return 0 if all(o.ok for o in outcomes) else 1


def format_summary(outcomes: list[Outcome], backend: Any) -> str:
    header = ("program", "compiles", "graphs", "fallbacks", "parity", "time s", "verdict")
    rows = [
        (
            o.program.name,
            str(o.compiles),
            str(o.counters.get("graphs", "-")),
            str(o.counters.get("fallbacks", "-")),
            o.parity,
            f"{o.seconds:.1f}",
            "PASS" if o.ok else "FAIL (" + "; ".join(o.failures) + ")",
        )
        for o in outcomes
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def fmt(row):
        return "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()

    passed = sum(o.ok for o in outcomes)
    lines = [f"Summary (backend={_backend_name(backend)}): {passed}/{len(outcomes)} passed", fmt(header)]
    lines.append("  ".join("-" * w for w in widths))
    lines += [fmt(row) for row in rows]
    return "\n".join(lines)


def _backend_name(backend: Any) -> str:
    return backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
