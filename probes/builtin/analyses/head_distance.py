"""head_distance: how alike every two heads attend (Clark et al. 2019, §6 "Clustering attention heads").

Token level. For a query token t and two heads p, q with attention rows P_t and Q_t over the
sentence's tokens, the Jensen–Shannon divergence (bits, log base 2, in [0, 1]) is

    JSD_t(p,q) = H(M) − (H(P_t) + H(Q_t)) / 2,   M = (P_t + Q_t) / 2

and the distance of two heads is D(p,q) = sqrt(mean over query tokens t of JSD_t(p,q)): a metric in
[0, 1] (an L2 mean of per-token JS distances, scipy's jensenshannon with base 2); Clark et al. ran
MDS on the summed divergence, of which this is a monotone function. Every term is a sum over tokens,
so the state is additive: Σ s ln s for every head pair (s = P_t + Q_t), and Σ p ln p, Σ p per head;
the cost grows with the corpus length, never with its square. Every token of a sentence is a query
when --distance-rows is 0; otherwise that many query tokens per sentence are drawn with --seed (the
draw depends only on the seed and the sentence's words), each weighted by (tokens in the sentence) /
(tokens drawn), so that the mean still estimates the mean over all tokens. The draw exists for
speed: comparing all L·H·(L·H − 1)/2 head pairs on every token costs about one more forward pass
of a small model (MiniLM); 4 tokens per sentence (the default) about a tenth of that.

Results: "overall" = each head's mean distance to the other heads; label "nearest" = the distance
to its closest other head. The JSON holds "head_names" ("L{l}-H{h}", in the order of the matrix),
the full "distance" matrix, "clusters" ([L][H] flat cluster numbers 1..k of a scipy hierarchical
clustering, --linkage average by default, cut into --clusters groups), the scipy "linkage" matrix
and a 2-D "layout" (classical multidimensional scaling of the distances, as Clark et al.'s Fig. 6);
saving writes the layout, a dendrogram and the distance matrix as PNGs (see head_layout).
"""
from __future__ import annotations

import math
import zlib

import numpy as np
import torch

from probes.batching import Batch
from probes.builtin.analyses.head_layout import cluster_heads, head_distance_figures
from probes.builtin.analyses.token_view import token_view
from probes.probe import Option, Probe
from probes.registry import register
from probes.results import LabelScores, ProbeResult, RunInfo

CHUNK_ELEMENTS = 1 << 22  # (head pairs × query tokens × keys) per step: bounds one step's memory (~16 MB)
TINY = 1e-30
LINKAGES = ("average", "complete", "single", "weighted")


@register
class HeadDistance(Probe):
    name = "head_distance"
    description = "Jensen-Shannon distance between every two heads, clustering and 2-D layout (Clark et al. 2019)"
    options = (Option("distance_rows", 4, "head_distance: query tokens compared per sentence, a seeded draw "
                      "(0: every token)", int),
               Option("seed", 0, "seed of the word shuffle (word_order) and of head_distance's token draw", int),
               Option("clusters", 8, "head_distance: number of flat clusters cut from the hierarchy", int),
               Option("linkage", "average", "head_distance: hierarchical clustering method", str, LINKAGES))
    figures = staticmethod(head_distance_figures)  # the heatmaps, the 2-D layout, dendrogram and distance matrix

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        n = layers * heads
        self.mix = torch.zeros(n, n, dtype=torch.float64)  # [LH,LH] Σ_t w_t Σ_k s ln s, s = P_t + Q_t (p < q used)
        self.plogp = torch.zeros(n, dtype=torch.float64)  # [LH] Σ_t w_t Σ_k p ln p
        self.mass = torch.zeros(n, dtype=torch.float64)  # [LH] Σ_t w_t Σ_k p (= Σ_t w_t up to rounding)
        self.weight = torch.zeros((), dtype=torch.float64)  # Σ_t w_t (= query tokens when all are compared)

    def update(self, batch: Batch) -> None:
        t = token_view(batch)
        sentence, position, weight = self._rows(batch, t.lengths.tolist())
        a = t.attention  # [B,L,H,T,T]
        keys = a.shape[-1]
        rows = a[sentence, :, :, position, :].reshape(len(sentence), -1, keys)  # [N,LH,T]
        flat = rows.permute(1, 0, 2).reshape(rows.shape[1], -1)  # [LH, N·T]: each head's rows side by side
        w = weight.to(flat.dtype).repeat_interleave(keys)  # [N·T] each row's weight, on each of its keys
        self.plogp += (torch.special.xlogy(flat, flat) @ w).double().cpu()
        self.mass += (flat @ w).double().cpu()
        self.weight += weight.sum().double()
        lifted = flat + TINY / 2  # no zero weight (padding, underflow) reaches a log; changes Σ s ln s by < 1e-28
        n = flat.shape[0]
        step = max(1, CHUNK_ELEMENTS // (n * flat.shape[1]))
        for first in range(0, n - 1, step):  # blocks of heads p, against every q > p: memory, not a loop per head
            last = min(first + step, n - 1)
            s = lifted[first:last, None, :] + lifted[None, first + 1:, :]  # [p, q, N·T] P + Q
            self.mix[first:last, first + 1:] += (torch.log(s).mul_(s) @ w).double().cpu()  # entries q <= p: unused

    def _rows(self, batch: Batch, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sentence index, position and weight [N] of every query token compared."""
        k = self.config["distance_rows"]
        sentence, position, weight = [], [], []
        for b, (s, n) in enumerate(zip(batch.sentences, lengths)):
            if k <= 0 or k >= n:
                chosen = np.arange(n)
            else:
                rng = np.random.default_rng([self.config["seed"], zlib.crc32("\x1f".join(s.words).encode("utf-8"))])
                chosen = np.sort(rng.choice(n, size=k, replace=False))
            sentence.append(np.full(len(chosen), b))
            position.append(chosen)
            weight.append(np.full(len(chosen), n / len(chosen)))
        return (torch.from_numpy(np.concatenate(sentence)), torch.from_numpy(np.concatenate(position)),
                torch.from_numpy(np.concatenate(weight)))

    def merge(self, other: "HeadDistance") -> None:
        self.mix += other.mix
        self.plogp += other.plogp
        self.mass += other.mass
        self.weight += other.weight

    def distances(self) -> np.ndarray:
        """[L·H, L·H] JS distance, sqrt of the mean divergence in bits (head index = layer · H + head)."""
        n = self.layers * self.heads
        out = np.zeros((n, n))
        if float(self.weight):
            i, j = torch.triu_indices(n, n, offset=1)
            # Σ_t w_t JSD_t = Σ_t w_t [H(M) − (H(P) + H(Q))/2] with H(M) = −½ Σ s ln s + ½ ln 2 Σ s
            nats = -0.5 * self.mix[i, j] + 0.5 * math.log(2) * (self.mass[i] + self.mass[j]) \
                + 0.5 * (self.plogp[i] + self.plogp[j])
            mean = (nats / math.log(2) / self.weight).clamp(min=0).sqrt().numpy()
            out[i.numpy(), j.numpy()] = mean
            out[j.numpy(), i.numpy()] = mean
        return out

    def compute(self, info: RunInfo) -> ProbeResult:
        d = self.distances()
        n = d.shape[0]
        others = np.where(np.eye(n, dtype=bool), np.nan, d)
        count = int(round(float(self.weight)))
        grid = (self.layers, self.heads)
        mean = np.nanmean(others, 1).reshape(grid) if n > 1 else np.full(grid, np.nan)
        nearest = np.nanmin(others, 1).reshape(grid) if n > 1 else np.full(grid, np.nan)
        clustering = cluster_heads(d, self.layers, self.heads, self.config["clusters"], self.config["linkage"])
        return ProbeResult(probe=self.name, info=info, options=dict(self.config),
                           labels={"nearest": LabelScores(count, nearest)}, overall=LabelScores(count, mean),
                           extra={"head_names": clustering["head_names"], "distance": d.tolist(),
                                  "clusters": clustering["clusters"].reshape(grid).tolist(),
                                  "linkage": clustering["linkage"], "layout": clustering["layout"]})
