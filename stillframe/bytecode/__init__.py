"""Code objects read into version-neutral instructions (see :mod:`.reader`).

Standard library only: importing this package never imports torch.
"""

from .reader import (
    OPNAMES_311,
    OPNAMES_312,
    OPNAMES_313,
    Bytecode,
    ExceptionTableEntry,
    Instruction,
    read,
    version_opnames,
)

__all__ = [
    "OPNAMES_311",
    "OPNAMES_312",
    "OPNAMES_313",
    "Bytecode",
    "ExceptionTableEntry",
    "Instruction",
    "read",
    "version_opnames",
]
