"""Python ints, floats and data-dependent values: graphs and recompiles, stillframe next to torch.compile.

    python bench/scalars.py                    # backend aot_eager
    python bench/scalars.py --backend eager

Rows (issue 12): a loop counter or step counter that changes (an int argument with a graph break inside,
a loop calling a function that breaks, a counter live across a break, ``state.step``, a ``for``/``while``
loop whose body breaks); a float that changes (``x * lr`` for 5 values of ``lr``, a branch on it, a size
computed from it); ``.item()`` and ``nonzero`` / mask indexing with torch._dynamo.config's
``capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops`` off and on (stillframe.config's for
stillframe). Columns: graphs compiled, recompiles (traces of a code point that already had a plan; for
torch.compile its ``recompiles`` log records), and whether every result equals eager's.
"""

from __future__ import annotations

import argparse
import contextlib
import io

import torch

from stillframe.check.scalar_programs import (branch, counter_across_a_break, calls_helper_in_a_loop, driver,
                                              item_size, loop_with_a_break, mask, object_counter, scaled,
                                              size_from_float, step, stillframe_counts, torch_compile_counts,
                                              while_with_a_break)


ROWS = [
    ("int argument, break inside (i in range(8))", step, "range8", {}),
    ("loop calls a function that breaks", calls_helper_in_a_loop, "once", {}),
    ("counter incremented across a break", counter_across_a_break, "range8", {}),
    ("state.step += 1, break", object_counter, "state", {}),
    ("for i in range(40): print (break in loop)", loop_with_a_break, "n40", {}),
    ("while i < 40: print (break in loop)", while_with_a_break, "n40", {}),
    ("x * lr, 5 values of lr", scaled, "floats", {}),
    ("branch on a float", branch, "floats", {}),
    ("a size computed from a float", size_from_float, "sizes", {}),
    (".item() as a size, flag off", item_size, "data", {}),
    (".item() as a size, capture_scalar_outputs", item_size, "data", {"capture_scalar_outputs": True}),
    ("nonzero / x[mask], flag off", mask, "data", {}),
    ("nonzero / x[mask], capture_dynamic_output_shape_ops", mask, "data",
     {"capture_dynamic_output_shape_ops": True}),
]


def table(backend: str) -> list[str]:
    rows = ["| program | stillframe graphs / recompiles | torch.compile graphs / recompiles | equal to eager |",
            "|---|---|---|---|"]
    for name, fn, kind, flags in ROWS:
        calls = driver(kind)
        with contextlib.redirect_stdout(io.StringIO()):
            eager = calls(fn)
        theirs, t_graphs, t_recompiles = torch_compile_counts(fn, calls, backend, flags)
        ours, s_graphs, s_recompiles = stillframe_counts(fn, calls, backend, flags)
        same = repr(ours) == repr(eager) == repr(theirs)
        rows.append(f"| {name} | {s_graphs} / {s_recompiles} | {t_graphs} / {t_recompiles} | {same} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="aot_eager")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, backend {args.backend}\n")
    print("\n".join(table(args.backend)))


if __name__ == "__main__":
    main()
