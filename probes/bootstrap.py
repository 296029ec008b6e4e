"""Streaming bootstrap: per-sentence Poisson(1) replicate weights, replicate sums, percentile intervals.

Every score is a ratio of sums over sentences (hits / arcs, units right / units). Replicate r reweights
sentence s by w[r, s] ~ Poisson(1), drawn from a counter-based hash of (seed, the sentence's identity
key, r) (probes.identity.sentence_key): no state, no order. So the replicate sums are additive like the
rest of a probe's state (shards merge by adding, any batching gives the same sums), and two runs over
one corpus (two checkpoints) reweight each sentence alike: every comparison of them is paired.

Intervals (95%; replicates in which a label has no instance are left out) never have width 0 where the
score is not exactly determined: each head's interval is the percentile interval over the R replicates
widened to the Wilson score interval where the score is a binomial share (n = what its instances are worth as
independent trials, from the replicates' variance: Korn & Graubard's effective sample size), or replaced by it
where a bounded mean's replicates have no spread (SCORE_KINDS, ``head_interval``). A best head's interval accounts
for its selection (BEST_METHOD): the head picked best may be the luckiest of several close heads, so its
lower bound is the score minus the largest replicate deviation among the heads in contention (97.5th
percentile); its upper bound is its own (selection only pushes a score up). The margin over the label's
best offset baseline is paired the same way (MARGIN_METHOD), and so are two results (``paired_delta``,
PAIRED_METHOD): the change's lower bound pairs A's contenders' deviation with B's own, its upper bound the
reverse.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np
import torch

from probes.batching import Batch
from probes.choices import DEFAULT_SEED, MASK64, check_bootstrap
from probes.errors import InputError
from probes.identity import sentence_key
from probes.results import BestInterval, LabelScores, ProbeResult, best_head

LEVEL = 0.95
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

    def weights(self, batch: Batch) -> torch.Tensor | None:
        """[R,B] float64 replicate weights of the batch's sentences (made once per batch), or None without replicates."""
        if not self.replicates:
            return None
        return batch.memo(("bootstrap.weights", self.replicates, self.seed), lambda: torch.from_numpy(
            replicate_weights([sentence_key(s) for s in batch.sentences], self.replicates, self.seed)).double())


def weighted_sums(groups: torch.Tensor, count: int, sentences: torch.Tensor, values: torch.Tensor,
                  weights: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """[R,count,F] replicate sums of items: Σ_i [groups[i] = g] · weights[r, sentences[i]] · values[i, f].

    groups, sentences [N]: each item's group (label) and batch row; values [N,F]; weights [R,B]. The items
    are first summed per (group, sentence) in float64 (``_per_group``), then weighted by one matrix product in
    `dtype` (float32 is exact for counts: integer weights and sums below 2^24)."""
    b = weights.shape[1]
    per_sentence = _per_group(groups, count, sentences, values, b).transpose(0, 1).reshape(b, -1)  # [B,count·F]
    return (weights.to(dtype) @ per_sentence.to(dtype)).view(len(weights), count, -1)


def add_weighted_sums(table: torch.Tensor, groups: torch.Tensor, sentences: torch.Tensor, values: torch.Tensor,
                      weights: torch.Tensor) -> None:
    """table[g, r, f] += Σ_i [groups[i] = g] · weights[r, sentences[i]] · values[i, f], in place: ``weighted_sums``
    written straight into a [count,R,F] table (a view of a probe's state), one batched product in the table's
    dtype with no [R,count,F] result to copy (float32 is exact for counts: integer weights and sums below 2^24).
    groups, sentences [N], values [N,F], weights [R,B]."""
    count, b = table.shape[0], weights.shape[1]
    per_group = _per_group(groups, count, sentences, values, b)  # [count,B,F]
    table.baddbmm_(weights.to(table.dtype).expand(count, -1, -1), per_group.to(table.dtype))


def _per_group(groups: torch.Tensor, count: int, sentences: torch.Tensor, values: torch.Tensor,
               b: int) -> torch.Tensor:
    """[count,B,F] float64: the items' values [N,F] summed per (group, sentence); groups, sentences [N]."""
    summed = torch.zeros(count * b, values.shape[1], dtype=torch.float64)
    summed.index_add_(0, groups.cpu() * b + sentences.cpu(), values.cpu().double())
    return summed.view(count, b, -1)


def add_replicates(table: torch.Tensor, sentences: torch.Tensor, values: torch.Tensor, weights: torch.Tensor | None,
                   at: tuple = ()) -> None:
    """Replicate sums without labels (a probe's float64 state [R, *shape]): table[:, at] += Σ_i weights[:,
    sentences[i]] · values[i], values [N, ...] of the slice's shape, sentences [N] their batch rows. Nothing
    without weights (no replicates)."""
    if weights is None:
        return
    target = table[(slice(None), *at)]  # [R, ...]
    added = weighted_sums(torch.zeros(len(sentences), dtype=torch.long), 1, sentences,
                          values.reshape(len(sentences), -1), weights, table.dtype)  # [R,1,F]
    target += added.reshape(target.shape)


# ---- intervals ------------------------------------------------------------------------------------

# How each kind of score gets its per-head interval (``head_interval``; the results' "interval_method")
SCORE_KINDS = {
    "binomial": "hits / count (each instance right or not): the hull of the percentile bootstrap interval and the "
                "Wilson score interval of the score p with n = what the instances are worth as independent trials, "
                "p(1 - p) / the variance of the replicate scores, at most the label's instances (Korn & Graubard's "
                "effective sample size: Wilson's skew where p is near 0 or 1, the sentences' clustering from the "
                "bootstrap); where the replicates have no spread (a head right on every instance or on none), "
                "n = count² / the variance of the replicate counts (Kish's effective sample size; never width 0)",
    "bounded": "a mean of values in [0, 1]: the percentile bootstrap interval, or where its replicates have no "
               "spread the Wilson score interval of the mean with n = the instances (no variable in [0, 1] of "
               "mean p varies more than a binomial one)",
    "mean": "a mean of unbounded values: the percentile bootstrap interval (width 0 only where every replicate "
            "gives the same mean)",
}
BEST_METHOD = ("contenders' bound: the best head's own interval, its lower bound taken down to the score minus the "
               "97.5th percentile of the largest replicate deviation (replicate score minus score) among the heads "
               "whose interval reaches the best head's (the contenders), so that a lucky winner is covered")
MARGIN_METHOD = ("paired: the margin's lower bound as the best head's (the contenders' largest deviation), the "
                 "offsets' winner's curse added back; its upper bound the best head's own paired margin interval's")
PAIRED_METHOD = ("contenders' bounds, paired: the change's lower bound the 2.5th percentile of A's contenders' "
                 "pivots minus B's own, its upper bound the 97.5th of A's own minus B's contenders' (pivot: the score "
                 "minus a replicate deviation); where that has width 0, the difference of the two best-head intervals")

def interval_method(kinds: str | dict[str, str]) -> dict:
    """What a result records under "interval_method": how its per-head (a kind of SCORE_KINDS, or {which labels:
    kind}), best-head and margin intervals are made."""
    per_head = {k: f"{v}: {SCORE_KINDS[v]}" for k, v in kinds.items()} if isinstance(kinds, dict) \
        else f"{kinds}: {SCORE_KINDS[kinds]}"
    return {"per_head": per_head, "best": BEST_METHOD, "margin": MARGIN_METHOD, "paired": PAIRED_METHOD}


def replicate_ratio(sums: torch.Tensor, counts: torch.Tensor) -> np.ndarray:
    """[R, ...] replicate scores sums / counts: counts [R] (or the leading dimensions of sums) divide every
    cell of their replicate; NaN in replicates with count 0."""
    counts = counts.double().reshape(*counts.shape, *([1] * (sums.dim() - counts.dim())))
    return (sums.double() / counts.where(counts > 0, torch.nan)).numpy()


def percentile_interval(replicates: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval over axis 0 of [R, ...] replicate values, NaN replicates left out (NaN where all are).

    Each bound is numpy's default ("linear") quantile of the valid values, v[⌊p⌋] + (p − ⌊p⌋)(v[⌊p⌋+1] − v[⌊p⌋])
    at p = q·(n − 1) over the n sorted values; computed for every cell at once (np.nanquantile loops over cells)."""
    values = np.sort(np.asarray(replicates, dtype=float), axis=0)  # NaN sorts last
    n = (~np.isnan(values)).sum(0)  # [...] valid replicates per cell
    tail = (1 - level) / 2

    def quantile(q: float) -> np.ndarray:
        position = q * np.maximum(n - 1, 0)
        low = np.floor(position).astype(int)
        high = np.minimum(low + 1, np.maximum(n - 1, 0))
        below, above = (np.take_along_axis(values, i[None], 0)[0] for i in (low, high))
        with np.errstate(invalid="ignore"):  # inf − inf where a bound is infinite
            between = np.where(above == below, below, below + (position - low) * (above - below))
        return np.where(n > 0, between, np.nan)

    return quantile(tail), quantile(1 - tail)


def wilson_interval(scores: np.ndarray, count: float | np.ndarray,
                    level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval of proportions `scores` (any shape) of `count` trials (a number, or an array
    broadcast with the scores): (p + z²/2n ± z·√(p(1−p)/n + z²/4n²)) / (1 + z²/n), z the normal quantile of
    (1 + level)/2; [0, z²/(n + z²)] at p = 0. NaN where the score is NaN or the count is not above 0."""
    p = np.asarray(scores, dtype=float)
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    n, z2 = np.asarray(count, dtype=float), z * z
    n = np.broadcast_to(np.where(n > 0, n, np.nan), np.broadcast_shapes(p.shape, n.shape))
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    with np.errstate(invalid="ignore"):  # p outside [0, 1] cannot happen; NaN passes through
        half = z * np.sqrt(np.clip(p * (1 - p), 0, None) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def effective_count(count: float, replicate_counts: np.ndarray | torch.Tensor | None) -> float:
    """How many independent units `count` instances are worth, from their replicate counts [R] (Kish's effective
    sample size under cluster sampling): count² / Var_r(count_r). With Poisson(1) sentence weights, Var_r(count_r)
    estimates Σ_s n_s², n_s the instances in sentence s, so one instance a sentence gives `count` and n instances
    in each of m sentences gives m (the instances of a sentence counted as one unit: right or wrong together at
    worst). `count` itself where no replicate counts are given or they have no spread; never below 1."""
    if replicate_counts is None:
        return float(count)
    values = np.asarray(replicate_counts, dtype=float).reshape(-1)
    values = values[np.isfinite(values)]
    spread = float(values.var(ddof=1)) if len(values) > 1 else 0.0
    return float(count) if spread <= 0 else float(np.clip(float(count) ** 2 / spread, 1.0, float(count)))


def variance_count(replicates: np.ndarray, scores: np.ndarray, count: float) -> np.ndarray:
    """[...] How many independent trials each binomial score p of [...] `scores` is worth, from its replicates
    [R, ...] (Korn & Graubard's effective sample size): p(1 − p) / Var_r(p_r) (ddof 1, NaN replicates left out),
    between 1 and `count` (the instances); `count` where the replicates have no spread or fewer than two values.
    A head whose instances err together in a sentence (pos: the words of a sentence) is worth fewer trials
    than it has instances; the Wilson interval at that n keeps the binomial's skew near 0 and 1 (its variance
    grows with p below 1/2), which the percentile interval of a chunk that came out low by chance lacks."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a cell with fewer than two replicates: NaN
        variance = np.nanvar(np.asarray(replicates, dtype=float), axis=0, ddof=1)  # [...]
    p = np.asarray(scores, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        worth = np.clip(p * (1 - p) / variance, 1.0, float(count))
    return np.where((variance > 0) & np.isfinite(worth), worth, float(count))


def head_interval(replicates: np.ndarray, scores: np.ndarray, count: float, kind: str,
                  level: float = LEVEL, effective: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each head's interval of its score (SCORE_KINDS[kind]): replicates [R,L,H], scores [L,H], count the
    label's instances, `effective` what they are worth as independent units (``effective_count``; default
    `count`), the n of the Wilson interval where the replicates have no spread (a head right on all instances
    or none: the sentences hold no information on how often it errs, and their instances err together).
    Where a binomial score's replicates spread, Wilson's n is ``variance_count``. Returns (low, high) [L,H]."""
    low, high = percentile_interval(replicates, level)
    if kind == "mean":
        return low, high
    flat = ~(high > low)  # no spread (or no replicate)
    flat_count = count if effective is None else min(effective, count)
    spread_count = variance_count(replicates, scores, count) if kind == "binomial" else count
    floor_low, floor_high = wilson_interval(scores, np.where(flat, flat_count, spread_count), level)
    if kind == "binomial":
        return np.fmin(low, floor_low), np.fmax(high, floor_high)
    return np.where(flat, floor_low, low), np.where(flat, floor_high, high)


def row_max(values: np.ndarray) -> np.ndarray:
    """[R]: the largest of each row of [R, ...] values, NaN left out (NaN where a row has none)."""
    flat = values.reshape(len(values), -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row without any value: NaN
        return np.nanmax(flat, axis=1) if flat.shape[1] else np.full(len(flat), np.nan)


def selection_shift(replicates: np.ndarray, points: np.ndarray) -> np.ndarray:
    """[R]: in each replicate of [R,K] candidates, the winner's replicate value minus its value on the corpus
    (`points` [K]): the bootstrap's copy of the optimism of taking the best of K. Among candidates tied at a
    replicate's top, the winner is the one best on the corpus (no order matters). NaN where a replicate has no
    value."""
    values = replicates.reshape(len(replicates), -1)  # [R,K]
    top = row_max(values)  # [R]
    points = np.asarray(points, dtype=float).reshape(1, -1)  # [1,K]
    tied = values == top[:, None]  # [R,K] the replicate's winners (none where its top is NaN)
    winner_point = np.where(tied, points, -np.inf).max(1, initial=-np.inf)  # [R]
    return np.where(np.isfinite(top), top - winner_point, np.nan)


def attach_interval(entry: LabelScores, replicates: np.ndarray, kind: str = "binomial",
                    baseline: tuple[np.ndarray, np.ndarray] | None = None, effective: float | None = None) -> np.ndarray:
    """Set entry.ci_low, entry.ci_high [L,H] from its replicate scores [R,L,H] (``head_interval`` of `kind`), and
    entry.best: the best head with its selection-aware interval (BEST_METHOD) and, given baseline = (the offset
    baselines' scores [K], their replicates [R,K]), its margin over the best offset with a paired interval
    (MARGIN_METHOD); every head's margin and its paired interval go to entry.margins. effective: the instances'
    worth as independent units (``head_interval``). Returns [2R] what pairs
    with another result (``paired_delta``): the best head's own pivots (the score minus its replicate deviation),
    then the contenders' (the score minus the largest deviation among the contenders)."""
    entry.ci_low, entry.ci_high = head_interval(replicates, entry.scores, entry.count, kind, effective=effective)
    named = best_head(entry.scores)
    if not np.isfinite(named.score):
        return np.full(len(replicates), np.nan)
    score = named.score  # the top score; its head is named only where best_head names one (no tie, not 0)
    at = named.layer, named.head
    deviations = replicates - entry.scores  # [R,L,H] each head's replicate score minus its score
    contenders = entry.ci_high >= entry.ci_low[at]  # [L,H] the heads whose interval reaches the best head's
    luckiest = row_max(deviations[:, contenders])  # [R] the largest deviation of a contender
    low = percentile_interval(score - luckiest)[0]
    entry.best = BestInterval(named.layer if named.found else None, named.head if named.found else None, score,
                              float(np.fmin(low, entry.ci_low[at])), float(entry.ci_high[at]))
    if baseline is not None:
        points, base = (np.asarray(x, dtype=float) for x in baseline)
        offset_shift = selection_shift(base, points)[:, None, None]  # [R,1,1] the offsets' winner's curse
        margins = entry.scores - float(points.max())  # [L,H] each head's margin over the best offset
        head_low, head_high = percentile_interval(margins - deviations + offset_shift)
        entry.margins = {"margin": margins, "margin_low": head_low, "margin_high": head_high}
        margin_low = percentile_interval(margins[at] - luckiest + offset_shift[:, 0, 0])[0]
        entry.best.margin, entry.best.margin_low, entry.best.margin_high = \
            float(margins[at]), float(np.fmin(margin_low, head_low[at])), float(head_high[at])
    return np.concatenate([score - deviations[:, at[0], at[1]], score - luckiest])


def attach_intervals(result: ProbeResult, hits, counts, baselines=None) -> ProbeResult:
    """Binomial intervals of a ratio-of-sums probe: for every label of `result` that the replicated ``LabelSums``
    `hits` (its main part: [labels, R, L, H]) and `counts` ([labels, R]) hold, and for "overall" (their sums
    over every label). baselines: a LabelSums of offset-baseline hits ([labels, R, offsets] replicated) for
    the paired margins. Keeps each label's best-head pivots in result.replicates (``attach_interval``) and the methods in
    result.extra["interval_method"]. Returns `result`."""
    if not hits.replicates:
        return result
    result.extra["interval_method"] = interval_method("binomial")
    entries = [(name, result.labels[name], name) for name in hits.names if name in result.labels]
    for name, entry, key in [*entries, ("overall", result.overall, None)]:
        if entry.count == 0:
            continue
        count, replicate_count = counts.main(key), counts.replicated(key)
        baseline = None
        if baselines is not None:
            baseline = (baselines.main(key).double() / float(count)).numpy(), \
                replicate_ratio(baselines.replicated(key), replicate_count)
        result.replicates[name] = attach_interval(entry, replicate_ratio(hits.replicated(key), replicate_count),
                                                  "binomial", baseline, effective_count(count, replicate_count))
    return result


def paired_delta(a: ProbeResult, b: ProbeResult, label: str = "overall", level: float = LEVEL) -> tuple[float, float, float]:
    """(delta, low, high): `a`'s best-head score for `label` minus `b`'s, with its paired interval (PAIRED_METHOD:
    the sentences reweighted alike on both sides, each side's selection counted as in its best-head interval).
    Both results must carry replicates (``ProbeResult.replicates``: kept
    by the run, saved in its JSON to float32 precision, rebuilt by `probes merge`) of the same number, seed,
    interval method and corpus; InputError otherwise."""
    for setting in ("replicates", "bootstrap_seed"):
        if a.info.settings.get(setting) != b.info.settings.get(setting):
            raise InputError(f"cannot pair {a.probe} results: {setting} differs "
                             f"({a.info.settings.get(setting)} and {b.info.settings.get(setting)})")
    methods = [r.extra.get("interval_method", {}).get("paired") for r in (a, b)]
    if methods[0] != methods[1]:
        raise InputError(f"cannot pair {a.probe} results: their best-head replicates were made differently "
                         "(results of another version; run both again)")
    corpora = [sorted((r.info.provenance.get("corpus_sha256") or {}).values()) or r.info.corpus for r in (a, b)]
    if corpora[0] != corpora[1]:
        raise InputError(f"cannot pair {a.probe} results of different corpora ({a.info.corpus} and {b.info.corpus})")
    missing = [r.info.model for r in (a, b) if label not in r.replicates]
    if missing:
        raise InputError(f"no bootstrap replicates of {a.probe} label {label!r} for {missing[0]} (a run with "
                         "--replicates 0, results of an older version, or a label without instances)")
    entries = [a.overall if label == "overall" else a.labels[label], b.overall if label == "overall" else b.labels[label]]
    (own_a, lucky_a), (own_b, lucky_b) = (np.split(r.replicates[label], 2) for r in (a, b))  # [R] each
    low = percentile_interval(lucky_a - own_b, level)[0]
    high = percentile_interval(own_a - lucky_b, level)[1]
    if not high > low:  # no spread (both best heads right on every instance, say): the unpaired difference
        best_a, best_b = entries[0].best, entries[1].best
        low, high = best_a.ci_low - best_b.ci_high, best_a.ci_high - best_b.ci_low
    return entries[0].best.score - entries[1].best.score, float(low), float(high)
