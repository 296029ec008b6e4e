"""dep: dependency relations from attention (Clark et al. 2019, "What does BERT look at?").

For a head, pred[i] = argmax_j A[i, j] over the root column ([CLS], column 0) and the words.
An arc (dependent d, head h, relation r) is right when pred[d] == h or pred[h] == d; the root's
head is the [CLS] column, and pred of the [CLS] row is taken like any other row. Accuracy per
relation and overall, in each direction alone (dep_to_head: pred[d] == h; head_to_dep:
pred[h] == d), and fixed-offset baselines: the "head" that always attends to position i + k,
k in −3..+3 (k ≠ 0), scored the same three ways.
"""
from __future__ import annotations

import numpy as np
import torch

from probes.batching import Batch
from probes.builtin.directional import OFFSETS, accuracy, offset_baseline
from probes.maps import LayerMaps
from probes.probe import LabelSums, Option, Probe
from probes.registry import register
from probes.results import ProbeResult, RunInfo

WAYS = ("either", "dep_to_head", "head_to_dep")


@register
class DependencyProbe(Probe):
    name = "dep"
    description = "dependency arcs: is a relation's head (or dependent) the word a head attends to most (Clark et al. 2019)"
    needs = ("head", "deprel")
    options = (Option("subtypes", False, "keep relation subtypes (nmod:poss) instead of the universal part (nmod)", bool),)

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        self.add_state("hits", LabelSums((len(WAYS), layers, heads)))  # [labels, 3, L, H] arcs right, per way
        self.add_state("baseline_hits", LabelSums((len(WAYS), len(OFFSETS))))  # [labels, 3, offsets]
        self.add_state("arcs", LabelSums(()))  # [labels] arc counts

    def reader_options(self):
        return {"subtypes": self.config["subtypes"]}

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        rows, dependents, heads, labels = batch.memo("dep.arcs", lambda: _arcs(batch))
        pred = maps.predictions.transpose(1, 2)  # [B,C,H]
        dependents_pred = pred[rows, dependents].cpu()  # [N,H] where each dependent looks
        heads_pred = pred[rows, heads].cpu()  # [N,H] where each head word looks
        to_head = dependents_pred == heads[:, None]
        to_dep = heads_pred == dependents[:, None]
        self.hits.add(self.hits.ids(labels), torch.stack([to_head | to_dep, to_head, to_dep], dim=1),
                      at=(slice(None), maps.layer))
        if maps.layer:  # the arcs and the baselines do not depend on the layer: counted once, at layer 0
            return
        self.arcs.add(self.arcs.ids(labels), torch.ones(len(labels)))
        offsets = torch.tensor(OFFSETS)
        base_to_head = heads[:, None] == dependents[:, None] + offsets  # [N,offsets]
        base_to_dep = dependents[:, None] == heads[:, None] + offsets
        self.baseline_hits.add(self.baseline_hits.ids(labels),
                               torch.stack([base_to_head | base_to_dep, base_to_head, base_to_dep], dim=1))

    def compute(self, info: RunInfo) -> ProbeResult:
        labels = {name: accuracy(self.arcs[name], self.hits[name], WAYS) for name in self.arcs.names}
        total = self.arcs.total()
        overall = accuracy(total, self.hits.total(), WAYS)
        baselines = {"offsets": list(OFFSETS),
                     "labels": {name: offset_baseline(self.arcs[name], self.baseline_hits[name], WAYS)
                                for name in self.arcs.names}}
        if self.arcs.names:
            baselines["overall"] = offset_baseline(total, self.baseline_hits.total(), WAYS)
        return ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels, overall=overall,
                           baselines=baselines)


def _arcs(batch: Batch):
    """Flattened gold arcs of a batch: sentence row, dependent column, head column, relation."""
    heads = [s.ann["head"] for s in batch.sentences]
    sizes = [len(h) for h in heads]
    rows = torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes))
    dependents = torch.from_numpy(np.concatenate([np.arange(1, n + 1) for n in sizes]))
    head_columns = torch.tensor([h for hs in heads for h in hs], dtype=torch.long)
    labels = [r for s in batch.sentences for r in s.ann["deprel"]]
    return rows, dependents, head_columns, labels
