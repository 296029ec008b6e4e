"""positional: heads that attend to one fixed relative position (Voita et al. 2019, "Analyzing Multi-Head
Self-Attention"; Clark et al. 2019's previous/next-token heads).

Token level. pred[i] = argmax_j A[i, j] over the sentence's real tokens. For each offset k in
−max_offset..+max_offset (k = 0: the token itself), label "offset{k:+d}" is the share of query
tokens i whose argmax is i + k, among the tokens for which position i + k exists in the sentence.
"overall" is each head's best offset share, extra grid "offset" the offset that gives it; a head is
positional when that share is at least --positional-threshold (0.9, as Voita et al.); the list is
in the JSON as "positional_heads". Bootstrap intervals (probes.results.bootstrap) are given per offset label; the
overall grid, each head's best offset, has none.
"""
from __future__ import annotations

import numpy as np
import torch

from probes.encoding.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import TokenView
from probes.settings.declared import POSITIONAL
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

MAX_OFFSET = 3


def offset_label(k: int) -> str:
    return f"offset{k:+d}"


@register
class PositionalAnalysis(MeanAnalysis, declared=POSITIONAL):
    measures = tuple(offset_label(k) for k in range(-MAX_OFFSET, MAX_OFFSET + 1))

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        t = TokenView(maps)
        real, heads = t.masks.real, self.heads
        positions = torch.arange(real.shape[1], device=real.device)  # [T]
        offsets = torch.arange(-MAX_OFFSET, MAX_OFFSET + 1, device=real.device)  # [K]
        delta = t.argmax - positions  # [B,H,T] argmax offset of every row
        near = (delta.abs() <= MAX_OFFSET) & real[:, None, :]  # an argmax is always a real token
        head = torch.arange(heads, device=delta.device).view(1, heads, 1)
        bins = heads * len(offsets)  # (head, offset) bins, then one that takes the rows not near: fixed shapes
        which = torch.where(near, head * len(offsets) + delta + MAX_OFFSET, bins).flatten()  # [B·H·T]
        hits = torch.zeros(bins + 1, dtype=torch.long, device=delta.device).scatter_add_(
            0, which, torch.ones_like(which))[:bins].view(heads, -1)  # [H,K]
        target = positions[:, None] + offsets  # [T,K] position i + k
        valid = real[:, :, None] & (target >= 0) & (target < t.masks.lengths[:, None, None])  # [B,T,K] i + k exists
        split = None  # (hits [K,B,H], counts [K,B]) for the bootstrap's replicates
        if self.bootstrap.replicates:
            per_sentence = ((delta[..., None] == offsets) & near[..., None]).sum(2)  # [B,H,K]
            split = (per_sentence.permute(2, 0, 1), valid.sum(1).T)
        self.add_many(maps, self.measures, hits.T, valid.sum((0, 1)), split)  # every offset at once

    def compute(self, info: RunInfo) -> ProbeResult:
        shares = {label: self.mean(label) for label in self.measures}
        grids = np.stack([s.scores for s in shares.values()])  # [K,L,H]
        filled = np.where(np.isnan(grids), -1.0, grids)
        best = filled.argmax(0)  # [L,H] index of each head's best offset
        score = np.take_along_axis(grids, best[None], 0)[0]
        offset = (best - MAX_OFFSET).astype(float)
        threshold = self.config["positional_threshold"]
        heads = [{"layer": int(layer), "head": int(head), "offset": int(offset[layer, head]),
                  "share": round(float(score[layer, head]), 6)}
                 for layer, head in zip(*np.nonzero(np.nan_to_num(score, nan=-1.0) >= threshold))]
        overall = LabelScores(count=int(self.counts[MAX_OFFSET]), scores=score, extra={"offset": offset})
        return self.result(info, overall, shares, extra={"positional_heads": heads})
