"""Protocols: one operation on VariableTrackers as a table from VariableTracker kind to rule.

A :class:`Protocol` replaces an ``isinstance`` ladder: each kind it knows has
one rule (registered with :meth:`Protocol.rule`), each kind it deliberately
has no rule for is listed with the reason (:meth:`Protocol.refuse`), and a
call on any other kind is a bug of ours, not a silent graph break. The
coverage test (``tests/rules/test_protocols.py``) checks every kind of
VariableTracker is in one or the other for every protocol, so adding a kind
means deciding, in one place per protocol, what it does.

Lookup is by the exact class of the VariableTracker: the kinds are a closed
set of final classes (none subclasses another).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import sys
from typing import Any, Callable

from ..errors import InternalError
from ..variables.base import VariableTracker

Rule = Callable[..., Any]


class Protocol:
    """``protocol(tx, var, *args)``: the rule of ``type(var)``, or ``refused(tx, var, reason, *args)`` for a kind
    listed by :meth:`refuse` (typically a graph break that names the reason)."""

    def __init__(self, name: str, refused: Rule):
        self.name = name
        self.rules: dict[type, Rule] = {}
        self.reasons: dict[type, str] = {}
        self._refused = refused
        PROTOCOLS.append(self)

    def rule(self, *kinds: type) -> Callable[[Rule], Rule]:
        """Register the decorated ``fn(tx, var, *args)`` for ``kinds``."""

        def register(fn: Rule) -> Rule:
            for kind in kinds:
                assert kind not in self.rules and kind not in self.reasons, f"{self.name}: {kind.__name__} twice"
                self.rules[kind] = fn
            return fn

        return register

    def refuse(self, reason: str, *kinds: type) -> None:
        """``kinds`` have no rule, for ``reason`` (shown to the user when the protocol is asked of one)."""
        for kind in kinds:
            assert kind not in self.rules and kind not in self.reasons, f"{self.name}: {kind.__name__} twice"
            self.reasons[kind] = reason

    def __call__(self, tx: Any, var: VariableTracker, *args: Any) -> Any:
        kind = type(var)
        rule = self.rules.get(kind)
        if rule is not None:
            return rule(tx, var, *args)
        if kind in self.reasons:
            return self._refused(tx, var, self.reasons[kind], *args)
        raise InternalError(f"the {self.name} protocol has no rule and no reason for {kind.__name__}")


#: Every protocol, for the coverage test.
PROTOCOLS: list[Protocol] = []


def variable_kinds() -> list[type]:
    """Every VariableTracker kind of the package: the subclasses of VariableTracker, transitively, that their
    module names (``@dataclass(slots=True)`` leaves the class it replaced behind as a subclass too)."""
    kinds: list[type] = []
    pending = [VariableTracker]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if sub.__module__.startswith("stillframe.") and \
                    getattr(sys.modules.get(sub.__module__), sub.__qualname__, None) is sub:
                kinds.append(sub)
    return kinds
