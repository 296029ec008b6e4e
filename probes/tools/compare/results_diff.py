"""Comparing two sets of results head by head (``probes compare A/ B/``): what changed from A to B.

For every probe and label either side has: the counts in A and B, the head and score each reports
(``ProbeResult.reported``: none where the top score ties or is 0; like with like: the ``--select-on`` choices
where both runs made one, else the best heads on each side, and the table says which), the change of that
score, how A's head fares in B, the mean change over heads, and the heads that gained or lost most;
delta = B − A per head, as an [L,H] grid (and a heatmap).
Minimum counts (the larger of the two runs' ``--min-count``): ``label_lost`` marks a label at or
above it in A but absent or below it in B, ``few`` a delta resting on fewer instances on either side;
the table on screen leaves out the labels below it on both sides unless asked (``all_labels``). Where both runs
kept bootstrap replicates over the same corpus with the same seed (probes.results.bootstrap, probes.results.intervals), the change of the best
score gets a paired 95% interval (the best head chosen again in each replicate of each side and its winner's
curse taken off, probes.results.intervals.paired_delta; the sentences reweighted alike on both), and ``flat`` marks a change whose interval contains 0. The probes both sides hold are
compared (those only one side holds are left out and listed in ``left_out``); each must have been
run with the same options, on models of one architecture (same layers × heads and family): heads
are matched by position, which means something only between checkpoints of one model (a
pre-trained model and its fine-tuned derivative, say). Other differences (corpus, sentences
scored, pooling) are reported as notes.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from probes.base.choices import COMPARE_SORTS
from probes.tools.compare.grids import load_any
from probes.base.errors import InputError
from probes.base.files import Table, json_grid, safe_name, write_result_files
from probes.results.intervals import paired_delta
from probes.results.probe_result import BestHead, ProbeResult, Reported, best_head, results_in
from probes.base.wording import counted, fixed

TOP = 3  # heads listed as gained / lost most


@dataclass
class LabelDelta:
    """One label of one probe, in A and in B."""

    probe: str
    label: str
    count_a: int
    count_b: int
    a: np.ndarray  # [L,H] scores in A
    b: np.ndarray  # [L,H] scores in B
    min_count: int = 0  # the larger of the two runs' minimum counts
    best_a: Reported | None = None  # A's head as its result reports it (None: from the grid, best_head)
    best_b: Reported | None = None
    paired: tuple[float, float] | None = None  # the paired 95% interval of B's best score − A's (None: no replicates)
    kind: str = "best"  # "selected": both sides' heads were chosen on their selection splits; "best": neither is

    @property
    def delta(self) -> np.ndarray:
        """[L,H] B − A."""
        return self.b - self.a

    def best(self, side: str) -> BestHead | Reported:
        """The best head of side "a" or "b" (``BestHead.found`` false where none is named)."""
        given = self.best_a if side == "a" else self.best_b
        if given is not None:
            return given
        return best_head(self.a if side == "a" else self.b, self.label, self.count_a if side == "a" else self.count_b)

    @property
    def label_lost(self) -> bool:
        """At or above the minimum count in A, absent or below it in B."""
        return self.label != "overall" and self.count_a >= self.min_count > self.count_b

    @property
    def few(self) -> bool:
        """Whether the delta rests on fewer than the minimum count of instances on either side."""
        return self.label != "overall" and min(self.count_a, self.count_b) < self.min_count

    @property
    def no_best(self) -> bool:
        """Whether a side names no best head."""
        return not (self.best("a").found and self.best("b").found)

    @property
    def flat(self) -> bool:
        """Whether the paired interval of the best score's change contains 0 (False without one)."""
        return self.paired is not None and self.paired[0] <= 0 <= self.paired[1]

    @property
    def frequent(self) -> bool:
        """At or above the minimum count on one side at least (overall always): shown on screen."""
        return self.label == "overall" or max(self.count_a, self.count_b) >= self.min_count

    def movers(self, gained: bool, top: int = TOP) -> list[tuple[int, int, float]]:
        """The `top` heads whose score rose (gained) or fell most: (layer, head, delta)."""
        d = self.delta
        order = np.argsort(np.where(np.isnan(d), 0.0, -d if gained else d), axis=None, kind="stable")
        picked = [np.unravel_index(int(i), d.shape) for i in order[:top]]
        return [(int(layer), int(head), float(d[layer, head])) for layer, head in picked
                if np.isfinite(d[layer, head]) and (d[layer, head] > 0 if gained else d[layer, head] < 0)]

    def row(self) -> dict:
        """The CSV's row. best_a / best_b: None where that side names no best head (why: no_best_a / no_best_b)."""
        best_a, best_b = self.best("a"), self.best("b")
        nan = float("nan")
        d = self.delta
        low, high = self.paired or (nan, nan)
        return {"probe": self.probe, "label": self.label, "count_a": self.count_a, "count_b": self.count_b,
                "heads": self.kind,
                "best_a": best_a.name, "score_a": best_a.score if best_a.found else nan, "no_best_a": best_a.reason,
                "best_b": best_b.name, "score_b": best_b.score if best_b.found else nan, "no_best_b": best_b.reason,
                "delta_best": (best_b.score - best_a.score) if best_a.found and best_b.found else nan,
                "delta_low": low, "delta_high": high, "flat": self.flat,
                "a_best_in_b": float(self.b[best_a.layer, best_a.head]) if best_a.found else nan,
                "mean_delta": float(np.nanmean(d)) if np.isfinite(d).any() else nan,
                "min_count": self.min_count, "label_lost": self.label_lost, "few": self.few,
                "gained": _heads(self.movers(True)), "lost": _heads(self.movers(False))}


@dataclass
class Comparison:
    """Every label of every probe, A against B (see the module docstring)."""

    a: str
    b: str
    model_a: str
    model_b: str
    labels: list[LabelDelta]
    notes: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # probes only one side holds, e.g. "pos (only in B)"

    def to_frame(self):
        """One row per probe × label (the CSV's rows), as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame([d.row() for d in self.labels])

    def to_table(self) -> Table:
        """The CSV's rows (``to_frame``'s, without pandas)."""
        rows = [d.row() for d in self.labels]
        columns = list(rows[0]) if rows else []
        return Table(columns, [[r[c] for c in columns] for r in rows])

    def layer_changes(self) -> list[dict]:
        """Per probe and layer, the mean absolute change over its heads and labels: rows {probe, layer,
        mean_abs_delta}, probes in the order of their labels."""
        rows = []
        for probe in dict.fromkeys(d.probe for d in self.labels):
            stack = np.stack([np.abs(d.delta) for d in self.labels if d.probe == probe])  # [labels,L,H]
            for layer, value in enumerate(np.nanmean(stack, axis=(0, 2))):
                rows.append({"probe": probe, "layer": layer, "mean_abs_delta": float(value)})
        return rows

    def to_json(self) -> dict:
        return {"a": self.a, "b": self.b, "model_a": self.model_a, "model_b": self.model_b, "notes": self.notes,
                "left_out": self.left_out,
                "labels": [{**_clean(d.row()), "delta": json_grid(d.delta)} for d in self.labels],
                "layers": [_clean(r) for r in self.layer_changes()]}

    def save(self, directory: str | Path, *, plots: bool = True, all_labels: bool = False) -> list[Path]:
        """compare.json, compare.csv (every label) and (optionally) one delta heatmap per probe and label
        (``figures``)."""
        return write_result_files(directory, {"compare.json": self.to_json(), "compare.csv": self.to_table(),
                                              **(self.figures(all_labels) if plots else {})})

    def figures(self, all_labels: bool = False) -> dict[str, bytes]:
        """{<probe>-<label>-delta.png: PNG}: B − A per head, red where B is higher, on a scale centred on 0, titled
        with both counts (and "few" where either is below the minimum count); the labels below the minimum count
        on both sides only with `all_labels`."""
        from probes.results.plots import heatmap_png

        pictures = {}
        for d in self.labels:
            if not (all_labels or d.frequent):
                continue
            span = float(np.nanmax(np.abs(d.delta))) if np.isfinite(d.delta).any() else 1.0
            pictures[f"{safe_name(d.probe)}-{safe_name(d.label)}-delta.png"] = heatmap_png(
                d.delta, f"{d.probe}: {d.label} (n={d.count_a}/{d.count_b}"
                         f"{f', few: below --min-count {d.min_count}' if d.few else ''}), B − A",
                f"A {self.model_a}\nB {self.model_b}", vmin=-(span or 1.0),
                vmax=span or 1.0, cmap="RdBu_r")
        return pictures

    def ordered(self, sort: str = "count") -> list[LabelDelta]:
        """The labels in the table's order: probe by probe as the results come, and within a probe by `sort`
        (probes.base.choices.COMPARE_SORTS): count, the most instances in A and B together first (as `probes show`);
        score, B's best score, highest first; delta, the change of the best score, largest first either way; label,
        by name. Labels without that number (no best head) follow, overall comes last."""
        if sort not in COMPARE_SORTS:
            raise InputError(f"unknown sort {sort!r}; choose one of {', '.join(COMPARE_SORTS)}")
        probes = list(dict.fromkeys(d.probe for d in self.labels))

        def key(d: LabelDelta) -> tuple:
            a, b = d.best("a"), d.best("b")
            value = {"count": -(d.count_a + d.count_b), "label": d.label,
                     "score": -b.score if b.found else math.nan,
                     "delta": -abs(b.score - a.score) if a.found and b.found else math.nan}[sort]
            missing = isinstance(value, float) and math.isnan(value)
            return probes.index(d.probe), d.label == "overall", missing, 0 if missing else value

        return sorted(self.labels, key=key)

    def format_table(self, all_labels: bool = False, sort: str = "count") -> str:
        """The table on screen: a row per label (those below the minimum count on both sides only with
        `all_labels`), in the order of ``ordered(sort)``, with its counts in A and B; "lost" where a label at or
        above the minimum count in A is absent or below it in B; "few" where the delta rests on fewer instances
        than that."""
        lines = [f"A: {self.model_a}", f"B: {self.model_b}", *[f"note: {n}" for n in self.notes]]
        for probe, kind in {d.probe: d.kind for d in self.labels}.items():
            lines.append(f"{probe}: " + ("heads chosen on each side's selection split (--select-on), scores on the "
                                         "scored corpora; no paired interval (its replicates are of the best heads)"
                                         if kind == "selected" else "best heads on the scored corpora"))
        paired = any(d.paired is not None for d in self.labels)
        header = (f"{'probe':<14}{'label':<18}{'n A':>6}{'n B':>6}  {'best A':<9}{'score':>7}  {'best B':<9}"
                  f"{'score':>7}{'Δbest':>8}" + (f"  {'95% interval':<17}{'flat':<5}" if paired else "") +
                  f"{'A-best in B':>13}  {'lost':<5}{'few':<4} gained most")
        changes = self.layer_changes()
        for probe in dict.fromkeys(r["probe"] for r in changes):
            lines.append(f"{probe}: mean |B − A| by layer: " + ", ".join(
                f"L{r['layer']} {r['mean_abs_delta']:.3f}" for r in changes if r["probe"] == probe))
        lines += [header, "-" * len(header)]
        shown = [d for d in self.ordered(sort) if all_labels or d.frequent]
        for d in shown:
            r = d.row()
            lines.append(f"{d.probe:<14}{d.label[:17]:<18}{d.count_a:>6}{d.count_b:>6}  {_short(d.best('a')):<9}"
                         f"{_number(r['score_a'], ''):>7}  {_short(d.best('b')):<9}{_number(r['score_b'], ''):>7}"
                         f"{_number(r['delta_best'], '+'):>8}"
                         + (f"  {_span(d.paired):<17}{'flat' if d.flat else '':<5}" if paired else "") +
                         f"{_number(r['a_best_in_b'], ''):>13}  "
                         f"{'lost' if d.label_lost else '':<5}{'few' if d.few else '':<4} {r['gained'].split(';')[0]}")
        least = {d.min_count for d in self.labels}
        if len(shown) < len(self.labels):
            lines.append(f"{counted(len(self.labels) - len(shown), 'label')} below the minimum count "
                         f"({', '.join(map(str, sorted(least)))} instances) in A and B not shown; --all-labels shows them")
        if paired:
            lines.append("95% interval: paired bootstrap interval of the change of the best score (the sentences "
                         "reweighted alike; each side's selection counted: its bound taken by the luckiest head close to "
                         "its best); flat: it contains 0, the change is not told apart from none")
        if any(d.no_best for d in shown):
            lines.append("no best head: tie×N where N heads share the top score, 0 where the top score is 0, "
                         "- where the label is absent or the selection split names none")
        return "\n".join(lines)


def load_results(path: str | Path) -> dict[str, ProbeResult]:
    """{probe name: result} from a results folder (every probes results JSON in it) or from one file."""
    p = Path(path)
    if not p.exists():
        raise InputError("not found", p)
    if p.is_dir():
        return results_in(p)
    result = load_any(p)
    return {result.probe: result}


def compare_results(a: str | Path | dict[str, ProbeResult], b: str | Path | dict[str, ProbeResult]) -> Comparison:
    """Compare two results folders (or files, or {probe: result} dicts) on the probes both hold; InputError
    when they hold none in common or a shared probe does not match."""
    left = a if isinstance(a, dict) else load_results(a)
    right = b if isinstance(b, dict) else load_results(b)
    where_a, where_b = (str(x) if not isinstance(x, dict) else side for x, side in ((a, "A"), (b, "B")))
    if any(r.info.provenance.get("array_file") for r in (*left.values(), *right.values())) \
            and len(left) == len(right) == 1:
        right = {next(iter(left)): next(iter(right.values()))}  # an array file: compared whatever its name
    shared = sorted(set(left) & set(right))
    if not shared:
        raise InputError(f"{where_a} and {where_b} hold no probe in common (A: {', '.join(sorted(left))}; "
                         f"B: {', '.join(sorted(right))})")
    left_out = [f"{p} (only in A)" for p in sorted(set(left) - set(right))] + \
               [f"{p} (only in B)" for p in sorted(set(right) - set(left))]
    labels, notes = [], []
    for probe in shared:
        ra, rb = left[probe], right[probe]
        _check_match(probe, ra, rb, where_a, where_b)
        notes += _notes(probe, ra, rb)
        chosen = ["select_on" in r.info.settings for r in (ra, rb)]
        kind = "selected" if all(chosen) else "best"  # like with like: one side's selection alone is not used
        if any(chosen) and not all(chosen):
            notes.append(f"{probe}: only {'A' if chosen[0] else 'B'} chose its heads on a selection split; "
                         "both sides' best heads on their scored corpora compared")
        for label in list(dict.fromkeys([*ra.labels, *rb.labels])) + ["overall"]:
            ea = ra.overall if label == "overall" else ra.labels.get(label)
            eb = rb.overall if label == "overall" else rb.labels.get(label)
            nan = np.full((ra.info.layers, ra.info.heads), np.nan)
            labels.append(LabelDelta(probe, label, ea.count if ea else 0, eb.count if eb else 0,
                                     ea.scores if ea else nan, eb.scores if eb else nan,
                                     max(ra.min_count, rb.min_count), ra.reported(label, kind) if ea else None,
                                     rb.reported(label, kind) if eb else None,
                                     _paired(ra, rb, label, notes) if kind == "best" else None, kind))
    first_a, first_b = left[shared[0]], right[shared[0]]
    return Comparison(where_a, where_b, first_a.info.model, first_b.info.model, labels, list(dict.fromkeys(notes)),
                      left_out)


def _paired(ra: ProbeResult, rb: ProbeResult, label: str, notes: list[str]) -> tuple[float, float] | None:
    """The paired interval of B's best score − A's for `label` (probes.results.intervals.paired_delta), or None where a
    side kept no replicates of it; where both kept some that cannot be paired, a note says why."""
    if label not in ra.replicates or label not in rb.replicates:
        return None
    try:
        _, low, high = paired_delta(rb, ra, label)
    except InputError as e:
        notes.append(f"no paired intervals: {e.problem}")
        return None
    return low, high


def _check_match(probe: str, ra: ProbeResult, rb: ProbeResult, where_a: str, where_b: str) -> None:
    shape_a, shape_b = (ra.info.layers, ra.info.heads), (rb.info.layers, rb.info.heads)
    if shape_a != shape_b:
        raise InputError(f"{probe}: A has {shape_a[0]} layers × {shape_a[1]} heads, B {shape_b[0]} × {shape_b[1]} "
                         f"({where_a} vs {where_b}); compare matches heads by position, so both must come from "
                         "models of one architecture")
    family_a, family_b = ra.info.provenance.get("model_type"), rb.info.provenance.get("model_type")
    if family_a and family_b and family_a != family_b:
        raise InputError(f"{probe}: A is a {family_a} model, B a {family_b} model ({where_a} vs {where_b}); "
                         "compare matches heads by position, so both must come from models of one architecture")
    if ra.options != rb.options:
        diff = [k for k in dict.fromkeys([*ra.options, *rb.options]) if ra.options.get(k) != rb.options.get(k)]
        pairs = ", ".join(f"{k}: {ra.options.get(k)!r} vs {rb.options.get(k)!r}" for k in diff)
        raise InputError(f"{probe}: run with different options in A and B ({pairs}); compare needs the same "
                         "probe settings")


def _notes(probe: str, ra: ProbeResult, rb: ProbeResult) -> list[str]:
    notes = []
    if [Path(c).name for c in ra.info.corpus] != [Path(c).name for c in rb.info.corpus]:
        notes.append(f"different corpora ({', '.join(ra.info.corpus) or '-'} vs "
                     f"{', '.join(rb.info.corpus) or '-'})")
    if ra.info.sentences != rb.info.sentences and ra.info.corpus and rb.info.corpus:
        notes.append(f"{probe}: {ra.scored()} scored in A, {rb.scored()} in B")
    for key in ("pool", "max_length", "tokenize"):
        va, vb = ra.info.settings.get(key), rb.info.settings.get(key)
        if va is not None and vb is not None and va != vb:
            notes.append(f"{key} {va} in A, {vb} in B")
    return notes


def _short(best: BestHead | Reported) -> str:
    """The head's name, or why there is none, short: tie×N, 0, -."""
    if best.found:
        return best.name
    if best.score == 0:
        return "0"
    ties = re.match(r"(\d+) heads tie", best.reason)
    return f"tie×{ties[1]}" if ties else "-"


def _number(x: float, sign: str) -> str:
    return fixed(x, f"{sign}.3f") if np.isfinite(x) else "-"


def _span(bounds: tuple[float, float] | None) -> str:
    return "-" if bounds is None else f"[{fixed(bounds[0], '+.3f')}, {fixed(bounds[1], '+.3f')}]"


def _heads(movers: list[tuple[int, int, float]]) -> str:
    return "; ".join(f"L{layer}-H{head} {delta:+.3f}" for layer, head, delta in movers)


def _clean(row: dict) -> dict:
    """JSON-safe: NaN → None."""
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()}
