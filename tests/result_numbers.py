"""Every value of a ProbeResult by path, to compare two results number by number."""
from __future__ import annotations

from typing import Any

import numpy as np


def result_numbers(result) -> dict[str, Any]:
    """{path: value} for the counts, scores, extra grids, baselines and extra fields of `result`;
    arrays and lists are split into their leaves ("labels/gap/scores[0][3]")."""
    tree = {"overall": {"count": result.overall.count, "scores": result.overall.scores, **result.overall.extra},
            "labels": {k: {"count": v.count, "scores": v.scores, **v.extra} for k, v in result.labels.items()},
            "baselines": result.baselines, "extra": result.extra, "sentences": result.info.sentences,
            "skipped": result.info.skipped}
    return _leaves(tree, "")


def _leaves(value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _leaves(item, f"{path}/{key}").items()}
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return {k: v for i, item in enumerate(value) for k, v in _leaves(item, f"{path}[{i}]").items()}
    return {path: value}


def differences(a, b, atol: float) -> list[str]:
    """Where two results differ: paths only one has, non-numbers that differ, numbers more than `atol` apart
    (NaN equals NaN); one line each, "path: a != b"."""
    x, y = result_numbers(a), result_numbers(b)
    out = [f"{path}: only in {'the first' if path in x else 'the second'}" for path in sorted(x.keys() ^ y.keys())]
    for path in x.keys() & y.keys():
        u, v = x[path], y[path]
        numbers = all(isinstance(z, (int, float, np.number)) and not isinstance(z, bool) for z in (u, v))
        if numbers:
            same = (np.isnan(u) and np.isnan(v)) or abs(u - v) <= atol
        else:
            same = u == v
        if not same:
            out.append(f"{path}: {u!r} != {v!r}")
    return sorted(out)


def assert_same_numbers(a, b, atol: float, context: str = "") -> None:
    """Two results have the same paths, equal non-numbers, and numbers within `atol`."""
    found = differences(a, b, atol)
    assert not found, f"{context}{len(found)} differences, e.g. {found[:3]}"
