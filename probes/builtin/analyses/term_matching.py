"""term_matching: heads that link identical tokens across the two sentences of a pair.

Token level, on sentence pairs (a TSV ``sentence1<TAB>sentence2[<TAB>label]``, see
probes.corpus.pairs). A query token is a word subword that has at least one identical token
(same vocabulary id) among the other sentence's word subwords; special tokens are never queries
nor targets. For each such token:

    overall   the share of its attention on identical tokens of the other sentence
    argmax    whether its argmax (over all real tokens) is such a token

Baseline "uniform": the share uniform attention over the pair's real tokens would give (matches / n).
"""
from __future__ import annotations

import torch

from probes.encoding.batching import Batch, token_segments
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import TokenView, row_sum
from probes.settings.declared import TERM_MATCHING
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo


def cross_matches(batch: Batch) -> torch.Tensor:
    """[B,T,T] True where query token i and key token j are the same vocabulary item in different sentences."""
    segments = token_segments(batch)  # [B,T], -1 for special tokens and padding
    ids = batch.input_ids
    words = segments >= 0
    return ((ids[:, :, None] == ids[:, None, :]) & (segments[:, :, None] != segments[:, None, :])
            & words[:, :, None] & words[:, None, :])


@register
class TermMatchingAnalysis(MeanAnalysis, declared=TERM_MATCHING):
    needs = ("pair",)
    corpus_format = "pairs"
    measures = ("attention", "argmax")
    scalars = ("uniform",)

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        t = TokenView(maps)
        match = batch.memo(("term_matching.matches", t.attention.device),
                           lambda: cross_matches(batch).to(t.attention.device))  # [B,T,T]
        rows = match.any(-1).to(t.attention.dtype)  # [B,T] query tokens with a match
        share = torch.einsum("bhij,bij->bhi", t.attention, match.to(t.attention.dtype))  # [B,H,T]
        pred = t.argmax  # [B,H,T]
        hit = match[:, None].expand(*pred.shape, match.shape[-1]).gather(-1, pred[..., None])[..., 0]  # [B,H,T]
        n_rows = rows.sum()
        self.add(maps, "attention", row_sum(share, rows), n_rows)
        self.add(maps, "argmax", row_sum(hit, rows), n_rows)
        if maps.layer == 0:  # the baseline does not depend on the layer
            self.add_scalar("uniform", (match.sum(-1) / t.masks.lengths[:, None].double() * rows).sum(), n_rows)

    def compute(self, info: RunInfo) -> ProbeResult:
        return self.result(info, self.mean("attention"), {"argmax": self.mean("argmax")},
                           baselines={"uniform": self.scalar("uniform")})
