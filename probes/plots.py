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

from probes.results import Reported, best_head

@dataclass
class Grid:
    """One [L,H] grid to draw: its scores, title, colour limits (None: the grid's own range), and `marked`, an
    [L,H] bool grid of heads drawn with a white dot (e.g. whose interval lies above the best baseline) or None;
    `shown`: the head the result reports (ProbeResult.reported), boxed and named in place of the grid's own best
    head, and written into the PNG's text chunk "probes" as JSON (``shown_in``)."""

    scores: np.ndarray
    title: str
    vmin: float | None = 0.0
    vmax: float | None = 1.0
    marked: np.ndarray | None = None
    shown: Reported | None = None


def heatmap_png(scores: np.ndarray, title: str, subtitle: str = "", *, vmin: float | None = 0.0,
                vmax: float | None = 1.0, cmap: str = "viridis", mark: str | None = "max",
                xlabel: str = "head", marked: np.ndarray | None = None, bad: str | None = None) -> bytes:
    """A PNG of an [L,H] grid: rows are layers (0 at the top), columns heads; the best head is boxed, where one
    head is best (probes.results.best_head; the title says why not when the top is tied or 0).

    mark="min" boxes the lowest cell instead (e.g. the head whose removal costs most); None boxes none.
    marked: [L,H] bool, heads dotted in white (``Grid.marked``); bad: the colour of NaN cells (default: none, the
    background shows).
    """
    return heatmap_pngs([Grid(np.asarray(scores, dtype=float), title, vmin, vmax, marked)], subtitle, cmap=cmap,
                        mark=mark, xlabel=xlabel, bad=bad)[0]


def heatmap_pngs(grids: list[Grid], subtitle: str = "", *, cmap: str = "viridis", mark: str | None = "max",
                 xlabel: str = "head", bad: str | None = None) -> list[bytes]:
    """One PNG per grid (all of one shape [L,H]), drawn by one figure whose image, colour limits, title and
    box are updated between grids; NaN cells in colour `bad` (default: none, the background shows)."""
    plt = pyplot()
    import matplotlib
    from matplotlib.patches import Rectangle

    layers, heads = grids[0].scores.shape
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * heads + 2), max(3.0, 0.4 * layers + 1.6)), dpi=100)
    colours = matplotlib.colormaps[cmap] if bad is None else matplotlib.colormaps[cmap].with_extremes(bad=bad)
    image = ax.imshow(np.zeros((layers, heads)), cmap=colours, aspect="auto")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
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
            title = f"{title}\n{'lowest' if mark == 'min' else 'best'} {picked.name} = {picked.score:.3f}"
        elif picked is not None:
            title = f"{title}\nno {'lowest' if mark == 'min' else 'best'} head: {picked.reason}"
        if box.get_visible():
            box.set_xy((picked.head - 0.5, picked.layer - 0.5))
        ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), fontsize=9)
        fig.tight_layout()
        pngs.append(png_bytes(fig, shown_in([grid])))
    plt.close(fig)
    return pngs


def overview_png(grids: list[Grid], title: str, *, cmap: str = "viridis") -> bytes:
    """The PNG of ``overview_figure``."""
    return closed_png(overview_figure(grids, title, cmap=cmap), shown_in(grids))


def overview_figure(grids: list[Grid], title: str, *, cmap: str = "viridis"):
    """Small multiples: every grid (one shape [L,H], one colour scale: the first grid's limits, or the range of
    all where those are None) as a tile of one image, its title above it and its best head (where one head is best,
    probes.results.best_head) boxed in red; the heads a grid marks (``Grid.marked``) dotted in white. Layer ticks
    at the left of each row of tiles, head ticks under each column; the figure's title wrapped to its width
    (``fit_title``) above the tiles and the colour bar. A matplotlib figure, for the caller to save and close."""
    plt = pyplot()
    layers, heads = grids[0].scores.shape
    columns = max(1, min(len(grids), round(math.sqrt(len(grids) * 1.6 * layers / heads)) or 1))
    rows = math.ceil(len(grids) / columns)
    gap_x, gap_y = 1, 3  # cells between tiles; the title sits in the vertical gap
    mosaic = np.full((rows * (layers + gap_y), columns * (heads + gap_x)), np.nan)
    best_x, best_y, dot_x, dot_y = [], [], [], []
    for i, grid in enumerate(grids):
        top, left = (i // columns) * (layers + gap_y) + gap_y, (i % columns) * (heads + gap_x)
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
    cell = 0.13  # inches per cell
    fig, ax = plt.subplots(figsize=(max(5.0, mosaic.shape[1] * cell + 1.4), max(2.5, mosaic.shape[0] * cell + 1.0)),
                           dpi=100)
    image = ax.imshow(np.ma.masked_invalid(mosaic), cmap=cmap, vmin=vmin, vmax=vmax if vmax > vmin else vmin + 1e-9,
                      interpolation="nearest", aspect="equal")
    ax.scatter(best_x, best_y, marker="s", s=(72 * cell) ** 2 * 0.9, facecolors="none", edgecolors="red",
               linewidths=1.0)
    ax.scatter(dot_x, dot_y, s=2.5, c="white", edgecolors="none")
    for i, grid in enumerate(grids):
        top, left = (i // columns) * (layers + gap_y) + gap_y, (i % columns) * (heads + gap_x)
        ax.text(left - 0.5, top - 0.8, grid.title, fontsize=6.5, va="bottom", ha="left", clip_on=False)
    layer_ticks, head_ticks = _tick_steps(layers), _tick_steps(heads)
    ax.set_yticks([r * (layers + gap_y) + gap_y + t for r in range(rows) for t in layer_ticks],
                  [str(t) for _ in range(rows) for t in layer_ticks])
    ax.set_xticks([c * (heads + gap_x) + t for c in range(columns) for t in head_ticks],
                  [str(t) for _ in range(columns) for t in head_ticks])
    ax.tick_params(labelsize=5, length=1.5, pad=1)
    ax.set_ylabel("layer", fontsize=7)
    ax.set_xlabel("head", fontsize=7)
    ax.spines[:].set_visible(False)
    fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01)
    fit_title(fig, title, fontsize=9)
    return fig


def _tick_steps(n: int) -> list[int]:
    """At most 4 tick positions of 0..n-1, 0 first."""
    return list(range(0, n, math.ceil(n / 4)))


def fit_title(fig, title: str, fontsize: float = 9) -> None:
    """`title` as the figure's title, wrapped at spaces into lines no wider than the figure (measured by its
    renderer), the figure made taller by the title's height and laid out (tight_layout) below it, so that
    the title is neither cut nor drawn over the axes or the colour bar."""
    import textwrap

    text = fig.suptitle(title, fontsize=fontsize, y=1.0, va="top")
    renderer = fig.canvas.get_renderer()
    room = 0.96 * fig.bbox.width
    chars = len(title)
    while chars > 10 and text.get_window_extent(renderer).width > room:
        chars = min(chars - 1, int(chars * room / text.get_window_extent(renderer).width))
        text.set_text(textwrap.fill(title, chars))
    height = text.get_window_extent(renderer).height / fig.dpi + 0.1  # inches, with a margin
    fig.set_figheight(fig.get_figheight() + height)
    fig.tight_layout(rect=(0, 0, 1, 1 - height / fig.get_figheight()))


def _caption(shown: Reported) -> str:
    """A heatmap's line naming the head a result reports: "selected L3-H11 = 0.260 [0.228, 0.294]", or why none."""
    if not shown.found:
        return f"no {shown.kind} head: {shown.reason}"
    bounds = f" [{shown.ci_low:.3f}, {shown.ci_high:.3f}]" if shown.ci_low is not None else ""
    return f"{shown.kind} {shown.name} = {shown.score:.3f}{bounds}"


def shown_in(grids: list[Grid]) -> dict[str, str]:
    """A PNG's text chunks: "probes", the JSON list of the heads its grids report (Reported.to_json); {} for none."""
    shown = [g.shown.to_json() for g in grids if g.shown is not None]
    return {"probes": json.dumps(shown)} if shown else {}


def lines_png(series: dict[str, list[float]], xticks: list[str], title: str, *, xlabel: str = "checkpoint",
              ylabel: str = "best-head score") -> bytes:
    """A line chart: each series (a label: one value per x position, NaN where it has none) against the
    positions 0..n-1 named by `xticks` (e.g. a study's checkpoints, each label's best-head score), the first
    series drawn thick and black (e.g. "overall"), a legend on the right."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(xticks) + 3.5), 3.6), dpi=100)
    x = np.arange(len(xticks))
    for i, (name, values) in enumerate(series.items()):
        style = {"color": "black", "linewidth": 2.4} if i == 0 else {"linewidth": 1.3}
        ax.plot(x, np.asarray(values, dtype=float), marker="o", markersize=3, label=name, **style)
    ax.set_xticks(x, xticks, rotation=30 if max(map(len, xticks), default=0) > 10 else 0, ha="right", fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return closed_png(fig)


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
