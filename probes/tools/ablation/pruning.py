"""Pruning curves: a classifier's accuracy and macro-F1 as heads are disabled in a given order
(Michel et al. 2019, figure 3; Voita et al. 2019), several orders in one plot.

Shapes: L layers, H heads, S shares, M masks.

An order ranks all L×H heads, the first to go first:

    importance        least gradient importance first (probes.tools.ablation.importance; ties by head index)
    probe:NAME:LABEL  lowest score of that probe label first (e.g. probe:dep:nsubj; LABEL default
                      overall), the probe run on the order data with the classifier's encoder
    random            `repeats` seeded random permutations ("random #0", ...)

For each order and each share s in 0, step, 2·step, ..., 100 % the first round(s·L·H) heads are
disabled (zero mode by default), and every mask of every curve is evaluated in the same batched
passes (probes.tools.ablation.sweep), the unpruned model once, as the curves' common first point.
Importance and probe scores come from `order_data` (default: the evaluation data itself; the
paper computes importance on held-out data, so give another split where there is one).

Files: ``DIR/ablation-pruning.json`` (shares, each order's heads in pruning order and its metric
values per share, and the random orders' mean and min/max per share), ``.csv`` (one row per
order × share × metric) and ``.png`` (the curves together, random as the mean with its min-max band).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from probes.tools.ablation.classifier import ClassifierTarget
from probes.tools.ablation.importance import head_importance
from probes.capture.ablation_masks import Mask, mask_tensor
from probes.tools.ablation.sweep import check_settings, evaluate_masks
from probes.base.errors import InputError
from probes.base.files import json_number, short_model_name, write_result_files
from probes.results.plots import closed_png, pyplot
from probes.results.probe_result import RunInfo
from probes.running.runner import run

IMPORTANCE, RANDOM, PROBE = "importance", "random", "probe"


@dataclass(repr=False)
class PruningResult:
    """Metric values along each order's pruning curve."""

    shares: list[float]  # [S] percent of heads pruned, 0 first
    orders: dict[str, list[tuple[int, int]]]  # order name -> all L·H heads, first pruned first
    values: dict[str, dict[str, np.ndarray]]  # order name -> metric -> [S]
    mode: str
    info: RunInfo
    importance: np.ndarray | None = None  # [L,H] when an importance order was asked for

    @property
    def metrics(self) -> list[str]:
        return list(next(iter(self.values.values())))

    def random_band(self, metric: str) -> dict[str, np.ndarray] | None:
        """mean, min, max [S] over the random orders, or None without any."""
        curves = [v[metric] for name, v in self.values.items() if name.startswith(RANDOM)]
        if not curves:
            return None
        stacked = np.stack(curves)  # [R,S]
        return {"mean": stacked.mean(0), "min": stacked.min(0), "max": stacked.max(0)}

    def summary(self) -> str:
        i = self.info
        lines = [f"pruning curves ({self.mode}): {i.model}, {i.sentences} examples, shares "
                 f"{', '.join(f'{s:g}%' for s in self.shares)}"]
        for m in self.metrics:
            for name, v in self.values.items():
                if not name.startswith(RANDOM):
                    lines.append(f"{m}, {name}: " + " ".join(f"{x:.3f}" for x in v[m]))
            band = self.random_band(m)
            if band is not None:
                lines.append(f"{m}, random (mean of {sum(n.startswith(RANDOM) for n in self.values)}): "
                             + " ".join(f"{x:.3f}" for x in band["mean"]))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        i = self.info
        out = {"model": i.model, "corpus": i.corpus, "mode": self.mode, "layers": i.layers, "heads": i.heads,
               "sentences": i.sentences, "settings": i.settings, "shares": self.shares,
               "orders": {name: {"heads": [list(p) for p in self.orders[name]],
                                 **{m: [json_number(x) for x in v[m]] for m in self.metrics}}
                          for name, v in self.values.items()},
               "random": {m: {k: [json_number(x) for x in a] for k, a in band.items()}
                          for m in self.metrics if (band := self.random_band(m)) is not None},
               "provenance": i.provenance}
        if self.importance is not None:
            out["importance"] = self.importance.tolist()
        return out

    def to_frame(self):
        import pandas as pd

        total = self.info.layers * self.info.heads
        rows = [[name, share, _count(share, total), m, float(v[m][k])]
                for name, v in self.values.items() for m in self.metrics for k, share in enumerate(self.shares)]
        return pd.DataFrame(rows, columns=["order", "share", "heads_pruned", "metric", "score"])

    def save(self, directory: str | Path, *, plots: bool = True) -> list[Path]:
        files: dict[str, Any] = {"ablation-pruning.json": self.to_json(), "ablation-pruning.csv": self.to_frame()}
        if plots:
            files.update({f"ablation-pruning-{m}.png": self._plot(m) for m in self.metrics})
        return write_result_files(directory, files)

    def _plot(self, metric: str) -> bytes:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6.0, 4.2), dpi=100)
        for name, v in self.values.items():
            if not name.startswith(RANDOM):
                ax.plot(self.shares, v[metric], marker="o", markersize=3, label=name)
        band = self.random_band(metric)
        if band is not None:
            ax.fill_between(self.shares, band["min"], band["max"], color="grey", alpha=0.25)
            n = sum(name.startswith(RANDOM) for name in self.values)
            ax.plot(self.shares, band["mean"], color="grey", linestyle="--", label=f"random (mean of {n}, min-max)")
        ax.set_xlabel("heads pruned (%)")
        ax.set_ylabel(metric)
        ax.set_title(f"{metric} as heads are pruned ({self.mode})\n{short_model_name(self.info.model)} · "
                     f"n={self.info.sentences}", fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        return closed_png(fig)


def prune(model: str, corpus: str | Path | Iterable[str | Path], orders: Iterable[str] = (IMPORTANCE, RANDOM), *,
          order_data: str | Path | Iterable[str | Path] | None = None, step: float = 10.0, repeats: int = 5,
          seed: int = 0, normalize: bool = True, mode: str = "zero", format: str | None = None,
          label_from: str = "label", batch_size: int = 32, masks_per_pass: int = 16, tokens_per_pass: int = 16384,
          max_length: int | None = None, limit: int | None = None, device: str = "cpu",
          progress: bool | None = None) -> PruningResult:
    """Pruning curves of a sequence classifier on labelled data `corpus` (see the module docstring).

    orders: "importance", "random", "probe:NAME[:LABEL]"; step: percent of heads between points;
    repeats, seed: the random orders; normalize: importance normalised per layer (the paper's default);
    order_data: the data importance and probe orders are computed on (default `corpus`).
    The other arguments as in ``ablate``.
    """
    started = time.perf_counter()
    check_settings(mode, batch_size=batch_size, masks_per_pass=masks_per_pass, tokens_per_pass=tokens_per_pass,
                   limit=limit, repeats=repeats)
    if not 0 < step <= 100:
        raise InputError(f"pruning step must be in (0, 100] percent, not {step:g}")
    orders = list(dict.fromkeys(orders))
    if not orders:
        raise InputError("no pruning order: give importance, random or probe:NAME:LABEL")
    paths = _paths(corpus)
    target = ClassifierTarget(model, paths, format=format, label_from=label_from, limit=limit, device=device,
                              max_length=max_length)
    layers, heads = target.layers, target.heads
    ranked: dict[str, list[tuple[int, int]]] = {}
    importance = None
    for order in orders:
        if order == IMPORTANCE:
            scorer = target if order_data is None else ClassifierTarget(
                model, _paths(order_data), format=format, label_from=label_from, limit=limit, device=device,
                max_length=max_length)
            importance = head_importance(scorer, normalize=normalize, batch_size=batch_size)
            ranked[order] = ascending(importance)
        elif order == RANDOM:
            generator = np.random.default_rng(seed)
            for r in range(repeats):
                ranked[f"random #{r}"] = [divmod(int(p), heads) for p in generator.permutation(layers * heads)]
        elif order.startswith(PROBE + ":"):
            ranked[order] = ascending(probe_scores(order, model, _paths(order_data) if order_data else paths,
                                                   device=device, max_length=max_length, limit=limit))
        else:
            raise InputError(f"unknown pruning order {order!r}; choose importance, random or probe:NAME[:LABEL]")
    shares = [float(s) for s in np.unique(np.append(np.arange(0.0, 100.0, step), 100.0))]
    masks = [Mask("none", "none", ())] + [Mask(f"{name} {share:g}%", "prune",
                                               tuple(sorted(order_heads[:_count(share, layers * heads)])))
                                          for name, order_heads in ranked.items() for share in shares[1:]]
    table = mask_tensor(masks, layers, heads)  # [M,L,H]
    evaluate_masks(target, table, mode, batch_size=batch_size, masks_per_pass=masks_per_pass,
                   tokens_per_pass=tokens_per_pass, progress=progress)
    settings = {"orders": orders, "step": step, "repeats": repeats, "seed": seed, "normalize": normalize,
                "order_data": [str(p) for p in _paths(order_data)] if order_data else None, "mode": mode,
                "batch_size": batch_size, "limit": limit, "label_from": label_from}
    scores, _, _, info = target.finish(settings, time.perf_counter() - started)
    per_share = len(shares) - 1
    values = {name: {m: np.concatenate([v[:1], v[1 + k * per_share:1 + (k + 1) * per_share]])  # [S]
                     for m, v in scores.items()}
              for k, name in enumerate(ranked)}
    return PruningResult(shares=shares, orders=ranked, values=values, mode=mode, info=info, importance=importance)


def ascending(scores: np.ndarray) -> list[tuple[int, int]]:
    """Every (layer, head) of an [L,H] grid, lowest score first (NaN first: nothing to keep it for); ties by index."""
    flat = np.nan_to_num(np.asarray(scores, dtype=float).ravel(), nan=-np.inf)
    heads = scores.shape[1]
    return [divmod(int(i), heads) for i in np.argsort(flat, kind="stable")]


def probe_scores(order: str, model: str, corpus: list[str], *, device: str, max_length: int | None,
                 limit: int | None) -> np.ndarray:
    """[L,H] scores of the label an order "probe:NAME[:LABEL]" names, the probe run with the classifier's encoder."""
    _, name, *rest = order.split(":", 2)
    label = rest[0] if rest else "overall"
    if not name:
        raise InputError(f"pruning order {order!r} names no probe; write probe:NAME[:LABEL], e.g. probe:dep:nsubj")
    result = run([name], model=model, corpus=corpus, device=device, max_length=max_length, limit=limit,
                 progress=False)[name]
    if label != "overall" and label not in result.labels:
        raise InputError(f"pruning order {order!r}: probe {name!r} found no label {label!r} in the corpus; "
                         f"labels: {', '.join(result.labels)}", corpus[0])
    return result.scores[label]


def _count(share: float, total: int) -> int:
    return int(round(share * total / 100))


def _paths(corpus) -> list[str]:
    return [str(p) for p in ([corpus] if isinstance(corpus, (str, Path)) else list(corpus or []))]
