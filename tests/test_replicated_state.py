"""State declared once, replicate-aware: ``Probe.add_state(..., replicated=True)`` gives a LabelSums the run's
bootstrap (its replicate sums of R replicates, weighted by ``add(..., sentences=rows, batch=batch)``) and a tensor
of sums an R dimension in front (added to by ``Probe.add_replicated``), as torchmetrics' ``Metric.add_state``
declares state that ``merge``, ``reset`` and ``state_dict`` then handle. Worked out by hand on two sentences."""
from __future__ import annotations

import numpy as np
import torch

from probes.results.bootstrap import replicate_weights
from probes.corpus.sentence import Sentence
from probes.encoding.identity import sentence_key
from probes.scoring.probe import LabelSums, Probe


class Toy(Probe):
    name = "toy"

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        self.add_state("hits", LabelSums((2,)), replicated=True)  # [labels, 2], replicas [labels, R, 2]
        self.add_state("sums", torch.zeros(2, dtype=torch.float64), replicated=True)  # [R, 2]
        self.add_state("plain", LabelSums(()))  # no replicas

    def update(self, batch, maps):  # the tests call add/add_replicated themselves
        pass

    def compute(self, info):  # nothing is computed from a Toy: its state is what the tests read
        return None


class TwoSentences:
    """What the bootstrap reads of a batch: its sentences and its memo."""

    def __init__(self):
        self.sentences = [Sentence(words=["a", "b"]), Sentence(words=["c"])]
        self.memos = {}

    def memo(self, key, make):
        if key not in self.memos:
            self.memos[key] = make()
        return self.memos[key]


def test_declared_replicated_state_gets_the_runs_bootstrap():
    probe = Toy(1, 2, replicates=4, bootstrap_seed=7)
    assert (probe.hits.replicates, probe.plain.replicates) == (4, 0) and probe.hits.bootstrap == probe.bootstrap
    assert probe.sums.shape == (4, 2) and probe.sums.dtype == torch.float64
    none = Toy(1, 2)
    assert none.hits.replicates == 0 and none.sums.shape == (0, 2)

    batch = TwoSentences()
    w = replicate_weights([sentence_key(s) for s in batch.sentences], 4, 7).astype(float)  # [R=4,B=2]
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # [N=3,2]: a in sentence 0, b and a in sentence 1
    probe.hits.add(probe.hits.ids(["a", "b", "a"]), values, sentences=torch.tensor([0, 1, 1]), batch=batch)
    # a: sentence 0's [1, 0] and sentence 1's [1, 1]; b: sentence 1's [0, 1]
    np.testing.assert_array_equal(probe.hits.replicated("a"), w[:, :1] * [1, 0] + w[:, 1:] * [1, 1])
    np.testing.assert_array_equal(probe.hits.replicated("b"), w[:, 1:] * [0, 1])
    np.testing.assert_array_equal(probe.hits["a"], [2.0, 1.0])
    probe.add_replicated(probe.sums, torch.tensor([0, 1, 1]), values.double(), batch)
    np.testing.assert_array_equal(probe.sums, w[:, :1] * [1, 0] + w[:, 1:] * [1, 2])
    # the same table with the weights given by hand: the same replicas
    by_hand = LabelSums((2,), replicates=4)
    by_hand.add(by_hand.ids(["a", "b", "a"]), values, sentences=torch.tensor([0, 1, 1]),
                weights=torch.from_numpy(w).float())
    assert torch.equal(by_hand.replicas, probe.hits.replicas)

    other = Toy(1, 2, replicates=4, bootstrap_seed=7)
    other.load_state_dict(probe.state_dict())
    probe.merge(other)  # adds every declared state, replicas too
    np.testing.assert_array_equal(probe.hits.replicated("b"), 2 * w[:, 1:] * [0, 1])
    np.testing.assert_array_equal(probe.sums, 2 * (w[:, :1] * [1, 0] + w[:, 1:] * [1, 2]))
    probe.reset()
    assert probe.hits.names == [] and probe.hits.replicates == 4 and not probe.sums.any()
    assert probe.sums.shape == (4, 2) and probe.hits.bootstrap == probe.bootstrap
