"""entropy: how broadly a head attends (Clark et al. 2019, §3) and how confident it is (Voita et al. 2019).

Token level, over every real query token (special tokens included) and all real keys:
    overall     entropy of the row, −Σ_j a_j ln a_j, in nats (mean over rows)
    gap         ln n − entropy: how far below uniform attention over the sentence's n real tokens
                the row is (0 = uniform; the mean of ln n is in baselines as uniform_entropy)
    confidence  the row's largest weight, max_j a_j ("confidence", Voita et al. 2019, "Analyzing
                Multi-Head Self-Attention"; here over all keys, special tokens included; uniform
                attention would give 1/n, whose mean is in baselines as uniform_confidence)
"""
from __future__ import annotations

import torch

from probes.encoding.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import TokenView, row_sum, sentence_sums
from probes.settings.declared import ENTROPY
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo


@register
class EntropyAnalysis(MeanAnalysis, declared=ENTROPY):
    measures = ("entropy", "gap", "confidence")
    ranges = {"entropy": (0.0, float("inf")), "gap": (0.0, float("inf"))}  # nats; confidence a weight in [0, 1]
    scalars = ("uniform_entropy", "uniform_confidence")

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        t = TokenView(maps)
        rows = t.row_weights()  # [B,T]
        n_rows = rows.sum()
        a = t.attention
        entropy = maps.entropy  # [B,H,T] −Σ a·ln a of each row (a zero weight adds 0), a few sentences at a time
        lengths = t.masks.lengths
        uniform_sum = (torch.log(lengths.double()) * lengths).sum()  # Σ over rows of ln n (float64)
        entropy_sum = row_sum(entropy, rows)  # [H] float64
        confidence = a.amax(-1)  # [B,H,T] the row's largest weight
        split = {}  # measure -> (sums [B,H], counts [B]) for the bootstrap's replicates
        if self.bootstrap.replicates:
            per_rows, per_entropy = rows.sum(1), sentence_sums(entropy, rows)  # [B], [B,H]
            uniform = (torch.log(lengths.double()) * lengths)[:, None]  # [B,1] Σ over a sentence's rows of ln n
            split = {"entropy": (per_entropy, per_rows), "gap": (uniform - per_entropy, per_rows),
                     "confidence": (sentence_sums(confidence, rows), per_rows)}
        sums = torch.stack([entropy_sum, uniform_sum - entropy_sum, row_sum(confidence, rows)])  # [3,H]
        self.add_many(maps, self.measures, sums, n_rows,
                      (torch.stack([split[m][0] for m in self.measures]), split["entropy"][1]) if split else None)
        if maps.layer == 0:  # the baselines do not depend on the layer
            self.add_scalar("uniform_entropy", uniform_sum, n_rows)
            self.add_scalar("uniform_confidence", len(batch.sentences), n_rows)  # Σ over rows of 1/n: one a sentence

    def compute(self, info: RunInfo) -> ProbeResult:
        return self.result(info, self.mean("entropy"), {"gap": self.mean("gap"), "confidence": self.mean("confidence")},
                           overall_measure="entropy",
                           baselines={"uniform_entropy": self.scalar("uniform_entropy"),
                                      "uniform_confidence": self.scalar("uniform_confidence")})
