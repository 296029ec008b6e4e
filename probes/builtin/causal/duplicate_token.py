"""duplicate_token: heads that attend from a token to its earlier occurrences in the sequence.

Token level, from the token ids: for every real query token i whose id occurs earlier (at some j < i), the
weight Σ_j A[i, j] on all its earlier occurrences; the score is its mean over those rows. Bootstrap intervals
by sequence.
"""
from __future__ import annotations

from probes.encoding.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.causal.token_pairs import add_rows, mass_on, token_pairs
from probes.settings.declared import DUPLICATE_TOKEN
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo


@register
class DuplicateTokenProbe(MeanAnalysis, declared=DUPLICATE_TOKEN):
    reads_entries = True
    measures = ("duplicate",)

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        pairs = token_pairs(batch, maps.device)
        add_rows(self, maps, "duplicate", mass_on(maps, pairs.earlier), pairs.earlier_rows)

    def compute(self, info: RunInfo) -> ProbeResult:
        overall = self.mean("duplicate")
        return self.result(info, overall, {"duplicate": overall}, overall_measure="duplicate")
