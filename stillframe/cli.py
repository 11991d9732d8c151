"""The ``stillframe`` command.

Each subcommand is two functions: ``_add_<name>(subparsers)`` declares its
arguments, ``_<name>(args) -> int`` runs it and returns the exit status. Add a
subcommand by writing both and listing it in ``SUBCOMMANDS``.

Example::

    $ stillframe demo --backend eager
    $ python -m stillframe demo --only gpt --full
    $ stillframe explain train.py:main
    $ stillframe explain train.py --epochs 1
    $ stillframe run train.py --epochs 1
"""

from __future__ import annotations
from .own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import argparse
import sys
from .demo import PROGRAMS, run_demo
from .diagnostics.explain import run_cli
from .runner import run


def _add_demo(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="compile the demo programs, print their graphs and guards, check them against eager",
        description=(
            "Compile three programs (the two seed bugs and a small GPT), print every captured FX graph, "
            "its guards and the compile counters, and compare values, requires_grad and gradients with "
            "eager PyTorch. Exits 1 if any program fails."
        ),
    )
    parser.add_argument(
        "--backend",
        default="inductor",
        help="torch.compile backend the captured graphs run on: inductor (default), aot_eager, eager, ...",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=[p.name for p in PROGRAMS],
        metavar="PROGRAM",
        help="run only this program (repeatable): " + ", ".join(p.name for p in PROGRAMS),
    )
    parser.add_argument("--full", action="store_true", help="print guards in full instead of the first lines")


def _demo(args: argparse.Namespace) -> int:
    return run_demo(backend=args.backend, only=args.only, full=args.full)


def _add_explain(subparsers) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="run a program under stillframe and report its graphs, graph breaks, guards and recompiles",
        description=(
            "Run a program with every torch.compile and stillframe.compile call routed to stillframe, then\n"
            "print stillframe.explain's report for each compiled object: its graphs (code, op counts), graph\n"
            "breaks (kind, reason, hint, file:line), guards, recompiles and eager fallbacks.\n\n"
            "  stillframe explain FILE.py:FUNCTION\n"
            "      Import FILE.py as a module and call FUNCTION. If FILE.py defines FUNCTION_example_inputs(),\n"
            "      FUNCTION (a function or nn.Module) is itself explained on the tuple of arguments it returns;\n"
            "      otherwise FUNCTION is an entry point, called with no arguments, that calls compiled code.\n"
            "  stillframe explain SCRIPT.py [ARGS...]\n"
            "      Run SCRIPT.py as __main__ with sys.argv = [SCRIPT.py, ARGS...].\n\n"
            "Exit status: 0 on success, 1 if the program raised (the reports of what ran are printed\n"
            "first), 2 for a bad FILE:FUNCTION or SCRIPT."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--backend",
        default="eager",
        help="backend every routed compile uses (default eager: the report is about capture); "
             "'keep' keeps each call's own backend",
    )
    parser.add_argument("--no-code", action="store_true", help="leave the graphs' code out of the report")
    parser.add_argument("--no-guards", action="store_true", help="leave the guards out of the report")
    parser.add_argument("target", metavar="FILE.py:FUNCTION | SCRIPT.py", help="what to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's arguments")


def _explain(args: argparse.Namespace) -> int:
    if not args.target.endswith(".py") and args.args:  # FILE.py:FUNCTION takes no ARGS: options may follow it
        options = argparse.ArgumentParser(prog="stillframe explain")
        options.add_argument("--backend", default=args.backend)
        options.add_argument("--no-code", action="store_true", default=args.no_code)
        options.add_argument("--no-guards", action="store_true", default=args.no_guards)
        rest, extra = options.parse_known_args(args.args)
        args.backend, args.no_code, args.no_guards, args.args = rest.backend, rest.no_code, rest.no_guards, extra
    return run_cli(args.target, args.args, backend=None if args.backend == "keep" else args.backend,
                   code=not args.no_code, guards=not args.no_guards)


def _add_run(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a script with torch.compile routed to stillframe, then summarize what was compiled",
        description=(
            "Run SCRIPT.py as `python SCRIPT.py ARGS...` would (as __main__, sys.argv = [SCRIPT.py, ARGS...]),\n"
            "with every torch.compile, nn.Module.compile() and stillframe.compile call compiling with\n"
            "stillframe. When the script ends, however it ends, print to stderr a summary per compiled object:\n"
            "graphs, graph breaks (reason, file:line), recompiles (the guard that failed), eager fallbacks,\n"
            "and the seconds spent tracing and in the backend's compile.\n\n"
            "Exit status: the script's (1 after an uncaught exception, whose traceback is printed),\n"
            "2 if SCRIPT.py is not a file."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--backend",
        default=None,
        help="backend every compile uses instead of its own (default: each call's own, as in the script)",
    )
    parser.add_argument("--summary", action=argparse.BooleanOptionalAction, default=True,
                        help="print the summary at exit (default: on)")
    parser.add_argument("script", metavar="SCRIPT.py", help="the script to run")
    rest = parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's arguments")
    rest.required = False  # argparse marks a REMAINDER positional required: "required: SCRIPT.py, ARGS"


def _run(args: argparse.Namespace) -> int:
    return run(args.script, args.args, backend=args.backend, summary=args.summary)


# name -> (declare arguments, run)
SUBCOMMANDS = {
    "demo": (_add_demo, _demo),
    "explain": (_add_explain, _explain),
    "run": (_add_run, _run),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stillframe",
        description="stillframe: a graph-capture JIT for PyTorch (bytecode -> torch.fx, guarded, any torch.compile backend).",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add, _ in SUBCOMMANDS.values():
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    _, run = SUBCOMMANDS[args.command]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
