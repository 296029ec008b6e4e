"""Streaming bootstrap: per-sentence Poisson(1) replicate weights and replicate sums.

Every score is a ratio of sums over sentences (hits / arcs, units right / units). Replicate r reweights
sentence s by w[r, s] ~ Poisson(1), drawn from a counter-based hash of (seed, the sentence's identity
key, r) (probes.encoding.identity.sentence_key): no state, no order. So the replicate sums are additive like the
rest of a probe's state (shards merge by adding, any batching gives the same sums), and two runs over
one corpus (two checkpoints) reweight each sentence alike: every comparison of them is paired.

The intervals made from these sums: probes.results.intervals (numpy alone, so that reading results needs no torch).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from probes.encoding.batching import Batch
from probes.base.choices import DEFAULT_SEED, MASK64, check_bootstrap
from probes.base.devices import CPU, to_device
from probes.base.ordered import index_sum
from probes.encoding.identity import sentence_key
from probes.results.intervals import SCORE_RANGES, attach_interval, effective_count, interval_method, record_range
from probes.results.probe_result import ProbeResult

_GOLDEN = 0x9E3779B97F4A7C15  # the counter's step (splitmix64's increment)
# P(X ≤ k) for X ~ Poisson(1), k = 0..24 (the tail beyond 24 is below 2^-53: no double can reach it)
POISSON_CDF = np.cumsum([math.exp(-1) / math.factorial(k) for k in range(25)])


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping arithmetic): a bijection that scrambles every bit."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def replicate_weights(keys: Sequence[int], replicates: int, seed: int) -> np.ndarray:
    """[R,B] Poisson(1) weights (uint8) of sentences with identity `keys` [B] in replicates 0..R-1.

    w[r, b] = F⁻¹(u), u = top 53 bits of mix(mix(key_b mod 2^64 ^ mix(seed)) + (r + 1)·γ) / 2^53, F the
    Poisson(1) distribution function (γ = 0x9E3779B97F4A7C15, mix splitmix64's finaliser)."""
    low = np.array([k & MASK64 for k in keys], dtype=np.uint64)  # [B] the key's low 64 bits
    base = _mix(low ^ _mix(np.array([seed], dtype=np.uint64)))  # [B]
    with np.errstate(over="ignore"):
        counters = base[None, :] + np.arange(1, replicates + 1, dtype=np.uint64)[:, None] * np.uint64(_GOLDEN)  # [R,B]
    u = (_mix(counters) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53  # [R,B] uniform on [0, 1)
    return poisson_quantile(u)


def poisson_quantile(u: np.ndarray) -> np.ndarray:
    """F⁻¹(u) = #{k : F(k) ≤ u} (uint8, the shape of u) for F the Poisson(1) distribution function, u in [0, 1):
    ``np.searchsorted(POISSON_CDF, u, side="right")``, with four comparisons where u < F(3) (98% of draws)."""
    weights = sum((u >= c for c in POISSON_CDF[:4]), np.zeros(u.shape, dtype=np.uint8))
    tail = u >= POISSON_CDF[3]
    weights[tail] = np.searchsorted(POISSON_CDF, u[tail], side="right")
    return weights


@dataclass(frozen=True)
class Bootstrap:
    """A run's bootstrap: R replicates (0: none) drawn with `seed`."""

    replicates: int = 0
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        check_bootstrap(self.replicates, self.seed)

    def weights(self, batch: Batch, device: torch.device = CPU,
                dtype: torch.dtype = torch.float32) -> torch.Tensor | None:
        """[R,B] replicate weights of the batch's sentences in `dtype` on `device` (made on the host and copied there
        once per batch and dtype; small integers, exact in any float type), or None without replicates."""
        if not self.replicates:
            return None
        made = batch.memo(("bootstrap.weights", self.replicates, self.seed), lambda: torch.from_numpy(
            replicate_weights([sentence_key(s) for s in batch.sentences], self.replicates, self.seed)).float())
        return batch.memo(("bootstrap.weights", self.replicates, self.seed, torch.device(device), dtype),
                          lambda: to_device(made.to(dtype), device))


def weighted_sums(groups: torch.Tensor, count: int, sentences: torch.Tensor, values: torch.Tensor,
                  weights: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """[R,count,F] replicate sums of items: Σ_i [groups[i] = g] · weights[r, sentences[i]] · values[i, f].

    groups, sentences [N]: each item's group (label) and batch row; values [N,F]; weights [R,B]. The items
    are first summed per (sentence, group) in float64 (``_per_sentence``), then weighted by one matrix product
    in `dtype` (float32 is exact for counts: integer weights and sums below 2^24)."""
    per_sentence = _per_sentence(groups, count, sentences, values, weights.shape[1])  # [B,count·F]
    return (weights.to(dtype) @ per_sentence.to(dtype)).view(len(weights), count, -1)


def add_weighted_sums(table: torch.Tensor, groups: torch.Tensor, sentences: torch.Tensor, values: torch.Tensor,
                      weights: torch.Tensor) -> None:
    """table[r, g] += Σ_i [groups[i] = g] · weights[r, sentences[i]] · values[i], in place: ``weighted_sums`` added
    to a [R,count,...] table (a view of a probe's state, values [N, ...] of its trailing shape; groups, sentences
    [N], weights [R,B]) in the table's dtype (float32 is exact for counts: integer weights and sums below 2^24).
    Where each replicate's [count,...] slice is contiguous (a whole replicate-major table), the product
    [R,B] × [B,count·F] is written into the table itself; otherwise (one layer's slice) it is added to it."""
    r, count = table.shape[:2]
    values = values.reshape(len(values), -1)  # [N,F]
    if not table[0].is_contiguous():  # one layer's slice
        table += weighted_sums(groups, count, sentences, values, weights, table.dtype).view(table.shape)
        return
    per_sentence = _per_sentence(groups, count, sentences, values, weights.shape[1])  # [B,count·F]
    table.view(r, -1).addmm_(weights.to(table.dtype), per_sentence.to(table.dtype))


def _per_sentence(groups: torch.Tensor, count: int, sentences: torch.Tensor, values: torch.Tensor,
                  b: int) -> torch.Tensor:
    """[B,count·F] float64 on the values' device: the items' values [N,F] summed per (sentence, group); groups,
    sentences [N] on that device."""
    summed = torch.zeros(b * count, values.shape[1], dtype=torch.float64, device=values.device)
    index_sum(summed, sentences * count + groups, values.double())  # the same order on every run
    return summed.view(b, -1)


def add_replicates(table: torch.Tensor, sentences: torch.Tensor | None, values: torch.Tensor,
                   weights: torch.Tensor | None, at: tuple = ()) -> None:
    """Replicate sums without labels (a probe's float64 state [R, *shape]): table[:, at] += Σ_i weights[:,
    sentences[i]] · values[i], values [N, ...] of the slice's shape, sentences [N] their batch rows, or None where
    values holds one row per batch row in order ([B, ...]: the product alone, the same sums), weights [R,B] (copied
    to the table's device where they are elsewhere). Nothing without weights (no replicates)."""
    if weights is None:
        return
    target = table[(slice(None), *at)]  # [R, ...]
    values, weights = values.to(table.device), weights.to(table.device)  # where given elsewhere
    if sentences is None:
        target += (weights.to(table.dtype) @ values.reshape(len(values), -1).to(table.dtype)).view(target.shape)
        return
    sentences = sentences.to(table.device)
    added = weighted_sums(sentences.new_zeros(len(sentences)), 1, sentences,
                          values.reshape(len(sentences), -1), weights, table.dtype)  # [R,1,F]
    target += added.reshape(target.shape)


def replicate_ratio(sums: torch.Tensor, counts: torch.Tensor) -> np.ndarray:
    """[R, ...] replicate scores sums / counts: counts [R] (or the leading dimensions of sums) divide every
    cell of their replicate; NaN in replicates with count 0. Computed with numpy, on one thread: sums are a strided
    view of a replicate table, and torch would spread each copy of it over its threads, whose waking costs more
    than these few MB do (on a many-core host, and on a busy one)."""
    n = counts.numpy().astype(np.float64).reshape(*counts.shape, *([1] * (sums.dim() - counts.dim())))
    with np.errstate(divide="ignore", invalid="ignore"):  # no division by 0: the NaN stands for it
        return sums.numpy().astype(np.float64) / np.where(n > 0, n, np.nan)


def attach_intervals(result: ProbeResult, hits, counts, baselines=None) -> ProbeResult:
    """Binomial intervals of a ratio-of-sums probe: for every label of `result` that the replicated ``LabelSums``
    `hits` (its main part: [labels, R, L, H]) and `counts` ([labels, R]) hold, and for "overall" (their sums
    over every label). baselines: a LabelSums of offset-baseline hits ([labels, R, offsets] replicated) for
    the paired margins. Keeps each label's best-head pivots in result.replicates (``attach_interval``) and the methods in
    result.extra["interval_method"]. Returns `result`."""
    if not hits.replicates:
        return result
    result.extra["interval_method"] = interval_method("binomial")
    record_range(result, SCORE_RANGES["binomial"])
    entries = [(name, result.labels[name], name) for name in hits.names if name in result.labels]
    for name, entry, key in [*entries, ("overall", result.overall, None)]:
        if entry.count == 0:
            continue
        count, replicate_count = counts.main(key), counts.replicated(key)
        baseline = None
        if baselines is not None:
            baseline = baselines.main(key).numpy().astype(np.float64) / float(count), \
                replicate_ratio(baselines.replicated(key), replicate_count)
        result.replicates[name] = attach_interval(entry, replicate_ratio(hits.replicated(key), replicate_count),
                                                  "binomial", baseline, effective_count(count, replicate_count))
    return result
