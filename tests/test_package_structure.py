"""The package's import structure, read from the source (ast): no import cycle between probes modules at module
level, and no private name (``_name``) imported from another module: what modules share is public."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "probes"


def modules() -> dict[str, Path]:
    """{dotted module name: file} of every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``from X import ...`` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if path.name != "__init__.py":
        base.pop()
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def module_level_imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The probes modules `module` imports when it is imported: statements outside functions and classes (under
    ``if``/``try`` too), ``from pkg import sub`` counted as importing the submodule."""
    found = set()

    def visit(statements) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom):
                source = imported(module, path, node)
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    found.add(sub if sub in known else source)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                visit(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {m for m in found if m in known and m != module}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_cycle_finder_on_a_known_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_between_modules():
    found = modules()
    graph = {m: module_level_imports(m, p, set(found)) for m, p in found.items()}
    assert "probes.results.probe_result" in graph["probes.scoring.probe"]  # the walk sees imports at all
    assert cycles(graph) == []


def test_no_private_name_imported_across_modules():
    found = modules()
    violations = []
    for module, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and imported(module, path, node).split(".")[0] == "probes":
                source = imported(module, path, node)
                violations += [f"{module} imports {source}.{a.name}" for a in node.names
                               if a.name.startswith("_") and not a.name.startswith("__") and source != module]
    assert violations == []
