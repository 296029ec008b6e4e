"""A study's figure: each label's best-head score against the models, in the study's order (probes.tools.studies.outputs),
read back from the PNG's text chunk ("probes-lines") and its pixels."""
from __future__ import annotations

import io
import json

import numpy as np
from PIL import Image

from probes.results import plots
from probes.results.plots import lines_png
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo
from probes.tools.studies import outputs
from probes.tools.studies.outputs import figures

MODELS = ["step-0", "step-1", "step-2"]
TAB10 = ["#1f77b4", "#ff7f0e", "#2ca02c"]


def result(probe: str, grids: dict[str, tuple[list[float], int]]) -> ProbeResult:
    """A 1 layer × 2 heads result: {label: (its two heads' scores, count)}, "overall" among them."""
    info = RunInfo("m", ["c.conllu"], 1, 2, 10, {}, {"min_count": 20}, {})
    entries = {name: LabelScores(count, np.array([scores], dtype=float)) for name, (scores, count) in grids.items()}
    overall = entries.pop("overall")
    return ProbeResult(probe, info, {}, entries, overall)


def made() -> dict[str, dict[str, ProbeResult]]:
    """Three models given out of order. Worked out: dep/nsubj's best per model is step-0 0.5 (L0-H1), step-1 none
    (both heads tie at 0.7), step-2 0.6 (L0-H0); dep/root ties at 1.0 everywhere (no best head); iobj has 3 < 20
    instances."""
    out = {}
    for model, (a, b) in {"step-2": (0.6, 0.1), "step-0": (0.2, 0.5), "step-1": (0.7, 0.7)}.items():
        out[model] = {
            "dep": result("dep", {"nsubj": ([a, b], 30), "root": ([1.0, 1.0], 25), "iobj": ([a + .1, b + .1], 3),
                                  "overall": ([a - .1, b - .1 + .05], 58)}),
            "mass": result("mass", {"cls": ([0.25, 0.5], 40), "overall": ([0.25, 0.5], 40)})}
    return out


def chunk(png: bytes) -> list[dict]:
    return json.loads(Image.open(io.BytesIO(png)).text["probes-lines"])


def test_named_scores_leave_out_no_best_head():
    scores = outputs.named_scores(made(), MODELS)
    assert list(scores.columns) == MODELS
    np.testing.assert_allclose(scores.loc[("dep", "nsubj")], [0.5, np.nan, 0.6])  # step-1: a tie, not 0.7
    assert scores.loc[("dep", "root")].isna().all()  # 1.0 tied everywhere: the tables' "no best head"
    # overall's heads: step-0 (0.1, 0.45), step-1 (0.6, 0.65), step-2 (0.5, 0.05)
    np.testing.assert_allclose(scores.loc[("dep", "overall")], [0.45, 0.65, 0.5])
    np.testing.assert_allclose(scores.loc[("mass", "cls")], [0.5, 0.5, 0.5])


def test_one_figure_per_probe_frequent_labels_no_point_without_a_best_head():
    pictures = figures(made(), MODELS)
    assert set(pictures) == {"study-dep.png", "study-mass.png"}
    lines = {s["name"]: s["values"] for s in chunk(pictures["study-dep.png"])}
    # iobj: 3 < 20 instances, left out; root named in the legend as having no best head anywhere
    assert list(lines) == ["overall (n=58)", "nsubj (n=30)", "root (n=25): no best head"]
    assert lines["nsubj (n=30)"] == [0.5, None, 0.6]
    assert lines["root (n=25): no best head"] == [None, None, None]
    assert figures(made(), ["step-0"]) == {}  # one model: nothing to draw across


def test_at_most_ten_lines_in_distinct_colours():
    many = {f"l{i}": ([0.1 + i / 100, 0.0], 100 - i) for i in range(15)}
    runs = {m: {"dep": result("dep", {**many, "overall": ([0.3, 0.1], 200)})} for m in MODELS}
    lines = chunk(figures(runs, MODELS)["study-dep.png"])
    assert len(lines) == 1 + outputs.FIGURE_LABELS == 10
    assert [s["name"] for s in lines[1:]] == [f"l{i} (n={100 - i})" for i in range(9)]  # the most frequent
    colours = [s["colour"] for s in lines]
    assert colours == list(plots.LINE_COLOURS) and len(set(colours)) == 10
    assert len({s["marker"] for s in lines}) == 10


def _pixels(png: bytes, colour: str) -> int:
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)  # [rows, columns, 3]
    want = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(rgb - want).sum(axis=2) <= 12).sum())


def test_equal_lines_all_stay_visible():
    """Four series with the same values (nsubj on overall, and two more on it): each one's colour still covers
    many pixels of the chart, not only its legend's line."""
    values = [0.4, 0.6, 0.5]
    png = lines_png({name: values for name in ("overall", "nsubj", "det", "case")}, MODELS, "equal")
    legend_only = _pixels(lines_png({"overall": [np.nan] * 3, "nsubj": [np.nan] * 3, "det": [np.nan] * 3,
                                     "case": [np.nan] * 3}, MODELS, "none"), TAB10[1])
    for colour in TAB10[:3]:  # nsubj, det, case: matplotlib's first three colours (blue, orange, green)
        assert _pixels(png, colour) > legend_only + 150, colour
    assert chunk(png)[1]["values"] == values
