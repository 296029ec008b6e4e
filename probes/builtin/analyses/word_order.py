"""word_order: how much a head's attention changes when the words of the sentence are shuffled.

Token level. The runner runs each batch a second time with every sentence's words in a fixed,
seeded order (--seed; the same words, each keeping its subwords; special tokens in place; the words
of a pair shuffled within their sentence; see probes.shuffle). The shuffled map is put back in the
original order (A'[i, j] = the shuffled run's attention between the subwords at original positions
i and j), and for each real query token:

    overall         total variation distance ½ Σ_j |A[i, j] − A'[i, j]| in [0, 1]: the share of the
                    row's attention that moved when only the order of the words changed
    argmax_changed  whether the row's argmax is another token after shuffling

Heads that track order (positional heads) score high; heads that follow content (the same word
wherever it is) score low. Sentences whose order cannot change (one word per segment) are not
scored ("unshuffled_sentences" in the JSON). This doubles the forward passes of a run.
"""
from __future__ import annotations

import torch

from probes.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import token_view
from probes.probe import Option
from probes.registry import register
from probes.results import ProbeResult, RunInfo


def unshuffle(twin_attention: torch.Tensor, position_of: torch.Tensor) -> torch.Tensor:
    """[B,L,H,T,T] twin maps back in the original order: out[b,l,h,i,j] = twin[b,l,h,pos[b,i],pos[b,j]]."""
    b, layers, heads, t, _ = twin_attention.shape
    rows = position_of[:, None, None, :, None].expand(b, layers, heads, t, t)
    out = twin_attention.gather(3, rows)
    return out.gather(4, position_of[:, None, None, None, :].expand(b, layers, heads, t, t))


@register
class WordOrderAnalysis(MeanAnalysis):
    name = "word_order"
    description = "how much each head's attention moves when the words are shuffled (second forward pass)"
    options = (Option("seed", 0, "seed of the word shuffle (word_order) and of head_distance's token draw", int),)
    measures = ("distance", "argmax_changed", "unshuffled_sentences")

    def shuffle_seed(self) -> int:
        return int(self.config["seed"])

    def update(self, batch: Batch) -> None:
        if batch.twin is None:
            raise RuntimeError("word_order needs the batch's shuffled twin (the runner makes it on shuffle_seed())")
        t, twin = token_view(batch), token_view(batch.twin)
        back = unshuffle(twin.attention, batch.twin.position_of.to(twin.attention.device))  # [B,L,H,T,T]
        rows = t.row_weights() * batch.twin.shuffled.to(t.real.device)[:, None]  # [B,T] rows of shuffled sentences
        moved = 0.5 * (t.attention - back).abs().sum(-1)  # [B,L,H,T]
        changed = t.argmax != back.argmax(-1)  # [B,L,H,T] (padding holds no weight: never an argmax)
        n_rows = rows.sum()
        self.add("distance", torch.einsum("blhi,bi->lh", moved, rows), n_rows)
        self.add("argmax_changed", torch.einsum("blhi,bi->lh", changed.to(rows.dtype), rows), n_rows)
        self.add("unshuffled_sentences", int((~batch.twin.shuffled).sum()), 1)

    def compute(self, info: RunInfo) -> ProbeResult:
        unshuffled = int(self.sums[self.measures.index("unshuffled_sentences"), 0, 0])
        return self.result(info, self.mean("distance"), {"argmax_changed": self.mean("argmax_changed")},
                           extra={"unshuffled_sentences": unshuffled})
