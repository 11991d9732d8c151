"""What each protocol does with a symbolic size (:class:`SymNodeVariable`, dynamic shapes).

A symbolic ``int`` behaves as the ``int`` it stands for: its truth and its use as
a Python constant (``range(n)``, a dict key, a builtin with no symbolic rule)
ask torch's ShapeEnv, which records the guard that makes the answer hold
(``bool(s0 > 2)`` guards ``2 < L['x'].size()[0]``; ``int(s0)`` guards
``L['x'].size()[0] == 3``). Arithmetic and comparisons stay symbolic
(:func:`stillframe.tensors.symbolic.apply`, reached from ``rules.operators``).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from ..tensors.symbolic import specialize
from ..variables.base import ConstantVariable, SymNodeVariable
from . import attrs, calls, containers, known, operators, truthiness

known.const_value.rule(SymNodeVariable)(specialize)
# specialized on demand, as const_value does: every builtin and fold that needs the number may have it
known.is_const.rule(SymNodeVariable)(lambda tx, var: True)
truthiness.truthiness.rule(SymNodeVariable)(lambda tx, var: bool(specialize(tx, var)))
known.sequence_items.refuse("an int is not iterable (the real step raises TypeError)", SymNodeVariable)
containers.subscript.refuse("an int is not subscriptable (the real step raises TypeError)", SymNodeVariable)
calls.CALL.refuse("an int is not callable (the real call raises TypeError)", SymNodeVariable)
# an attribute (``n.real``, pytest's ``getattr(n, "__dataclass_fields__", None)``) is read on the specialized value
attrs.GETATTR.rule(SymNodeVariable)(lambda tx, var, name: attrs.GETATTR(tx, ConstantVariable(specialize(tx, var)),
                                                                        name))
operators.IDENTITY.refuse("an int computed from symbolic sizes has no identity of its own", SymNodeVariable)

