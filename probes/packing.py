"""Arrays inside JSON: base64 of their little-endian bytes (per-sentence views, bootstrap replicates)."""
from __future__ import annotations

import base64

import numpy as np


def pack(values: np.ndarray, dtype: type) -> str:
    """`values` as base64 of their bytes in `dtype`, little-endian, row-major."""
    return base64.b64encode(np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()).decode()


def unpack(text: str, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    """The array `pack` packed."""
    return np.frombuffer(base64.b64decode(text), dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
