"""Rank correlation over heads between any layers × heads grid and probe scores (``probes correlate``).

This is how the stem-cell question relates, say, the heads a pruning run kept (gates, importance
scores) to the heads' probing skill: for every label of every probe (and each probe's overall
grid), Spearman's ρ between the grid and the label's [L,H] scores over the heads where both are
defined.

Each ρ gets a two-sided permutation p-value: the grid's values are shuffled over those heads
(seeded; the same draws for the same inputs), p = (1 + #{|ρ_perm| ≥ |ρ|}) / (1 + permutations).
The p-values are then corrected over every label tested (the rows with a defined ρ: ``tests``),
Holm's step-down method by default (family-wise error ≤ α), Benjamini–Hochberg (false discovery
rate ≤ α) or none; ``significant`` is p_adjusted ≤ α. A permutation p-value is never below
1 / (permutations + 1), so the default count is chosen to reach the corrected threshold α / tests
with room to spare; fewer permutations than that are refused.
"""
from __future__ import annotations

import math

import numpy as np

from probes.base.errors import InputError
from probes.results.probe_result import ProbeResult

CORRECTIONS = ("holm", "bh", "none")
MIN_PERMUTATIONS = 9999


def correlate(grid: ProbeResult | np.ndarray, results: dict[str, ProbeResult] | ProbeResult, *,
              correction: str = "holm", alpha: float = 0.05, permutations: int | None = None, seed: int = 0):
    """DataFrame, one row per probe × label: probe, label, count, heads (compared), spearman, p_value (permutation,
    two-sided), p_adjusted, significant, correction, tests (how many p-values were corrected together).

    permutations: shuffles of the heads per label (default: the larger of 9999 and 10 · tests / α).
    Its ``attrs`` hold correction, alpha, tests, permutations and seed."""
    import pandas as pd

    if correction not in CORRECTIONS:
        raise InputError(f"unknown correction {correction!r}; choose one of {', '.join(CORRECTIONS)}")
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be between 0 and 1, not {alpha}")
    values = np.asarray(grid.overall.scores if isinstance(grid, ProbeResult) else grid, dtype=float)
    targets = {results.probe: results} if isinstance(results, ProbeResult) else results
    rows, pairs = [], []
    for probe, result in targets.items():
        if (result.info.layers, result.info.heads) != values.shape:
            raise InputError(f"{probe}: {result.info.layers} layers × {result.info.heads} heads, but the grid is "
                             f"{values.shape[0]} × {values.shape[1]}; correlation needs one value per head of "
                             "one model")
        for label, entry in [*result.labels.items(), ("overall", result.overall)]:
            both = np.isfinite(values) & np.isfinite(entry.scores)
            x, y = values[both], entry.scores[both]
            constant = len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0
            pairs.append(None if constant else (x, y))
            rows.append({"probe": probe, "label": label, "count": entry.count, "heads": len(x)})
    tests = sum(p is not None for p in pairs)
    needed = math.ceil((tests if correction != "none" else 1) / alpha - 1e-9)  # 1 / (permutations + 1) ≤ α / tests
    if permutations is None:
        permutations = max(MIN_PERMUTATIONS, 10 * needed)
    elif permutations + 1 < needed:
        raise InputError(f"{permutations} permutations cannot reach the corrected threshold α / {tests} = "
                         f"{alpha / max(tests, 1):.3g} (the smallest p-value is 1 / (permutations + 1)); "
                         f"use at least {needed - 1}")
    rng = np.random.default_rng(seed)
    stats = [(np.nan, np.nan) if pair is None else permutation_spearman(*pair, permutations, rng) for pair in pairs]
    p_values = np.array([p for _, p in stats])
    adjusted = np.full(len(p_values), np.nan)
    tested = np.isfinite(p_values)
    adjusted[tested] = adjust_p_values(p_values[tested], correction)
    for row, (rho, p), q in zip(rows, stats, adjusted):
        row.update(spearman=float(rho), p_value=float(p), p_adjusted=float(q), significant=bool(q <= alpha),
                   correction=correction, tests=tests)
    table = pd.DataFrame(rows, columns=["probe", "label", "count", "heads", "spearman", "p_value", "p_adjusted",
                                        "significant", "correction", "tests"])
    table.attrs.update(correction=correction, alpha=alpha, tests=tests, permutations=permutations, seed=seed)
    return table


def permutation_spearman(x: np.ndarray, y: np.ndarray, permutations: int,
                         rng: np.random.Generator) -> tuple[float, float]:
    """Spearman's ρ of x and y [n] (average ranks for ties) and its two-sided permutation p-value: x's ranks
    shuffled `permutations` times, p = (1 + #{|ρ_perm| ≥ |ρ|}) / (1 + permutations)."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x) - (len(x) + 1) / 2, rankdata(y) - (len(y) + 1) / 2  # [n] centred ranks
    scale = math.sqrt(float(rx @ rx) * float(ry @ ry))
    rho = float(rx @ ry) / scale
    shuffled = rng.permuted(np.broadcast_to(rx, (permutations, len(rx))), axis=1)  # [P,n]
    null = shuffled @ ry / scale  # [P]
    extreme = int(np.count_nonzero(np.abs(null) >= abs(rho) - 1e-12))
    return rho, (1 + extreme) / (1 + permutations)


def adjust_p_values(p: np.ndarray, correction: str) -> np.ndarray:
    """Adjusted p-values [m] of p [m]: Holm's step-down (family-wise error), Benjamini–Hochberg's step-up
    (false discovery rate), or p itself ("none"). A test is significant at level α when its adjusted p ≤ α."""
    m = len(p)
    if correction == "none" or m == 0:
        return np.asarray(p, dtype=float)
    order = np.argsort(p, kind="stable")
    ranked = np.asarray(p, dtype=float)[order]
    if correction == "holm":  # max over j ≤ i of (m − j + 1) p_(j)
        steps = np.maximum.accumulate((m - np.arange(m)) * ranked)
    else:  # bh: min over j ≥ i of m / j · p_(j)
        steps = np.minimum.accumulate((m / np.arange(1, m + 1) * ranked)[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(steps, 1.0)
    return adjusted
