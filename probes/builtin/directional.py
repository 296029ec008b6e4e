"""Shared by the argmax probes that score a relation in two directions (dep, srl).

Hits are counted three ways: "either" direction (the probe's main score) and each direction alone;
fixed-offset baselines (a "head" that always attends to position i + k) are counted the same ways.
"""
from __future__ import annotations

import numpy as np
import torch

from probes.probe import ratio
from probes.results import LabelScores

OFFSETS = (-3, -2, -1, 1, 2, 3)
CLAMPED_OFFSETS = (-3, -2, -1, 0, 1, 2)  # Clark et al.'s code: range(-3, 3), positions clamped to the sentence


def accuracy(count: torch.Tensor, hits: torch.Tensor, ways: tuple[str, str, str]) -> LabelScores:
    """hits [3,L,H] (either, one direction, the other) over `count` instances → LabelScores (NaN if none)."""
    acc = ratio(hits, count)
    return LabelScores(count=int(count), scores=acc[0], extra={ways[1]: acc[1], ways[2]: acc[2]})


def offset_baseline(count: torch.Tensor, hits: torch.Tensor, ways: tuple[str, str, str],
                    offsets: tuple[int, ...] = OFFSETS) -> dict:
    """hits [3,offsets] → accuracies per offset for each way, and the best offset (either direction)."""
    n = int(count)
    acc = (hits / max(n, 1)).numpy()
    best = int(np.argmax(acc[0]))
    return {"count": n, **{way: [round(float(x), 6) for x in acc[i]] for i, way in enumerate(ways)},
            "best_offset": offsets[best], "best": round(float(acc[0, best]), 6)}
