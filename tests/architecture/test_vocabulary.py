"""Closed vocabularies (issue 10): every graph-break tag written in the package is a GraphBreakKind."""

import ast
import pathlib

import pytest

import stillframe
from stillframe.errors import GraphBreak, GraphBreakKind
from stillframe.guards.guard import GUARD_KINDS
from stillframe.trace.interpreter import Tracer

PACKAGE = pathlib.Path(stillframe.__file__).parent


def written_kinds():
    """The string literals passed as the kind of ``tx.unsupported(...)`` anywhere in the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "unsupported" and node.args:
                first = node.args[0]
                yield path.relative_to(PACKAGE), node.lineno, first


def test_every_unsupported_call_names_a_graph_break_kind():
    seen = list(written_kinds())
    assert len(seen) > 50  # the scan found the package's calls (it cannot pass by reading nothing)
    kinds = set(GraphBreakKind)
    # A literal, or a conditional choosing between literals.
    literals = lambda arg: [arg] if not isinstance(arg, ast.IfExp) else [*literals(arg.body), *literals(arg.orelse)]
    bad = [f"{path}:{line}: {ast.unparse(arg)}" for path, line, arg in seen
           if not all(isinstance(a, ast.Constant) and a.value in kinds for a in literals(arg))]
    assert bad == []


def test_tracer_refuses_an_unknown_kind():
    tracer = Tracer(None, None, True)
    with pytest.raises(ValueError, match="not_a_kind"):
        tracer.unsupported("not_a_kind", "an explanation")


def test_graph_break_formats_its_kind_as_the_tag():
    assert GraphBreak(GraphBreakKind.DATA_DEPENDENT, "why").format() == "data_dependent: why"


def written_guard_kinds():
    """The string literals passed as the kind of ``Guard(source, kind, ...)`` anywhere in the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Guard" \
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                yield f"{path.relative_to(PACKAGE)}:{node.lineno}", node.args[1].value


def test_every_guard_kind_written_is_in_the_table():
    seen = list(written_guard_kinds())
    assert len(seen) > 15
    assert [f"{where}: {kind}" for where, kind in seen if kind not in GUARD_KINDS] == []
