"""Arrays inside JSON: base64 of their little-endian bytes (per-sentence views and their marks, bootstrap
replicates), and the other fields of a per-sentence view that its readers share."""
from __future__ import annotations

import base64

import numpy as np


def pack(values: np.ndarray, dtype: type) -> str:
    """`values` as base64 of their bytes in `dtype`, little-endian, row-major."""
    return base64.b64encode(np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()).decode()


def unpack(text: str, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    """The array `pack` packed."""
    return np.frombuffer(base64.b64decode(text), dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)


MARK_TYPES = {"right": np.uint8, "predicted": np.int16, "head": np.int16, "weight": np.uint8}  # a view's marks, packed


def unpack_marks(sentence: dict, layers: int, heads: int) -> dict[str, np.ndarray]:
    """A view sentence's marks unpacked: {name: [L*H, items]} ("weight" back in [0, 1], × 255 rounded)."""
    n = len(sentence.get("items", []))
    out = {mark: unpack(packed, MARK_TYPES[mark], (layers * heads, n)) for mark, packed in sentence.get("marks", {}).items()}
    if "weight" in out:
        out["weight"] = out["weight"] / 255
    return out


FALLBACK_SPECIALS = ("[ROOT]", "[END]")  # the start and end columns' names where the model has no such token


def specials_of(views: dict) -> tuple[str, str]:
    """The names of a view's start column (the root of the arcs) and end column: the model's own special tokens
    as the run recorded them ("specials": [CLS] and [SEP] for BERT, <s> and </s> for RoBERTa), else
    FALLBACK_SPECIALS (a model without them, or results written before the view recorded them)."""
    start, end = views.get("specials") or FALLBACK_SPECIALS
    return start, end
