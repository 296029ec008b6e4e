"""Clustering, 2-D layout and plots of a head-to-head distance matrix (for head_distance)."""
from __future__ import annotations

import numpy as np

from probes.base.files import safe_name, short_model_name
from probes.results.plots import closed_png, pyplot
from probes.results.presentation import Presentation
from probes.results.probe_result import ProbeResult


def head_names(layers: int, heads: int) -> list[str]:
    return [f"L{layer}-H{head}" for layer in range(layers) for head in range(heads)]


def cluster_heads(distance: np.ndarray, layers: int, heads: int, clusters: int, method: str) -> dict:
    """scipy hierarchical clustering of the heads, flat clusters 1..k, and a classical-MDS 2-D layout."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    n = distance.shape[0]
    names = head_names(layers, heads)
    if n < 2:
        return {"head_names": names, "linkage": [], "clusters": np.ones(n, dtype=int), "layout": [[0.0, 0.0]] * n}
    z = linkage(squareform(distance, checks=False), method=method)
    flat = fcluster(z, t=max(1, min(clusters, n)), criterion="maxclust")
    return {"head_names": names, "linkage": z.tolist(), "clusters": flat, "layout": classical_mds(distance).tolist()}


def classical_mds(distance: np.ndarray, dims: int = 2) -> np.ndarray:
    """[n,dims] coordinates whose Euclidean distances best match `distance` (Torgerson's classical MDS)."""
    n = distance.shape[0]
    centre = np.eye(n) - np.full((n, n), 1.0 / n)
    gram = -0.5 * centre @ (distance ** 2) @ centre
    values, vectors = np.linalg.eigh(gram)
    top = np.argsort(values)[::-1][:dims]
    coords = vectors[:, top] * np.sqrt(np.clip(values[top], 0, None))
    # A fixed sign, so reruns draw the same picture: on each axis, the coordinate of largest magnitude is positive
    # (sklearn's svd_flip rule; the coordinates sum to 0 up to rounding, so their sum's sign is noise).
    largest = coords[np.abs(coords).argmax(0), np.arange(coords.shape[1])]
    return coords * np.where(largest < 0, -1.0, 1.0)


def layout_png(result: ProbeResult) -> bytes:
    """Scatter of the heads in the 2-D layout, coloured by layer, each labelled L-H."""
    plt = pyplot()
    xy = np.asarray(result.extra["layout"], dtype=float)
    layers, heads = result.info.layers, result.info.heads
    layer_of = np.repeat(np.arange(layers), heads)
    fig, ax = plt.subplots(figsize=(7, 6), dpi=100)
    points = ax.scatter(xy[:, 0], xy[:, 1], c=layer_of, cmap="viridis", s=28)
    fig.colorbar(points, ax=ax, label="layer")
    ax.set_title(f"heads by Jensen–Shannon distance (classical MDS); labels that would overlap are left out\n"
                 f"{short_model_name(result.info.model)}", fontsize=9)
    fig.canvas.draw()
    screen = ax.transData.transform(xy)  # [n,2] pixels
    placed = np.empty((0, 2))
    for (x, y), (px, py), name in zip(xy, screen, result.extra["head_names"]):
        if len(placed) and (np.abs(placed - (px, py)) < (32, 9)).all(1).any():
            continue  # another label already sits there
        placed = np.vstack([placed, (px, py)])
        ax.annotate(name, (x, y), fontsize=6.5, xytext=(2, 2), textcoords="offset points")
    ax.set_xticks([])
    ax.set_yticks([])
    return _png(fig)


def dendrogram_png(result: ProbeResult) -> bytes:
    from scipy.cluster.hierarchy import dendrogram

    plt = pyplot()
    n = len(result.extra["head_names"])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.16 * n + 2), 5), dpi=100)
    if result.extra["linkage"]:
        dendrogram(np.asarray(result.extra["linkage"]), labels=result.extra["head_names"], ax=ax, leaf_font_size=7,
                   leaf_rotation=90)
    ax.set_ylabel("Jensen–Shannon distance")
    ax.set_title(f"hierarchical clustering of heads ({result.options.get('linkage', '')} linkage)\n"
                 f"{short_model_name(result.info.model)}", fontsize=9)
    return _png(fig)


def matrix_png(result: ProbeResult) -> bytes:
    plt = pyplot()
    d = np.asarray(result.extra["distance"], dtype=float)
    heads = result.info.heads
    fig, ax = plt.subplots(figsize=(7, 6), dpi=100)
    image = ax.imshow(d, cmap="magma_r", vmin=0)
    fig.colorbar(image, ax=ax, label="Jensen–Shannon distance")
    ticks = np.arange(0, d.shape[0], heads)
    ax.set_xticks(ticks, [f"L{i}" for i in range(len(ticks))])
    ax.set_yticks(ticks, [f"L{i}" for i in range(len(ticks))])
    ax.set_title(f"head-to-head distance (rows and columns: L0-H0, L0-H1, ...)\n"
                 f"{short_model_name(result.info.model)}", fontsize=9)
    return _png(fig)


def head_distance_figures(result: ProbeResult, kind: str = "overview") -> dict[str, bytes]:
    """head_distance's pictures: the heatmaps of every probe (``kind``, see probes.results.presentation), then
    <probe>-layout.png, -dendrogram.png and -matrix.png (none for kind "none")."""
    if kind == "none":
        return {}
    drawings = (("layout", layout_png), ("dendrogram", dendrogram_png), ("matrix", matrix_png))
    return {**Presentation.figures(result, kind), **{f"{safe_name(result.probe)}-{suffix}.png": draw(result)
                                                     for suffix, draw in drawings}}


def _png(fig) -> bytes:
    fig.tight_layout()
    return closed_png(fig)


class HeadDistancePresentation(Presentation):
    """head_distance's figures (``head_distance_figures``) instead of the default's."""

    figures = staticmethod(head_distance_figures)
