"""word_order: how much a head's attention changes when the words of the sentence are shuffled.

Token level. The runner runs each batch a second time with every sentence's words in a fixed,
seeded order (--seed; the same words, each keeping its subwords; special tokens in place; the words
of a pair shuffled within their sentence; see probes.encoding.shuffle). The shuffled map is put back in the
original order (A'[i, j] = the shuffled run's attention between the subwords at original positions
i and j; each layer against the same layer of the twin, ``maps.twin``), and for each real query token:

    overall         total variation distance ½ Σ_j |A[i, j] − A'[i, j]| in [0, 1]: the share of the
                    row's attention that moved when only the order of the words changed
    argmax_changed  whether the row's argmax is another token after shuffling

Heads that track order (positional heads) score high; heads that follow content (the same word
wherever it is) score low. Sentences whose order cannot change (one word per segment) are not
scored ("unshuffled_sentences" in the JSON). This doubles the forward passes of a run.
"""
from __future__ import annotations

import torch

from probes.encoding.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import TokenView, row_sum
from probes.settings.declared import WORD_ORDER
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo


def unshuffle(twin_attention: torch.Tensor, position_of: torch.Tensor) -> torch.Tensor:
    """[B,H,T,T] twin maps back in the original order: out[b,h,i,j] = twin[b,h,pos[b,i],pos[b,j]]."""
    b, heads, t, _ = twin_attention.shape
    rows = twin_attention.gather(2, position_of[:, None, :, None].expand(b, heads, t, t))
    return rows.gather(3, position_of[:, None, None, :].expand(b, heads, t, t))


@register
class WordOrderAnalysis(MeanAnalysis, declared=WORD_ORDER):
    measures = ("distance", "argmax_changed")
    tallies = ("unshuffled_sentences",)

    def shuffle_seed(self) -> int:
        return int(self.config["seed"])

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        if maps.twin is None:
            raise RuntimeError("word_order needs the batch's shuffled twin (the runner makes it on shuffle_seed())")
        t = TokenView(maps)
        twin = maps.twin.batch
        back = unshuffle(maps.twin.attention.float(), twin.position_of.to(t.attention.device))  # [B,H,T,T]
        rows = t.row_weights() * twin.shuffled.to(t.attention.device)[:, None]  # [B,T] rows of shuffled sentences
        moved = 0.5 * (t.attention - back).abs().sum(-1)  # [B,H,T]
        changed = t.argmax != back.argmax(-1)  # [B,H,T] (padding holds no weight: never an argmax)
        n_rows = rows.sum()
        self.add(maps, "distance", row_sum(moved, rows), n_rows)
        self.add(maps, "argmax_changed", row_sum(changed, rows), n_rows)
        if maps.layer == 0:
            self.tally("unshuffled_sentences", (~twin.shuffled).sum())

    def compute(self, info: RunInfo) -> ProbeResult:
        return self.result(info, self.mean("distance"), {"argmax_changed": self.mean("argmax_changed")},
                           extra={"unshuffled_sentences": self.tallied("unshuffled_sentences")})
