"""sink: attention sinks (Xiao et al. 2023), the share of each head's attention that lands on the first token.

Token level. For every real query token i ≥ 1 (row 0 can attend only to itself):
    first   the weight A[i, 0] on the sequence's first token, whatever it is
    start   the weight on the start special token (BOS, word column 0) where the tokenizer adds one (no rows, and no
            score, where it adds none: GPT-2, GPT-NeoX, Qwen2)
"overall" is "first". Bootstrap intervals by sequence.
"""
from __future__ import annotations

from probes.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.causal.token_pairs import add_rows, token_pairs
from probes.builtin.declared import SINK
from probes.maps import LayerMaps
from probes.registry import register
from probes.results import ProbeResult, RunInfo


@register
class SinkProbe(MeanAnalysis, declared=SINK):
    measures = ("first", "start")

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        pairs = token_pairs(batch, maps.attention.device)
        attention = maps.attention.float()  # [B,H,T,T]
        add_rows(self, maps, "first", attention[..., 0], pairs.previous)
        start = (batch.columns.to(attention.device) == 0) & pairs.real  # [B,T] start special tokens
        on_start = (attention @ start[:, None, :, None].to(attention.dtype)).squeeze(-1)  # [B,H,T]
        add_rows(self, maps, "start", on_start, pairs.previous & start.any(1, keepdim=True))

    def compute(self, info: RunInfo) -> ProbeResult:
        overall = self.mean("first")
        return self.result(info, overall, {m: self.mean(m) for m in self.measures}, overall_measure="first")
