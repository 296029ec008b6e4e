"""A registered probe as an ablation target: the probe's own run, with heads disabled.

For each mask, ``probes.run`` scores the corpus with the mask applied to every batch row (and to
any fit phase or second pass the probe asks for), so a masked run is exactly the probe's run on
a model without those heads. The scores of one label (default ``overall``) give two metrics:

    best  the highest score of any head (the "best head" of the probe's L×H grid)
    mean  the mean score over the L×H heads

and the whole [L,H] grid per mask is kept, so a user can see what disabling, say, layer 2 does
to the heads of later layers.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from probes.defaults import default_model
from probes.errors import InputError
from probes.model import load_encoder
from probes.registry import get_probe
from probes.results import ProbeResult, RunInfo
from probes.runner import run

class ProbeTarget:
    """Score a probe on a corpus under each of many head masks."""

    def __init__(self, probe: str, model: str | None, corpus: list[str | Path], *, label: str = "overall",
                 device: str = "cpu", max_length: int | None = None, run_options: dict[str, Any] | None = None):
        self.probe = get_probe(probe).name
        self.corpus = [str(p) for p in corpus] or None
        self.label = label
        self.run_options = dict(run_options or {})
        self.encoder = enc = load_encoder(model or default_model(), device=device, max_length=max_length)
        self.model, self.layers, self.heads, self.head_dim = enc.model, enc.layers, enc.heads, enc.head_dim
        self.modules = enc._self_attention
        self.results: list[ProbeResult] = []

    units = 1  # progress: one per mask run

    @property
    def name(self) -> str:
        return self.encoder.name

    def evaluate(self, masks: torch.Tensor, masker, bar, **_passes) -> None:
        """One probe run per mask (masks [M,L,H]), each with that mask on every row."""
        for mask in masks:
            masker.set(mask)
            result = run([self.probe], encoder=self.encoder, corpus=self.corpus, progress=False,
                         **self.run_options)[self.probe]
            if not self.results and self.label != "overall" and self.label not in result.labels:
                raise InputError(f"probe {self.probe!r} found no label {self.label!r} in the corpus; "
                                 f"labels: {', '.join(result.labels)}")
            self.results.append(result)
            bar.update(1)

    def finish(self, settings: dict, elapsed: float) -> tuple[dict[str, np.ndarray], np.ndarray, dict, RunInfo]:
        """Metrics [M], the label's grids [M,L,H] (NaN where it has no instance), what to record, the run's info."""
        grids = np.stack([r.scores[self.label] for r in self.results])
        first = self.results[0]
        count = first.overall.count if self.label == "overall" else first.labels[self.label].count
        extra = {"probe": self.probe, "label": self.label, "count": count, "options": first.options}
        info = replace(first.info, settings={**first.info.settings, **settings},
                       provenance={**first.info.provenance, "seconds": round(elapsed, 3)})
        return grid_metrics(grids), grids, extra, info


def grid_metrics(grids: np.ndarray) -> dict[str, np.ndarray]:
    """best (max over heads) and mean (over heads) [M] of per-mask grids [M,L,H]; NaN heads ignored."""
    flat = grids.reshape(grids.shape[0], -1)
    empty = np.isnan(flat).all(axis=1)
    best = np.where(empty, np.nan, np.where(np.isnan(flat), -np.inf, flat).max(axis=1))
    count = (~np.isnan(flat)).sum(axis=1)
    mean = np.where(empty, np.nan, np.nansum(flat, axis=1) / np.maximum(count, 1))
    return {"best": best, "mean": mean}
