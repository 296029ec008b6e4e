"""Shared by the argmax probes that score a relation in two directions (dep, srl, frames' accuracy).

Hits are counted three ways: "either" direction (the probe's main score) and each direction alone;
fixed-offset baselines (a "head" that always attends to position i + k) are counted the same ways.

On a decoder-only model a word attends only to itself and earlier words, so each direction can be right only for
the pairs whose target word comes first: ``causal_constraint`` states, per label and overall, the share of
instances each direction can reach at all, and the best offset baseline under the same constraint (k < 0 only).
"""
from __future__ import annotations

import numpy as np
import torch

from probes.scoring.probe import LabelSums, ratio
from probes.results.probe_result import LabelScores

OFFSETS = (-3, -2, -1, 1, 2, 3)
OFFSET_BASELINE = "best offset baseline"  # what a label's head is compared with (ProbeResult.baseline_name)
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


def causal_constraint(note: str, count: LabelSums, reachable: LabelSums, directions: tuple[str, ...],
                      baseline_hits: LabelSums | None = None, ways: tuple[str, ...] = (),
                      offsets: tuple[int, ...] = OFFSETS) -> dict:
    """What a decoder-only model can get right (see the module docstring), overall and per label: `note` says
    it in words; per label, for each of `directions`, the share "<direction>_share" of the `count` instances
    that direction can reach (reachable: how many, [directions] or [] for one direction), and with offset
    baselines (baseline_hits [ways, offsets] hits) "causal_offset_baseline": per way the best accuracy of the
    offsets k < 0, the only ones a causal model can follow."""
    left = [k < 0 for k in offsets]

    def reading(n: torch.Tensor, reached: torch.Tensor, hits: torch.Tensor | None) -> dict:
        n = float(n)
        shares = (reached.reshape(-1) / n).tolist() if n else [None] * len(directions)  # [directions]
        stated = {f"{d}_share": None if s is None else round(s, 6) for d, s in zip(directions, shares, strict=True)}
        if hits is not None:
            best = (hits[:, left].max(-1).values / n).tolist() if n else [None] * len(ways)  # [ways]
            stated["causal_offset_baseline"] = {way: None if b is None else round(b, 6) for way, b in zip(ways, best)}
        return stated

    def hits_of(name: str | None) -> torch.Tensor | None:
        if baseline_hits is None:
            return None
        return baseline_hits.total() if name is None else baseline_hits[name]

    return {"note": note, "overall": reading(count.total(), reachable.total(), hits_of(None)),
            "labels": {name: reading(count[name], reachable[name], hits_of(name)) for name in count.names}}
