"""Layer × head heatmaps with the best head marked: one grid, many grids drawn through one reused figure, and an
overview of many grids as small multiples in one picture.

Drawing is most of the cost of a figure, so the many-grid paths never build a figure per grid: ``heatmap_pngs``
reuses one figure (new data, limits, title and box per grid) and ``overview_png`` tiles every grid into one
image drawn by a single ``imshow``. ``lines_png`` draws values against checkpoints (a study's best-head scores).
"""
from __future__ import annotations

import gc
import io
import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from probes.results import best_head

@dataclass
class Grid:
    """One [L,H] grid to draw: its scores, title, colour limits (None: the grid's own range), and `marked`, an
    [L,H] bool grid of heads drawn with a white dot (e.g. whose interval lies above the best baseline) or None."""

    scores: np.ndarray
    title: str
    vmin: float | None = 0.0
    vmax: float | None = 1.0
    marked: np.ndarray | None = None


def heatmap_png(scores: np.ndarray, title: str, subtitle: str = "", *, vmin: float | None = 0.0,
                vmax: float | None = 1.0, cmap: str = "viridis", mark: str | None = "max",
                xlabel: str = "head") -> bytes:
    """A PNG of an [L,H] grid: rows are layers (0 at the top), columns heads; the best head is boxed, where one
    head is best (probes.results.best_head; the title says why not when the top is tied or 0).

    mark="min" boxes the lowest cell instead (e.g. the head whose removal costs most); None boxes none.
    """
    return heatmap_pngs([Grid(np.asarray(scores, dtype=float), title, vmin, vmax)], subtitle, cmap=cmap, mark=mark,
                        xlabel=xlabel)[0]


def heatmap_pngs(grids: list[Grid], subtitle: str = "", *, cmap: str = "viridis", mark: str | None = "max",
                 xlabel: str = "head") -> list[bytes]:
    """One PNG per grid (all of one shape [L,H]), drawn by one figure whose image, colour limits, title and
    box are updated between grids."""
    plt = pyplot()
    from matplotlib.patches import Rectangle

    layers, heads = grids[0].scores.shape
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * heads + 2), max(3.0, 0.4 * layers + 1.6)), dpi=100)
    image = ax.imshow(np.zeros((layers, heads)), cmap=cmap, aspect="auto")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("layer")
    ax.set_xticks(range(heads))
    ax.set_yticks(range(layers))
    ax.tick_params(labelsize=7)
    box = ax.add_patch(Rectangle((0, 0), 1, 1, fill=False, linewidth=2,
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
        picked = None if mark is None or finite.size == 0 else best_head(-scores if mark == "min" else scores)
        box.set_visible(picked is not None and picked.found)
        if box.get_visible():
            layer, head = picked.layer, picked.head
            box.set_xy((head - 0.5, layer - 0.5))
            title = f"{title}\n{'lowest' if mark == 'min' else 'best'} L{layer}-H{head} = {scores[layer, head]:.3f}"
        elif picked is not None:
            title = f"{title}\nno {'lowest' if mark == 'min' else 'best'} head: {picked.reason}"
        ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), fontsize=9)
        fig.tight_layout()
        pngs.append(png_bytes(fig))
    plt.close(fig)
    return pngs


def overview_png(grids: list[Grid], title: str, *, cmap: str = "viridis") -> bytes:
    """Small multiples: every grid (one shape [L,H], one colour scale: the first grid's limits, or the range of
    all where those are None) as a tile of one image, its title above it and its best head (where one head is best,
    probes.results.best_head) boxed in red; the heads a grid marks (``Grid.marked``) dotted in white."""
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
        best = best_head(scores)
        if best.found:
            best_x.append(left + best.head)
            best_y.append(top + best.layer)
    finite = mosaic[np.isfinite(mosaic)]
    vmin = grids[0].vmin if grids[0].vmin is not None else (finite.min() if finite.size else 0.0)
    vmax = grids[0].vmax if grids[0].vmax is not None else (finite.max() if finite.size else 1.0)
    cell = 0.13  # inches per cell
    fig, ax = plt.subplots(figsize=(max(5.0, mosaic.shape[1] * cell + 1.2), max(2.5, mosaic.shape[0] * cell + 0.8)),
                           dpi=100)
    image = ax.imshow(np.ma.masked_invalid(mosaic), cmap=cmap, vmin=vmin, vmax=vmax if vmax > vmin else vmin + 1e-9,
                      interpolation="nearest", aspect="equal")
    ax.scatter(best_x, best_y, marker="s", s=(72 * cell) ** 2 * 0.9, facecolors="none", edgecolors="red",
               linewidths=1.0)
    ax.scatter(dot_x, dot_y, s=2.5, c="white", edgecolors="none")
    for i, grid in enumerate(grids):
        top, left = (i // columns) * (layers + gap_y) + gap_y, (i % columns) * (heads + gap_x)
        ax.text(left - 0.5, top - 0.8, grid.title, fontsize=6.5, va="bottom", ha="left", clip_on=False)
    ax.set_axis_off()
    fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    data = png_bytes(fig)
    plt.close(fig)
    return data


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
    data = png_bytes(fig)
    plt.close(fig)
    return data


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed), imported with the collector paused."""
    with collection_paused():
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

    return plt


def png_bytes(fig) -> bytes:
    """The figure drawn as PNG, with the collector paused."""
    buffer = io.BytesIO()
    with collection_paused():
        fig.savefig(buffer, format="png")
    return buffer.getvalue()


@contextmanager
def collection_paused():
    """Importing matplotlib and drawing allocate many small objects; in a run's process, which holds the model
    (torch and transformers: some 400,000 objects), the full collections they trigger each walk all of those, and
    cost as much as the drawing itself. The objects there before are frozen meanwhile (gc.freeze: left out of
    every collection), and unfrozen after, so a collection walks only what the drawing made (where the process
    froze objects of its own, they are left as they are)."""
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        yield
    finally:
        if freeze:
            gc.unfreeze()
