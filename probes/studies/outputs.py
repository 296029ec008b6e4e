"""What a study writes from its finished units: per model the results files of ``probes run``, one tidy
table of the whole study (``study.parquet``, ``study.csv``), ``study.json``, and per probe a figure of each
label's best-head score against the models in the study's order (``study-<probe>.png``: a trajectory's steps),
and the reference against each other model with paired intervals (``study-deltas.csv``).

A model's results for a corpus group are rewritten only when the units they are merged from changed
(their keys, recorded in study.json, differ), the figures asked for changed, or a file is missing; the table and study.json only when
something else was written or they are missing: a study run again unchanged rewrites nothing.
"""
from __future__ import annotations

import hashlib
import io
import json
import platform
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from probes.choices import DEFAULT_MIN_COUNT
from probes.plots import lines_png
from probes.provenance import probes_version
from probes.figures import save_result
from probes.files import STUDY_JSON, write_result_files
from probes.results import ProbeResult, load_result
from probes.state_files import merge
from probes.studies.spec import StudySpec
from probes.studies.units import Unit, UnitStore

TABLES = ("study.parquet", "study.csv")
DELTAS = "study-deltas.csv"
COLUMNS = ["model", "probe", "label", "layer", "head", "score", "count"]
FIGURE_LABELS = 10  # labels drawn per probe in study-<probe>.png besides overall: the most frequent


def previous(out: Path) -> dict[str, Any]:
    """The study.json of an earlier run into `out` ({} where there is none or it cannot be read)."""
    try:
        return json.loads((out / STUDY_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def results(spec: StudySpec, units: list[Unit], store: UnitStore, out: Path, before: dict[str, Any],
            plots: bool | str) -> tuple[dict[str, dict[str, ProbeResult]], dict[str, Any], list[Path]]:
    """{model: {probe: result}}, the record of which units each came from, and the files written."""
    made: dict[str, dict[str, ProbeResult]] = {m.name: {} for m in spec.models}
    record, written = {}, []
    for model in spec.models:
        for index, group in enumerate(spec.groups):
            mine = [u for u in units if u.model == model and u.group_index == index]
            digest = hashlib.sha256(" ".join([*(u.key for u in mine), f"plots={plots}"]).encode()).hexdigest()
            files = [out / model.name / f"{p}.json" for p in group.probes]
            pair = f"{model.name}/{index}"
            if before.get("results", {}).get(pair) == digest and all(f.is_file() for f in files):
                made[model.name].update({p: load_result(f) for p, f in zip(group.probes, files)})
            else:
                merged = merge([store.folder(u) for u in mine], code=spec.code)
                views = store.views(mine[0]) if group.shards == 1 else {}
                for name in group.probes:
                    if views.get(name):
                        merged[name].extra["sentence_views"] = views[name]
                    written += save_result(merged[name], out / model.name, plots=plots)
                made[model.name].update(merged)
            record[pair] = digest
    return made, record, written


def frame(made: dict[str, dict[str, ProbeResult]]):
    """The tidy table: one row per model × probe × label × layer × head (the label "overall" included)."""
    import pandas as pd

    parts = []
    for model, by_probe in made.items():
        for probe, result in by_probe.items():
            rows = result.to_frame()[["label", "layer", "head", "score", "count"]]
            parts.append(rows.assign(model=model, probe=probe))
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)
    return table[COLUMNS].astype({"layer": "int64", "head": "int64", "count": "int64", "score": "float64"})


def best_scores(table, models: list[str]):
    """[probe, label] × model: each label's best-head score (its top score over the L×H heads; where heads tie
    the tied score) for every model, columns in the study's model order."""
    top = table.groupby(["probe", "label", "model"])["score"].max().unstack("model")
    return top.reindex(columns=[m for m in models if m in top.columns])


def figures(table, models: list[str], min_count: int = DEFAULT_MIN_COUNT) -> dict[str, bytes]:
    """{study-<probe>.png: PNG} of each probe with labels: the best-head score of overall and of the
    FIGURE_LABELS labels most frequent in the first model (at least `min_count` instances) against the models."""
    if table.empty or len(models) < 2:
        return {}
    scores = best_scores(table, models)
    counts = table[table["model"] == models[0]].groupby(["probe", "label"])["count"].first()
    pictures = {}
    for probe in sorted(table["probe"].unique()):
        frequent = counts[probe].drop("overall", errors="ignore")
        frequent = frequent[frequent >= min_count].sort_values(ascending=False, kind="stable")
        labels = [x for x in ["overall", *frequent.index[:FIGURE_LABELS]] if (probe, x) in scores.index]
        series = {f"{x} (n={int(counts[probe][x])})" if x in counts[probe] else x: scores.loc[(probe, x)].tolist()
                  for x in labels}
        if series:
            pictures[f"study-{probe}.png"] = lines_png(series, list(scores.columns),
                                                       f"{probe}: each label's best-head score across the study")
    return pictures


def deltas(made: dict[str, dict[str, ProbeResult]], reference: str):
    """The reference against each other model (probes.compare.compare_results, reference = A): one row per
    model × probe × label with both counts and best heads, the change of the best score and its paired
    bootstrap interval (delta_low, delta_high; flat where it contains 0). None with one model only."""
    import pandas as pd

    from probes.compare.results_diff import compare_results

    frames = [compare_results(made[reference], results).to_frame().assign(model=model)
              for model, results in made.items() if model != reference and made[reference].keys() & results.keys()]
    if not frames:
        return None
    table = pd.concat(frames, ignore_index=True)
    return table[["model", *[c for c in table.columns if c != "model"]]]


def write_study(out: Path, table, summary: dict[str, Any], pictures: dict[str, bytes], changes=None) -> list[Path]:
    """study.parquet, study.csv, study.json, the figures (``figures``) and the reference's paired changes
    (``deltas``: study-deltas.csv), each atomically."""
    parquet = io.BytesIO()
    table.to_parquet(parquet, index=False)
    return write_result_files(out, {TABLES[0]: parquet.getvalue(), TABLES[1]: table, STUDY_JSON: summary,
                                    **pictures, **({DELTAS: changes} if changes is not None else {})})


def summary(spec: StudySpec, out: Path, engine: dict[str, Any], units: list[dict[str, Any]],
            record: dict[str, str], seconds: float) -> dict[str, Any]:
    """What study.json records: the study, what ran (each unit: ran now or cached, where, how long), the
    results' unit digests, timings and provenance."""
    import torch
    import transformers

    ran = [u for u in units if u["status"] == "ran"]
    return {
        "kind": "probes-study", "study": spec.source, "out": str(out), "reference": spec.reference,
        "models": [{"name": m.name, "path": m.path} for m in spec.models],
        "corpora": [{"name": g.name, "corpus": list(g.corpus), "probes": list(g.probes), "options": g.options,
                     "settings": g.settings, "shards": g.shards} for g in spec.groups],
        "engine": engine, "units": units, "results": record,
        "timings": {"seconds": round(seconds, 3), "units_run": len(ran), "units_cached": len(units) - len(ran),
                    "unit_seconds": round(sum(u["seconds"] for u in ran), 3),
                    "load_seconds": round(sum(u["load_seconds"] for u in ran), 3)},
        "provenance": {"probes": probes_version(), "torch": torch.__version__, "transformers": transformers.__version__,
                       "python": platform.python_version(), "platform": platform.platform(),
                       "command": shlex.join(sys.argv), "created": datetime.now(timezone.utc).isoformat(timespec="seconds")},
    }
