"""`probes report`: one self-contained HTML file (inline JavaScript and CSS, no network) of one or more results
folders, to open from disk.

    build_report([folder, ...]) -> str      the HTML
    write_report([folder, ...], path)       written atomically

Each folder (``probes run --out``) is one model; a study's folder (``probes study``, or ``probes run --model A
--model B --out``: it holds study.json) is each of its models, in the study's order. The page
shows, per probe, the label table (sortable by count and by margin over the baseline), the layer × head grid
of the chosen label for every model, and with several models the delta grid against a chosen reference; labels
below the run's ``--min-count`` are left out of the table, the head details and the chart across models
unless asked (a check box), and shown greyed with their count when they are;
hovering a cell shows its score, other grids (directions, intervals where a probe has them), count and
baseline; clicking it shows that head's details and its per-sentence view (probes.results.examples): the attention
map as lines between the words (like bertviz's head view) and the probe's own view (probes.results.presentation:
``Presentation.view``), green where the head gets an item and red where not, as the probe scored it: dep and
trees the gold arcs above the sentence with the head's argmax (dep) or decoded tree (trees) below; srl
predicate → argument and frames target → frame element arcs; pos, ner and con each unit's gold and predicted
label under it; seg its example sentences as the head segments them; none for a probe without a view. Arcs are drawn
by nesting level and their labels moved apart where they would meet, so that no two label boxes intersect; the grids
share the panel's width. With several models (a study's checkpoints, in the order given), a chart of each label's
best-head score against the model: overall and the 9 most frequent labels, each line in a colour of its own, no point
where a model's result names no best head (a tie at the top), a click on a legend entry hiding or showing its line.

Data is embedded once as JSON; per-sentence argmax columns and attention maps as the results keep them (base64,
see probes.results.examples), each sentence's maps stored once per model even when several probes kept them.
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from probes.tools.compare.results_diff import load_results
from probes.base.errors import InputError
from probes.base.files import STUDY_JSON, json_grid, short_model_name, write_atomic
from probes.base.packing import specials_of
from probes.results.probe_result import ProbeResult, Reported


def write_report(folders: list[str | Path], path: str | Path) -> Path:
    """The report of `folders`, written to `path` atomically."""
    return write_atomic(Path(path), build_report(folders).encode("utf-8"))


def build_report(folders: list[str | Path]) -> str:
    """The report's HTML for one or more results folders (or results files)."""
    models = [model for folder in folders for model in _models(Path(folder))]
    names = _unique([short_model_name(results[next(iter(results))].info.model) for _, results in models])
    data = {"models": [_model(name, str(path), results) for name, (path, results) in zip(names, models)]}
    page = _asset("report.html")
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return (page.replace("/*CSS*/", _asset("report.css")).replace("/*JS*/", _asset("report.js"))
            .replace("/*DATA*/", payload))


def _models(folder: Path) -> list[tuple[Path, dict[str, ProbeResult]]]:
    """(folder, {probe: result}) for a results folder or file; for a study's folder (``probes study``, ``probes run
    --model A --model B``: one that holds study.json) its models' folders in the study's order; for a folder of
    results folders (none of its own), each subfolder that holds results."""
    if (folder / STUDY_JSON).is_file():
        return [(p, load_results(p)) for p in _study_folders(folder)]
    if folder.is_dir() and not any(folder.glob("*.json")):
        subfolders = sorted(p for p in folder.iterdir() if p.is_dir() and any(p.glob("*.json")))
        if subfolders:
            return [(p, load_results(p)) for p in subfolders]
    results = load_results(folder)
    if not results:
        raise InputError("no probe results here", folder)
    return [(folder, results)]


def _study_folders(folder: Path) -> list[Path]:
    """A study's model folders (OUT/<model>, in study.json's order); InputError where study.json cannot be read or
    names no model whose folder holds results."""
    where = folder / STUDY_JSON
    try:
        names = [m["name"] for m in json.loads(where.read_text(encoding="utf-8"))["models"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"not a study's record ({type(e).__name__}: {e})", where) from None
    folders = [folder / str(n) for n in names if (folder / str(n)).is_dir() and any((folder / str(n)).glob("*.json"))]
    if not folders:
        raise InputError(f"the study's models ({', '.join(map(str, names))}) have no results folder here", folder)
    return folders


def _unique(names: list[str]) -> list[str]:
    """Names made distinct by a counter where two models share one."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if names.count(name) == 1 else f"{name} ({seen[name]})")
    return out


def _model(name: str, path: str, results: dict[str, ProbeResult]) -> dict[str, Any]:
    sentences: dict[str, dict[str, Any]] = {}  # sentence key -> words, gold, argmax columns, maps by head
    probes = {probe: _probe(result, sentences) for probe, result in results.items()}
    first = next(iter(results.values()))
    return {"name": name, "path": path, "model": first.info.model, "layers": first.info.layers,
            "heads": first.info.heads, "probes": probes, "sentences": sentences}


def _probe(result: ProbeResult, sentences: dict[str, dict[str, Any]]) -> dict[str, Any]:
    base = result.baselines.get("labels", {}) if isinstance(result.baselines, dict) else {}
    labels = [{**_label(name, entry, base.get(name), result.reported(name)), "rare": result.below_min_count(name)}
              for name, entry in result.labels.items()]
    overall = _label("overall", result.overall, result.baselines.get("overall") if isinstance(result.baselines, dict)
                     else None, result.reported())
    views = result.extra.get("sentence_views") or {}
    keys = []
    for view in views.get("sentences", []):
        key = " ".join(view["words"]) + f"#{view['index']}"
        entry = sentences.setdefault(key, {"id": view["sent_id"] or str(view["index"] + 1), "words": view["words"],
                                           "argmax": view["predictions"], "width": len(view["words"]) + 1, "maps": {},
                                           "specials": specials_of(views)})  # the root and end columns' names
        for head, packed in view["attention"].items():
            entry["maps"].setdefault(head, packed)
        keys.append(key)
    return {"labels": labels, "overall": overall, "min_count": result.min_count, "sentences": keys, "kind": views.get("kind"),
            "views": [{"items": v.get("items", []), "marks": v.get("marks", {})} for v in views.get("sentences", [])],
            # seg: its example sentences' units and every head's word ends (probes.builtin.seg: "examples")
            "segments": [{"id": ex["sent_id"] or str(ex["index"] + 1), "gold": ex["gold"], "units": ex["units"],
                          "ends": ex["ends"]} for ex in result.extra.get("examples", []) if "ends" in ex],
            "names": views.get("labels", []), "kept": views.get("heads", []),
            "named": views.get("named", []), "sentences_scored": result.info.sentences,
            "annotation": result.info.annotation,  # "gold", or "silver" where a tool (spaCy) made the labels
            "corpus": [Path(c).name for c in result.info.corpus]}


def _label(name: str, entry, baseline: dict | None, best: Reported) -> dict[str, Any]:
    """A label's data; "best": the head its result reports (ProbeResult.reported: the best, or the head --select-on
    chose) {l, h, v, kind, low, high, margin, margin_low, margin_high}, or {why, kind} where none is named."""
    shown = {"kind": best.kind, "low": best.ci_low, "high": best.ci_high, "margin": best.margin,
             "margin_low": best.margin_low, "margin_high": best.margin_high}
    return {"name": name, "count": int(entry.count), "scores": json_grid(entry.scores),
            "best": {"l": best.layer, "h": best.head, "v": best.score, **shown} if best.found else
            {"why": best.reason, "kind": best.kind},
            "extra": {k: json_grid(v) for k, v in entry.extra.items()},
            "interval": None if entry.ci_low is None else {"low": json_grid(entry.ci_low), "high": json_grid(entry.ci_high)},
            "baseline": None if not baseline else {"offset": baseline.get("best_offset"), "score": baseline.get("best")}}


def _asset(name: str) -> str:
    return resources.files("probes.tools.report").joinpath(name).read_text(encoding="utf-8")
