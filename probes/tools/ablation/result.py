"""Ablation results: metrics per mask, deltas to the baseline, sweep summaries, and their files.

``DIR/ablation-<target>.json`` (target = ``classify`` or the probe's name) holds the baseline,
every mask with its heads, scores and deltas (delta = score with the mask − baseline score, so a
negative delta means the disabled heads were needed), and per sweep: ``heads`` an [L,H] delta
grid, ``layers`` an [L] list, ``halves`` bottom/top, ``random`` mean, sample standard deviation,
min and max of the deltas over the repeats of each k%. ``DIR/ablation-<target>.csv`` has one row
per mask × metric; heatmaps ``ablation-<target>-heads-<metric>.png`` and
``ablation-<target>-layers-<metric>.png`` show the deltas (red: removal hurts, blue: it helps),
and for a probe target each user-given mask and keep-mask gets ``ablation-<target>-mask-<name>.png``,
the change of the label's [L,H] grid (in zero mode the mask's disabled heads are not scored: grey; in uniform mode dotted). Numbers are written at full precision; files are written
atomically. ``print(result)`` shows the summary (``summary()``), not the arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from probes.capture.ablation_masks import Mask, mask_tensor
from probes.base.files import json_grid, json_number, safe_name, short_model_name, write_result_files
from probes.results.probe_result import RunInfo

SCHEMA_VERSION = 1
DISABLED = "#7f7f7f"  # the colour of a disabled, unscored head in a mask's figure (RdBu has no grey)


@dataclass(repr=False)
class AblationResult:
    """Scores of one target under each mask; ``masks[0]`` is the baseline (nothing disabled)."""

    target: str  # "classify" or a probe name
    mode: str  # "zero" or "uniform"
    masks: list[Mask]
    values: dict[str, np.ndarray]  # metric -> [M] score per mask
    info: RunInfo
    grids: np.ndarray | None = None  # [M,L,H] the probe label's scores per mask (probe targets)
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"AblationResult(target={self.target!r}, mode={self.mode!r}, model={self.info.model!r}, "
                f"masks={len(self.masks)}, metrics={self.metrics}, sentences={self.info.sentences})")

    def __str__(self) -> str:
        return self.summary()

    @property
    def metrics(self) -> list[str]:
        return list(self.values)

    @property
    def baseline(self) -> dict[str, float]:
        return {m: float(v[0]) for m, v in self.values.items()}

    def deltas(self, metric: str) -> np.ndarray:
        """[M] score with each mask minus the baseline score."""
        return self.values[metric] - self.values[metric][0]

    @property
    def named(self) -> str:
        """The target, and for a probe target the label scored ("dep nsubj")."""
        return f"{self.target} {self.extra['label']}" if "label" in self.extra and self.grids is not None else self.target

    def _of_sweep(self, sweep: str) -> list[int]:
        return [i for i, m in enumerate(self.masks) if m.sweep == sweep]

    def head_grid(self, metric: str) -> np.ndarray:
        """[L,H] delta of disabling each single head (NaN where that head was not swept)."""
        grid = np.full((self.info.layers, self.info.heads), np.nan)
        d = self.deltas(metric)
        for i in self._of_sweep("heads"):
            (layer, head), = self.masks[i].heads
            grid[layer, head] = d[i]
        return grid

    def layer_deltas(self, metric: str) -> np.ndarray:
        """[L] delta of disabling each whole layer (NaN where not swept)."""
        out = np.full(self.info.layers, np.nan)
        d = self.deltas(metric)
        for i in self._of_sweep("layers"):
            out[self.masks[i].heads[0][0]] = d[i]
        return out

    def random_summary(self, metric: str) -> dict[str, dict[str, float]]:
        """Per k% ("10%"): heads disabled, repeats, and mean / std (ddof 1) / min / max of the deltas."""
        d = self.deltas(metric)
        groups: dict[str, list[int]] = {}
        for i in self._of_sweep("random"):
            groups.setdefault(self.masks[i].name.split()[1], []).append(i)
        out = {}
        for percent, idx in groups.items():
            x = d[idx]
            out[percent] = {"heads": len(self.masks[idx[0]].heads), "repeats": len(idx), "mean": float(np.mean(x)),
                            "std": float(np.std(x, ddof=1)) if len(x) > 1 else 0.0,
                            "min": float(np.min(x)), "max": float(np.max(x))}
        return out

    def ranked(self, metric: str, sweep: str | None = None) -> list[tuple[Mask, float]]:
        """(mask, delta) of the masks of `sweep` (default: all but the baseline), most harmful first."""
        d = self.deltas(metric)
        idx = self._of_sweep(sweep) if sweep else range(1, len(self.masks))
        return sorted(((self.masks[i], float(d[i])) for i in idx), key=lambda md: (md[1], md[0].name))

    def summary(self, top: int = 5) -> str:
        """A few lines of text: the baseline, then per metric the masks that hurt and help most, per sweep."""
        i = self.info
        lines = [f"ablate {self.named} ({self.mode}): {i.model}, {i.sentences} sentences scored, "
                 f"{sum(i.skipped.values())} skipped, {len(self.masks) - 1} masks",
                 "baseline: " + ", ".join(f"{m} {v:.4f}" for m, v in self.baseline.items())]
        for m in self.metrics:
            heads = self.ranked(m, "heads")
            if heads:
                lines.append(f"{m}, single heads, hurt most: {_listed(heads[:top])}")
                lines.append(f"{m}, single heads, help most: {_listed(heads[::-1][:top])}")
            for sweep in ("layers", "halves", "list", "keep"):
                ranked = sorted(self.ranked(m, sweep), key=lambda md: self.masks.index(md[0]))
                if ranked:
                    lines.append(f"{m}, {sweep}: {_listed(ranked)}")
            for percent, s in self.random_summary(m).items():
                lines.append(f"{m}, random {percent} ({s['heads']} heads, {s['repeats']} draws): mean {s['mean']:+.4f}"
                             f" ± {s['std']:.4f} (min {s['min']:+.4f}, max {s['max']:+.4f})")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        i = self.info
        masks = []
        for k, mask in enumerate(self.masks):
            entry = {"name": mask.name, "sweep": mask.sweep, "heads": [list(p) for p in mask.heads],
                     "scores": {m: json_number(v[k]) for m, v in self.values.items()},
                     "delta": {m: json_number(self.deltas(m)[k]) for m in self.metrics}}
            if self.grids is not None:
                entry["grid"] = json_grid(self.grids[k])
            masks.append(entry)
        return {"target": self.target, "model": i.model, "corpus": i.corpus, "mode": self.mode,
                "layers": i.layers, "heads": i.heads, "sentences": i.sentences, "skipped": sum(i.skipped.values()),
                "skipped_reasons": i.skipped, "settings": i.settings, "metrics": self.metrics,
                "baseline": {m: json_number(v) for m, v in self.baseline.items()}, "sweeps": self._sweeps(),
                "masks": masks, **self.extra, "version": i.provenance.get("probes"), "provenance": i.provenance,
                "schema": SCHEMA_VERSION}

    def _sweeps(self) -> dict[str, Any]:
        sweeps = {m.sweep for m in self.masks}
        out: dict[str, Any] = {}
        if "heads" in sweeps:
            out["heads"] = {m: json_grid(self.head_grid(m)) for m in self.metrics}
        if "layers" in sweeps:
            out["layers"] = {m: [json_number(x) for x in self.layer_deltas(m)] for m in self.metrics}
        if "halves" in sweeps:
            out["halves"] = {m: {mask.name: json_number(d) for mask, d in self.ranked(m, "halves")}
                             for m in self.metrics}
        if "random" in sweeps:
            out["random"] = {m: {k: {f: json_number(v) for f, v in s.items()}
                                 for k, s in self.random_summary(m).items()}
                             for m in self.metrics}
        return out

    def to_frame(self):
        """A pandas DataFrame, one row per mask × metric (the CSV's rows)."""
        import pandas as pd

        rows = [[mask.sweep, mask.name, " ".join(f"{layer}:{h}" for layer, h in mask.heads), m,
                 float(self.values[m][k]), float(self.deltas(m)[k])]
                for k, mask in enumerate(self.masks) for m in self.metrics]
        return pd.DataFrame(rows, columns=["sweep", "mask", "heads", "metric", "score", "delta"])

    def save(self, directory: str | Path, *, plots: bool = True) -> list[Path]:
        """Write JSON, CSV and (optionally) heatmaps into `directory`; return the paths written."""
        stem = f"ablation-{safe_name(self.target)}"
        return write_result_files(directory, {f"{stem}.json": self.to_json(), f"{stem}.csv": self.to_frame(),
                                              **(dict(self._heatmaps(stem)) if plots else {})})

    def _heatmaps(self, stem: str) -> list[tuple[str, bytes]]:
        from probes.results.plots import heatmap_png

        sweeps = {m.sweep for m in self.masks}
        where = f"{short_model_name(self.info.model)} · {self.mode} · n={self.info.sentences}"
        pngs = []
        what = self.named
        for m in self.metrics:
            base = f"{what} {m}: change when disabled (baseline {self.baseline[m]:.3f})"
            if "heads" in sweeps:
                grid = self.head_grid(m)
                pngs.append((f"{stem}-heads-{m}.png", heatmap_png(grid, f"{base}, single heads", where,
                                                                    mark="min", **_diverging(grid))))
            if "layers" in sweeps:
                column = self.layer_deltas(m)[:, None]  # [L,1]
                worst = int(np.nanargmin(column[:, 0]))
                title = (f"{what} {m} (baseline {self.baseline[m]:.3f}):\nchange when a whole layer is "
                         f"disabled\nlowest L{worst} = {column[worst, 0]:+.3f}")
                pngs.append((f"{stem}-layers-{m}.png", heatmap_png(column, title, where, mark=None, xlabel="",
                                                                     **_diverging(column))))
        if self.grids is not None:
            for k in self._of_sweep("list") + self._of_sweep("keep"):
                change = self.grids[k] - self.grids[0]
                disabled = mask_tensor([self.masks[k]], *change.shape)[0].numpy()  # [L,H] bool
                # zero mode leaves the disabled heads unscored (NaN): painted DISABLED; uniform mode scores them: dotted
                key = "grey: disabled, not scored" if self.mode == "zero" else "dot: disabled"
                title = f"{what}: change of each head's score, heads {self.masks[k].name} disabled ({key})"
                pngs.append((f"{stem}-mask-{safe_name(self.masks[k].name)}.png",
                             heatmap_png(change, title, where, mark="min", bad=DISABLED,
                                         marked=disabled if self.mode != "zero" else None, **_diverging(change))))
        return pngs


def _diverging(values: np.ndarray) -> dict[str, Any]:
    """Colour scale centred on 0: red where the score drops, blue where it rises."""
    finite = np.abs(values[np.isfinite(values)])
    limit = float(finite.max()) if finite.size and finite.max() > 0 else 1e-6
    return {"vmin": -limit, "vmax": limit, "cmap": "RdBu"}


def _listed(masks: list[tuple[Mask, float]]) -> str:
    return ", ".join(f"{mask.name} {delta:+.4f}" for mask, delta in masks)
