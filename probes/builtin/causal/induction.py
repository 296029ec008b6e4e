"""induction: induction heads (Olsson et al. 2022), by what they attend to and by what their OV circuit writes.

Attention side (prefix matching), token level from the token ids: for every real query token i whose id occurred
earlier at some j with j + 1 < i, the weight Σ A[i, j + 1] on the tokens that followed its earlier occurrences;
the score "prefix_matching" is its mean over those rows. On a sequence of random tokens repeated (probes.encoding.
sequences) the rows are the second copy's tokens and the target is the token after the first copy's occurrence,
TransformerLens' "induction_head" pattern (which divides by all T rows instead, and counts the key k = i too).

OV side: each head's copying score (probes.capture.causal_families.copying_scores): of W_U·W_O·W_V·W_E the real part of
its eigenvalues' sum over the sum of their moduli, in -1..1 (positive: attending to a token raises its logit). Two
choices move it, both options recorded with the results: --copying-vocab (the vocabulary without the special tokens,
the default, or all of it) and --copying-norms (the layer norms left out, the default, or their scales folded into
W_V and W_U as TransformerLens' fold_ln does). It depends on the weights only: label "copying", without interval, read from decoder-only models (an encoder's
results have prefix matching only). An induction head does both: the JSON's
"induction_heads" lists the heads whose prefix-matching score reaches --induction-threshold and whose copying
score is positive. "overall" is prefix matching, with bootstrap intervals by sequence.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from probes.encoding.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.causal.token_pairs import add_rows, mass_on, token_pairs
from probes.settings.declared import INDUCTION
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo


@register
class InductionProbe(MeanAnalysis, declared=INDUCTION):
    reads_entries = True
    measures = ("prefix_matching",)

    def __init__(self, layers: int, heads: int, **options: Any):
        super().__init__(layers, heads, **options)
        self.copying: np.ndarray | None = None  # [L,H], read from the model's weights (read_model)

    def read_model(self, encoder: Any) -> None:
        super().read_model(encoder)
        # None for an encoder: prefix matching only
        scores = encoder.copying_scores(self.config["copying_vocab"], self.config["copying_norms"])
        self.copying = None if scores is None else scores.numpy()

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        pairs = token_pairs(batch, maps.device)
        add_rows(self, maps, "prefix_matching", mass_on(maps, pairs.induction), pairs.induction_rows)

    def compute(self, info: RunInfo) -> ProbeResult:
        prefix = self.mean("prefix_matching")
        labels = {"prefix_matching": prefix}
        found = []
        if self.copying is not None:
            labels["copying"] = LabelScores(count=prefix.count, scores=self.copying)
            both = (np.nan_to_num(prefix.scores, nan=-1.0) >= self.config["induction_threshold"]) & (self.copying > 0)
            found = [{"layer": int(layer), "head": int(head),
                      "prefix_matching": round(float(prefix.scores[layer, head]), 6),
                      "copying": round(float(self.copying[layer, head]), 6)} for layer, head in zip(*np.nonzero(both))]
        return self.result(info, prefix, labels, overall_measure="prefix_matching", extra={"induction_heads": found})
