"""The base of analyses whose scores are means: per measure, an [L,H] sum and a count (additive state)."""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from probes.results.bootstrap import replicate_ratio
from probes.results.intervals import attach_interval, interval_method, record_range
from probes.capture.maps import LayerMaps
from probes.scoring.probe import Probe, ratio
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

# what a decoder-only model's analyses mean (extra["causal_constraint"] of every analysis, Probe.causal)
CAUSAL_NOTE = ("decoder-only model: each position attends only to itself and earlier positions, so attention to "
               "later words (the next word, positive offsets, the end special) is 0 by construction, not a property "
               "of a head, and an earlier word's distribution spreads over fewer positions (the first word's over "
               "itself and the start token only)")


class MeanAnalysis(Probe):
    """An analysis whose scores are means. Subclasses name three kinds of state and fill them from ``update``:

    measures  per-head means: ``add(maps, measure, sums [H], count)`` adds the layer's sums; the count
              (query rows, maps) is the same for every layer and is added once, with layer 0. Given them
              split by sentence too (``per_sentence``), the bootstrap's replicates (probes.results.bootstrap) and
              the results' intervals come with them. ``add_many`` adds several measures that follow one another
              at once
    scalars   head-independent means (baselines): ``add_scalar(name, sum, count)``, once per batch
    tallies   plain counts (sentences left out): ``tally(name, n)``, once per batch

    Sums are float64 and counts int64, so a corpus split into batches or shards in any way adds up to
    the same numbers. They stay on the run's device: sums and counts given as tensors there are added there, never
    read back per layer (a count given as a float tensor holds a whole number: it is added as int64).
    """

    state_on_device = True  # added to through add, add_scalar and tally alone, from tensors on any device
    measures: ClassVar[tuple[str, ...]] = ()
    # measure -> (lowest, highest) its mean can be, for its intervals (probes.results.intervals); a measure not named is
    # a mean of values in [0, 1] (a share of attention, of rows)
    ranges: ClassVar[dict[str, tuple[float, float]]] = {}
    scalars: ClassVar[tuple[str, ...]] = ()
    tallies: ClassVar[tuple[str, ...]] = ()

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        self.add_state("sums", torch.zeros(len(self.measures), layers, heads, dtype=torch.float64))  # [measures,L,H]
        self.add_state("counts", torch.zeros(len(self.measures), dtype=torch.int64))  # [measures]
        self.add_state("scalar_sums", torch.zeros(len(self.scalars), dtype=torch.float64))  # [scalars]
        self.add_state("scalar_counts", torch.zeros(len(self.scalars), dtype=torch.int64))  # [scalars]
        self.add_state("tally_counts", torch.zeros(len(self.tallies), dtype=torch.int64))  # [tallies]
        # the bootstrap's replicate sums and counts (probes.results.bootstrap)
        self.add_state("replicate_sums", torch.zeros(len(self.measures), layers, heads, dtype=torch.float64),
                       replicated=True)  # [R,measures,L,H]
        self.add_state("replicate_counts", torch.zeros(len(self.measures), dtype=torch.float64), replicated=True)  # [R,measures]

    def add(self, maps: LayerMaps, measure: str, sums: torch.Tensor, count: torch.Tensor | int,
            per_sentence: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        """Add layer ``maps.layer``'s per-head sums [H] of `measure`, and (at layer 0) its count.
        per_sentence: the same split by sentence, (sums [B,H], counts [B]), for the bootstrap's replicates."""
        self.add_many(maps, (measure,), sums[None], count,
                      None if per_sentence is None else (per_sentence[0][None], per_sentence[1]))

    def add_many(self, maps: LayerMaps, measures: tuple[str, ...], sums: torch.Tensor, count: torch.Tensor | int,
                 per_sentence: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        """``add`` for M measures that follow one another in ``measures`` at once (the same sums, a few operations in
        all instead of a few each: on a GPU each is a kernel launch): sums [M,H]; count one for all or [M];
        per_sentence (sums [M,B,H], counts [B] for all or [M,B]): held for the batch, layer by layer, and added to
        the replicate sums at its last layer, every layer's in one product (one a batch, not one a layer)."""
        first = self.measures.index(measures[0])
        if tuple(self.measures[first:first + len(measures)]) != tuple(measures):
            raise ValueError(f"{self.name}: measures {measures} do not follow one another in {self.measures}")
        at = slice(first, first + len(measures))
        self.sums[at, maps.layer].add_(sums.detach().to(self.sums.device))  # float64 state: the sums added as float64
        if maps.layer == 0:
            self.counts[at].add_(_whole(count, self.counts.device))
        if per_sentence is not None and self.bootstrap.replicates:
            values, counts = per_sentence  # one row per sentence of the batch
            held = self.batch_buffer(maps.batch, "analysis.replicates", (len(values[0]), len(self.measures),
                                                                          self.layers, self.heads), torch.float64,
                                     zeroed=True)  # [B,measures,L,H] the batch's per-sentence sums, layer by layer
            held[:, at, maps.layer].add_(values.detach().transpose(0, 1).to(held.device))  # [B,M,H]
            if maps.layer == self.layers - 1:  # every layer's at once: one product a batch, not one a layer
                self.add_replicated(self.replicate_sums, None, held[:, at], maps.batch, at=(at,))  # [B,M,L,H]
                held[:, at].zero_()  # added: a later call for these measures adds only its own
            if maps.layer == 0:
                counts = counts.detach()
                counts = counts.T if counts.dim() == 2 else counts[:, None].expand(-1, len(measures))  # [B,M]
                self.add_replicated(self.replicate_counts, None, counts, maps.batch, at=(at,))

    def add_scalar(self, name: str, total: torch.Tensor | float, count: torch.Tensor | int) -> None:
        """Add a head-independent sum and its count (call once per batch)."""
        i = self.scalars.index(name)
        if isinstance(total, torch.Tensor):
            total = total.detach().to(self.scalar_sums.device, torch.float64)
        self.scalar_sums[i].add_(total)
        self.scalar_counts[i].add_(_whole(count, self.scalar_counts.device))

    def tally(self, name: str, n: torch.Tensor | int) -> None:
        """Add `n` to a plain count (call once per batch)."""
        self.tally_counts[self.tallies.index(name)].add_(_whole(n, self.tally_counts.device))

    def mean(self, measure: str) -> LabelScores:
        """The measure's [L,H] mean over its count (NaN when nothing was counted)."""
        i = self.measures.index(measure)
        return LabelScores(count=int(self.counts[i]), scores=ratio(self.sums[i], self.counts[i]))

    def scalar(self, name: str) -> float | None:
        """The mean of a head-independent measure (a baseline), or None when nothing was counted."""
        i = self.scalars.index(name)
        value = float(ratio(self.scalar_sums[i], self.scalar_counts[i]))
        return None if np.isnan(value) else round(value, 6)

    def tallied(self, name: str) -> int:
        return int(self.tally_counts[self.tallies.index(name)])

    def result(self, info: RunInfo, overall: LabelScores, labels: dict[str, LabelScores], overall_measure: str | None = None,
               **fields) -> ProbeResult:
        """A ProbeResult of this analysis; `fields`: baselines=..., extra=... With replicates, the labels named
        after a measure, and the overall grid when it is `overall_measure`'s mean, get bootstrap intervals."""
        result = ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels, overall=overall,
                             **fields)
        if self.causal:
            result.extra["causal_constraint"] = {"note": CAUSAL_NOTE}
        if self.bootstrap.replicates:
            named = [(name, entry, name) for name, entry in labels.items() if name in self.measures]
            for name, entry, measure in [*named, *([("overall", overall, overall_measure)] if overall_measure else [])]:
                i = self.measures.index(measure)
                if entry.count and self.replicate_counts[:, i].any():  # the analysis gave it per sentence
                    replicates = replicate_ratio(self.replicate_sums[:, i], self.replicate_counts[:, i])
                    bounds = self.ranges.get(measure, (0.0, 1.0))
                    result.replicates[name] = attach_interval(entry, replicates, "mean", bounds=bounds)  # → best [R]
                    result.extra["interval_method"] = interval_method("mean")
                    record_range(result, bounds, name)
        return result


def _whole(count: torch.Tensor | int, device: torch.device) -> torch.Tensor | int:
    """A count to add to int64 state on `device`: an int as it is, a tensor (of a whole number) as int64 there."""
    if isinstance(count, torch.Tensor):
        return count.detach().to(device, torch.int64)
    return int(count)
