"""The streaming bootstrap (probes.results.bootstrap): replicate weights, replicate sums, intervals, paired deltas.

Weights are checked against a plain-integer reimplementation of their definition and for the Poisson(1)
law; replicate sums against sums worked out by hand; intervals for coverage (over simulated corpora of
known rate the 95% interval covers it 93–97% of the time), and for invariance to the batch size and to
sharding (every replicate sum is an exact sum of integer counts, so intervals are equal, not close).
"""
from __future__ import annotations

import copy
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import probes
from helpers import CAT, CAT_COLUMNS, CAT_TO_HEADS, HI, HI_COLUMNS, HI_TO_HEADS, attention, batch, feed
from probes.results.bootstrap import POISSON_CDF, Bootstrap, poisson_quantile, replicate_ratio, replicate_weights
from probes.builtin.dep import DependencyProbe
from probes.cli import main
from probes.corpus import read_corpus
from probes.results.fitting import choose_heads
from probes.encoding.identity import sentence_key
from probes.results.intervals import (attach_interval, effective_count, head_interval, paired_delta, percentile_interval,
                              variance_count, wilson_interval)
from probes.scoring.probe import LabelSums
from probes.results.probe_result import LabelScores, ProbeResult
from probes.running.state_files import Shard, split
from reader_samples import SAMPLES, reader_format, write_sample

M64 = (1 << 64) - 1


def _mix(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def _weight(key: int, r: int, seed: int) -> int:
    """The definition in plain integers: u from the counter's hash, then the Poisson(1) quantile of u."""
    u = (_mix((_mix((key & M64) ^ _mix(seed)) + (r + 1) * 0x9E3779B97F4A7C15) & M64) >> 11) / 2 ** 53
    k, cdf = 0, math.exp(-1)
    while u >= cdf:
        k += 1
        cdf += math.exp(-1) / math.factorial(k)
    return k


# ---- weights ---------------------------------------------------------------------------------------

def test_weights_follow_their_definition():
    keys = [0, 1, 2 ** 255 + 12345, int("ab" * 32, 16)]
    for seed in (0, 7):
        w = replicate_weights(keys, 40, seed)
        assert w.shape == (40, 4) and w.dtype == np.uint8
        assert w.tolist() == [[_weight(k, r, seed) for k in keys] for r in range(40)]
    # a sentence's weights depend on its key alone: not on the other sentences of the batch, nor their order
    assert replicate_weights(keys[::-1], 40, 0).tolist() == replicate_weights(keys, 40, 0)[:, ::-1].tolist()
    assert replicate_weights(keys[2:3], 40, 0)[:, 0].tolist() == replicate_weights(keys, 40, 0)[:, 2].tolist()
    # another seed, other weights
    assert not np.array_equal(replicate_weights(keys, 40, 0), replicate_weights(keys, 40, 1))


def test_poisson_quantile_at_and_around_every_step():
    """The four comparisons and the tail's look-up count F(k) ≤ u exactly as the binary search does, at each step
    F(k) of the distribution function, just below and just above it, and at 0 and the largest u below 1."""
    steps = POISSON_CDF[POISSON_CDF < 1]
    u = np.concatenate([[0.0, np.nextafter(1.0, 0)], steps, np.nextafter(steps, 0), np.nextafter(steps, 1),
                        np.random.default_rng(0).random(100_000)])
    assert poisson_quantile(u).tolist() == np.searchsorted(POISSON_CDF, u, side="right").tolist()
    assert poisson_quantile(np.array([0.0, 0.5, 0.8, 0.95, 0.99])).tolist() == [0, 1, 2, 3, 4]  # F = .368 .736 .920 .981 .996


def test_weights_are_poisson_1():
    keys = np.random.default_rng(0).integers(0, 2 ** 63, 20000).tolist()
    w = replicate_weights(keys, 50, 0).astype(float)  # 10^6 draws
    assert abs(w.mean() - 1) < 0.005 and abs(w.var() - 1) < 0.01
    for k in range(4):  # P(w = k) = e^-1 / k!
        assert abs((w == k).mean() - math.exp(-1) / math.factorial(k)) < 0.002, k
    # replicates of one sentence, and sentences of one replicate, are uncorrelated
    assert abs(np.corrcoef(w[0], w[1])[0, 1]) < 0.03 and abs(np.corrcoef(w[:, 0], w[:, 1])[0, 1]) < 0.3


def test_bootstrap_settings_are_checked():
    for replicates, seed in ((-1, 0), (10, -1), (10, 2 ** 64), (1.5, 0), (True, 0)):
        with pytest.raises(probes.InputError):
            Bootstrap(replicates, seed)


# ---- replicate sums --------------------------------------------------------------------------------

def test_label_sums_replicas_by_hand():
    """Two sentences (rows 0, 1), three items; weights W [R=3,B=2]: replicas[k, r] = Σ_i [label_i = k] W[r, s_i] v_i."""
    table = LabelSums((3, 2), replicates=3, main=0)  # [labels, 3 ways, 2 heads], replicated: way 0
    weights = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.0, 3.0]])
    values = torch.tensor([[[1, 0], [1, 1], [0, 0]],  # label a, sentence 0
                           [[1, 1], [0, 0], [1, 1]],  # label b, sentence 1
                           [[0, 1], [0, 0], [0, 0]]])  # label a, sentence 1
    table.add(table.ids(["a", "b", "a"]), values, sentences=torch.tensor([0, 1, 1]), weights=weights)
    np.testing.assert_array_equal(table["a"], [[1, 1], [1, 1], [0, 0]])  # the sums as before
    # label a: W[:,0]·(1,0) + W[:,1]·(0,1) = (1,0), (2,1), (0,3); label b: W[:,1]·(1,1) = (0,0), (1,1), (3,3)
    np.testing.assert_array_equal(table.replicated("a"), [[1, 0], [2, 1], [0, 3]])
    np.testing.assert_array_equal(table.replicated("b"), [[0, 0], [1, 1], [3, 3]])
    np.testing.assert_array_equal(table.replicated(), [[1, 0], [3, 2], [3, 6]])
    # a shard's table merges by label name; state_dict keeps the replicas
    other = LabelSums((3, 2), replicates=3, main=0)
    other.add(other.ids(["b"]), values[1:2], sentences=torch.tensor([0]), weights=torch.tensor([[1.0], [1.0], [1.0]]))
    table.merge(other)
    np.testing.assert_array_equal(table.replicated("b"), [[1, 1], [2, 2], [4, 4]])
    copy = LabelSums((3, 2), replicates=3, main=0)
    copy.load_state_dict(table.state_dict())
    assert torch.equal(copy.replicas, table.replicas) and copy.names == table.names
    with pytest.raises(ValueError, match="replicate sums"):
        LabelSums((3, 2), replicates=4, main=0).load_state_dict(table.state_dict())


def test_label_sums_replicas_into_one_layer():
    """One layer's slice of [labels, 3 ways, L=2, H=2] (as dep adds): the replicas of that layer, a strided
    [labels, R, H] view of the state, get the weighted sums in place and the other layer none; a table of
    counts (shape (), replicas [labels, R]) too."""
    table = LabelSums((3, 2, 2), replicates=2, main=0)
    weights = torch.tensor([[1.0, 2.0], [0.0, 1.0]])  # [R=2, B=2]
    values = torch.tensor([[[1, 0], [0, 0], [0, 0]],  # label a, sentence 0
                           [[1, 1], [1, 0], [0, 0]]])  # label a, sentence 1
    table.add(table.ids(["a", "a"]), values, at=(slice(None), 1), sentences=torch.tensor([0, 1]), weights=weights)
    # layer 1, way 0: r0 = 1·(1,0) + 2·(1,1) = (3,2); r1 = 0·(1,0) + 1·(1,1) = (1,1)
    np.testing.assert_array_equal(table.replicated("a")[:, 1], [[3, 2], [1, 1]])
    np.testing.assert_array_equal(table.replicated("a")[:, 0], [[0, 0], [0, 0]])
    np.testing.assert_array_equal(table["a"][:, 1], [[2, 1], [1, 0], [0, 0]])
    counts = LabelSums((), replicates=2)
    counts.add(counts.ids(["a", "b", "a"]), torch.ones(3), sentences=torch.tensor([0, 1, 1]), weights=weights)
    np.testing.assert_array_equal(counts.replicated("a"), [1 + 2, 0 + 1])  # W[:,0] + W[:,1]: a in rows 0 and 1
    np.testing.assert_array_equal(counts.replicated("b"), [2, 1])



def test_label_sums_replicas_as_labels_arrive():
    """Twenty batches, each bringing a new label beside earlier ones (the replicate table's room grows several
    times and its rows are copied over): every label's replicas are Σ over its items of W[:, sentence] · value,
    summed by hand; the state holds them as [labels, R, ...] and loads back into a table that keeps adding."""
    rng = np.random.default_rng(0)
    r, b = 4, 3
    table = LabelSums((2, 3), replicates=r, main=0)
    expected: dict[str, np.ndarray] = {}
    for step in range(20):
        labels = [f"l{step}", *(f"l{k}" for k in rng.integers(0, step + 1, 4))]
        weights = torch.from_numpy(rng.integers(0, 4, (r, b))).float()  # [R,B]
        sentences = torch.from_numpy(rng.integers(0, b, len(labels)))  # [N]
        values = torch.from_numpy(rng.integers(0, 2, (len(labels), 2, 3))).double()  # [N, 2 ways, 3 heads]
        table.add(table.ids(labels), values, sentences=sentences, weights=weights)
        for i, label in enumerate(labels):
            added = weights[:, sentences[i]].numpy()[:, None] * values[i, 0].numpy()[None]  # [R,3] way 0
            expected[label] = expected.get(label, 0) + added
    assert table.names == [f"l{k}" for k in range(20)]
    for label, replicas in expected.items():
        np.testing.assert_array_equal(table.replicated(label), replicas)
    state = table.state_dict()
    assert state["replicas"].shape == (20, r, 3) and state["replicas"].is_contiguous()
    copy = LabelSums((2, 3), replicates=r, main=0)
    copy.load_state_dict(state)
    more = torch.ones(1, 2, 3, dtype=torch.float64)
    for t in (table, copy):
        t.add(t.ids(["new"]), more, sentences=torch.tensor([0]), weights=torch.ones(r, 1))
    assert torch.equal(copy.replicas, table.replicas) and copy.names == table.names

# ---- intervals -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_coverage_of_a_known_rate():
    """4,000 simulated corpora of 40 sentences, 1 to 5 items each, every item right with p = 0.3: the 95%
    interval of the rate (replicate hits / replicate items) covers 0.3 93–97% of the time (the binomial sd
    of that share over 4,000 corpora: 0.35 points)."""
    rng = np.random.default_rng(12)
    corpora, n, p, r = 4000, 40, 0.3, 200
    items = rng.integers(1, 6, (corpora, n))  # [M,n] items per sentence
    hits = rng.binomial(items, p)  # [M,n]
    keys = rng.integers(0, 2 ** 63, corpora * n).tolist()  # every sentence its own identity
    w = torch.from_numpy(replicate_weights(keys, r, 0).reshape(r, corpora, n)).float()  # [R,M,n]
    sums = torch.einsum("rmn,mn->rm", w, torch.from_numpy(hits).float())  # [R,M] replicate hits (exact integers)
    counts = torch.einsum("rmn,mn->rm", w, torch.from_numpy(items).float())  # [R,M] replicate items
    low, high = percentile_interval(replicate_ratio(sums, counts))  # [M] each
    covered = ((low <= p) & (p <= high)).mean()
    assert 0.93 <= covered <= 0.97, covered


def test_wilson_bounds_by_hand():
    """Wilson's score interval, z = 1.959964 (z² = 3.841459): 5 of 10 is 0.5 ± z·√(0.025 + z²/400) / (1 + z²/10) =
    0.5 ± 0.263407; 0 of 10 is [0, z²/(10 + z²)] = [0, 0.277533], 10 of 10 its mirror [10/(10 + z²), 1]; 0 of 100
    is [0, z²/(100 + z²)] = [0, 0.036994]. No count, no interval."""
    low, high = wilson_interval(np.array([0.5, 0.0, 1.0]), 10)
    np.testing.assert_allclose(low, [0.236593, 0.0, 0.722467], atol=1e-6)
    np.testing.assert_allclose(high, [0.763407, 0.277533, 1.0], atol=1e-6)
    assert wilson_interval(np.array([0.0]), 100)[1][0] == pytest.approx(0.036994, abs=1e-6)
    assert np.isnan(wilson_interval(np.array([0.5]), 0)[0]).all()


def test_no_zero_width_intervals():
    """A head right on every instance (or none) in every replicate still gets an interval of width: binomial and
    bounded scores Wilson's (n = the label's 40 instances: [40/(40 + z²), 1] = [0.912378, 1] and [0, 0.087622]); a
    bounded score with spread keeps its percentile interval; a mean of unbounded values has no such floor."""
    replicates = np.stack([np.array([[1.0, 0.0, 0.3 + 0.01 * (r % 3)]]) for r in range(20)])  # [R=20,1,3]
    scores = np.array([[1.0, 0.0, 0.31]])
    for kind in ("binomial", "bounded"):
        low, high = head_interval(replicates, scores, 40, kind)
        np.testing.assert_allclose(low[0, :2], [0.912378, 0.0], atol=1e-6)
        np.testing.assert_allclose(high[0, :2], [1.0, 0.087622], atol=1e-6)
        assert (high > low).all(), kind
    low, high = head_interval(replicates, scores, 40, "bounded")
    assert (low[0, 2], high[0, 2]) == (0.3, 0.32)  # the percentile interval where the replicates spread
    wide = head_interval(replicates, scores, 40, "binomial")  # binomial: widened to Wilson's [0.184, 0.469]
    assert wide[0][0, 2] == pytest.approx(wilson_interval(scores, 40)[0][0, 2]) and wide[1][0, 2] > 0.46
    low, high = head_interval(replicates, scores, 40, "mean")
    np.testing.assert_array_equal(low, [[1.0, 0.0, 0.3]])


def test_wilson_counts_broadcast():
    """An array of counts gives each score its own n: 5 of 10 and 0 of 100 side by side are the bounds worked out
    in test_wilson_bounds_by_hand; a count of 0 gives no interval in its cell alone."""
    low, high = wilson_interval(np.array([0.5, 0.0, 0.5]), np.array([10.0, 100.0, 0.0]))
    np.testing.assert_allclose(low[:2], [0.236593, 0.0], atol=1e-6)
    np.testing.assert_allclose(high[:2], [0.763407, 0.036994], atol=1e-6)
    assert np.isnan(low[2]) and np.isnan(high[2])


def test_variance_count_by_hand():
    """Korn & Graubard's effective sample size p(1 − p) / Var_r(p_r): replicates 0.05, 0.15, 0.05, 0.15 (a NaN
    one left out) have variance 4·0.05² / 3 = 1/300, so a score of 0.1 is worth 0.09·300 = 27 trials; capped at
    the 20 instances of a smaller label; replicates 0, 1, 0, 1 (variance 1/3) make 0.5 worth 0.75 → at least 1;
    no spread: the count."""
    spread = np.array([0.05, 0.15, 0.05, 0.15, np.nan])[:, None, None]  # [R=5,1,1]
    assert variance_count(spread, np.array([[0.1]]), 100)[0, 0] == pytest.approx(27.0)
    assert variance_count(spread, np.array([[0.1]]), 20)[0, 0] == 20.0
    assert variance_count(np.array([[0.0], [1], [0], [1]]), np.array([0.5]), 100)[0] == 1.0
    assert variance_count(np.full((4, 1), 0.3), np.array([0.3]), 100)[0] == 100.0



def test_percentile_interval_is_each_cells_linear_quantile():
    """Every cell's bounds are numpy's linear quantiles of its own valid replicates (NaN left out; NaN where a cell
    has none), with or without NaN among them, for [R] and [R, ...] replicates."""
    rng = np.random.default_rng(3)
    whole = rng.integers(0, 30, (1000, 3, 4)) / 29.0  # ties, as ratios of counts have
    holed = rng.random((57, 5))
    holed[rng.random((57, 5)) < 0.4] = np.nan
    holed[:, 2] = np.nan
    for values in (whole, whole[:, 0, 0], holed):
        low, high = percentile_interval(values)
        flat = values.reshape(len(values), -1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the cell without any value
            expected = [np.nanquantile(flat, q, axis=0).reshape(values.shape[1:]) for q in (0.025, 0.975)]
        np.testing.assert_allclose(low, expected[0], rtol=1e-12)
        np.testing.assert_allclose(high, expected[1], rtol=1e-12)
    assert np.isnan(percentile_interval(holed)[0][2])

def test_binomial_interval_keeps_the_skew_near_zero():
    """A head right on 10% of a label's 100 instances whose sentences make its replicates swing 0.05–0.15: the
    percentile interval is [0.05, 0.15], symmetric about the score, and Wilson's at n = the 100 instances,
    [0.055229, 0.174366], is narrower than the bootstrap says; Wilson's at the 27 trials the variance is worth
    (test_variance_count_by_hand), (0.1 + z²/54 ± z·√(0.09/27 + z²/2916)) / (1 + z²/27) = [0.032808, 0.266836],
    reaches further above the score (0.167) than below (0.067), as a share near 0 varies more upwards, and is
    the interval (the hull of it and the percentile one)."""
    spread = np.array([0.05, 0.15, 0.05, 0.15, np.nan])[:, None, None]
    low, high = head_interval(spread, np.array([[0.1]]), 100, "binomial")
    np.testing.assert_allclose([low[0, 0], high[0, 0]], [0.032808, 0.266836], atol=1e-6)
    np.testing.assert_allclose(np.ravel(percentile_interval(spread)), [0.05, 0.15])
    np.testing.assert_allclose(wilson_interval(np.array(0.1), 100), [0.055229, 0.174366], atol=1e-6)


def test_effective_count_and_heads_without_spread():
    """Kish's effective count n² / Var_r(n_r): replicate counts 57, 63, 57, 63 have variance 12 (ddof 1), so 60
    instances are worth 60² / 12 = 300 → capped at 60; counts 30, 90, 30, 90 (variance 1200) are worth 3. A head
    with no hit (no spread in its replicates) then gets Wilson's [0, z²/(3 + z²)] = [0, 0.561497]; a head with
    spread keeps the hull with Wilson at n = 60; without replicate counts the count itself."""
    assert effective_count(60, np.array([57.0, 63, 57, 63])) == 60.0
    assert effective_count(60, torch.tensor([30.0, 90, 30, 90])) == pytest.approx(3.0)
    assert effective_count(60, None) == 60.0 and effective_count(60, np.array([60.0, 60.0])) == 60.0
    replicates = np.stack([np.array([[0.0, 0.4 + 0.1 * (r % 2)]]) for r in range(20)])  # [R=20,1,2]
    scores = np.array([[0.0, 0.45]])
    low, high = head_interval(replicates, scores, 60, "binomial", effective=3.0)
    assert (low[0, 0], high[0, 0]) == (0.0, pytest.approx(0.561497, abs=1e-6))
    wilson = wilson_interval(scores, 60)
    assert low[0, 1] == pytest.approx(min(0.4, wilson[0][0, 1])) and high[0, 1] == pytest.approx(max(0.5, wilson[1][0, 1]))
    np.testing.assert_array_equal(head_interval(replicates, scores, 60, "binomial")[1][0, 0], wilson[1][0, 0])


def test_best_head_interval_counts_the_selection():
    """Replicates where different heads win: the best head's lower bound is the score minus the largest deviation
    among the contenders (the heads whose interval reaches its own), its upper bound its own; the margin is paired
    (the offsets' winner's curse added back); every head's margin too; the own and the contenders' pivots are
    what pairs with another result."""
    scores = np.array([[0.5, 0.4]])  # [L=1,H=2]
    replicates = np.array([[[0.5, 0.4]], [[0.4, 0.6]], [[0.6, 0.5]], [[0.5, 0.5]], [[np.nan, np.nan]]])  # [R=5,1,2]
    entry = LabelScores(count=1000, scores=scores)
    points = np.array([0.25, 0.2])  # two offsets' scores, their replicates [R,2]
    base = np.array([[0.2, 0.1], [0.3, 0.2], [0.2, 0.25], [0.4, 0.1], [np.nan, np.nan]])
    pivots = attach_interval(entry, replicates, "binomial", (points, base))
    # what pairs: head 0's own pivots (0.5 minus its deviation), then the contenders' (0.5 minus the largest)
    np.testing.assert_allclose(pivots, [0.5, 0.6, 0.4, 0.5, np.nan, 0.5, 0.3, 0.4, 0.4, np.nan])
    assert (entry.best.layer, entry.best.head, entry.best.score) == (0, 0, 0.5)
    # own intervals: head 0's replicates sort to 0.4, 0.5, 0.5, 0.6: percentiles [0.4075, 0.5925], their variance
    # 0.02 / 3, so Wilson's n = 0.25 / (0.02 / 3) = 37.5 (below the 1000 instances): 0.5 ± z·√(0.25/37.5 +
    # z²/5625) / (1 + z²/37.5) = 0.5 ± 0.152414, wider; head 1's percentiles the same, n = 0.24 / (0.02 / 3) = 36:
    # (0.4 + z²/72 ± z·√(0.24/36 + z²/5184)) / (1 + z²/36) = [0.257217, 0.562067], the hull [0.257217, 0.5925]
    np.testing.assert_allclose(entry.ci_low, [[0.347586, 0.257217]], atol=1e-6)
    np.testing.assert_allclose(entry.ci_high, [[0.652414, 0.5925]], atol=1e-6)
    # both heads contend (head 1's interval reaches 0.3476); deviations: head 0 0, −0.1, 0.1, 0; head 1 0, 0.2, 0.1,
    # 0.1: the largest 0, 0.2, 0.1, 0.1; 0.5 − those sorted 0.3, 0.4, 0.4, 0.5: 2.5% → 0.3 + 0.075·0.1
    assert entry.best.ci_low == pytest.approx(0.3075) and entry.best.ci_high == pytest.approx(0.652414, abs=1e-6)
    # offsets' winners 0, 0, 1, 0: shifts −0.05, 0.05, 0.05, 0.15. Each head's margin pivots: margin − its deviation
    # + offset shift: head 0 (0.25) 0.2, 0.4, 0.2, 0.4; head 1 (0.15) 0.1, 0.0, 0.1, 0.2
    np.testing.assert_allclose(entry.margins["margin"], [[0.25, 0.15]])
    np.testing.assert_allclose(entry.margins["margin_low"], [[0.2, 0.0075]])
    np.testing.assert_allclose(entry.margins["margin_high"], [[0.4, 0.1925]])
    # the best's margin: its lower bound from 0.25 − largest + offset shift = 0.2, 0.1, 0.2, 0.3 (2.5% → 0.1075),
    # its upper bound head 0's own
    assert entry.best.margin == pytest.approx(0.25)
    assert entry.best.margin_low == pytest.approx(0.1075) and entry.best.margin_high == pytest.approx(0.4)


def test_selected_head_fields_come_from_the_grids():
    """--select-on's block: the selected head's own interval and margin (with its paired interval) are the
    per-head grids' values at that head on the scored corpus; without baselines the margin is None."""
    scores = np.array([[0.5, 0.4]])
    replicates = np.array([[[0.5, 0.4]], [[0.4, 0.6]], [[0.6, 0.5]], [[0.5, 0.5]]])
    entry = LabelScores(count=1000, scores=scores)
    attach_interval(entry, replicates, "binomial", (np.array([0.25, 0.2]), np.array([[0.2, 0.1], [0.3, 0.2],
                                                                                   [0.2, 0.25], [0.4, 0.1]])))
    result = ProbeResult("dep", _info(), {}, {"det": entry}, LabelScores(count=1000, scores=scores),
                         baselines={"labels": {"det": {"best": 0.25, "best_offset": -1}}})
    chooser = ProbeResult("dep", _info(), {}, {"det": LabelScores(count=9, scores=np.array([[0.1, 0.9]]))},
                          LabelScores(count=9, scores=np.array([[0.1, 0.9]])))
    choose_heads(result, chooser)
    chosen = result.labels["det"].selected
    assert (chosen["layer"], chosen["head"], chosen["score_on_corpus"], chosen["score_on_selection"]) == (0, 1, 0.4, 0.9)
    assert (chosen["ci_low"], chosen["ci_high"]) == (entry.ci_low[0, 1], entry.ci_high[0, 1])
    assert chosen["margin"] == pytest.approx(0.15)
    assert (chosen["margin_low"], chosen["margin_high"]) == (entry.margins["margin_low"][0, 1],
                                                             entry.margins["margin_high"][0, 1])
    assert chosen["margin_low"] <= chosen["margin"] <= chosen["margin_high"]
    overall = result.overall.selected  # no replicates, no baseline: no interval, no margin
    assert overall["layer"] == 0 and overall["head"] == 1
    assert all(overall[k] is None for k in ("ci_low", "ci_high", "margin", "margin_low", "margin_high"))
    again = ProbeResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again.labels["det"].selected == chosen


# ---- probes: intervals in results, invariance, merge -----------------------------------------------

@pytest.fixture(scope="module")
def tiny_encoder(tiny_model):
    return probes.load_encoder(str(tiny_model("bert")))


def _intervals(result: ProbeResult) -> dict:
    return {name: (e.ci_low, e.ci_high, e.best) for name, e in [*result.labels.items(), ("overall", result.overall)]}


def _assert_same_intervals(a: ProbeResult, b: ProbeResult) -> None:
    ia, ib = _intervals(a), _intervals(b)
    assert ia.keys() == ib.keys()
    for name in ia:
        np.testing.assert_array_equal(ia[name][0], ib[name][0], err_msg=name)
        np.testing.assert_array_equal(ia[name][1], ib[name][1], err_msg=name)
        assert ia[name][2] == ib[name][2], name
        np.testing.assert_array_equal(a.replicates[name], b.replicates[name], err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dep", "trees", "pos"])
def test_intervals_do_not_depend_on_the_batch_size(name, tiny_encoder):
    runs = {bs: probes.run([name], encoder=tiny_encoder, batch_size=bs, limit=25, replicates=200, progress=False,
                           **({"fit_on": "same"} if name == "pos" else {}))[name] for bs in (1, 64)}
    assert runs[1].overall.best is not None and len(runs[1].replicates) == len(runs[1].labels) + 1
    _assert_same_intervals(runs[1], runs[64])


def test_intervals_of_merged_shards(tiny_encoder, tmp_path):
    whole = probes.run(["dep"], encoder=tiny_encoder, limit=40, replicates=200, progress=False)["dep"]
    for i in range(3):
        probes.run(["dep"], encoder=tiny_encoder, limit=40, replicates=200, progress=False, shard=(i, 3),
                   state=tmp_path)
    merged = probes.merge(tmp_path)["dep"]
    _assert_same_intervals(whole, merged)
    assert merged.info.settings["replicates"] == 200 and merged.info.settings["bootstrap_seed"] == 0


def test_merge_refuses_other_replicates(tiny_encoder, tmp_path):
    probes.run(["dep"], encoder=tiny_encoder, limit=12, replicates=20, progress=False, shard=(0, 2), state=tmp_path)
    probes.run(["dep"], encoder=tiny_encoder, limit=12, replicates=30, progress=False, shard=(1, 2), state=tmp_path)
    with pytest.raises(probes.InputError, match="replicates differs"):
        probes.merge(tmp_path)


def test_dep_replicates_by_hand():
    """dep on the hand-built batch (tests/helpers.py): head 0 gets every arc, head 1 the three arcs of "The playing
    cat" and not the root arc of "Hi". With the two sentences' weights w_cat, w_hi [R], head 1's overall replicate
    score is 3·w_cat / (3·w_cat + w_hi), head 0's is 1, and root's (one arc in each sentence) head-1 score is
    w_cat / (w_cat + w_hi); the intervals are their percentiles widened to Wilson's (4 arcs overall, 2 of root),
    head 0's (right on every arc: no spread) Wilson's at what the 4 arcs are worth as sentences, 4² / Var_r(3·w_cat
    + w_hi) (about 16 / (3² + 1²) = 1.6); the scores are those of a run without replicates."""
    r = 300
    hand = batch([CAT, HI], [CAT_COLUMNS, HI_COLUMNS], [[CAT_TO_HEADS, CAT_TO_HEADS], [HI_TO_HEADS, attention(3, {})]])
    probe, plain = DependencyProbe(1, 2, replicates=r, bootstrap_seed=5), DependencyProbe(1, 2)
    feed(probe, hand)
    feed(plain, hand)
    result = probe.compute(_info())
    np.testing.assert_array_equal(result.overall.scores, plain.compute(_info()).overall.scores)
    np.testing.assert_array_equal(result.overall.scores, [[1.0, 0.75]])
    w_cat, w_hi = replicate_weights([sentence_key(CAT), sentence_key(HI)], r, 5).astype(float).T  # [R] each
    shown = (w_cat + w_hi) > 0  # replicates where the corpus has an arc at all
    head1 = 3 * w_cat[shown] / (3 * w_cat[shown] + w_hi[shown])
    low, high = np.quantile(head1, [0.025, 0.975])
    wilson = wilson_interval(np.array([1.0, 0.75]), 4)
    effective = 16 / np.var(3 * w_cat + w_hi, ddof=1)
    assert 1.3 < effective < 1.9
    flat = wilson_interval(np.array([1.0]), effective)  # head 0 right on every arc: [n / (n + z²), 1], n = effective
    np.testing.assert_allclose(result.overall.ci_low, [[flat[0][0], min(low, wilson[0][1])]])
    np.testing.assert_allclose(result.overall.ci_high, [[1.0, max(high, wilson[1][1])]])
    # head 0's own pivots are 1 (it is right on every arc); the contenders' take off head 1's deviation where larger
    own, lucky = np.split(result.replicates["overall"], 2)
    np.testing.assert_array_equal(own, np.where(shown, 1.0, np.nan))
    np.testing.assert_allclose(lucky[shown], 1.0 - np.maximum(0.0, head1 - 0.75))
    assert (result.overall.best.layer, result.overall.best.head, result.overall.best.score) == (0, 0, 1.0)
    assert (result.overall.best.ci_low, result.overall.best.ci_high) == (pytest.approx(flat[0][0]), 1.0)
    both = (w_cat > 0) & (w_hi > 0)
    root1 = w_cat[both] / (w_cat[both] + w_hi[both])  # root needs both: replicates with a 0 weight shift the share
    root = w_cat / np.where(w_cat + w_hi > 0, w_cat + w_hi, np.nan)
    assert result.labels["root"].scores[0, 1] == 0.5
    np.testing.assert_allclose(result.labels["root"].ci_low[0, 1],
                               min(np.nanquantile(root, 0.025), wilson_interval(np.array(0.5), 2)[0]))
    assert root1.size < shown.sum()  # some replicates leave a sentence out (weight 0): that is the resampling
    # the margin over the best offset: offsets −1 and +1 get one arc of each sentence either way (amod, Hi's
    # root), the others one arc of "The playing cat" alone: the best offset's replicate score b is
    # (w_cat + w_hi) / (3·w_cat + w_hi), its shift b − 0.5. Head 0's own margin pivots are 0.5 − 0 + (b − 0.5) = b;
    # the lower bound takes off head 1's deviation too where it is larger (head 1 contends: its interval reaches 1)
    base = result.baselines["overall"]
    assert base["best"] == 0.5 and result.overall.best.margin == 0.5
    b = (w_cat[shown] + w_hi[shown]) / (3 * w_cat[shown] + w_hi[shown])
    largest = np.maximum(0.0, head1 - 0.75)
    np.testing.assert_allclose([result.overall.best.margin_low, result.overall.best.margin_high],
                               [min(np.quantile(b - largest, 0.025), np.quantile(b, 0.025)), np.quantile(b, 0.975)])


def _info():
    from probes.results.probe_result import RunInfo

    return RunInfo(model="hand", corpus=["hand"], layers=1, heads=2, sentences=2, skipped={}, settings={}, provenance={})


def test_results_keep_intervals(tiny_encoder, tmp_path, capsys):
    """JSON round trip, CSV columns, `probes show`'s best-head interval, paired deltas, and --replicates 0."""
    result = probes.run(["dep"], encoder=tiny_encoder, limit=20, replicates=100, progress=False)["dep"]
    result.save(tmp_path)
    loaded = probes.load_result(tmp_path / "dep.json")
    assert loaded.labels["det"].best == result.labels["det"].best
    assert set(loaded.replicates) == set(result.replicates)  # saved to float32 precision
    for name, values in result.replicates.items():
        np.testing.assert_array_equal(loaded.replicates[name], values.astype(np.float32))
    np.testing.assert_array_equal(loaded.overall.ci_high, result.overall.ci_high)
    frame = loaded.to_frame()
    assert {"ci_low", "ci_high"} <= set(frame.columns)
    row = frame[(frame["label"] == "overall") & (frame["layer"] == 0) & (frame["head"] == 1)].iloc[0]
    assert row.ci_low == result.overall.ci_low[0, 1] and row.ci_high == result.overall.ci_high[0, 1]
    assert main(["show", str(tmp_path / "dep.json")]) == 0
    b = result.overall.best
    out = capsys.readouterr().out
    assert f"[{b.ci_low:.3f}, {b.ci_high:.3f}]" in out
    assert "the best head's counting its selection" in out.splitlines()[0]  # the legend says which interval
    # paired: a run against itself changes by 0, inside its interval (the contenders' bounds on each side:
    # lower = A's contenders' pivots − its own, never above 0); against another seed, refused
    delta, low, high = paired_delta(result, result, "det")
    own, lucky = np.split(result.replicates["det"], 2)
    assert delta == 0.0 and low == percentile_interval(lucky - own)[0] <= 0 <= high == percentile_interval(own - lucky)[1]
    other = probes.run(["dep"], encoder=tiny_encoder, limit=20, replicates=100, bootstrap_seed=1, progress=False)["dep"]
    with pytest.raises(probes.InputError, match="bootstrap_seed differs"):
        paired_delta(result, other)
    delta, low, high = paired_delta(loaded, result, "overall")  # read back, it pairs with the run's own
    assert (delta, low, high) == pytest.approx(paired_delta(result, result, "overall"), abs=1e-6)
    plain = probes.run(["dep"], encoder=tiny_encoder, limit=20, replicates=0, progress=False)["dep"]
    with pytest.raises(probes.InputError, match="replicates differs"):
        paired_delta(plain, result)
    assert main(["run", "dep", "--limit", "3", "--replicates", "-1", "--quiet"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_analyses_with_and_without_intervals(tiny_encoder):
    """mass gives its sums per sentence: intervals per label and overall, scores those of R = 0; patterns does not
    (whole-matrix scores): no interval at all rather than an empty one."""
    runs = {r: probes.run(["mass", "patterns"], encoder=tiny_encoder, limit=12, replicates=r, progress=False)
            for r in (0, 60)}
    mass, patterns = runs[60]["mass"], runs[60]["patterns"]
    assert set(mass.replicates) == {*mass.labels, "overall"} and mass.overall.best is not None
    for name, entry in [*mass.labels.items(), ("overall", mass.overall)]:
        plain = runs[0]["mass"].overall if name == "overall" else runs[0]["mass"].labels[name]
        np.testing.assert_array_equal(entry.scores, plain.scores, err_msg=name)
        assert np.all(entry.ci_low <= entry.ci_high), name
    assert patterns.replicates == {} and patterns.overall.best is None and patterns.overall.ci_low is None


def test_compare_gives_paired_intervals(tiny_encoder, tmp_path, capsys):
    """`probes compare A B` pairs the two runs' replicates: each label's interval is paired_delta(B, A) of the
    results read back; A against itself changes by exactly 0 (flat); another seed cannot pair and says so."""
    from probes.tools.compare.results_diff import compare_results

    runs = {name: probes.run(["dep"], encoder=tiny_encoder, limit=25, replicates=200, progress=False, pool=pool,
                             bootstrap_seed=seed)["dep"]
            for name, pool, seed in (("a", "mean-sum", 0), ("b", "first", 0), ("c", "first", 1))}
    for name, result in runs.items():
        result.save(tmp_path / name)
    comparison = compare_results(tmp_path / "a", tmp_path / "b")
    loaded = {name: probes.load_result(tmp_path / name / "dep.json") for name in "ab"}
    paired = [d for d in comparison.labels if d.paired is not None]
    assert {d.label for d in paired} == set(loaded["a"].replicates) & set(loaded["b"].replicates)
    for d in paired:
        assert d.paired == paired_delta(loaded["b"], loaded["a"], d.label)[1:]
        row = d.row()
        assert (row["delta_low"], row["delta_high"]) == d.paired and row["flat"] == (d.paired[0] <= 0 <= d.paired[1])
    same = compare_results(tmp_path / "a", tmp_path / "a")
    assert all(d.paired[0] <= 0 <= d.paired[1] and d.flat for d in same.labels if d.paired is not None)
    other = compare_results(tmp_path / "a", tmp_path / "c")
    assert all(d.paired is None for d in other.labels)
    assert any("no paired intervals: cannot pair dep results: bootstrap_seed differs" in n for n in other.notes)
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--all-labels"]) == 0
    out = capsys.readouterr().out
    assert "95% interval" in out and "paired bootstrap interval" in out


def test_figures_dot_heads_whose_interval_clears_the_baseline(tiny_encoder):
    """The overview and per-label heatmaps dot the heads whose ci_low lies above the label's best offset baseline."""
    from probes.results.presentation import Presentation, above_baseline

    result = probes.run(["dep"], encoder=tiny_encoder, limit=25, replicates=100, progress=False)["dep"]
    for name, entry in [*result.labels.items(), ("overall", result.overall)]:
        base = result.baselines["overall"] if name == "overall" else result.baselines["labels"][name]
        expected = np.nan_to_num(entry.ci_low, nan=-np.inf) > base["best"]
        np.testing.assert_array_equal(above_baseline(result, name), expected)
    result.overall.ci_low = np.full_like(result.overall.ci_low, 2.0)  # every head above: every head dotted
    assert above_baseline(result, "overall").all()
    assert set(Presentation.figures(result, "labels")) >= {"dep.png", "dep-overall.png"}
    plain = probes.run(["dep"], encoder=tiny_encoder, limit=25, replicates=0, progress=False)["dep"]
    assert above_baseline(plain, "overall") is None


def test_seg_replicates_add_up_to_its_counts(tiny_encoder, monkeypatch):
    """seg's word F1 per replicate from per-sentence parts: with every sentence weighing 1 in every replicate,
    each replicate's F1 is the point F1 of every head exactly (the parts add up to tally's counts), so the best
    head's pivot replicates are its score and each head's interval is Wilson's at its score."""
    from probes.results.bootstrap import Bootstrap

    def ones(self, batch):
        return None if not self.replicates else torch.ones(self.replicates, len(batch.sentences), dtype=torch.float64)

    monkeypatch.setattr(Bootstrap, "weights", ones)
    result = probes.run(["seg"], encoder=tiny_encoder, limit=25, replicates=3, progress=False)["seg"]
    f1 = result.overall.scores  # [L,H]
    assert np.isfinite(f1).all()
    # no spread in the replicates: F1 (bounded) gets Wilson's interval at the score, n = the gold words, and so
    # does each word-length label (binomial: the hull of the flat percentile interval and Wilson's)
    for name, entry in [*result.labels.items(), ("overall", result.overall)]:
        if entry.count:
            low, high = wilson_interval(entry.scores, entry.count)
            np.testing.assert_array_equal(entry.ci_low, low, err_msg=name)
            np.testing.assert_array_equal(entry.ci_high, high, err_msg=name)
    np.testing.assert_array_equal(result.replicates["overall"], np.full(6, np.nanmax(f1)))


@pytest.mark.slow
def test_seg_intervals_do_not_depend_on_the_batch_size(tiny_encoder):
    runs = [probes.run(["seg"], encoder=tiny_encoder, limit=25, batch_size=bs, replicates=200, progress=False)["seg"]
            for bs in (1, 64)]
    np.testing.assert_array_equal(runs[0].overall.ci_low, runs[1].overall.ci_low)
    np.testing.assert_array_equal(runs[0].overall.ci_high, runs[1].overall.ci_high)
    low, high = runs[0].overall.ci_low, runs[0].overall.ci_high
    assert (low <= high).all() and (low < high).any()
    for name, entry in runs[0].labels.items():
        if entry.count:
            np.testing.assert_array_equal(entry.ci_low, runs[1].labels[name].ci_low)


# ---- the sentence identity: what the probes read, not how the file was written ---------------------

def _ewt_blocks(shared_corpora, n: int) -> list[str]:
    """The first `n` sentence blocks of UD English EWT dev (LF, no trailing blank line), its second sentence
    repeated at the end under another sent_id: the same content twice."""
    text = (shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8")
    blocks = text.split("\n\n")[:n]
    return blocks + [blocks[1].replace("# sent_id = ", "# sent_id = again-", 1)]


def _with_empty_node(block: str) -> str:
    """The block with a valid empty node after its first word (CoNLL-U's "1.1"), which no probe reads."""
    lines = block.split("\n")
    first = next(i for i, line in enumerate(lines) if line.split("\t")[0] == "1")
    lines.insert(first + 1, "1.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t1:conj\tCopyOf=1")
    return "\n".join(lines)


def _with_comments(block: str, i: int) -> str:
    """Another sent_id and two more comments (``# text`` kept: the CoNLL-U reader reads it into ann)."""
    block = block.replace("# sent_id = ", f"# newpar id = p{i}\n# sent_id = other-{i}-", 1)
    return block.replace("# text = ", "# note = rewritten\n# text = ", 1)


def _variants(shared_corpora, tmp_path, n: int = 40) -> dict[str, Path]:
    blocks = _ewt_blocks(shared_corpora, n)
    lf = "\n\n".join(blocks) + "\n\n"
    texts = {
        "lf": lf,
        "crlf": lf.replace("\n", "\r\n"),
        "bom": "\ufeff" + lf,
        "comments": "# global.columns = ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC\n"
                    + "\n\n".join(_with_comments(b, i) for i, b in enumerate(blocks)) + "\n\n\n",
        "empty_node": "\n\n".join(_with_empty_node(b) if i % 3 == 0 else b for i, b in enumerate(blocks)) + "\n\n",
    }
    texts["all"] = "\ufeff" + "\n\n".join(_with_empty_node(_with_comments(b, i)) for i, b in enumerate(blocks)
                                          ).replace("\n", "\r\n") + "\r\n\r\n"
    paths = {}
    for name, text in texts.items():
        paths[name] = tmp_path / f"{name}-variant.conllu"
        paths[name].write_bytes(text.encode("utf-8"))
    return paths


@pytest.mark.slow
def test_line_endings_bom_comments_and_empty_nodes_change_no_interval(shared_corpora, minilm, tmp_path):
    """Issue 24: the same 40 EWT sentences (and one of them again) written with LF, CR LF, a BOM, other sent_ids
    and more comments, empty nodes, and all of these at once: the same words and annotation, so every score,
    every interval cell, every best head's interval and every replicate array are IDENTICAL; the shard split
    and the corpus digest too. The sentences do stand at other lines of other files (what the identity was
    made of before)."""
    paths = _variants(shared_corpora, tmp_path)
    read = {name: read_corpus([str(p)]).sentences for name, p in paths.items()}
    assert all(len(s) == 41 for s in read.values())
    for name, sentences in read.items():
        assert [(s.words, s.ann) for s in sentences] == [(s.words, s.ann) for s in read["lf"]], name
    assert [s.line for s in read["comments"]] != [s.line for s in read["lf"]]
    assert {s.sent_id for s in read["comments"]}.isdisjoint(s.sent_id for s in read["lf"])
    splits = {name: split(sentences, Shard(1, 3)) for name, sentences in read.items()}
    assert len({(s.digest, s.corpus_digest) for s in splits.values()}) == 1
    assert len({tuple(tuple(s.words) for s in sp.sentences) for sp in splits.values()}) == 1

    results = {name: probes.run(["dep"], encoder=minilm, corpus=str(p), replicates=200, progress=False)["dep"]
               for name, p in paths.items()}
    base = results["lf"]
    for name, result in results.items():
        assert set(result.replicates) == set(base.replicates) and len(base.replicates) > 10, name
        for label, values in base.replicates.items():
            np.testing.assert_array_equal(result.replicates[label], values, err_msg=f"{name} {label}")
        entries = [("overall", base.overall, result.overall),
                   *((k, v, result.labels[k]) for k, v in base.labels.items())]
        assert set(result.labels) == set(base.labels), name
        for label, want, got in entries:
            for grid in ("scores", "ci_low", "ci_high"):
                np.testing.assert_array_equal(getattr(got, grid), getattr(want, grid), err_msg=f"{name} {label} {grid}")
            assert got.best == want.best and got.count == want.count, (name, label)
        written, expected = (_without_origin(r.to_json()) for r in (result, base))
        assert written == expected, name


def _without_origin(data: dict) -> dict:
    """A result's JSON without where its sentences came from: the corpus' path, the provenance, the sent_ids
    of the per-sentence views."""
    data = copy.deepcopy(data)  # it shares the result's own dicts
    for key in ("corpus", "provenance"):
        del data[key]
    for view in data["sentence_views"]["sentences"]:
        del view["sent_id"]
    return data


def test_the_key_is_the_words_and_their_occurrence():
    """The words and the occurrence change the key; the file, line, sent_id and annotation (which follows the
    reader's options) do not. A corpus stream numbers sentences with the same words 0, 1, ... so each gets its
    own key (its own replicate weights), whatever their annotation."""
    from probes.corpus.sentence import Sentence
    from probes.encoding.identity import Occurrences

    s = Sentence(["Hi", "there"], {"head": [0, 1], "deprel": ["root", "advmod"]}, "a", "x.conllu", 3)
    same = [Sentence(["Hi", "there"], {"head": [0, 1], "deprel": ["root", "advmod:tmod"]}, "b", "y.conllu", 70),
            Sentence(["Hi", "there"], {}, None, "", 0)]
    assert {sentence_key(x) for x in same} == {sentence_key(s)}
    others = [Sentence(["Hi", "There"]), Sentence(["Hithere"]), Sentence(["Hi", "there", "."]),
              Sentence(["Hi there"]), Sentence(["Hi", "there"], occurrence=1)]
    assert len({sentence_key(s), *(sentence_key(o) for o in others)}) == len(others) + 1
    stream = [Sentence(["Thanks", "."]), s, Sentence(["Thanks", "."], {"head": [0, 1]}), same[0],
              Sentence(["Thanks", "."])]
    numbering = Occurrences()
    keys = [numbering.key(x) for x in stream]
    assert [x.occurrence for x in stream] == [0, 0, 1, 1, 2]
    assert len(set(keys)) == 5 and keys == [sentence_key(x) for x in stream]
    # the order of the stream changes which copy gets which number, not the set of keys
    again = [Sentence(["Thanks", "."]), same[0], s, Sentence(["Thanks", "."]), Sentence(["Thanks", "."])]
    numbering = Occurrences()
    assert sorted(numbering.key(x) for x in again) == sorted(keys)



def test_a_remembered_key_follows_the_words_and_the_occurrence():
    """A sentence remembers its key once made (the run's reading makes it, the bootstrap reads it again): a change
    of its occurrence or of its words, even in place, gives the key of what it now is."""
    from probes.corpus.sentence import Sentence

    s = Sentence(["Hi", "there"])
    key = sentence_key(s)
    assert sentence_key(s) == key and s.identity[2] == key and s == Sentence(["Hi", "there"])
    s.occurrence = 1
    assert sentence_key(s) == sentence_key(Sentence(["Hi", "there"], occurrence=1)) != key
    s.words[1] = "here"
    assert sentence_key(s) == sentence_key(Sentence(["Hi", "here"], occurrence=1))

@pytest.mark.parametrize("name", sorted(set(SAMPLES) - {"spacy"}))  # spacy: a pipeline (tests/test_spacy_annotate.py)
def test_every_reader_reads_the_same_content_through_a_bom_and_cr_lf(name, tmp_path):
    """Each reader's sample (tests/reader_samples.py) written with a byte-order mark and CR LF line endings: the
    same words and annotation, the same content digests, so the same keys."""
    from probes.encoding.identity import content_digest

    files, _ = SAMPLES[name]
    plain = read_corpus([str(p) for p in write_sample(tmp_path / "a", name)], reader_format(name))
    marked = read_corpus([str(p) for p in write_sample(tmp_path / "b", name, {
        rel: b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n") for rel, data in files.items()})], reader_format(name))
    assert plain.sentences
    assert [(s.words, s.ann) for s in marked.sentences] == [(s.words, s.ann) for s in plain.sentences]
    assert [content_digest(s) for s in marked.sentences] == [content_digest(s) for s in plain.sentences]
    assert (marked.skipped, marked.notes) == (plain.skipped, plain.notes)
