"""Any layers × heads array as a result: pruning gates, importance scores, another tool's output.

    load_any(path) -> ProbeResult

Accepted files (rows are layers, columns heads, 0-indexed):
    .npy   a 2-D numeric array
    .json  a probes results file (``probes run --out``), a 2-D list [[...], ...], or {"scores": [[...]]}
    .csv   a numeric matrix (an optional header row and an optional first column of names are
           skipped), or the long form with columns layer, head and score (or value), optionally
           label and count, as ``probes run`` writes it
A plain array becomes a result with that grid as its "overall" scores and the file name (without
suffix) as its probe name, so it plots, compares and correlates like any probe's result.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from probes.base.errors import InputError
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo, load_result

GRID_SUFFIXES = (".npy", ".json", ".csv")


def load_any(path: str | Path) -> ProbeResult:
    """A probes results file or any layers × heads array file, as a ProbeResult."""
    p = Path(path)
    if not p.exists():
        raise InputError("file not found", p)
    if p.is_dir():
        raise InputError("is a directory; give a results file or an array file (.npy, .json, .csv)", p)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        return grid_result(p, _npy(p))
    if suffix == ".json":
        data = _json(p)
        if isinstance(data, dict) and "probe" in data and "labels" in data:
            return load_result(p)
        return grid_result(p, _array(data.get("scores") if isinstance(data, dict) else data, p))
    if suffix == ".csv":
        return _csv(p)
    raise InputError(f"cannot read {suffix or 'a file without suffix'} as layers × heads; use .npy, .json or .csv", p)


def grid_result(path: Path, grid: np.ndarray, labels: dict[str, LabelScores] | None = None,
                count: int = 0) -> ProbeResult:
    """A ProbeResult holding `grid` [L,H] as its overall scores (and any labels)."""
    layers, heads = grid.shape
    info = RunInfo(model=str(path), corpus=[], layers=layers, heads=heads, sentences=0, skipped={}, settings={},
                   provenance={"array_file": str(path)})
    return ProbeResult(probe=path.stem, info=info, options={}, labels=labels or {},
                       overall=LabelScores(count=count, scores=grid))


def _npy(p: Path) -> np.ndarray:
    try:
        data = np.load(p, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise InputError(f"not a NumPy array file ({e})", p) from None
    return _array(data, p)


def _json(p: Path):
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg}", p, e.lineno) from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", p) from None


def _array(data, p: Path) -> np.ndarray:
    try:
        grid = np.asarray(data, dtype=float)
    except (TypeError, ValueError):
        raise InputError("expected a layers × heads array of numbers (rows of equal length)", p) from None
    if grid.ndim != 2 or 0 in grid.shape:
        raise InputError(f"expected a 2-D layers × heads array, found shape {tuple(grid.shape)}", p)
    return grid


def _csv(p: Path) -> ProbeResult:
    try:
        rows = [r for r in csv.reader(p.read_text(encoding="utf-8").splitlines()) if any(c.strip() for c in r)]
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", p) from None
    if not rows:
        raise InputError("file is empty", p)
    header = [c.strip().lower() for c in rows[0]]
    if "layer" in header and "head" in header:
        return _long_csv(p, header, rows[1:])
    start = 0 if _numeric(rows[0][-1]) else 1  # a header row
    body = rows[start:]
    skip_names = int(bool(body) and not _numeric(body[0][0]))  # a first column of layer names
    grid = []
    for number, row in enumerate(body, start + 1):
        cells = row[skip_names:]
        if not all(_numeric(c) for c in cells):
            raise InputError("expected numbers (rows: layers, columns: heads)", p, number)
        grid.append([float(c) for c in cells])
    if len({len(r) for r in grid}) > 1:
        raise InputError("rows of different lengths: expected a layers × heads matrix", p)
    return grid_result(p, _array(grid, p))


def _long_csv(p: Path, header: list[str], rows: list[list[str]]) -> ProbeResult:
    value = next((c for c in ("score", "value") if c in header), None)
    if value is None:
        raise InputError("a CSV with layer and head columns needs a score (or value) column", p, 1)
    col = {name: header.index(name) for name in ("layer", "head", value, "label", "count") if name in header}
    cells: dict[str, dict[tuple[int, int], float]] = {}
    counts: dict[str, int] = {}
    for number, row in enumerate(rows, 2):
        try:
            layer, head = int(row[col["layer"]]), int(row[col["head"]])
            score = float(row[col[value]]) if row[col[value]].strip() else float("nan")
            count = int(float(row[col["count"]])) if "count" in col else 0
        except (ValueError, IndexError):
            raise InputError(f"expected integer layer and head and a numeric {value}", p, number) from None
        if layer < 0 or head < 0:
            raise InputError("layer and head are 0-indexed and cannot be negative", p, number)
        label = row[col["label"]] if "label" in col else "overall"
        cells.setdefault(label, {})[(layer, head)] = score
        counts[label] = count
    if not cells:
        raise InputError("no rows after the header", p)
    layers = 1 + max(k[0] for c in cells.values() for k in c)
    heads = 1 + max(k[1] for c in cells.values() for k in c)
    grids = {}
    for label, entries in cells.items():
        grid = np.full((layers, heads), np.nan)
        idx = np.array(list(entries))
        grid[idx[:, 0], idx[:, 1]] = list(entries.values())
        grids[label] = LabelScores(count=counts[label], scores=grid)
    if "overall" not in grids and len(grids) != 1:
        raise InputError("several labels and no 'overall' rows: which grid is the result?", p)
    overall = grids.pop("overall") if "overall" in grids else grids.pop(next(iter(grids)))
    return grid_result(p, overall.scores, grids, overall.count)


def _numeric(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
