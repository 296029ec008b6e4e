"""A model given as one GGUF file (llama.cpp's format; Ollama keeps its models so too): recognised by its first four
bytes, its header read with the ``gguf`` package for what the results record (the quantisation type). transformers
loads the file itself (``from_pretrained(folder, gguf_file=name)``, which needs ``gguf`` and ``accelerate``: the
extra ``attention-probes[gguf]``), dequantising every tensor to float32: the weights the probes read are the
quantised values, not the original checkpoint's.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.base.errors import InputError, require

MAGIC = b"GGUF"  # a GGUF file's first four bytes
NEEDED_BY = "loading a GGUF file"


def is_gguf(path: str | Path) -> bool:
    """Whether `path` is a file that starts as a GGUF file does (whatever its name)."""
    path = Path(path)
    if not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


@dataclass(frozen=True)
class GgufFile:
    """A GGUF file's path and what its header says of its weights."""

    path: Path
    quantisation: str | None  # the file type its header names (general.file_type: "Q4_1", "Q8_0", "F16", ...)
    tensor_types: dict[str, int]  # how many of its tensors are stored in each type ({"Q4_1": 210, "F32": 61, ...})

    def record(self) -> dict[str, Any]:
        """What a results file records of it (beside the file's sha256, provenance's model_weights_sha256)."""
        return {"file": self.path.name, "quantisation": self.quantisation, "tensor_types": self.tensor_types}


def read_gguf(path: str | Path) -> GgufFile:
    """The header of the GGUF file at `path`; InputError (naming the file) where it cannot be read, or naming the
    extra attention-probes[gguf] where the ``gguf`` or ``accelerate`` package is missing (transformers reads the
    file with gguf, and refuses to load it without accelerate)."""
    gguf = require("gguf", "gguf", NEEDED_BY)
    require("accelerate", "gguf", NEEDED_BY)
    path = Path(path)
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, OSError, IndexError, KeyError, TypeError) as e:
        raise InputError(f"GGUF file is unreadable (truncated or corrupt): {type(e).__name__}: {e}", path) from None
    field = reader.fields.get("general.file_type")
    return GgufFile(path=path, quantisation=None if field is None else file_type_name(gguf, int(field.contents())),
                    tensor_types=dict(sorted(Counter(t.tensor_type.name for t in reader.tensors).items())))


def file_type_name(gguf: Any, number: int) -> str:
    """llama.cpp's name of file type `number` without its "MOSTLY_"/"ALL_" prefix (3: "Q4_1", 0: "F32")."""
    try:
        name = gguf.LlamaFileType(number).name
    except ValueError:
        return f"file type {number}"
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")
