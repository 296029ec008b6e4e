"""Pseudo-clustering of head outputs (He & Choi 2021, "The stem cell hypothesis"): the base of pos, ner, con.

A unit (a word, an entity span, a constituent) is represented, for every head, by the mean of its
words' per-head context vectors (a word's vector is the mean of its subwords', see LayerMaps.word_vectors).
Fit phase (`fit_update`, on the fit corpus): per label and head, the sum and count of the units'
vectors (probes.scoring.centroids.Centroids). Scoring (`update`): each unit is predicted, per head, as the
label of the nearest centroid by cosine similarity; a head's accuracy for a label is the share of
that label's units predicted right. A scored label with no centroid (absent from the fit corpus)
can never be predicted: its units count as wrong and it is listed in the result's
``labels_without_centroid``.

No pair of words is scored, so a decoder-only model's constraint rules out no direction; what it changes is said in
its results (``extra["causal_constraint"]``, CAUSAL_NOTE): a word's context vector reads only itself and earlier
words.
"""
from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from probes.base.devices import to_device
from probes.encoding.batching import Batch
from probes.results.bootstrap import attach_intervals
from probes.builtin.fitted import FitPresentation
from probes.scoring.centroids import Centroids
from probes.corpus.sentence import Sentence
from probes.base.errors import InputError
from probes.capture.maps import LayerMaps
from probes.scoring.probe import LabelSums, Probe, ratio
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo


CAUSAL_NOTE = ("decoder-only model: a word's per-head context vector mixes the values of itself and earlier words "
               "only, so a unit's vector (the mean of its words') holds nothing of the words after it, and its first "
               "word's nothing of the unit's later words; no pair of words is scored, so no direction is ruled out")


class ClusteringProbe(FitPresentation, Probe):
    """Nearest-centroid accuracy per label per head. Subclasses say what the units are (`spans`)."""

    needs_vectors = True
    needs_fit = True
    state_on_device = True
    unit = "units"  # what the units are, for messages ("words", "entities", "phrases")
    view = "units"

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        # under fit_beside: each batch fed (as kept) with its layers' (layer, labels, unit vectors [N,H,d]); else None
        self._kept: list[tuple[_Kept, list[tuple[int, list[str], torch.Tensor]]]] | None = None
        self.add_state("centroids", Centroids(layers, heads), fit=True)  # per-label sums [K,L,H,d] and counts [K]
        self.add_state("hits", LabelSums((layers, heads)), replicated=True)  # [labels, L, H] units predicted right (replicas [labels, R, L, H])
        self.add_state("units", LabelSums(()), replicated=True, host=True)  # [labels] units scored (replicas [labels, R]), gold alone

    @abstractmethod
    def spans(self, sentence: Sentence) -> list[tuple[str, int, int]]:
        """The sentence's units as (label, start, end): 0-based word indices, end exclusive."""

    def view_items(self, sentence: Sentence) -> list[dict]:
        return [{"from": start + 1, "to": end, "label": label} for label, start, end in self.spans(sentence)]

    def view_labels(self) -> list[str]:
        """The centroids' labels sorted (their own order is the order first met, which chunks and shards change)."""
        return sorted(self.centroids.names)

    def _sorted_position(self, batch: Batch, device: torch.device) -> torch.Tensor:
        """[K] each centroid's position in ``view_labels``, on `device` (made once per batch)."""
        position = {name: k for k, name in enumerate(self.view_labels())}
        return batch.memo(("clustering.sorted", id(self), device), lambda: to_device(
            torch.tensor([position[name] for name in self.centroids.names]), device))

    def unit_vectors(self, batch: Batch, maps: LayerMaps) -> tuple[list[str], torch.Tensor]:
        """Labels and vectors [N,H,d] of the batch's units at layer ``maps.layer``: the mean of each span's
        word vectors."""
        key = ("clustering.units", self.name, tuple(sorted(self.config.items())))
        labels, *units = batch.memo(key, lambda: _members([self.spans(s) for s in batch.sentences], batch.width))
        words = maps.word_vectors  # [B,H,C,d]
        if not labels:
            return labels, words.new_zeros((0, words.shape[1], words.shape[-1]))
        member, rows, slots, lengths = batch.memo((*key, words.device), lambda: [to_device(t, words.device)
                                                                                for t in units])
        sums = member.to(words)[:, None] @ words  # [B,H,U,d] sum of each unit's word vectors
        vectors = sums.transpose(1, 2)[rows, slots]  # [N,H,d]
        return labels, vectors / lengths.to(vectors)[:, None, None]

    def fit_update(self, batch: Batch, maps: LayerMaps) -> None:
        labels, vectors = self.unit_vectors(batch, maps)
        self.centroids.add(labels, vectors, maps.layer)

    def beside_bytes(self, sentences: list[Sentence], head_dim: int) -> int | None:
        """The unit vectors of every layer, float32: units × L × H × d × 4 bytes (EWT dev's 25,147 tagged words with
        MiniLM's 6 × 12 heads of 32: 232 MB)."""
        return sum(len(self.spans(s)) for s in sentences) * self.layers * self.heads * head_dim * 4

    def fit_beside(self) -> None:
        self._kept = []

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        labels, vectors = self.unit_vectors(batch, maps)  # [N,H,d]
        if self._kept is None:
            self._score(batch, maps.layer, labels, vectors)
            return
        self.centroids.add(labels, vectors, maps.layer)
        if maps.layer == 0:  # a batch's first layer (layers come in order, 0 first)
            self._kept.append((_Kept(batch), []))
        self._kept[-1][1].append((maps.layer, labels, vectors))

    def score_kept(self, viewed: Callable[[Any, int], None]) -> None:
        """Each kept batch's layers scored against the centroids of the whole pass (see ``fit_beside``), each batch's
        vectors dropped once scored."""
        kept, self._kept = self._kept or [], None
        kept.reverse()
        while kept:
            batch, layers = kept.pop()
            for layer, labels, vectors in layers:
                self._score(batch, layer, labels, vectors)
                viewed(batch, layer)

    def fed_state(self, method: str) -> set[str]:
        """Probe.fed_state, and the centroids where the scoring pass fits them (``fit_beside``)."""
        fed = super().fed_state(method)
        return fed | self._fit_state if self._kept is not None else fed

    def retry_point(self, method: str = "update") -> tuple:
        """The state, and how many batches were kept (a batch fed again under ``fit_beside`` is kept again)."""
        return super().retry_point(method), None if self._kept is None else len(self._kept)

    def restore(self, point: tuple) -> None:
        state, kept = point
        super().restore(state)
        if kept is not None:
            del self._kept[kept:]

    def _score(self, batch: Batch, layer: int, labels: list[str], vectors: torch.Tensor) -> None:
        """Add one layer of a batch's units (their labels, vectors [N,H,d]): each predicted by its nearest centroid."""
        if not len(self.centroids):
            raise InputError(f"{self.name}: no centroids: the fit corpus has no labelled {self.unit}")
        if not labels:
            return
        device = vectors.device
        predicted = self.centroids.classify(vectors, layer)  # [N,H]
        right = predicted == batch.memo(("clustering.index", id(self)), lambda: self.centroids.index(labels))[:, None]
        rows = self.unit_rows(batch)  # [N] sentence of each unit, on the host
        on_device = batch.memo(("clustering.rows", id(self), device), lambda: to_device(rows, device))
        self.keep_view(layer, on_device, predicted=self._sorted_position(batch, device)[predicted], right=right)
        hits = self.batch_buffer(batch, "clustering.right", (len(labels), self.layers, self.heads), torch.bool)
        hits[:, layer] = right  # [N,L,H]: the batch's hits added at once, at the last layer (one product, not L)
        if layer == self.layers - 1:
            self.hits.add(self.hits.ids(labels), hits, sentences=on_device, batch=batch)
        if layer == 0:  # units are counted once
            self.units.add(self.units.ids(labels), torch.ones(len(labels)), sentences=rows, batch=batch)

    def unit_rows(self, batch: Batch) -> torch.Tensor:
        """[N] the sentence row of each unit of ``unit_vectors``, in its order (units in sentence order), on the
        host."""
        return batch.memo(("clustering.rows", self.name, tuple(sorted(self.config.items()))), lambda: torch.from_numpy(
            np.repeat(np.arange(len(batch.sentences)), [len(self.spans(s)) for s in batch.sentences])))

    def merge(self, other: "ClusteringProbe") -> None:
        """Add another shard's scores; both must have scored with the same (merged) centroids."""
        if type(other) is type(self) and not self.centroids.same_as(other.centroids):
            raise ValueError(f"{self.name}: cannot merge scores computed with different centroids; "
                             "merge the fits (merge_fit) before scoring the shards")
        super().merge(other)

    def compute(self, info: RunInfo) -> ProbeResult:
        labels = {name: _scores(self.units[name], self.hits[name]) for name in self.units.names}
        overall = _scores(self.units.total(), self.hits.total())
        fitted = dict(zip(self.centroids.names, (int(n) for n in self.centroids.counts.sums)))
        fit = {**info.settings.get("fit", {}), "units": fitted}
        missing = [name for name in self.units.names if name not in fitted]
        baselines = {}
        if fitted and overall.count:  # always answering the fit corpus' most frequent label
            majority = max(fitted, key=fitted.get)
            right = int(self.units[majority]) if majority in self.units.names else 0
            baselines["majority"] = {"label": majority, "overall": round(right / overall.count, 6)}
        extra = {"fit": fit, "labels_without_centroid": missing}
        if self.causal:
            extra["causal_constraint"] = {"note": CAUSAL_NOTE}
        return attach_intervals(ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels,
                                            overall=overall, baselines=baselines, extra=extra), self.hits, self.units)


class _Kept:
    """What scoring a batch after the pass reads of it (``ClusteringProbe.score_kept``): its sentences and their
    indices, and a memo of its own (``Batch.memo``'s), the batch itself dropped (its memo holds the pass's buffers)."""

    def __init__(self, batch: Batch):
        self.sentences, self.indices = batch.sentences, batch.indices
        self._memo: dict = {}

    def memo(self, key, make):
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]


def _members(spans: list[list[tuple[str, int, int]]],
             width: int) -> tuple[list[str], torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch's units from each sentence's spans (see ``ClusteringProbe.spans``): their labels [N], member
    [B,U,C] (1 where column c is a word of the sentence's u-th unit, U the most units of a sentence), the
    sentence row and slot u of each unit [N], and its length in words [N]."""
    labels = [label for sentence in spans for label, _, _ in sentence]
    if not labels:
        return labels, *(torch.zeros(0, dtype=torch.long) for _ in range(4))
    per_sentence = np.array([len(s) for s in spans])
    rows = np.repeat(np.arange(len(spans)), per_sentence)  # [N] sentence of each unit
    slots = np.concatenate([np.arange(n) for n in per_sentence])  # [N] its index within the sentence
    starts = np.array([start for s in spans for _, start, _ in s]) + 1  # first word column
    ends = np.array([end for s in spans for _, _, end in s]) + 1  # column after the last word
    lengths = ends - starts
    # one (unit, column) pair per word of each unit: columns start..end-1
    pair_unit = np.repeat(np.arange(len(labels)), lengths)
    pair_column = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths) + starts[pair_unit]
    member = torch.zeros(len(spans), int(per_sentence.max()), width)  # [B,U,C]
    member[rows[pair_unit], slots[pair_unit], pair_column] = 1.0
    return labels, member, torch.from_numpy(rows), torch.from_numpy(slots), torch.from_numpy(lengths)


def _scores(count: torch.Tensor, hits: torch.Tensor) -> LabelScores:
    return LabelScores(count=int(count), scores=ratio(hits, count))
