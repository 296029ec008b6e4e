"""Layer × head heatmaps with the best head marked."""
from __future__ import annotations

import io

import numpy as np


def heatmap_png(scores: np.ndarray, title: str, subtitle: str = "", *, vmin: float | None = 0.0,
                vmax: float | None = 1.0, cmap: str = "viridis", mark: str | None = "max",
                xlabel: str = "head") -> bytes:
    """A PNG of an [L,H] grid: rows are layers (0 at the top), columns heads; the best head is boxed.

    mark="min" boxes the lowest cell instead (e.g. the head whose removal costs most); None boxes none.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    scores = np.asarray(scores, dtype=float)
    layers, heads = scores.shape
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * heads + 2), max(3.0, 0.4 * layers + 1.6)), dpi=100)
    image = ax.imshow(np.ma.masked_invalid(scores), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("layer")
    ax.set_xticks(range(heads))
    ax.set_yticks(range(layers))
    ax.tick_params(labelsize=7)
    if mark is not None and np.isfinite(scores).any():
        pick = np.nanargmin if mark == "min" else np.nanargmax
        layer, head = np.unravel_index(int(pick(scores)), scores.shape)
        ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False,
                               edgecolor="black" if mark == "min" else "red", linewidth=2))
        title = f"{title}\n{'lowest' if mark == 'min' else 'best'} L{layer}-H{head} = {scores[layer, head]:.3f}"
    ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()
