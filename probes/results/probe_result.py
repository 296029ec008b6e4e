"""Probe results: per-label [L,H] score grids with counts and provenance, as plain data, and their data files.

``DIR/<probe>.json`` (the schema is in docs/getting-started.md, "Results format"); ``DIR/<probe>.csv`` has one
row per label × layer × head. Layers and heads are 0-indexed. Numbers are written at full precision (a save
and load round trip gives the same floats), every file atomically (probes.base.files). A result does not draw
itself: its pictures are its probe's ``figures`` (probes.results.presentation: ``figures_of``, and ``save_result``
that writes them beside the data files).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from probes.base.errors import InputError
from probes.base.files import Table, json_grid, json_number, write_result_files
from probes.base.packing import pack, unpack
from probes.base.wording import counted

SCHEMA_VERSION = 1
SKIP_NOTE_SHARE = 0.10  # a run that skips more of the sentences it read names the reasons under its summary
FEW_UNITS = 20  # a bootstrap over fewer units (sentences, documents) gives rough intervals: the views say so


@dataclass
class RunInfo:
    """What a run knew that every result records."""

    model: str
    corpus: list[str]
    layers: int
    heads: int
    sentences: int  # sentences scored
    skipped: dict[str, int]  # reason -> sentences not scored
    settings: dict[str, Any]  # the run settings a results file records (probes.settings.run_settings.RunSettings.recorded)
    provenance: dict[str, Any]  # versions, time, elapsed seconds
    notes: dict[str, int] = field(default_factory=dict)  # annotations (not sentences) the reader set aside
    annotation: str = "gold"  # where the corpus' labels came from: "gold", or "silver" (a tool's, e.g. spaCy's)
    annotator: str = ""  # what made silver labels ("spaCy 3.8.0, en_core_web_sm 3.8.0"); "" for gold
    # the units the bootstrap resamples among those scored (probes.encoding.identity): `unit` "sentence", or "document"
    # where a probe cut documents into windows (sentences then counts the windows); None: one per sentence
    units: int | None = None
    unit: str = "sentence"

    @property
    def unit_count(self) -> int:
        """How many units the bootstrap resampled (``units``, or the sentences scored)."""
        return self.sentences if self.units is None else self.units

    def skip_note(self) -> str | None:
        """"skipped: 1445 longer than 12 words, 405 no frame elements (93% of the 2000 sentences read)" where more
        than SKIP_NOTE_SHARE of the sentences read were skipped (printed under the run's summary line), else None."""
        skipped = sum(self.skipped.values())
        read = skipped + self.sentences
        if skipped <= SKIP_NOTE_SHARE * read:
            return None
        return f"skipped: {skip_summary(self.skipped)} ({skipped / read:.0%} of the {read} sentences read)"


def skip_summary(skipped: dict[str, int]) -> str:
    """"3 too long, 1 no head" (or "none read")."""
    return ", ".join(f"{n} {r.replace('_', ' ')}" for r, n in skipped.items()) or "none read"


@dataclass
class BestInterval:
    """A label's best head with its bootstrap interval (probes.results.bootstrap): ci_low..ci_high is the 95% interval
    of the best score with its selection counted (its lower bound taken down by the largest replicate deviation
    among the heads whose intervals reach the best head's: BEST_METHOD); margin: the score minus the label's best offset baseline, with its paired
    interval (None without baselines).
    layer, head: None where no single head is named (a tie at the top score, or a top score of 0; see
    best_head): score, its interval and the margin are then those of the top score."""

    layer: int | None
    head: int | None
    score: float
    ci_low: float
    ci_high: float
    margin: float | None = None
    margin_low: float | None = None
    margin_high: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v if isinstance(v, int) or v is None else json_number(v) for k, v in vars(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "BestInterval":
        def number(key: str) -> float:
            return float("nan") if data[key] is None else float(data[key])

        margins = (None if data.get(k) is None else float(data[k]) for k in ("margin", "margin_low", "margin_high"))
        layer, head = (None if data.get(k) is None else int(data[k]) for k in ("layer", "head"))
        return cls(layer, head, number("score"), number("ci_low"), number("ci_high"), *margins)


INTERVAL_KEYS = ("ci_low", "ci_high", "best")  # a label's interval fields in the JSON (beside count, scores, extra grids)


@dataclass
class LabelScores:
    """One label's scores: `scores` [L,H] is the probe's main score; `extra` holds other [L,H] grids.
    `selected`: where ``--select-on`` chose the label's best head on another split, that choice
    ({"layer", "head", "score_on_corpus", "score_on_selection", "count_on_selection", "ci_low", "ci_high",
    "margin", "margin_low", "margin_high"}, or {"reason"} where that split names no head; probes.results.fitting.
    choose_heads).
    With the bootstrap (probes.results.bootstrap): ci_low, ci_high [L,H], each head's 95% interval of the main score
    (probes.results.intervals.head_interval), and `best`, the best head with its selection-aware interval; None without
    replicates. `margins`: where the probe has offset baselines, every head's margin over the best one with its
    paired interval ({"margin", "margin_low", "margin_high"}: [L,H] each), kept for ``choose_heads``, not saved."""

    count: int
    scores: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    selected: dict[str, Any] | None = None
    ci_low: np.ndarray | None = None
    ci_high: np.ndarray | None = None
    best: BestInterval | None = None
    margins: dict[str, np.ndarray] | None = field(default=None, repr=False, compare=False)

    def grids(self) -> dict[str, np.ndarray]:
        """Every [L,H] grid but the scores: the extra grids and the interval bounds (the CSV's other columns)."""
        bounds = {} if self.ci_low is None else {"ci_low": self.ci_low, "ci_high": self.ci_high}
        return {**self.extra, **bounds}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"count": int(self.count), "scores": json_grid(self.scores)}
        out.update({k: json_grid(v) for k, v in self.grids().items()})
        if self.best is not None:
            out["best"] = self.best.to_json()
        if self.selected is not None:
            out["selected"] = {k: json_number(v) if isinstance(v, float) else v for k, v in self.selected.items()}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LabelScores":
        grid = {k: np.asarray(v, dtype=float) for k, v in data.items() if k not in LABEL_KEYS}
        extra = {k: v for k, v in grid.items() if k not in INTERVAL_KEYS}
        best = BestInterval.from_json(data["best"]) if "best" in data else None
        selected = data.get("selected")
        if selected is not None:
            selected = {k: float("nan") if v is None and k.startswith("score") else v for k, v in selected.items()}
        return cls(count=int(data["count"]), scores=np.asarray(data["scores"], dtype=float), extra=extra,
                   selected=selected, ci_low=grid.get("ci_low"), ci_high=grid.get("ci_high"), best=best)


LABEL_KEYS = ("count", "scores", "selected", "below_min_count", "best")  # a label's JSON keys that are not grids


@dataclass
class BestHead:
    """A label's best head, or why it has none.

    A head is named (``found``) only when its score is finite, not 0, and no other head shares it; else
    ``reason`` says why not ("4 heads tie at 0.500", "every head scores 0", "no instance") and ``tied``
    lists the heads at the top score. layer, head: the named head; where none is, the first head at the
    top score (0, 0 when every score is NaN), for views that need some head. score: on the scored corpus.
    selection_score: the head's score on the ``--select-on`` split where that split chose it (else None).
    """

    label: str
    layer: int
    head: int
    score: float
    count: int
    tied: list[tuple[int, int]] = field(default_factory=list)
    reason: str = ""
    selection_score: float | None = None

    @property
    def found(self) -> bool:
        return not self.reason

    @property
    def name(self) -> str | None:
        """"L3-H5", or None where no head is named."""
        return f"L{self.layer}-H{self.head}" if self.found else None


def best_head(scores: np.ndarray, label: str = "overall", count: int = 0) -> BestHead:
    """The best head of an [L,H] grid (see BestHead): the single head with the highest score, unless the top
    score is shared by several heads, is 0, or every score is NaN."""
    grid = np.asarray(scores, dtype=float)  # [L,H]
    finite = np.isfinite(grid)
    if not finite.any():
        return BestHead(label, 0, 0, float("nan"), count, [], "no instance (every score is NaN)")
    top = float(grid[finite].max())
    layers, heads = np.nonzero(finite & (grid == top))  # [K] each: the heads at the top score, in index order
    tied = [(int(layer), int(head)) for layer, head in zip(layers, heads)]
    if top == 0 and len(tied) == int(finite.sum()):
        reason = "every head scores 0"
    elif len(tied) > 1:
        reason = f"{len(tied)} heads tie at {top:.3f}"
    elif top == 0:
        reason = "the top score is 0"
    else:
        reason = ""
    return BestHead(label, *tied[0], top, count, tied if len(tied) > 1 else [], reason)


@dataclass(frozen=True)
class Reported:
    """What every view shows of one label (``ProbeResult.reported``): the table, ``probes show``, compare, the
    figures, the report. kind "selected": the head ``--select-on`` chose on another split, its score here, its own
    95% interval (the head's percentile interval) and its margin over the label's best offset baseline with the
    paired interval where the result records them; kind "best": the best head on the scored corpus with the
    selection-aware interval of ``BestInterval``. layer, head: None where no single head is named (``reason``
    says why: a tie at the top score, a top score of 0, absent on the selection split); score, interval and
    margin are then those of the top score (NaN, None for a selected label without a head). Bounds and margins
    are None where the result has none (no replicates, no baselines)."""

    label: str
    kind: str
    layer: int | None
    head: int | None
    score: float
    count: int
    ci_low: float | None = None
    ci_high: float | None = None
    margin: float | None = None
    margin_low: float | None = None
    margin_high: float | None = None
    reason: str = ""
    selection_score: float | None = None  # kind "selected": the head's score on the selection split
    baseline: float | None = None  # the label's best offset baseline score, with its offset
    offset: int | None = None

    @property
    def found(self) -> bool:
        return self.layer is not None

    @property
    def name(self) -> str | None:
        """"L3-H5", or None where no head is named."""
        return f"L{self.layer}-H{self.head}" if self.found else None

    @property
    def outside(self) -> bool:
        """Whether the score lies outside its interval (a best-of-L×H score can: see docs/intervals.md)."""
        return self.ci_low is not None and self.ci_high is not None and not self.ci_low <= self.score <= self.ci_high

    def to_json(self) -> dict[str, Any]:
        return {k: json_number(v) if isinstance(v, float) else v for k, v in vars(self).items()}


@dataclass
class ProbeResult:
    """The scores of one probe over one run.

    ``labels[name].scores`` and ``overall.scores`` are [L,H] arrays (NaN where a label had no
    instance); ``baselines`` and ``extra`` carry probe-specific JSON (e.g. dep's offset baselines).
    What the probe says of itself, which every view reads (``scored``, the tables, warnings and figure titles):
    ``unit``, what ``info.sentences`` counts ("sentences", or coref's "windows"), with ``documents``, the documents
    they were cut from where the probe cuts documents into windows; ``baseline_name``, what each label's head is
    compared with where ``baselines`` names a label's best baseline ("best offset baseline" for dep and srl).
    """

    probe: str
    info: RunInfo
    options: dict[str, Any]
    labels: dict[str, LabelScores]
    overall: LabelScores
    baselines: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    # label (and "overall") → [R] the bootstrap replicates' best-head scores (probes.results.intervals.paired_delta);
    # in the JSON as base64 float32 ("replicates": {label: ...}; to float32 precision), so results read back pair
    replicates: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    unit: str = "sentences"
    documents: int | None = None
    baseline_name: str = ""

    def scored(self) -> str:
        """What the run scored: "2001 sentences", or "24 windows of 3 documents" (coref)."""
        rows = counted(self.info.sentences, self.unit[:-1], self.unit)
        return rows if self.documents is None else f"{rows} of {counted(self.documents, 'document')}"

    def compared_with(self) -> str:
        """What each label's head is compared with (``baseline_name``; "best baseline" for a result that names none)."""
        return self.baseline_name or "best baseline"

    @property
    def scores(self) -> dict[str, np.ndarray]:
        """label → [L,H] scores, with the overall grid under "overall"."""
        return {**{k: v.scores for k, v in self.labels.items()}, "overall": self.overall.scores}

    def entry(self, label: str) -> LabelScores:
        """`label`'s scores ("overall" for the overall grid); KeyError naming the labels when it has none."""
        entry = self.overall if label == "overall" else self.labels.get(label)
        if entry is None:
            raise KeyError(f"{self.probe} has no label {label!r}; labels: {', '.join(self.labels)}")
        return entry

    def best(self, label: str = "overall") -> BestHead:
        """The head with the highest score for `label` ("overall" by default), or why there is none (``best_head``).
        Where ``--select-on`` chose the label's head on another split, that head, with its score here."""
        entry = self.entry(label)
        chosen = entry.selected
        if chosen is None:
            return best_head(entry.scores, label, entry.count)
        if "reason" in chosen:
            return BestHead(label, 0, 0, float("nan"), entry.count, reason=f"{chosen['reason']} on the selection split")
        layer, head = int(chosen["layer"]), int(chosen["head"])
        return BestHead(label, layer, head, float(entry.scores[layer, head]), entry.count,
                        selection_score=float(chosen["score_on_selection"]))

    def reported(self, label: str = "overall", kind: str | None = None) -> Reported:
        """What the views show of `label` ("overall" by default; see Reported): the ``--select-on`` choice where the
        run made one, else the best head; kind "best" or "selected" asks for one of them (compare pairs like with
        like). The selected head's interval and margin come from its ``selected`` block where recorded, else its
        interval from the per-head grid (ci_low, ci_high) and its margin from the baseline, without an interval."""
        entry = self.entry(label)
        kind = kind or ("best" if entry.selected is None else "selected")
        if kind not in ("best", "selected") or (kind == "selected" and entry.selected is None):
            raise ValueError(f"{self.probe} {label}: no {kind!r} head (kinds: best, and selected after --select-on)")
        base = self.baseline(label) or {}
        point, offset = base.get("best"), base.get("best_offset")

        def margin(score: float) -> float | None:
            return score - point if point is not None and np.isfinite(score) else None

        if kind == "selected":
            chosen = self.best(label)
            if not chosen.found:
                return Reported(label, kind, None, None, float("nan"), entry.count, reason=chosen.reason,
                                baseline=point, offset=offset)
            block, at = entry.selected, (chosen.layer, chosen.head)
            grid = (None, None) if entry.ci_low is None else (float(entry.ci_low[at]), float(entry.ci_high[at]))
            low, high = (block.get(k, default) for k, default in zip(("ci_low", "ci_high"), grid))
            return Reported(label, kind, *at, chosen.score, entry.count, _number(low), _number(high),
                            _number(block.get("margin", margin(chosen.score))), _number(block.get("margin_low")),
                            _number(block.get("margin_high")), selection_score=chosen.selection_score,
                            baseline=point, offset=offset)
        top, interval = best_head(entry.scores, label, entry.count), entry.best
        where = (top.layer, top.head) if top.found else (None, None)
        low, high, margin_low, margin_high = (None,) * 4 if interval is None else (
            interval.ci_low, interval.ci_high, interval.margin_low, interval.margin_high)
        point_margin = margin(top.score) if interval is None or interval.margin is None else interval.margin
        return Reported(label, "best", *where, top.score, entry.count, _number(low), _number(high),
                        _number(point_margin), _number(margin_low), _number(margin_high), reason=top.reason,
                        baseline=point, offset=offset)

    def score_range(self, label: str = "overall") -> tuple[float, float]:
        """(lowest, highest) `label`'s score can be, as its probe declared it (extra["score_range"]: {label or "*":
        [low, high]}, null for no bound; probes.results.intervals.record_range); for results that declare none, [0, 1]
        where every interval is of a share (binomial or bounded, extra["interval_method"]), else no bound."""
        declared = self.extra.get("score_range") or {}
        bounds = declared.get(label, declared.get("*"))
        if bounds is not None:
            return (-np.inf if bounds[0] is None else float(bounds[0]), np.inf if bounds[1] is None else float(bounds[1]))
        per_head = (self.extra.get("interval_method") or {}).get("per_head") or ""
        kinds = per_head.values() if isinstance(per_head, dict) else [per_head]
        shares = all(str(k).startswith(("binomial", "bounded")) for k in kinds) and bool(per_head)
        return (0.0, 1.0) if shares else (-np.inf, np.inf)

    def few_units(self) -> str | None:
        """"the bootstrap resampled only 3 documents (fewer than 20): its 95% intervals are rough" where the result has bootstrap intervals
        and the bootstrap resampled fewer than FEW_UNITS units (``RunInfo.units``), else None: the views print it
        and mark the intervals ~; the JSON records it ("few_units")."""
        n, entries = self.info.unit_count, [*self.labels.values(), self.overall]
        if n >= FEW_UNITS or all(e.ci_low is None for e in entries):
            return None
        return (f"the bootstrap resampled only {n} {self.info.unit}{'' if n == 1 else 's'} (fewer than {FEW_UNITS}): "
                "its 95% intervals are rough")

    def baseline(self, label: str = "overall") -> dict[str, Any] | None:
        """`label`'s offset baselines ({"best", "best_offset", ...}) where its probe has them, else None."""
        baselines = self.baselines if isinstance(self.baselines, dict) else {}
        return (baselines.get("overall") if label == "overall" else baselines.get("labels", {}).get(label)) or None

    @property
    def min_count(self) -> int:
        """The run's minimum count (``--min-count``); 0 for results that record none."""
        return int(self.info.settings.get("min_count") or 0)

    def below_min_count(self, label: str) -> bool:
        """Whether `label` has fewer instances than the run's minimum count (never true of "overall")."""
        return label != "overall" and self.entry(label).count < self.min_count

    def shown(self, all_labels: bool = False) -> list[tuple[str, LabelScores]]:
        """Labels, most frequent first, those below the minimum count left out unless `all_labels`."""
        return [(k, v) for k, v in self.by_count() if all_labels or v.count >= self.min_count]

    def by_count(self) -> Iterator[tuple[str, LabelScores]]:
        """Labels, most frequent first."""
        return iter(sorted(self.labels.items(), key=lambda kv: (-kv[1].count, kv[0])))

    def to_frame(self):
        """A pandas DataFrame, one row per label × layer × head (the CSV's rows)."""
        import pandas as pd

        return pd.DataFrame(self._rows(), columns=self._columns())

    def to_table(self) -> Table:
        """The CSV's content, one row per label × layer × head (``to_frame`` without pandas)."""
        return Table(self._columns(), self._rows())

    def _columns(self) -> list[str]:
        entries = [*self.labels.values(), self.overall]
        bounds = ["ci_low", "ci_high"] if any(v.ci_low is not None for v in entries) else []
        extra = sorted({k for v in entries for k in v.extra})
        return ["label", "layer", "head", "count", "score", *bounds, *extra]

    def _rows(self) -> list[list[Any]]:
        columns = self._columns()[5:]
        rows = []
        for name, entry in [*self.labels.items(), ("overall", self.overall)]:
            grids = entry.grids()
            for layer in range(self.info.layers):
                for head in range(self.info.heads):
                    rows.append([name, layer, head, entry.count, float(entry.scores[layer, head]),
                                 *(float(grids[c][layer, head]) if c in grids else None for c in columns)])
        return rows

    def to_json(self) -> dict[str, Any]:
        i = self.info
        return {
            "probe": self.probe, "model": i.model, "corpus": i.corpus, "layers": i.layers, "heads": i.heads,
            "sentences": i.sentences, "bootstrap_units": {"count": i.unit_count, "unit": i.unit},
            **({"few_units": note} if (note := self.few_units()) else {}),
            "skipped": sum(i.skipped.values()), "skipped_reasons": i.skipped,
            "corpus_notes": i.notes, "annotation": i.annotation, **({"annotator": i.annotator} if i.annotator else {}),
            "unit": self.unit, **({"documents": self.documents} if self.documents is not None else {}),
            **({"baseline_name": self.baseline_name} if self.baseline_name else {}),
            "options": self.options, "settings": i.settings,
            "labels": {k: {**v.to_json(), **({"below_min_count": v.count < self.min_count} if "min_count" in i.settings
                                               else {})} for k, v in self.labels.items()},
            "overall": self.overall.to_json(), "baselines": self.baselines, **self.extra,
            **({"replicates": {k: pack(v, np.float32) for k, v in self.replicates.items()}} if self.replicates else {}),
            "version": i.provenance.get("probes"), "provenance": i.provenance, "schema": SCHEMA_VERSION,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ProbeResult":
        known = {"probe", "model", "corpus", "layers", "heads", "sentences", "skipped", "skipped_reasons", "corpus_notes", "options",
                 "settings", "labels", "overall", "baselines", "version", "provenance", "schema", "replicates",
                 "annotation", "annotator", "bootstrap_units", "few_units", "unit", "documents", "baseline_name"}
        info = RunInfo(model=data["model"], corpus=list(data["corpus"]), layers=int(data["layers"]),
                       heads=int(data["heads"]), sentences=int(data["sentences"]),
                       skipped=dict(data.get("skipped_reasons", {})), settings=dict(data.get("settings", {})),
                       provenance=dict(data.get("provenance", {})), notes=dict(data.get("corpus_notes", {})),
                       annotation=data.get("annotation", "gold"), annotator=data.get("annotator", ""),
                       units=(data.get("bootstrap_units") or {}).get("count"),
                       unit=(data.get("bootstrap_units") or {}).get("unit", "sentence"))
        return cls(probe=data["probe"], info=info, options=dict(data.get("options", {})),
                   labels={k: LabelScores.from_json(v) for k, v in data["labels"].items()},
                   overall=LabelScores.from_json(data["overall"]), baselines=data.get("baselines", {}),
                   extra={k: v for k, v in data.items() if k not in known},
                   replicates={k: unpack(v, np.float32, (-1,)).astype(float)
                               for k, v in data.get("replicates", {}).items()},
                   unit=data.get("unit", "sentences"), documents=data.get("documents"),
                   baseline_name=data.get("baseline_name", ""))

    def data_files(self) -> dict[str, Any]:
        """{file name: content} of the result's data files: ``<probe>.json`` and ``<probe>.csv``."""
        return {f"{self.probe}.json": self.to_json(), f"{self.probe}.csv": self.to_table()}

    def save(self, directory: str | Path) -> list[Path]:
        """Write the JSON and the CSV into `directory`; return the paths written. (The figures too:
        ``probes.save_result``.)"""
        return write_result_files(directory, self.data_files())


def load_result(path: str | Path) -> ProbeResult:
    """Read a ``<probe>.json`` written by ``ProbeResult.save``."""
    p = Path(path)
    if p.is_dir():
        raise InputError("is a directory; give a results file such as DIR/dep.json", p)
    if not p.exists():
        raise InputError("file not found", p)
    try:
        return ProbeResult.from_json(json.loads(p.read_text(encoding="utf-8")))
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg}", p, e.lineno) from None
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as e:
        raise InputError(f"not a probes results file ({type(e).__name__}: {e})", p) from None


def results_in(folder: str | Path) -> dict[str, ProbeResult]:
    """{probe name: result} of every probes results file (``<probe>.json``) in `folder`; other JSON files
    (compare.json, ablation-*.json) are passed over. InputError when there is none."""
    p = Path(folder)
    results = {}
    for f in sorted(p.glob("*.json")):
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise InputError("not valid JSON", f) from None
        if isinstance(data, dict) and "probe" in data and "labels" in data:
            results[data["probe"]] = load_result(f)
    if not results:
        raise InputError("no probe results here (the DIR/<probe>.json files of `probes run --out`)", p)
    return results


def _number(x: Any) -> float | None:
    """A bound or margin as a float, None where there is none (missing, null, NaN)."""
    return None if x is None or x != x else float(x)
