"""What a results file records about how it was made: versions, platform, model class and commit, corpus hashes."""
from __future__ import annotations

import hashlib
import platform
from datetime import datetime, timezone
from typing import Any


def provenance(encoder, files: list[str], elapsed: float) -> dict[str, Any]:
    """Provenance of a run of `encoder` (anything with ``.model``, a transformers model) over corpus `files`
    that took `elapsed` seconds."""
    import tokenizers
    import torch
    import transformers

    from probes import __version__

    return {
        "probes": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__, "python": platform.python_version(), "platform": platform.platform(),
        "model_class": type(encoder.model).__name__, "model_type": encoder.model.config.model_type,
        "model_commit": getattr(encoder.model.config, "_commit_hash", None),
        "corpus_sha256": {f: sha256(f) for f in files},
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": round(elapsed, 3),
    }


def sha256(path: str) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
