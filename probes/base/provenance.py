"""What a results file records about how it was made: versions, platform, model class and commit, corpus hashes."""
from __future__ import annotations

import hashlib
import os
import platform
import shlex
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from probes.base.checkpoint import weights_sha256
from probes.base.errors import InputError


def provenance(encoder, files: list[str], elapsed: float, **extra: Any) -> dict[str, Any]:
    """Provenance of a run of `encoder` (anything with ``.name`` and ``.model``, a transformers model, and
    optionally ``.gguf``, the probes.base.gguf_file.GgufFile it was loaded from) over corpus `files` that took `elapsed`
    seconds; `extra` entries are recorded as given (e.g. the words that tokenize to [UNK], the ids of skipped
    sentences). model_weights_sha256: of the weights files (a GGUF file's own bytes); model_gguf: the GGUF file's
    name, quantisation type and tensor types from its header (None for a checkpoint that is not one)."""
    import tokenizers
    import torch
    import transformers

    return {
        "probes": probes_version(), "torch": str(torch.__version__), "transformers": str(transformers.__version__),
        "tokenizers": str(tokenizers.__version__), "python": platform.python_version(), "platform": platform.platform(),
        "command": shlex.join(sys.argv),
        "model_class": type(encoder.model).__name__, "model_type": encoder.model.config.model_type,
        "model_commit": getattr(encoder.model.config, "_commit_hash", None),
        "model_weights_sha256": _weights(encoder.name),
        "model_gguf": gguf.record() if (gguf := getattr(encoder, "gguf", None)) is not None else None,
        "corpus_sha256": {f: sha256(f) for f in files}, **extra,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": round(elapsed, 3),
    }


def probes_version() -> str:
    """The installed distribution's version ("0+unknown" in a source tree that is not installed)."""
    try:
        return version("attention-probes")
    except PackageNotFoundError:
        return "0+unknown"


def _weights(model: str) -> str | None:
    """The weights' sha256, or None where they cannot be found (a model built in memory, a hub name not cached)."""
    try:
        return weights_sha256(model)
    except (InputError, OSError):
        return None


def sha256(path: str) -> str:
    """Hex SHA-256 of a file's bytes; of a folder (a corpus given as one, e.g. LitBank's or FrameNet's), of its
    files' paths relative to it and their own SHA-256, in sorted order (the same whatever the listing order)."""
    if os.path.isdir(path):
        tree = hashlib.sha256()
        for f in sorted(p for p in Path(path).rglob("*") if p.is_file()):
            tree.update(f"{f.relative_to(path).as_posix()}\0{sha256(str(f))}\0".encode())
        return tree.hexdigest()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
