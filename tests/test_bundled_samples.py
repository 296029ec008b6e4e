"""The bundled corpus samples (probes.base.defaults): found through the installed package probes.corpora, and from a
checkout on PYTHONPATH that was never installed (a GPU machine's copy of the tree: benchmarks/gpu_check.py)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from probes.base import defaults

ROOT = Path(__file__).resolve().parents[1]


def test_every_sample_of_the_manifest_is_found_installed_or_not(monkeypatch):
    installed = defaults.corpora_dir()
    manifest = json.loads((ROOT / "corpora" / "MANIFEST.json").read_text(encoding="utf-8"))
    files = [entry["file"] for entry in manifest["samples"]]
    assert defaults.bundled_corpora() == files and all((installed / f).is_file() for f in files)

    find_spec = importlib.util.find_spec  # a checkout on PYTHONPATH: no package-dir mapping, no probes.corpora

    def uninstalled(name, *args):
        return None if name == "probes.corpora" else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", uninstalled)
    assert defaults.corpora_dir() == ROOT / "corpora"
    assert Path(defaults.bundled_corpus()) == ROOT / "corpora" / defaults.DEFAULT_CORPUS
    assert Path(defaults.bundled_corpus()).read_bytes() == (installed / defaults.DEFAULT_CORPUS).read_bytes()
