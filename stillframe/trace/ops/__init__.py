"""Opcode handlers, one module per ``dis`` family; importing this package registers them all."""

from . import blocks, containers, exceptions, functions, generators, jumps, names, operators, stack, strings  # noqa: F401
