"""The house is one-way: every module of probes/ sits on a floor (FLOORS, the README's "Map of the code"), and no
module imports one on a floor above it, at the top of the file or inside a function (or under TYPE_CHECKING);
and no set of modules imports itself round in a circle."""
from __future__ import annotations

import ast
from pathlib import Path

from test_package_structure import PACKAGE, cycles, imported, modules

# floor -> the modules on it, by prefix (the longest prefix that names a module decides); lowest first
FLOORS = {
    "base": ["probes", "probes.errors", "probes.choices", "probes.defaults", "probes.provenance", "probes.checkpoint",
             "probes.gguf_file",
             "probes.packing", "probes.options", "probes.progress", "probes.prefetch", "probes.scratch",
             "probes.exports", "probes.argtypes", "probes.files", "probes.registries", "probes.protocols", "probes.ablation",
             "probes.compare", "probes.studies"],
    "reader": ["probes.corpus"],
    "encoding": ["probes.causal.sequences", "probes.windows", "probes.encoding", "probes.pooling", "probes.shuffle", "probes.identity", "probes.batching"],
    "settings": ["probes.settings", "probes.registry", "probes.builtin.declared"],
    "capture": ["probes.families", "probes.capture", "probes.causal.families", "probes.model", "probes.maps", "probes.ablation.masks",
                "probes.ablation.sharing"],
    "results": ["probes.results", "probes.intervals", "probes.bootstrap", "probes.fitting", "probes.plots", "probes.presentation",
                "probes.examples", "probes.figures", "probes.builtin.fitted", "probes.builtin.trees.details",
                "probes.builtin.seg.show", "probes.builtin.analyses.head_layout"],
    "probes": ["probes.probe", "probes.centroids", "probes.builtin"],
    "runner": ["probes.chunks", "probes.state_files", "probes.runner"],
    "tools": ["probes.causal.detect", "probes.causal.commands", "probes.ablation.", "probes.compare.", "probes.studies.", "probes.report", "probes.show",
              "probes.arguments"],
    "cli": ["probes.cli", "probes.__main__"],
}
RANK = {name: i for i, name in enumerate(FLOORS)}


def floor(module: str) -> str:
    """The floor of `module`: its longest prefix in FLOORS ("probes.ablation." covers the package's modules,
    "probes.ablation" the package's own __init__)."""
    best, found = -1, None
    for name, prefixes in FLOORS.items():
        for prefix in prefixes:
            if (module == prefix or (prefix.endswith(".") and module.startswith(prefix))
                    or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), name
    assert found is not None, f"{module} is on no floor: add it to FLOORS (and to the README's Map of the code)"
    return found


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
    assert imports("probes.errors", source, {"probes.errors": source, "probes.cli": Path()}) == {"probes.cli": 2}
    assert RANK[floor("probes.cli")] > RANK[floor("probes.results")] > RANK[floor("probes.corpus.conllu_reader")]
