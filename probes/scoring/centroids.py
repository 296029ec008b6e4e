"""Streaming per-head centroids and nearest-centroid classification (He & Choi 2021).

For every head (layer l, head h) and label k the centroid is the mean of the fit units' vectors
of that label: c[k,l,h] = sums[k,l,h] / counts[k]. A unit with vector x is predicted, for each
head separately, as the label whose centroid has the highest cosine similarity with x.

Only sums and counts are kept ([labels, L, H, d] float64 and [labels]), never the vectors, so
memory does not grow with the corpus, and two fits (shards of a fit corpus) merge by adding.
Vectors come one layer at a time (``add(labels, vectors, layer)``, as the runner feeds probes).

Classification is one einsum over labels × heads. Cosine similarity
cos(x, c) = x·c / (|x| |c|): for a fixed unit and head, |x| is the same for every label, so the
argmax over labels only needs the centroid directions c / |c| (and c / |c| = sums / |sums|,
counts cancel). Ties go to the label seen first in the fit corpus; a zero centroid has
similarity 0 with everything.

Sums, counts and the classification stay on the device of the vectors (``to``): fitting and classifying read
nothing back to the host.
"""
from __future__ import annotations

from typing import Any

import torch

from probes.base.devices import CPU, to_device
from probes.scoring.probe import LabelSums


class Centroids:
    """Per-label sums [K,L,H,d] and counts [K] of fit vectors; `classify` predicts labels per head.

    Additive probe state (``Probe.add_state``): ``merge`` adds another fit, ``state_dict`` /
    ``load_state_dict`` save and reload it."""

    def __init__(self, layers: int, heads: int):
        self.layers, self.heads = layers, heads
        self.sums: LabelSums | None = None  # [K,L,H,d], created by the first add (when d is known)
        self.counts = LabelSums(())  # [K]
        self.device = CPU  # where the sums and counts are (``to``)
        self._directions: torch.Tensor | None = None  # cached c / |c| [K,L,H,d]

    @property
    def names(self) -> list[str]:
        """Labels in the order first seen: index k of `classify`'s predictions."""
        return self.counts.names

    def __len__(self) -> int:
        return len(self.counts.names)

    def to(self, device: torch.device | str) -> "Centroids":
        """Move the sums and counts to `device` (in place); these centroids."""
        self.device = torch.device(device)
        for table in (self.sums, self.counts):
            if table is not None:
                table.to(self.device)
        self._directions = None
        return self

    def add(self, labels: list[str], vectors: torch.Tensor, layer: int) -> None:
        """Add N fit units at one layer: labels[i] with vectors[i] ([N,H,d]). The units are counted at
        layer 0: feed every layer of a batch, starting with layer 0 (as the runner does)."""
        if len(labels) != vectors.shape[0]:
            raise ValueError(f"{len(labels)} labels for {vectors.shape[0]} vectors")
        if not labels:
            return
        if not 0 <= layer < self.layers:
            raise ValueError(f"layer {layer} of a model with {self.layers} layers")
        self._check_shape((self.layers, *vectors.shape[1:]))
        self.sums.add(self.sums.ids(labels), vectors, at=(layer,))
        if layer == 0:
            self.counts.add(self.counts.ids(labels), vectors.new_ones(len(labels)))
        self._directions = None

    def merge(self, other: "Centroids") -> None:
        """Add another fit's sums and counts (labels matched by name)."""
        if other.sums is None:
            return
        self._check_shape(tuple(other.sums.sums.shape[1:]))
        self.sums.merge(other.sums)
        self.counts.merge(other.counts)
        self._directions = None

    def state_dict(self) -> dict[str, Any]:
        return {"counts": self.counts.state_dict(), "sums": None if self.sums is None else self.sums.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the fit by a ``state_dict()`` of centroids of the same model shape."""
        self.sums = None
        if state["sums"] is not None:
            self._check_shape(tuple(state["sums"]["sums"].shape[1:]))
            self.sums.load_state_dict(state["sums"])
        self.counts.load_state_dict(state["counts"])
        self._directions = None

    def same_as(self, other: "Centroids") -> bool:
        """Whether both hold exactly the same labels, sums and counts."""
        if self.names != other.names:
            return False
        if self.sums is None or other.sums is None:
            return self.sums is other.sums
        return torch.equal(self.sums.sums, other.sums.sums) and torch.equal(self.counts.sums, other.counts.sums)

    def means(self) -> torch.Tensor:
        """The centroids [K,L,H,d] (float64)."""
        if self.sums is None:
            raise RuntimeError("no centroid fitted yet")
        return self.sums.sums / self.counts.sums[:, None, None, None]

    def index(self, labels: list[str]) -> torch.Tensor:
        """[N] the centroid index of each label, -1 for a label with no centroid (never predicted), on the centroids'
        device."""
        position = {name: k for k, name in enumerate(self.names)}
        return to_device(torch.tensor([position.get(x, -1) for x in labels], dtype=torch.long), self.device)

    def classify(self, vectors: torch.Tensor, layer: int) -> torch.Tensor:
        """[N,H,d] unit vectors at `layer` → [N,H] index of the nearest centroid by cosine similarity, per head."""
        if self.sums is None:
            raise RuntimeError("no centroid fitted yet")
        cached = self._directions
        if cached is None or cached.device != vectors.device or cached.dtype != vectors.dtype:
            sums = self.sums.sums
            directions = sums / sums.norm(dim=-1, keepdim=True).clamp(min=torch.finfo(sums.dtype).tiny)
            self._directions = directions.to(device=vectors.device, dtype=vectors.dtype)  # [K,L,H,d]
        similarity = torch.einsum("nhd,khd->nhk", vectors, self._directions[:, layer])  # |x|·cos(x, c), [N,H,K]
        return similarity.argmax(dim=-1)

    def _check_shape(self, shape: tuple[int, ...]) -> None:
        """shape: (L, H, d) of the vectors to add; creates the sums on first use."""
        if shape[:2] != (self.layers, self.heads):
            raise ValueError(f"vectors for {shape[0]} layers × {shape[1]} heads, expected {self.layers} × {self.heads}")
        if self.sums is None:
            self.sums = LabelSums(shape).to(self.device)
        elif tuple(self.sums.sums.shape[1:]) != shape:
            raise ValueError(f"vectors of shape {shape}, expected {tuple(self.sums.sums.shape[1:])}")
