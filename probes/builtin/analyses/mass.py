"""mass: where a head's attention goes, on average (Clark et al. 2019, "What does BERT look at?", §3).

Token level. For each real query token (special tokens included), the weight a head puts on:
    cls    the start special token ([CLS], <s>)
    sep    the end special tokens ([SEP], </s>; both separators of a sentence pair)
    punct  subwords of punctuation words (words made only of Unicode P* characters)
    self   the token itself
    prev   the previous token (rows that have one: every token but the first)
    next   the next token (rows that have one: every token but the last)
Each label's score is the mean over its rows; "overall" is the mass on special tokens (cls + sep),
the "vertical" stripes of Kovaleva et al. (2019).
"""
from __future__ import annotations

import torch

from probes.encoding.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import TokenView, row_sum, sentence_sums
from probes.settings.declared import MASS
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo

TARGETS = ("cls", "sep", "punct", "self", "prev", "next")


@register
class MassAnalysis(MeanAnalysis, declared=MASS):
    measures = (*TARGETS, "special")

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        t = TokenView(maps)
        m = t.masks
        rows = t.row_weights()  # [B,T]
        n_rows = rows.sum()
        groups = ("cls", "sep", "punct", "special")
        keys = torch.stack([m.start, m.end, m.punct, m.special], -1).to(rows.dtype)  # [B,T,4] key groups
        onto = torch.einsum("bhij,bjk->bhik", t.attention, keys)  # [B,H,T,4] each row's mass per group
        sums = torch.einsum("bhik,bi->kh", onto.double(), rows.double())  # [4,H] float64, as row_sum
        per_rows = rows.sum(1)  # [B] query rows of each sentence
        replicated = self.bootstrap.replicates > 0  # the per-sentence sums only where the bootstrap needs them
        split = torch.einsum("bhik,bi->kbh", onto.double(), rows.double()) if replicated else None  # [4,B,H]
        self.add_many(maps, groups[:3], sums[:3], n_rows, (split[:3], per_rows) if replicated else None)
        self.add(maps, "special", sums[3], n_rows, per_sentence=(split[3], per_rows) if replicated else None)
        prev, nxt = t.neighbour_mass()  # [B,H,T]
        with_neighbour = n_rows - len(batch.sentences)  # all but the first (prev) or the last (next) token
        values = (t.attention.diagonal(0, -2, -1), prev, nxt)  # [B,H,T] each: self, prev, next
        self.add_many(maps, ("self", "prev", "next"), torch.stack([row_sum(v, rows) for v in values]),
                      torch.stack([n_rows, with_neighbour, with_neighbour]),
                      (torch.stack([sentence_sums(v, rows) for v in values]),
                       torch.stack([per_rows, per_rows - 1, per_rows - 1])) if replicated else None)  # [3,B,H], [3,B]

    def compute(self, info: RunInfo) -> ProbeResult:
        return self.result(info, self.mean("special"), {label: self.mean(label) for label in TARGETS},
                           overall_measure="special")
