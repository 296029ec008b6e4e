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

from probes.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import token_view
from probes.batching import token_segments
from probes.registry import register
from probes.results import ProbeResult, RunInfo


def cross_matches(batch: Batch) -> torch.Tensor:
    """[B,T,T] True where query token i and key token j are the same vocabulary item in different sentences."""
    segments = token_segments(batch)  # [B,T], -1 for special tokens and padding
    ids = batch.input_ids
    words = segments >= 0
    return ((ids[:, :, None] == ids[:, None, :]) & (segments[:, :, None] != segments[:, None, :])
            & words[:, :, None] & words[:, None, :])


@register
class TermMatchingAnalysis(MeanAnalysis):
    name = "term_matching"
    description = "attention from a token to the identical token in the other sentence of a pair (TSV pairs)"
    needs = ("pair",)
    corpus_format = "pairs"
    measures = ("attention", "argmax", "uniform")

    def update(self, batch: Batch) -> None:
        t = token_view(batch)
        match = cross_matches(batch).to(t.attention.device)  # [B,T,T]
        rows = match.any(-1).to(t.attention.dtype)  # [B,T] query tokens with a match
        share = torch.einsum("blhij,bij->blhi", t.attention, match.to(t.attention.dtype))  # [B,L,H,T]
        pred = t.argmax  # [B,L,H,T]
        hit = match[:, None, None].expand(*pred.shape, match.shape[-1]).gather(-1, pred[..., None])[..., 0]
        n_rows = rows.sum()
        self.add("attention", torch.einsum("blhi,bi->lh", share, rows), n_rows)
        self.add("argmax", torch.einsum("blhi,bi->lh", hit.to(rows.dtype), rows), n_rows)
        self.add("uniform", (match.sum(-1) / t.lengths[:, None] * rows).sum(), n_rows)

    def compute(self, info: RunInfo) -> ProbeResult:
        return self.result(info, self.mean("attention"), {"argmax": self.mean("argmax")},
                           baselines={"uniform": self.scalar("uniform")})
