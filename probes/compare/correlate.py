"""Rank correlation over heads between any layers × heads grid and probe scores (``probes correlate``).

This is how the stem-cell question relates, say, the heads a pruning run kept (gates, importance
scores) to the heads' probing skill: for every label of every probe, Spearman's ρ between the grid
and the label's [L,H] scores over the heads where both are defined, with its two-sided p-value
(scipy.stats.spearmanr; no correction for the number of labels tested).
"""
from __future__ import annotations

import numpy as np

from probes.errors import InputError
from probes.results import ProbeResult


def correlate(grid: ProbeResult | np.ndarray, results: dict[str, ProbeResult] | ProbeResult):
    """DataFrame: probe, label, count, heads (compared), spearman, p_value; one row per probe × label."""
    import pandas as pd
    from scipy.stats import spearmanr

    values = np.asarray(grid.overall.scores if isinstance(grid, ProbeResult) else grid, dtype=float)
    targets = {results.probe: results} if isinstance(results, ProbeResult) else results
    rows = []
    for probe, result in targets.items():
        if (result.info.layers, result.info.heads) != values.shape:
            raise InputError(f"{probe}: {result.info.layers} layers × {result.info.heads} heads, but the grid is "
                             f"{values.shape[0]} × {values.shape[1]}; correlation needs one value per head of "
                             "one model")
        for label, entry in [*result.labels.items(), ("overall", result.overall)]:
            both = np.isfinite(values) & np.isfinite(entry.scores)
            n = int(both.sum())
            constant = n < 3 or np.ptp(values[both]) == 0 or np.ptp(entry.scores[both]) == 0
            rho, p = (np.nan, np.nan) if constant else spearmanr(values[both], entry.scores[both])
            rows.append({"probe": probe, "label": label, "count": entry.count, "heads": n,
                         "spearman": float(rho), "p_value": float(p)})
    return pd.DataFrame(rows)
