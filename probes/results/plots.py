"""Layer × head heatmaps with the best head marked: one grid, many grids drawn through one reused figure, and an
overview of many grids as small multiples in one picture.

Drawing is most of the cost of a figure, so the many-grid paths never build a figure per grid: ``heatmap_pngs``
reuses one figure (new data, limits, title and box per grid) and ``overview_png`` tiles every grid into one
image drawn by a single ``imshow``. ``lines_png`` draws values against checkpoints (a study's best-head scores).
"""
from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass

import numpy as np

from probes.results.probe_result import Reported, best_head
from probes.base.wording import fixed

@dataclass
class Grid:
    """One [L,H] grid to draw: its scores, title, colour limits (None: the grid's own range), and `marked`, an
    [L,H] bool grid of heads drawn with a white dot (e.g. whose interval lies above the best baseline) or None;
    `shown`: the head the result reports (ProbeResult.reported), boxed and named in place of the grid's own best
    head, and written into the PNG's text chunk "probes" as JSON (``shown_in``); `trivial`: why the grid's scores
    are trivially high, where they are (the overview fades its tile and draws it as its probe orders it: last)."""

    scores: np.ndarray
    title: str
    vmin: float | None = 0.0
    vmax: float | None = 1.0
    marked: np.ndarray | None = None
    shown: Reported | None = None
    trivial: str = ""  # why the grid's scores are trivially high (dep's root: attention to [CLS] counts); "": not


def heatmap_png(scores: np.ndarray, title: str, subtitle: str = "", *, vmin: float | None = 0.0,
                vmax: float | None = 1.0, cmap: str = "viridis", mark: str | None = "max",
                xlabel: str = "head", marked: np.ndarray | None = None, bad: str | None = None,
                scale: str = "") -> bytes:
    """A PNG of an [L,H] grid: rows are layers (0 at the top), columns heads; the best head is boxed, where one
    head is best (probes.results.probe_result.best_head; the title says why not when the top is tied or 0).

    mark="min" boxes the lowest cell instead (e.g. the head whose removal costs most); None boxes none.
    marked: [L,H] bool, heads dotted in white (``Grid.marked``); bad: the colour of NaN cells (default: none, the
    background shows); scale: the colour bar's name (the score's).
    """
    return heatmap_pngs([Grid(np.asarray(scores, dtype=float), title, vmin, vmax, marked)], subtitle, cmap=cmap,
                        mark=mark, xlabel=xlabel, bad=bad, scale=scale)[0]


def heatmap_pngs(grids: list[Grid], subtitle: str = "", *, cmap: str = "viridis", mark: str | None = "max",
                 xlabel: str = "head", bad: str | None = None, scale: str = "") -> list[bytes]:
    """One PNG per grid (all of one shape [L,H]), drawn by one figure whose image, colour limits, title and
    box are updated between grids; NaN cells in colour `bad` (default: none, the background shows); the colour bar
    named `scale` (the score's name)."""
    plt = pyplot()
    import matplotlib
    from matplotlib.patches import Rectangle

    layers, heads = grids[0].scores.shape
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * heads + 2), max(3.0, 0.4 * layers + 1.6)), dpi=100)
    colours = matplotlib.colormaps[cmap] if bad is None else matplotlib.colormaps[cmap].with_extremes(bad=bad)
    image = ax.imshow(np.zeros((layers, heads)), cmap=colours, aspect="auto")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04).set_label(scale, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("layer")
    ax.set_xticks(range(heads))
    ax.set_yticks(range(layers))
    ax.tick_params(labelsize=7)
    box = ax.add_patch(Rectangle((-0.5, -0.5), 1, 1, fill=False, linewidth=2,  # inside the image: no extra column
                                 edgecolor="black" if mark == "min" else "red"))
    dots = ax.scatter([], [], s=9, c="white", edgecolors="black", linewidths=0.4)
    pngs = []
    for grid in grids:
        scores = np.asarray(grid.scores, dtype=float)
        image.set_data(np.ma.masked_invalid(scores))
        layers_marked, heads_marked = np.nonzero(grid.marked) if grid.marked is not None else ([], [])
        dots.set_offsets(np.column_stack([heads_marked, layers_marked]).reshape(-1, 2))
        finite = scores[np.isfinite(scores)]
        low = grid.vmin if grid.vmin is not None else (finite.min() if finite.size else 0.0)
        high = grid.vmax if grid.vmax is not None else (finite.max() if finite.size else 1.0)
        image.set_clim(low, high if high > low else low + 1e-9)
        title = grid.title
        picked = grid.shown or (None if mark is None or finite.size == 0 else
                                best_head(-scores if mark == "min" else scores))
        box.set_visible(picked is not None and picked.found)
        if grid.shown is not None:
            title = f"{title}\n{_caption(grid.shown)}"
        elif box.get_visible():
            title = f"{title}\n{'lowest' if mark == 'min' else 'best'} {picked.name} = {fixed(picked.score)}"
        elif picked is not None:
            title = f"{title}\nno {'lowest' if mark == 'min' else 'best'} head: {picked.reason}"
        if box.get_visible():
            box.set_xy((picked.head - 0.5, picked.layer - 0.5))
        ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), fontsize=9)
        fig.tight_layout()
        pngs.append(png_bytes(fig, shown_in([grid])))
    plt.close(fig)
    return pngs


def overview_png(grids: list[Grid], title: str, *, cmap: str = "viridis", scale: str = "") -> bytes:
    """The PNG of ``overview_figure``, its text chunks those of ``shown_in`` and "probes-tiles" (``tiles_in``), its title in a "Title" chunk too."""
    fig, tiles = _overview(grids, title, cmap, scale)
    return closed_png(fig, {**shown_in(grids), **tiles_in(fig, grids, tiles), "Title": title})


def overview_figure(grids: list[Grid], title: str, *, cmap: str = "viridis", scale: str = ""):
    """Small multiples: every grid (one shape [L,H], one colour scale: the first grid's limits, or the range of
    all where those are None) as a tile of one image, its title above it and its best head (where one head is best,
    probes.results.probe_result.best_head) boxed in red, or where none is, a hatched note beside the title ("tie" where heads
    tie at the top, else "none"); the heads a grid marks (``Grid.marked``) dotted in white; a trivial grid's tile
    (``Grid.trivial``) faded under white. Layer ticks at the left of each row of tiles, head ticks under the last
    tile of each column (none under an empty slot); columns of tiles far enough apart for their titles; the colour
    bar named `scale` (the score's name); the figure's title wrapped to its width above the tiles, and the figure
    sized to its content (no empty band). A matplotlib figure, for the caller to save and close."""
    return _overview(grids, title, cmap, scale)[0]


@dataclass(frozen=True)
class Tiles:
    """Where an overview's `count` tiles of [layers, heads] cells lie in its mosaic: `columns` columns of tiles,
    `gap` cells between two (at least GAP_X, more where a tile's title is wider than its tile), GAP_Y rows above
    each row of tiles for their titles."""

    count: int
    layers: int
    heads: int
    columns: int
    gap: int

    @property
    def rows(self) -> int:
        return math.ceil(self.count / self.columns)

    @property
    def shape(self) -> tuple[int, int]:
        """The mosaic's [rows, columns] of cells: the last column of tiles followed by room for its titles."""
        return self.rows * (self.layers + GAP_Y), self.columns * (self.heads + self.gap) - 1

    def corner(self, i: int) -> tuple[int, int]:
        """(top row, left column) of the cell where tile `i` starts."""
        return (i // self.columns) * (self.layers + GAP_Y) + GAP_Y, (i % self.columns) * (self.heads + self.gap)

    def last_in_column(self, column: int) -> int:
        """The index of the lowest tile in `column`."""
        return column + (self.count - 1 - column) // self.columns * self.columns


def _overview(grids: list[Grid], title: str, cmap: str, scale: str):
    """``overview_figure``'s figure and its Tiles."""
    plt = pyplot()
    from matplotlib.font_manager import FontProperties
    from matplotlib.patches import Rectangle
    from matplotlib.patheffects import withStroke

    layers, heads = grids[0].scores.shape
    fig = plt.figure(dpi=100)
    renderer = fig.canvas.get_renderer()
    names = [grid.title + (" · trivial" if grid.trivial else "") for grid in grids]
    notes = [unnamed_note(grid) for grid in grids]
    widest = max(renderer.get_text_width_height_descent(f"{name}  {note}  " if note else f"{name} ",
                                                        FontProperties(size=6.5), ismath=False)[0]
                 for name, note in zip(names, notes)) / fig.dpi / CELL  # cells
    tiles = Tiles(len(grids), layers, heads, tile_columns(len(grids), layers, heads),
                  max(GAP_X, math.ceil(widest - heads + 0.5)))
    mosaic = np.full(tiles.shape, np.nan)
    best_x, best_y, dot_x, dot_y = [], [], [], []
    for i, grid in enumerate(grids):
        top, left = tiles.corner(i)
        scores = np.asarray(grid.scores, dtype=float)
        mosaic[top:top + layers, left:left + heads] = scores
        if grid.marked is not None:
            marked_layers, marked_heads = np.nonzero(grid.marked)
            dot_x += (left + marked_heads).tolist()
            dot_y += (top + marked_layers).tolist()
        best = grid.shown or best_head(scores)
        if best.found:
            best_x.append(left + best.head)
            best_y.append(top + best.layer)
    finite = mosaic[np.isfinite(mosaic)]
    vmin = grids[0].vmin if grids[0].vmin is not None else (finite.min() if finite.size else 0.0)
    vmax = grids[0].vmax if grids[0].vmax is not None else (finite.max() if finite.size else 1.0)
    # inches: the tiles; the margins for the layer ticks and label (left), the head ticks and label (bottom), the
    # colour bar with its ticks and name (right); the figure at least MIN_WIDTH wide, the tiles centred
    tiles_w, tiles_h = mosaic.shape[1] * CELL, (mosaic.shape[0] - TRIM) * CELL
    left_in, bottom_in, bar_gap, bar_w, right_in = 0.45, 0.3, 0.12, 0.12, 0.85
    width = max(MIN_WIDTH, left_in + tiles_w + right_in)
    x_in = left_in + (width - left_in - tiles_w - right_in) / 2
    fig.set_size_inches(width, bottom_in + tiles_h)
    heading = wrap_title(fig, title, fontsize=9)
    height = bottom_in + tiles_h + heading
    fig.set_figheight(height)
    ax = fig.add_axes((x_in / width, bottom_in / height, tiles_w / width, tiles_h / height))
    image = ax.imshow(np.ma.masked_invalid(mosaic), cmap=cmap, vmin=vmin, vmax=vmax if vmax > vmin else vmin + 1e-9,
                      interpolation="nearest", aspect="auto")
    ax.set_ylim(mosaic.shape[0] - 0.5, TRIM - 0.5)  # the first row of tiles' gap trimmed to its titles' height
    ax.scatter(best_x, best_y, marker="s", s=(72 * CELL) ** 2 * 0.9, facecolors="none", edgecolors="red",
               linewidths=1.0)
    ax.scatter(dot_x, dot_y, s=2.5, c="white", edgecolors="none")
    for i, (grid, name, note) in enumerate(zip(grids, names, notes)):
        top, left = tiles.corner(i)
        if grid.trivial:
            ax.add_patch(Rectangle((left - 0.5, top - 0.5), heads, layers, facecolor="white", alpha=FADE,
                                   edgecolor="none"))
        text = ax.text(left - 0.5, top - 0.8, name, fontsize=6.5, va="bottom", ha="left", clip_on=False,
                       color="#757575" if grid.trivial else "black")
        if note:
            ax.annotate(note, xy=(1, 0), xycoords=text, xytext=(4, 0), textcoords="offset points", fontsize=6,
                        fontweight="bold", va="bottom", ha="left", color=NOTE_COLOUR, annotation_clip=False,
                        path_effects=[withStroke(linewidth=2.5, foreground="white")],
                        bbox={"boxstyle": "square,pad=0.3", "facecolor": "white", "edgecolor": NOTE_COLOUR,
                              "hatch": "////", "linewidth": 0.6})
    layer_ticks, head_ticks = _tick_steps(layers), _tick_steps(heads)
    ax.set_yticks([r * (layers + GAP_Y) + GAP_Y + t for r in range(tiles.rows) for t in layer_ticks],
                  [str(t) for _ in range(tiles.rows) for t in layer_ticks])
    ax.set_xticks([])
    for column in range(min(tiles.columns, len(grids))):
        top, left = tiles.corner(tiles.last_in_column(column))
        for t in head_ticks:
            ax.text(left + t, top + layers - 0.5 + 0.35, str(t), fontsize=5, ha="center", va="top", clip_on=False,
                    gid="head-tick")
    ax.tick_params(labelsize=5, length=1.5, pad=1)
    ax.set_ylabel("layer", fontsize=7)
    ax.set_xlabel("head", fontsize=7, labelpad=9)
    ax.spines[:].set_visible(False)
    bar = fig.add_axes(((x_in + tiles_w + bar_gap) / width, bottom_in / height, bar_w / width, tiles_h / height))
    fig.colorbar(image, cax=bar)
    bar.tick_params(labelsize=6)
    bar.set_ylabel(scale, fontsize=7)
    return fig, tiles


GAP_X, GAP_Y = 1, 3  # cells between the overview's tiles (at least); a tile's title sits in the gap above it
CELL = 0.13  # inches per cell of the overview
TRIM = 1.8  # cells of the gap above the first row of tiles left out of the picture: the rest holds their titles
MIN_WIDTH = 4.0  # inches: the overview's narrowest figure (its title wraps within it)
FADE = 0.7  # a trivial grid's tile lies under white of this opacity
NOTE_COLOUR = "#e65100"  # the hatched note beside a tile's title where no head is named


def tile_columns(tiles: int, layers: int, heads: int) -> int:
    """Columns of the overview's tiles: about as many as make the mosaic 1.6 times as wide as high."""
    return max(1, min(tiles, round(math.sqrt(tiles * 1.6 * layers / heads)) or 1))


def unnamed_note(grid: Grid) -> str:
    """The note beside a tile's title where no head is named: "tie" where heads tie at the top score, "none" for
    another reason (a top score of 0, no instance); "" where a head is named."""
    best = grid.shown or best_head(np.asarray(grid.scores, dtype=float))
    if best.found:
        return ""
    return "tie" if " tie " in f" {best.reason} " else "none"


def tiles_in(fig, grids: list[Grid], tiles: Tiles) -> dict[str, str]:
    """The overview PNG's text chunk "probes-tiles": JSON {"scale": the colour bar's name, "tiles": [{"title",
    "note" (``unnamed_note``), "trivial", "box": the tile's [left, top, right, bottom] in the PNG's pixels}]}."""
    ax, bar = fig.axes[0], fig.axes[1]
    height = fig.bbox.height
    boxes = []
    for i, grid in enumerate(grids):
        top, left = tiles.corner(i)
        (x0, y0), (x1, y1) = ax.transData.transform([(left - 0.5, top - 0.5),
                                                     (left + tiles.heads - 0.5, top + tiles.layers - 0.5)])
        boxes.append({"title": grid.title, "note": unnamed_note(grid), "trivial": bool(grid.trivial),
                      "box": [round(x0), round(height - y0), round(x1), round(height - y1)]})
    return {"probes-tiles": json.dumps({"scale": bar.get_ylabel(), "tiles": boxes})}


def _tick_steps(n: int) -> list[int]:
    """At most 4 tick positions of 0..n-1, 0 first."""
    return list(range(0, n, math.ceil(n / 4)))


def wrap_title(fig, title: str, fontsize: float = 9) -> float:
    """`title` as the figure's title at its top, wrapped at spaces into lines no wider than the figure (measured by
    its renderer); its height in inches, with a margin."""
    import textwrap

    text = fig.suptitle(title, fontsize=fontsize, y=1.0, va="top")
    renderer = fig.canvas.get_renderer()
    room = 0.96 * fig.bbox.width
    chars = len(title)
    while chars > 10 and text.get_window_extent(renderer).width > room:
        chars = min(chars - 1, int(chars * room / text.get_window_extent(renderer).width))
        text.set_text(textwrap.fill(title, chars))
    return text.get_window_extent(renderer).height / fig.dpi + 0.1


def _caption(shown: Reported) -> str:
    """A heatmap's line naming the head a result reports: "selected L3-H11 = 0.260 [0.228, 0.294]", or why none."""
    if not shown.found:
        return f"no {shown.kind} head: {shown.reason}"
    bounds = f" [{fixed(shown.ci_low)}, {fixed(shown.ci_high)}]" if shown.ci_low is not None else ""
    return f"{shown.kind} {shown.name} = {fixed(shown.score)}{bounds}"


def shown_in(grids: list[Grid]) -> dict[str, str]:
    """A PNG's text chunks: "probes", the JSON list of the heads its grids report (Reported.to_json); {} for none."""
    shown = [g.shown.to_json() for g in grids if g.shown is not None]
    return {"probes": json.dumps(shown)} if shown else {}


def lines_png(series: dict[str, list[float]], xticks: list[str], title: str, *, xlabel: str = "checkpoint",
              ylabel: str = "best-head score") -> bytes:
    """A line chart: each series (a label: one value per x position, NaN where it has none: nothing is drawn
    there) against the positions 0..n-1 named by `xticks` (e.g. a study's checkpoints, each label's best-head
    score), at most len(LINE_COLOURS) series: the first drawn thick, black and half transparent under the others
    (e.g. "overall"), the others each in a colour of the categorical palette (LINE_COLOURS: tab10 without its grey)
    with a marker of its own, each series' points moved sideways by a small step of its own (at most ±0.15 of
    the distance between positions) so that equal values stay visible side by side; a legend on the right. Text
    chunk "probes-lines": JSON [{"name", "values" (null for none), "colour", "marker"}]."""
    if len(series) > len(LINE_COLOURS):
        raise ValueError(f"{len(series)} series: at most {len(LINE_COLOURS)} lines in one chart")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(xticks) + 3.5), 3.6), dpi=100)
    x = np.arange(len(xticks))
    step = min(0.05, 0.3 / max(1, len(series) - 1))
    drawn = []
    for i, (name, values) in enumerate(series.items()):
        values = np.asarray(values, dtype=float)
        colour, marker = LINE_COLOURS[i], LINE_MARKERS[i]
        style = ({"linewidth": 3.0, "alpha": 0.45, "zorder": 1, "markersize": 4} if i == 0 else
                 {"linewidth": 1.4, "zorder": 2 + i, "markersize": 4, "markeredgecolor": "white",
                  "markeredgewidth": 0.5})
        ax.plot(x + (i - (len(series) - 1) / 2) * step, values, color=colour, marker=marker, label=name, **style)
        drawn.append({"name": name, "values": [None if not np.isfinite(v) else float(v) for v in values],
                      "colour": colour, "marker": marker})
    ax.set_xticks(x, xticks, rotation=30 if max(map(len, xticks), default=0) > 10 else 0, ha="right", fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return closed_png(fig, {"probes-lines": json.dumps(drawn)})


# a line chart's colours: black for the first series, then matplotlib's tab10 without its grey (told apart from
# black and from each other); and a marker per series
LINE_COLOURS = ("#000000", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
                "#17becf")
LINE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig, text: dict[str, str] | None = None) -> bytes:
    """The figure drawn as PNG; `text`: tEXt chunks ({key: value}, e.g. ``shown_in``)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata=text)
    return buffer.getvalue()


def closed_png(fig, text: dict[str, str] | None = None) -> bytes:
    """The figure drawn as PNG (``png_bytes``), then closed."""
    data = png_bytes(fig, text)
    pyplot().close(fig)
    return data
