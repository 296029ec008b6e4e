"""head_distance: how alike every two heads attend (Clark et al. 2019, §6 "Clustering attention heads").

Token level. For a query token t and two heads p, q with attention rows P_t and Q_t over the
sentence's tokens, the Jensen–Shannon divergence (bits, log base 2, in [0, 1]) is

    JSD_t(p,q) = H(M) − (H(P_t) + H(Q_t)) / 2,   M = (P_t + Q_t) / 2

and the distance of two heads is D(p,q) = sqrt(mean over query tokens t of JSD_t(p,q)): a metric in
[0, 1] (an L2 mean of per-token JS distances, scipy's jensenshannon with base 2); Clark et al. ran
MDS on the summed divergence, of which this is a monotone function. Every term is a sum over tokens,
so the state is additive: Σ s ln s for every head pair (s = P_t + Q_t), and Σ p ln p, Σ p per head;
the cost grows with the corpus length, never with its square. The sums are float64 and so is every
term that feeds them: the distance is a difference of nearly equal sums, which float32 terms would
leave depending on how the corpus is cut into batches. Heads of different layers are compared, and
the runner hands over one layer at a time: each layer's compared rows ([N,H,T], N query tokens) are
kept until the batch's last layer arrives, then the batch's sums are added and the rows dropped.

Every token of a sentence is a query when --distance-rows is 0; otherwise that many query tokens per sentence are drawn with --seed (the
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

from probes.encoding.batching import Batch
from probes.builtin.analyses.head_layout import HeadDistancePresentation, cluster_heads
from probes.builtin.analyses.mean_analysis import CAUSAL_NOTE
from probes.settings.declared import HEAD_DISTANCE
from probes.capture.maps import LayerMaps
from probes.scoring.probe import Probe
from probes.settings.registry import register
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

CHUNK_ELEMENTS = 1 << 22  # (head pairs × query tokens × keys) per step: bounds one step's memory (~32 MB)
TINY = 1e-30


@register
class HeadDistance(HeadDistancePresentation, Probe, declared=HEAD_DISTANCE):
    """Its figures: HeadDistancePresentation (the heatmaps, the 2-D layout, dendrogram and distance matrix)."""

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        n = layers * heads
        self.add_state("mix", torch.zeros(n, n, dtype=torch.float64))  # [LH,LH] Σ_t w_t Σ_k s ln s, s = P_t + Q_t
        self.add_state("plogp", torch.zeros(n, dtype=torch.float64))  # [LH] Σ_t w_t Σ_k p ln p
        self.add_state("mass", torch.zeros(n, dtype=torch.float64))  # [LH] Σ_t w_t Σ_k p (= Σ_t w_t up to rounding)
        self.add_state("weight", torch.zeros((), dtype=torch.float64))  # Σ_t w_t (= query tokens when all compared)
        self._stash: list[torch.Tensor] = []  # the current batch's compared rows, one [N,H,T] per layer so far

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        """Stash the layer's compared rows; with the last layer, add the batch's sums and drop the stash."""
        if maps.layer != len(self._stash):
            raise RuntimeError(f"head_distance needs layers 0..{self.layers - 1} of a batch in order, "
                               f"got layer {maps.layer} after {len(self._stash)}")
        a = maps.attention  # [B,H,T,T]
        draw = ("head_distance.rows", self.config["distance_rows"], self.config["seed"], a.device)
        sentence, position, weight = batch.memo(draw, lambda: [x.to(a.device) for x in self.query_rows(batch)])  # [N]
        self._stash.append(a[sentence, :, position, :].double())  # [N,H,T]
        if maps.layer == self.layers - 1:
            rows, self._stash = torch.stack(self._stash, 1), []  # [N,L,H,T]
            self._add_batch(rows.flatten(1, 2), weight)

    def _add_batch(self, rows: torch.Tensor, weight: torch.Tensor) -> None:
        """Add the sums of N compared rows [N,LH,T] of weight [N]. Every term is float64: the distances
        are differences of nearly equal sums, which float32 terms would leave depending on the batching."""
        keys = rows.shape[-1]
        flat = rows.permute(1, 0, 2).reshape(rows.shape[1], -1)  # [LH, N·T]: each head's rows side by side
        w = weight.repeat_interleave(keys)  # [N·T] each row's weight, on each of its keys
        lifted = flat + TINY / 2  # no zero weight (padding, underflow) reaches a log; changes Σ s ln s by < 1e-28
        n = flat.shape[0]
        mix = flat.new_zeros(n, n)  # [LH,LH] the batch's Σ s ln s, on the rows' device; entries q <= p: unused
        step = max(1, CHUNK_ELEMENTS // (n * flat.shape[1]))
        for first in range(0, n - 1, step):  # blocks of heads p, against every q > p: memory, not a loop per head
            last = min(first + step, n - 1)
            s = lifted[first:last, None, :] + lifted[None, first + 1:, :]  # [p, q, N·T] P + Q
            mix[first:last, first + 1:] = torch.log(s).mul_(s) @ w
        # the batch's sums, read to the host together: once per batch, however many blocks
        sums = torch.cat([mix.flatten(), torch.special.xlogy(flat, flat) @ w, flat @ w, weight.sum()[None]]).cpu()
        self.mix += sums[: n * n].view(n, n)
        self.plogp += sums[n * n: n * n + n]
        self.mass += sums[n * n + n: n * n + 2 * n]
        self.weight += sums[-1]

    def query_rows(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sentence index, position and weight [N] (float64) of every query token compared."""
        k = self.config["distance_rows"]
        sentence, position, weight = [], [], []
        for b, (s, n) in enumerate(zip(batch.sentences, batch.attention_mask.sum(1).tolist())):
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

    def reset(self) -> None:
        super().reset()
        self._stash = []

    def drop_unfinished(self) -> None:
        """The rows stashed from a batch not finished."""
        self._stash = []

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
        extra = {"head_names": clustering["head_names"], "distance": d.tolist(),
                 "clusters": clustering["clusters"].reshape(grid).tolist(), "linkage": clustering["linkage"],
                 "layout": clustering["layout"]}
        if self.causal:
            extra["causal_constraint"] = {"note": CAUSAL_NOTE}
        return ProbeResult(probe=self.name, info=info, options=dict(self.config),
                           labels={"nearest": LabelScores(count, nearest)}, overall=LabelScores(count, mean), extra=extra)
