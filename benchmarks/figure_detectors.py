"""docs/decoders.md's table and figure: the causal detectors on the trained induction model and on
the same architecture at initialisation (tests/data/induction-gpt2 and its init/, benchmarks/train_induction.py),
32 sequences of 24 random tokens repeated (seed 0), 1,000 bootstrap replicates.

    python benchmarks/figure_detectors.py [docs/decoder-detectors.png]

Prints the table (markdown) and writes the figure: one row per model, one [layer × head] grid per score.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from probes.tools.detect import DETECTORS, detect

TRAINED = Path(__file__).resolve().parents[1] / "tests" / "data" / "induction-gpt2"
PANELS = (("prev_token", "overall", "previous token"), ("duplicate_token", "overall", "duplicate token"),
          ("induction", "prefix_matching", "induction: prefix matching"), ("induction", "copying", "induction: OV copying"),
          ("sink", "overall", "sink: first token"))


def scores(folder: Path) -> dict:
    return detect(DETECTORS, str(folder), count=32, length=24, sequence_seed=0, replicates=1000, progress=False)


def grid(results: dict, probe: str, label: str) -> np.ndarray:
    entry = results[probe].overall if label == "overall" else results[probe].labels[label]
    return entry.scores


def table(trained: dict, init: dict) -> str:
    lines = ["| score | best head (trained) | trained | 95% interval | best at initialisation |", "|---|---|---|---|---|"]
    for probe, label, title in PANELS:
        entry = trained[probe].overall if label == "overall" else trained[probe].labels[label]
        layer, head = np.unravel_index(np.nanargmax(entry.scores), entry.scores.shape)
        interval = "—" if label == "copying" else f"{entry.best.ci_low:.3f}–{entry.best.ci_high:.3f}"
        lines.append(f"| {title} | layer {layer}, head {head} | {entry.scores[layer, head]:.3f} | {interval} | "
                     f"{np.nanmax(grid(init, probe, label)):.3f} |")
    return "\n".join(lines)


def figure(trained: dict, init: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(PANELS), figsize=(3.0 * len(PANELS), 4.2), constrained_layout=True)
    for row, (name, results) in enumerate((("trained", trained), ("initialisation", init))):
        for col, (probe, label, title) in enumerate(PANELS):
            values = grid(results, probe, label)
            ax = axes[row, col]
            image = ax.imshow(values, vmin=-1 if label == "copying" else 0, vmax=1,
                              cmap="RdBu_r" if label == "copying" else "viridis")
            for (layer, head), v in np.ndenumerate(values):
                ax.text(head, layer, f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if label == "copying" or v > 0.5 else "white")
            ax.set_xticks(range(values.shape[1]))
            ax.set_yticks(range(values.shape[0]))
            ax.set_xlabel("head")
            ax.set_ylabel(f"{name}\nlayer" if col == 0 else "layer")
            if row == 0:
                ax.set_title(title, fontsize=9)
        fig.colorbar(image, ax=axes[row, -1], shrink=0.8)
    partial = out.with_name(out.name + ".partial.png")
    fig.savefig(partial, dpi=110)
    partial.replace(out)


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "docs" / "decoder-detectors.png"
    trained, init = scores(TRAINED), scores(TRAINED / "init")
    print(table(trained, init))
    figure(trained, init, out)
    print(f"figure: {out}")
