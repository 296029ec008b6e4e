"""prev_token: previous-token heads, the first half of an induction circuit (Olsson et al. 2022).

Token level. For every real query token i ≥ 1, the weight A[i, i-1] a head puts on the token before it; the score
is its mean over those rows (TransformerLens' detect_head "previous_token_head" divides the same sum by all T rows
of a sequence, row 0 included, so its score is this one × (T-1)/T). Bootstrap intervals by sequence.
"""
from __future__ import annotations

from probes.encoding.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.causal.token_pairs import add_rows, previous_token, token_pairs
from probes.settings.declared import PREV_TOKEN
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo


@register
class PrevTokenProbe(MeanAnalysis, declared=PREV_TOKEN):
    reads_entries = True
    measures = ("previous",)

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        pairs = token_pairs(batch, maps.device)
        add_rows(self, maps, "previous", previous_token(maps), pairs.previous)

    def compute(self, info: RunInfo) -> ProbeResult:
        overall = self.mean("previous")
        return self.result(info, overall, {"previous": overall}, overall_measure="previous")
