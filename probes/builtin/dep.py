"""dep: dependency relations from attention (Clark et al. 2019, "What does BERT look at?").

For a head, pred[i] = argmax_j A[i, j] over the root column ([CLS], column 0) and the words.
An arc (dependent d, head h, relation r) is right when pred[d] == h or pred[h] == d; the root's
head is the [CLS] column, and pred of the [CLS] row is taken like any other row. Accuracy per
relation and overall, in each direction alone (dep_to_head: pred[d] == h; head_to_dep:
pred[h] == d), and fixed-offset baselines: the "head" that always attends to position i + k,
k in −3..+3 (k ≠ 0), scored the same three ways. The results call root trivial ("trivial_labels": most heads
attend to [CLS] most, so most get every root arc; the figures draw it last and faded).

Options that read the definition as Clark et al.'s code does (``--protocol clark2019`` sets them all,
with ``first-sum`` pooling; see probes.base.protocols):

    zero_self      each word's own column is zeroed before the argmax (ties at 0 go to the first column)
    words_only     the [CLS] and [SEP] rows and columns are dropped before the argmax: pred[i] is a word,
                   the [CLS] row predicts nothing, so root arcs are counted and never right
    head_to_dep    "column": head_to_dep is right when the word attending most to d (argmax_j A[j, d],
                   under the same two options) is h; "row" (default): pred[h] == d
    offsets        "clamped": k in −3..+2 (offset 0 included, as their range(-3, 3)) and each word i's
                   offset "head" is clamp(i + k, 0, n), the root column at the left edge and the last
                   word at the right; dep_to_head: clamp(d + k) == h, head_to_dep: clamp(h + k) == d
                   for h a word (their code scores the dep_to_head way only)
"""
from __future__ import annotations

import torch

from probes.builtin.gold_arcs import gold_arcs
from probes.base.devices import to_device
from probes.encoding.batching import Batch
from probes.results.bootstrap import attach_intervals
from probes.settings.declared import DEP
from probes.builtin.directional import (CLAMPED_OFFSETS, OFFSET_BASELINE, OFFSETS, accuracy, causal_constraint,
                                        offset_baseline)
from probes.capture.maps import LayerMaps
from probes.corpus.sentence import Sentence
from probes.results.presentation import arc_items
from probes.scoring.probe import LabelSums, Probe
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo

WAYS = ("either", "dep_to_head", "head_to_dep")
# the result's "trivial_labels" (drawn last and faded): root, whose head is the start column ([CLS]), where most
# heads put most of their attention (not under words_only, where root arcs are never right)
ROOT_TRIVIAL = "attention to [CLS] counts as right"


@register
class DependencyProbe(Probe, declared=DEP):
    state_on_device = True
    needs = ("head", "deprel")
    view = "arcs"

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        self.offsets = CLAMPED_OFFSETS if self.config["offsets"] == "clamped" else OFFSETS
        # replicated: the "either" way, [labels, R, L, H] and [labels, R, offsets]
        self.add_state("hits", LabelSums((len(WAYS), layers, heads), main=0), replicated=True)  # [labels, 3, L, H] arcs right, per way
        # the rest is gold alone, counted on the host
        self.add_state("baseline_hits", LabelSums((len(WAYS), len(self.offsets)), main=0), replicated=True,
                       host=True)  # [labels, 3, offsets]
        self.add_state("arcs", LabelSums(()), replicated=True, host=True)  # [labels] arc counts
        self.add_state("left_arcs", LabelSums(()), host=True)  # [labels] arcs whose head precedes the dependent (root arcs too)

    def reader_options(self):
        return {"subtypes": self.config["subtypes"]}

    def view_items(self, sentence: Sentence) -> list[dict]:
        return arc_items(sentence)

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        rows, dependents, heads, labels = gold_arcs(batch)  # on the host
        device = maps.device
        on_device = batch.memo(("dep.arcs", device), lambda: tuple(to_device(t, device) for t in (
            rows, dependents, heads, torch.cat([rows, rows]), torch.cat([dependents, heads]),
            torch.cat([heads, dependents]).view(2, -1, 1))))  # then both ways': rows [2N], words [2N], targets [2,N,1]
        zero_self, words_only = self.config["zero_self"], self.config["words_only"]
        if zero_self or words_only:
            pred = argmax_words(maps.word_attention, zero_self, words_only).transpose(1, 2)  # [B,C-1,H]
        else:  # the project's reading: the predictions every probe of the run shares
            pred = maps.predictions.transpose(1, 2)  # [B,C,H]
        arc_rows, arc_dependents, arc_heads, both_rows, looking, targets = on_device
        right = self.batch_buffer(batch, "dep.right", (len(labels), len(WAYS), self.layers, self.heads),
                                  torch.bool)  # [N,3,L,H]
        either, to_head, to_dep = right[:, :, maps.layer].unbind(1)  # [N,H] each, views: the ways in WAYS order
        if self.config["head_to_dep"] == "row":  # the dependent looks at its head, the head at its dependent: at once
            torch.eq(pred[both_rows, looking].view(2, len(labels), self.heads), targets,
                     out=right[:, 1:, maps.layer].transpose(0, 1))  # [2,N,H]: to_head, to_dep
        else:  # the word that looks at each dependent most, argmax over rows: a column argmax
            torch.eq(pred[arc_rows, arc_dependents], arc_heads[:, None], out=to_head)
            looked_at = argmax_words(maps.word_attention.transpose(-1, -2), zero_self, words_only)  # [B,H,C-1]
            torch.eq(looked_at.transpose(1, 2)[arc_rows, arc_dependents], arc_heads[:, None], out=to_dep)
        torch.bitwise_or(to_head, to_dep, out=either)
        self.keep_view(maps.layer, arc_rows, right=either)
        if maps.layer == self.layers - 1:  # the batch's hits added at once, every layer's (one product, not L)
            self.hits.add(self.hits.ids(labels), right, sentences=arc_rows, batch=batch)
        if maps.layer:  # the arcs and the baselines do not depend on the layer: counted once, at layer 0, on the host
            return
        self.arcs.add(self.arcs.ids(labels), torch.ones(len(labels)), sentences=rows, batch=batch)
        self.left_arcs.add(self.left_arcs.ids(labels), (heads < dependents).double())
        offsets = torch.tensor(self.offsets)
        if self.config["offsets"] == "free":
            base_to_head = heads[:, None] == dependents[:, None] + offsets  # [N,offsets]
            base_to_dep = dependents[:, None] == heads[:, None] + offsets
        else:  # word i's offset "head" is clamp(i + k, 0, n); the root column has none
            n = torch.tensor([len(s.ann["head"]) for s in batch.sentences])[rows, None]  # [N,1] words
            base_to_head = heads[:, None] == (dependents[:, None] + offsets).clamp(min=0).minimum(n)  # [N,offsets]
            base_to_dep = dependents[:, None] == (heads[:, None] + offsets).clamp(min=0).minimum(n)
            base_to_dep &= heads[:, None] > 0
        self.baseline_hits.add(self.baseline_hits.ids(labels),
                               torch.stack([base_to_head | base_to_dep, base_to_head, base_to_dep], dim=1),
                               sentences=rows, batch=batch)

    def compute(self, info: RunInfo) -> ProbeResult:
        labels = {name: accuracy(self.arcs[name], self.hits[name], WAYS) for name in self.arcs.names}
        total = self.arcs.total()
        overall = accuracy(total, self.hits.total(), WAYS)
        baselines = {"offsets": list(self.offsets),
                     "labels": {name: offset_baseline(self.arcs[name], self.baseline_hits[name], WAYS, self.offsets)
                                for name in self.arcs.names}}
        if self.arcs.names:
            baselines["overall"] = offset_baseline(total, self.baseline_hits.total(), WAYS, self.offsets)
        extra = {"causal_constraint": self._causal_constraint()} if self.causal and self.arcs.names else {}
        if "root" in self.arcs.names and not self.config["words_only"]:
            extra["trivial_labels"] = {"root": ROOT_TRIVIAL}
        return attach_intervals(ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels,
                                            overall=overall, baselines=baselines, extra=extra,
                                            baseline_name=OFFSET_BASELINE), self.hits, self.arcs,
                                self.baseline_hits)

    def _causal_constraint(self) -> dict:
        """dep_to_head (pred[d] == h) can be right only where the head precedes the dependent (root arcs: the start
        column, where there is a start token), head_to_dep only where it follows: the share of arcs whose head
        precedes ("head_precedes_share"), and the offset baselines under the same constraint."""
        return causal_constraint("decoder-only model: a word attends only to itself and earlier words; dep_to_head "
                                 "can be right only for arcs whose head precedes the dependent, head_to_dep only for "
                                 "the others", self.arcs, self.left_arcs, ("head_precedes",), self.baseline_hits,
                                 WAYS, self.offsets)


def argmax_words(attention: torch.Tensor, zero_self: bool, words_only: bool) -> torch.Tensor:
    """Word attention [B,H,C,C] → [B,H,C-1]: for each row but the end's, the column it attends to most over the
    root column and the words (the end column left out, as in LayerMaps.predictions; first maximum on ties).
    zero_self: the row's own column is zeroed first. words_only: the root column is dropped too, and the root
    row predicts -1 (no column). Pass the transpose to get, for each column, the row that attends to it most."""
    scores = attention[..., :-1, :-1]  # [B,H,C-1,C-1] the end row and column dropped
    if zero_self:
        scores = scores.masked_fill(torch.eye(scores.shape[-1], dtype=torch.bool, device=scores.device), 0)
    if not words_only:
        return scores.argmax(-1)
    pred = scores[..., 1:].argmax(-1) + 1  # [B,H,C-1] over the words (and padding, zero weight, after them)
    pred[..., 0] = -1
    return pred


