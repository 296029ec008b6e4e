"""sink: attention sinks (Xiao et al. 2023), the share of each head's attention that lands on the first token.

Token level. For every real query token i ≥ 1 (row 0 can attend only to itself):
    first   the weight A[i, 0] on the sequence's first token, whatever it is
    start   the weight on the start special token (BOS, word column 0) where the tokenizer adds one (no rows, and no
            score, where it adds none: GPT-2, GPT-NeoX, Qwen2)
"overall" is "first". Bootstrap intervals by sequence.
"""
from __future__ import annotations

from probes.encoding.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.causal.token_pairs import add_rows, mass_on, token_pairs
from probes.settings.declared import SINK
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo


@register
class SinkProbe(MeanAnalysis, declared=SINK):
    reads_entries = True
    measures = ("first", "start")

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        pairs = token_pairs(batch, maps.device)
        add_rows(self, maps, "first", mass_on(maps, pairs.first), pairs.previous)  # [B,H,T] A[i, 0]
        add_rows(self, maps, "start", mass_on(maps, pairs.start), pairs.start_rows)

    def compute(self, info: RunInfo) -> ProbeResult:
        overall = self.mean("first")
        return self.result(info, overall, {m: self.mean(m) for m in self.measures}, overall_measure="first")
