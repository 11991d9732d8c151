"""The ``stillframe`` command.

Each subcommand is two functions: ``_add_<name>(subparsers)`` declares its
arguments, ``_<name>(args) -> int`` runs it and returns the exit status. Add a
subcommand by writing both and listing it in ``SUBCOMMANDS``.

Example::

    $ stillframe demo --backend eager
    $ python -m stillframe demo --only gpt --full
"""

from __future__ import annotations

import argparse
import sys


def _add_demo(subparsers) -> None:
    from stillframe.demo import PROGRAMS

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
    from stillframe.demo import run_demo

    return run_demo(backend=args.backend, only=args.only, full=args.full)


# name -> (declare arguments, run); `explain` and `run` come here next.
SUBCOMMANDS = {
    "demo": (_add_demo, _demo),
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
