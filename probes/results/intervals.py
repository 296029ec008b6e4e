"""Intervals from bootstrap replicates (probes.results.bootstrap), with numpy alone: reading, comparing and showing results
imports no torch.

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

Every interval lies within what its score can be (``clip``): a head's and a best head's within the score's range
(SCORE_RANGES by kind: [0, 1] for a share, or what the probe declares, recorded in the result's "score_range"
and read back by ``ProbeResult.score_range``), a margin or a change between two results within the difference of
the two ranges (``difference_range``: [-1, 1] for two shares). The bootstrap's bounds can leave it only where
a selection's correction or a pairing subtracts a deviation from a score near its edge: clipping there drops
values the score cannot take, never one it can.
"""
from __future__ import annotations

import warnings
from statistics import NormalDist

import numpy as np

from probes.base.errors import InputError
from probes.results.probe_result import BestInterval, LabelScores, ProbeResult, best_head

LEVEL = 0.95
Range = tuple[float, float]  # (lowest, highest) a score can be; ±inf where it has no bound

# The range of each kind's scores, where the probe declares none of its own (``attach_interval``'s `bounds`)
SCORE_RANGES: dict[str, Range] = {"binomial": (0.0, 1.0), "bounded": (0.0, 1.0), "mean": (-np.inf, np.inf)}

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

def difference_range(a: Range, b: Range | None = None) -> Range:
    """The range of x − y for x in `a` and y in `b` (default `a`): (a_low − b_high, a_high − b_low); [-1, 1] for
    two shares."""
    b = a if b is None else b
    return a[0] - b[1], a[1] - b[0]


def clip(values, bounds: Range):
    """`values` (a number or an array) moved into [low, high] = `bounds`; NaN stays NaN."""
    clipped = np.clip(np.asarray(values, dtype=float), *bounds)
    return float(clipped) if clipped.ndim == 0 else clipped


def record_range(result: ProbeResult, bounds: Range, label: str = "*") -> None:
    """Declare in `result` the range of `label`'s scores ("*": every label the result names no range for), as
    ``ProbeResult.score_range`` reads it: extra["score_range"][label] = [low, high] (null for an infinite bound)."""
    result.extra.setdefault("score_range", {})[label] = [None if np.isinf(x) else float(x) for x in bounds]


def interval_method(kinds: str | dict[str, str]) -> dict:
    """What a result records under "interval_method": how its per-head (a kind of SCORE_KINDS, or {which labels:
    kind}), best-head and margin intervals are made."""
    per_head = {k: f"{v}: {SCORE_KINDS[v]}" for k, v in kinds.items()} if isinstance(kinds, dict) \
        else f"{kinds}: {SCORE_KINDS[kinds]}"
    return {"per_head": per_head, "best": BEST_METHOD, "margin": MARGIN_METHOD, "paired": PAIRED_METHOD}


def percentile_interval(replicates: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval over axis 0 of [R, ...] replicate values, NaN replicates left out (NaN where all are).

    Each bound is numpy's default ("linear") quantile of the valid values, v[⌊p⌋] + (p − ⌊p⌋)(v[⌊p⌋+1] − v[⌊p⌋])
    at p = q·(n − 1) over the n sorted values; computed for every cell at once (np.nanquantile loops over cells)."""
    values = np.asarray(replicates, dtype=float)
    shape = values.shape[1:]
    # [cells, R] each cell's replicates in a row, sorted (NaN last: a cell has one only if its last value is)
    cells = np.sort(values.reshape(len(values), -1).T, axis=1)
    holed = np.isnan(cells[:, -1]).any()
    n = (~np.isnan(cells)).sum(1) if holed else np.full(len(cells), cells.shape[1])  # [cells] valid replicates
    tail = (1 - level) / 2

    def quantile(q: float) -> np.ndarray:
        position = q * np.maximum(n - 1, 0)
        low = np.floor(position).astype(int)
        high = np.minimum(low + 1, np.maximum(n - 1, 0))
        below, above = (np.take_along_axis(cells, i[:, None], 1)[:, 0] for i in (low, high))
        with np.errstate(invalid="ignore"):  # inf − inf where a bound is infinite
            between = np.where(above == below, below, below + (position - low) * (above - below))
        return np.where(n > 0, between, np.nan).reshape(shape)

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


def effective_count(count: float, replicate_counts: np.ndarray | None) -> float:
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
        values = np.asarray(replicates, dtype=float)
        variance = (np.nanvar if np.isnan(values).any() else np.var)(values, axis=0, ddof=1)  # [...]
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
                    baseline: tuple[np.ndarray, np.ndarray] | None = None, effective: float | None = None,
                    bounds: Range | None = None) -> np.ndarray:
    """Set entry.ci_low, entry.ci_high [L,H] from its replicate scores [R,L,H] (``head_interval`` of `kind`), and
    entry.best: the best head with its selection-aware interval (BEST_METHOD) and, given baseline = (the offset
    baselines' scores [K], their replicates [R,K]), its margin over the best offset with a paired interval
    (MARGIN_METHOD); every head's margin and its paired interval go to entry.margins. effective: the instances'
    worth as independent units (``head_interval``). bounds: the score's range (default SCORE_RANGES[kind]): every
    interval is clipped to it, every margin's to ``difference_range(bounds)`` (the offsets' scores are of the same
    kind); record it in the result with ``record_range``. Returns [2R] what pairs
    with another result (``paired_delta``): the best head's own pivots (the score minus its replicate deviation),
    then the contenders' (the score minus the largest deviation among the contenders)."""
    bounds = SCORE_RANGES[kind] if bounds is None else bounds
    entry.ci_low, entry.ci_high = (clip(x, bounds) for x in head_interval(replicates, entry.scores, entry.count, kind,
                                                                          effective=effective))
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
                              clip(np.fmin(low, entry.ci_low[at]), bounds), float(entry.ci_high[at]))
    if baseline is not None:
        points, base = (np.asarray(x, dtype=float) for x in baseline)
        offset_shift = selection_shift(base, points)[:, None, None]  # [R,1,1] the offsets' winner's curse
        margins = entry.scores - float(points.max())  # [L,H] each head's margin over the best offset
        margin_range = difference_range(bounds)
        head_low, head_high = (clip(x, margin_range) for x in percentile_interval(margins - deviations + offset_shift))
        entry.margins = {"margin": margins, "margin_low": head_low, "margin_high": head_high}
        margin_low = percentile_interval(margins[at] - luckiest + offset_shift[:, 0, 0])[0]
        entry.best.margin, entry.best.margin_low, entry.best.margin_high = \
            float(margins[at]), clip(np.fmin(margin_low, head_low[at]), margin_range), float(head_high[at])
    return np.concatenate([score - deviations[:, at[0], at[1]], score - luckiest])


def paired_delta(a: ProbeResult, b: ProbeResult, label: str = "overall", level: float = LEVEL) -> tuple[float, float, float]:
    """(delta, low, high): `a`'s best-head score for `label` minus `b`'s, with its paired interval (PAIRED_METHOD:
    the sentences reweighted alike on both sides, each side's selection counted as in its best-head interval),
    clipped to the difference of the two scores' ranges (``ProbeResult.score_range``).
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
    bounds = difference_range(a.score_range(label), b.score_range(label))
    return entries[0].best.score - entries[1].best.score, clip(low, bounds), clip(high, bounds)
