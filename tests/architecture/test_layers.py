"""The package's layers import only downward, and private torch APIs are named in ``compat`` (the package) alone
(issue 10; README, "Layout").

Every module-level import of a stillframe module is read from the source with
``ast`` (imports under ``if TYPE_CHECKING:`` are not module-level statements
and are not counted; function-local imports are counted, and must not exist).
A module may import its own floor or any floor below it. Within ``rules/``,
getattr, call and setattr recurse into each other as Python's object model
does; that recursion is the one cycle allowed, and it stays inside the package.
"""

import ast
import pathlib

import pytest

import stillframe

PACKAGE = pathlib.Path(stillframe.__file__).parent

# Module-name prefixes, lowest floor first; the longest matching prefix decides a module's floor.
FLOORS = [
    ("stillframe.bytecode", 0), ("stillframe.errors", 0), ("stillframe.config", 0), ("stillframe.compat", 0),
    ("stillframe.diagnostics.log", 0), ("stillframe.own_builtins", 0),
    ("stillframe.guards", 1), ("stillframe.graph", 1), ("stillframe.tensors.meta", 1), ("stillframe.trace.state", 1),
    ("stillframe.variables", 2),
    ("stillframe.tensors", 3),
    ("stillframe.rules", 4),
    ("stillframe.trace", 5),
    ("stillframe.runtime", 6),
    ("stillframe.api", 7), ("stillframe.diagnostics.report", 7),  # the public faces: compile, explain
    ("stillframe", 8),  # stillframe/__init__.py: the public names
    ("stillframe.cli", 9), ("stillframe.__main__", 9), ("stillframe.demo", 9), ("stillframe.runner", 9),
    ("stillframe.diagnostics", 9), ("stillframe.check", 9),  # the tools, outside the library core
]


def floor(module: str) -> int:
    matches = [(len(prefix), level) for prefix, level in FLOORS if module == prefix or module.startswith(prefix + ".")]
    assert matches, f"{module} is on no floor: add it to FLOORS"
    return max(matches)[1]


def module_name(path: pathlib.Path) -> str:
    parts = ["stillframe", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(module: str, path: pathlib.Path, node: ast.AST) -> list[str]:
    """The stillframe modules an import statement loads (``from . import x`` names the submodule x)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    else:
        return []
    found = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.append(name)
    return found


def edges():
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        top = {id(node) for node in tree.body}  # a module-level try's body is module level too
        top |= {id(inner) for node in tree.body if isinstance(node, ast.Try) for inner in node.body}
        type_only = {id(inner) for node in tree.body if isinstance(node, ast.If)
                     and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING") for inner in node.body}
        for node in ast.walk(tree):
            if id(node) in type_only:
                continue
            for target in imported(module, path, node):
                yield module, target, node.lineno, id(node) in top


def test_every_module_is_on_a_floor():
    for module in MODULES:
        floor(module)


def test_imports_only_go_down():
    upward = [f"{m}:{line} imports {t} (floor {floor(m)} -> {floor(t)})"
              for m, t, line, top in edges() if top and floor(t) > floor(m)]
    assert upward == []


def test_no_function_local_imports_of_stillframe():
    local = [f"{m}:{line} imports {t}" for m, t, line, top in edges() if not top]
    assert local == []


def test_the_only_cycle_is_rules_recursion():
    graph: dict[str, set] = {m: set() for m in MODULES}
    for m, t, _, top in edges():
        if top:
            graph[m].add(t)
    # Tarjan's strongly connected components.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    for component in components:
        assert all(m.startswith("stillframe.rules.") for m in component), component


@pytest.mark.parametrize("module", sorted(MODULES))
def test_private_torch_apis_only_through_compat(module):
    if module == "stillframe.compat" or module.startswith("stillframe.compat."):
        return
    tree = ast.parse(MODULES[module].read_text())
    private = [f"line {node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
               if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                   part.startswith("_") for name in ([node.module or ""] if isinstance(node, ast.ImportFrom)
                                                     else [a.name for a in node.names])
                   if name.startswith("torch.") for part in name.split("."))
               or isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch"
               and node.attr.startswith("_")]
    assert private == []
