"""The base of analyses whose scores are means: per measure, an [L,H] sum and a count (additive state)."""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from probes.probe import Probe
from probes.results import LabelScores, ProbeResult, RunInfo


class MeanAnalysis(Probe):
    """Subclasses name their `measures` and call ``add(measure, sums [L,H], count)`` from ``update``.
    A measure that does not depend on the head (a baseline) is added as a scalar sum."""

    measures: ClassVar[tuple[str, ...]] = ()

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        self.sums = torch.zeros(len(self.measures), layers, heads, dtype=torch.float64)  # [measures,L,H]
        self.counts = torch.zeros(len(self.measures), dtype=torch.float64)  # [measures]

    def add(self, measure: str, sums: torch.Tensor | float, count: torch.Tensor | float) -> None:
        i = self.measures.index(measure)
        self.sums[i] += torch.as_tensor(sums).detach().to("cpu", torch.float64)
        self.counts[i] += float(count)

    def merge(self, other: "MeanAnalysis") -> None:
        self.sums += other.sums
        self.counts += other.counts

    def mean(self, measure: str) -> LabelScores:
        """The measure's [L,H] mean over its count (NaN when nothing was counted)."""
        i = self.measures.index(measure)
        n = float(self.counts[i])
        scores = (self.sums[i] / n).numpy() if n else np.full((self.layers, self.heads), np.nan)
        return LabelScores(count=int(round(n)), scores=scores)

    def scalar(self, measure: str) -> float | None:
        """The mean of a head-independent measure (a baseline), or None when nothing was counted."""
        scores = self.mean(measure).scores
        return None if np.isnan(scores).all() else round(float(scores[0, 0]), 6)

    def result(self, info: RunInfo, overall: LabelScores, labels: dict[str, LabelScores], **fields) -> ProbeResult:
        """A ProbeResult of this analysis; `fields`: baselines=..., extra=..."""
        return ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels, overall=overall,
                           **fields)
