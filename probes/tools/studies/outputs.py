"""What a study writes from its finished units: per model the results files of ``probes run``, one tidy
table of the whole study (``study.parquet``, ``study.csv``), ``study.json``, and per probe a figure of each
label's best-head score against the models in the study's order (``study-<probe>.png``: a trajectory's steps; no
point where a result names no best head),
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

from probes.base.choices import DEFAULT_MIN_COUNT
from probes.results.plots import lines_png
from probes.base.provenance import probes_version
from probes.results.figures import save_result
from probes.base.files import STUDY_JSON, write_result_files
from probes.results.probe_result import ProbeResult, load_result
from probes.running.state_files import merge
from probes.tools.studies.spec import StudySpec
from probes.tools.studies.units import Unit, UnitStore

TABLES = ("study.parquet", "study.csv")
DELTAS = "study-deltas.csv"
COLUMNS = ["model", "probe", "label", "layer", "head", "score", "count"]
FIGURE_LABELS = 9  # labels drawn per probe in study-<probe>.png besides overall (10 lines): the most frequent


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


def named_scores(made: dict[str, dict[str, ProbeResult]], models: list[str]):
    """[probe, label] × model: each label's reported score (ProbeResult.reported: the best head's, or the head
    ``--select-on`` chose) for every model, columns in the study's model order; NaN where the result names no head
    (a tie at the top, a top score of 0: the tables' "no best head") or the model has no such label."""
    import pandas as pd

    rows = {}
    for m, model in enumerate(models):
        for probe, result in made.get(model, {}).items():
            for label in ["overall", *result.labels]:
                shown = result.reported(label)
                rows.setdefault((probe, label), [float("nan")] * len(models))[m] = \
                    shown.score if shown.found else float("nan")
    index = pd.MultiIndex.from_tuples(sorted(rows), names=["probe", "label"])
    return pd.DataFrame([rows[k] for k in index], index=index, columns=models)


def figures(made: dict[str, dict[str, ProbeResult]], models: list[str],
            min_count: int = DEFAULT_MIN_COUNT) -> dict[str, bytes]:
    """{study-<probe>.png: PNG} of each probe with labels: the reported score (``named_scores``) of overall and of
    the FIGURE_LABELS labels most frequent in the first model that has the probe (at least `min_count` instances)
    against the models; no point where a model's result names no head."""
    if len(models) < 2:
        return {}
    scores = named_scores(made, models)
    pictures = {}
    for probe in sorted({p for results in made.values() for p in results}):
        first = next(made[m][probe] for m in models if probe in made.get(m, {}))
        frequent = [name for name, entry in first.by_count() if entry.count >= min_count][:FIGURE_LABELS]
        counts = {"overall": first.overall.count, **{name: first.labels[name].count for name in frequent}}
        series = {f"{x} (n={counts[x]})" + (": no best head" if scores.loc[(probe, x)].isna().all() else ""):
                  scores.loc[(probe, x)].tolist() for x in ["overall", *frequent]}
        title = f"{probe}: each label's best-head score across the study (no point: no best head)"
        pictures[f"study-{probe}.png"] = lines_png(series, models, title)
    return pictures


def deltas(made: dict[str, dict[str, ProbeResult]], reference: str):
    """The reference against each other model (probes.tools.compare.compare_results, reference = A): one row per
    model × probe × label with both counts and best heads, the change of the best score and its paired
    bootstrap interval (delta_low, delta_high; flat where it contains 0). None with one model only."""
    import pandas as pd

    from probes.tools.compare.results_diff import compare_results

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
