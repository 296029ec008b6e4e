"""A study's figure: each label's best-head score against the models, in the study's order (probes.studies.outputs)."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd

from probes.studies.outputs import best_scores, figures


def table() -> pd.DataFrame:
    """Two probes, three models (given out of order), 1 layer × 2 heads; worked out: dep/nsubj's best per model is
    step-0 0.5, step-1 0.7, step-2 0.6 (max of the two heads)."""
    rows = []
    for model, (a, b) in {"step-2": (0.6, 0.1), "step-0": (0.2, 0.5), "step-1": (0.7, 0.7)}.items():
        for label, count, shift in (("nsubj", 30, 0.0), ("iobj", 3, 0.1), ("overall", 33, -0.1)):
            rows += [[model, "dep", label, 0, 0, a + shift, count], [model, "dep", label, 0, 1, b + shift, count]]
        rows += [[model, "mass", "cls", 0, h, 0.25 * (h + 1), 40] for h in range(2)]
    return pd.DataFrame(rows, columns=["model", "probe", "label", "layer", "head", "score", "count"])


def test_best_scores_in_study_order():
    scores = best_scores(table(), ["step-0", "step-1", "step-2"])
    assert list(scores.columns) == ["step-0", "step-1", "step-2"]
    assert np.allclose(scores.loc[("dep", "nsubj")], [0.5, 0.7, 0.6])
    assert np.allclose(scores.loc[("dep", "overall")], [0.4, 0.6, 0.5])
    assert np.allclose(scores.loc[("mass", "cls")], [0.5, 0.5, 0.5])


def test_one_figure_per_probe_labels_above_min_count(monkeypatch):
    drawn = {}

    def lines(series, xticks, title):
        drawn[title.split(":")[0]] = (series, xticks)
        return b"png"

    monkeypatch.setattr("probes.studies.outputs.lines_png", lines)
    pictures = figures(table(), ["step-0", "step-1", "step-2"])
    assert set(pictures) == {"study-dep.png", "study-mass.png"}
    series, xticks = drawn["dep"]
    assert xticks == ["step-0", "step-1", "step-2"]
    assert list(series) == ["overall (n=33)", "nsubj (n=30)"]  # iobj: 3 < 20 instances, left out
    assert np.allclose(series["nsubj (n=30)"], [0.5, 0.7, 0.6])
    assert figures(table(), ["step-0"]) == {}  # one model: nothing to draw across


def test_figure_is_a_png():
    from PIL import Image

    png = figures(table(), ["step-0", "step-1", "step-2"])["study-dep.png"]
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size[0] > 300
    colours = np.unique(np.asarray(image.convert("RGB")).reshape(-1, 3), axis=0)
    assert len(colours) > 16
