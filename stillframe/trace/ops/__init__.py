"""Opcode handlers, one module per ``dis`` family; importing this package registers them all."""

from . import blocks, containers, functions, jumps, names, operators, stack  # noqa: F401
