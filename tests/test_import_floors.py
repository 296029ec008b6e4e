"""The house is one-way: every module of probes/ sits on a floor (FLOORS: the folders of probes/, docs/design.md), and no
module imports one on a floor above it, at the top of the file or inside a function (or under TYPE_CHECKING);
and no set of modules imports itself round in a circle."""
from __future__ import annotations

import ast
from pathlib import Path

from test_package_structure import PACKAGE, cycles, imported, modules

# floor -> the folders of probes/ on it (their every module), lowest first; the top-level modules are named alone
FLOORS = {
    "base": ["base", "__init__"],
    "reader": ["corpus"],
    "encoding": ["encoding"],
    "settings": ["settings"],
    "capture": ["capture"],
    "results": ["results"],
    "probes": ["scoring", "builtin"],
    "runner": ["running"],
    "tools": ["tools"],
    "cli": ["cli", "__main__"],
}
RANK = {name: i for i, name in enumerate(FLOORS)}
FOLDER_FLOOR = {folder: name for name, folders in FLOORS.items() for folder in folders}


def floor(module: str) -> str:
    """The floor of `module`: the floor of the folder of probes/ it lies in (``probes`` itself, the package's
    ``__init__``, is on the ground floor)."""
    parts = module.split(".")
    folder = parts[1] if len(parts) > 1 else "__init__"
    assert folder in FOLDER_FLOOR, f"{module} is in no floor's folder: add probes/{folder} to FLOORS (and to docs/design.md)"
    return FOLDER_FLOOR[folder]


def test_every_folder_is_a_floor():
    """Every entry of probes/ is a floor's folder or a named top-level module, and there are at most 15."""
    entries = {p.stem for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert entries == set(FOLDER_FLOOR), entries ^ set(FOLDER_FLOOR)
    assert len(entries) <= 15


def imports(name: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """The package's modules that `name` imports anywhere in its file (inside functions too), with the first line
    of each; ``from pkg import sub`` counts as importing the submodule."""
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = imported(name, path, node)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base, node.lineno)
    return found


def graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def test_every_module_is_on_a_floor():
    for module in modules():
        floor(module)


def test_no_module_imports_one_above_it():
    upward = [f"{modules()[m].relative_to(PACKAGE.parent)}:{line}: {m} ({floor(m)}) imports {t} ({floor(t)})"
              for m, targets in graph().items() for t, line in targets.items() if RANK[floor(t)] > RANK[floor(m)]]
    assert not upward, "\n".join(upward)


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_walk_sees_an_import_inside_a_function(tmp_path):
    """An upward import hidden in a function counts (test_package_structure tests the cycle search)."""
    source = tmp_path / "low.py"
    source.write_text("def f():\n    from probes.cli import main\n    return main\n", encoding="utf-8")
    assert imports("probes.base.errors", source, {"probes.base.errors": source, "probes.cli": Path()}) == {"probes.cli": 2}
    assert RANK[floor("probes.cli")] > RANK[floor("probes.results.probe_result")] > RANK[floor("probes.corpus.conllu_reader")]
