"""Imports in traced code: the ``import`` statement (``IMPORT_NAME``) and the ``__import__`` builtin."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import sys
from typing import TYPE_CHECKING, Any

from ..guards.guard import Guard, builtins_of
from ..guards.source import BuiltinsSource, GetItemSource
from ..own_builtins import BUILTINS
from ..variables.base import PythonObjectVariable, VariableTracker
from .known import const_value, is_const

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


def import_module(tx: Tracer, name: str, fromlist: Any, level: int) -> VariableTracker:
    """``import name`` / ``from name import ...`` / ``__import__(name, fromlist=..., level=...)``: the module Python's
    import returns, when it is already imported (importing runs the module's code, an effect the trace cannot
    hold). Without a fromlist, ``import a.b`` gives the top package ``a``, as Python's does."""
    if level != 0:
        tx.unsupported("unsupported_import", f"relative import of {name} inside a compiled function")
    module = sys.modules.get(name)
    if module is None:
        tx.unsupported("unsupported_import", f"importing {name}, which is not imported yet",
                       ("import it at the top of the file",))
    if not fromlist and "." in name:
        module = sys.modules[name.partition(".")[0]]
    return PythonObjectVariable(module)


def import_statement(tx: Tracer, name: str, fromlist: Any, level: int) -> VariableTracker:
    """The ``import`` statement (``IMPORT_NAME``): CPython calls the ``__import__`` of the frame's builtins, so the
    trace folds it (:func:`import_module`) only while that is Python's own, guarded; a user's import hook or mock
    (``builtins.__import__ = ...``) breaks the graph and the statement runs for real, calling it."""
    frame = tx.frame
    table = builtins_of(frame.globals)
    if table is not BUILTINS:  # (stillframe's own code: its copy never changes)
        source = GetItemSource(BuiltinsSource(frame.globals_module), "__import__")
        hook = table.get("__import__")
        if hook is not BUILTINS["__import__"]:
            tx.unsupported("unsupported_import", f"import {name} while builtins.__import__ is not Python's own")
        tx.add_guard(Guard(source, "ID", id(hook)))
    return import_module(tx, name, fromlist, level)


def import_builtin(tx: Tracer, args: list, kwargs: dict) -> VariableTracker:
    names = ("name", "globals", "locals", "fromlist", "level")
    bound = dict(zip(names, args), **kwargs)
    if not set(bound) <= set(names) or "name" not in bound or len(args) > len(names):
        tx.unsupported("unsupported_builtin", "__import__ with arguments Python would reject")
    if not all(is_const(tx, bound[k]) for k in ("name", "fromlist", "level") if k in bound):
        tx.unsupported("unsupported_builtin", "__import__ of a name or fromlist computed from traced values")
    name = const_value(tx, bound["name"])
    if not isinstance(name, str):
        tx.user_error(TypeError(f"__import__() argument 1 must be str, not {type(name).__name__}"))
    fromlist = const_value(tx, bound["fromlist"]) if "fromlist" in bound else None
    level = const_value(tx, bound["level"]) if "level" in bound else 0
    return import_module(tx, name, fromlist, level)
