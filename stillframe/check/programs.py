"""Seeded random PyTorch programs for differential testing: the generator behind :mod:`stillframe.check.fuzz`.

A program is Python source text: module-level outside state (``OUT``, a list; ``STATE``, a dict; ``OBJ``, a
plain object; ``HOLD``, an object with a data descriptor and a property; ``BUF``, an ``io.StringIO`` that
``print`` writes to; ``MOD``, a module with a parameter, buffers and hooks, and ``OPT``, its optimizer),
``make_args(i)`` (the inputs of call
``i``: ``x`` an (n, n) tensor, often a leaf requiring grad; ``y`` an (n, n) tensor to mutate; ``w`` an (n,)
tensor; ``k`` a Python int that changes between calls), helper functions and generators, and ``f(x, y, w, k)``,
the function to compile. The same ``(seed, index)`` always gives the same program, so a divergence is
reproduced from its numbers or from its text.

    >>> from stillframe.check.programs import generate
    >>> program = generate(0, 0)
    >>> "def f(x, y, w, k):" in program.source and "def make_args(i):" in program.source
    True

The generator tracks, for every tensor name, its shape in symbols (``N`` and ``1``, so a program is valid for
any ``n``), the leaves requiring grad it depends on, whether it is a leaf, and which storage it views, so most
programs run eagerly to their end. It validates each program by running it eagerly three times and draws again
(a few times) when the first call raises. ``Program.families`` names the constructs it contains (``FAMILIES``).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import io
import random
import warnings
from dataclasses import dataclass

from .program_statements import Writer

__all__ = ["FAMILIES", "Program", "generate", "load"]

FAMILIES = (
    "inplace", "view", "metadata", "setitem", "requires_grad", "backward", "autograd_grad", "retain_grad",
    "grad_read", "no_grad", "side_effect", "print", "graph_break", "item_branch", "branch", "loop", "while",
    "try_except", "raise", "nested_call", "generator", "closure", "return_input", "object", "exception_chain",
    "rng", "generator_protocol", "context_manager", "global", "container", "data_dependent", "autograd_function",
    "internal_name", "except_break", "locals", "descriptor", "mutate_iter", "exception_object", "iter_builtin",
    "advanced_setitem", "hook", "grad_mode", "version", "module", "optimizer",
)


@dataclass(frozen=True)
class Program:
    """One generated program: its ``source`` text, where it came from, and the construct families it uses."""

    seed: int
    index: int
    source: str
    families: frozenset = frozenset()

    def namespace(self) -> dict:
        """A fresh module namespace with the program executed in it (``f``, ``make_args``, ``OUT``, ...)."""
        ns: dict = {"__name__": f"fuzz_{self.seed}_{self.index}"}
        exec(compile(self.source, f"<fuzz {self.seed}:{self.index}>", "exec"), ns)
        return ns


def load(source: str, seed: int = -1, index: int = -1) -> Program:
    """A :class:`Program` from source text (a reproducer), its families read from ``# families:``."""
    families: frozenset = frozenset()
    for line in source.splitlines():
        if line.startswith("# families:"):
            families = frozenset(line.split(":", 1)[1].split())
    return Program(seed, index, source, families)


def generate(seed: int, index: int, *, validate: bool = True) -> Program:
    """The program ``index`` of ``seed``: drawn again (at most 6 times) when its first eager call raises."""
    rng = random.Random(f"{seed}:{index}")
    program = None
    for attempt in range(6):
        source, families = Writer(rng).program(seed, index)
        program = Program(seed, index, source, families)
        if not validate or _first_call_returns(program) or rng.random() < 0.1:
            return program
    return program


def _first_call_returns(program: Program) -> bool:
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            ns = program.namespace()
            ns["f"](*ns["make_args"](0))
        except Exception:  # the program's own error: it is why we draw again
            return False
    return True
