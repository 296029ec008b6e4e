"""A registered probe as an ablation target: the probe's scores with heads disabled.

Shapes: M masks, G masks in one pass, B sentences of a batch, T subword positions, L layers, H heads.

The corpus is streamed as ``probes.run`` streams it (probes.running.chunks: read, filtered and tokenised a chunk at a
time, the probe's ``prepare`` over the whole corpus first). Each length-sorted batch then runs once per pass
of G masks, repeated G times along the batch axis (rows mask-major) under a [G·B,L,H] head mask,
as the classify target does; masks are grouped by their first layer with a disabled head, and the
layers below it run once on the B sentences (probes.capture.sharing). Every mask has its own
probe instance (a copy of one prepared instance), fed exactly what ``probes.run`` would feed it
on a model without those heads: mask g's rows of each layer's maps. Below a mask's first disabled
layer its maps are the unmasked model's, so those layers' word-level maps are pooled once per
batch and handed to every mask. A heads sweep of an L×H model thus costs about 0.62 × (L·H + 1)
forward passes for 6 × 12 heads, plus the probe's own updates.

Probes with a fit phase, a word-shuffled twin or context vectors, and runs whose settings (RunSettings) differ
from the defaults in more than SHARED_SETTINGS (fit, annotate, protocol, replicates, ...), run ``probes.run`` with
those settings once per mask instead (same scores, no sharing).

The scores of one label (default ``overall``) give two metrics:

    best  the highest score of any head (the "best head" of the probe's L×H grid)
    mean  the mean score over the L×H heads

and the whole [L,H] grid per mask is kept. In zero mode a disabled head's cells are NaN (not
scored): its output is gone, although its attention map is still computed; it is never "best"
and is left out of "mean". In uniform mode its map is the uniform map, scored as such.
"""
from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from probes.capture.sharing import SharedPrefix, by_first_layer, mask_passes
from probes.encoding.batching import Batch, length_sorted_batches
from probes.running.chunks import Chunk, Pass, with_counts
from probes.corpus import CorpusStream, guess_format
from probes.base.defaults import bundled_corpus, default_model
from probes.base.errors import InputError
from probes.capture.maps import LayerMaps
from probes.capture.model import load_encoder
from probes.base.provenance import provenance
from probes.settings.registry import get_probe
from probes.results.probe_result import ProbeResult, RunInfo
from probes.running.runner import run
from probes.settings.run_settings import RunSettings

# the settings the shared read honours (any other changed from its default: one probes.run per mask)
SHARED_SETTINGS = ("format", "batch_size", "limit", "pool", "tokenize", "device", "dtype", "max_length",
                   "allow_unknown", "code")


class ProbeTarget:
    """Score a probe on a corpus under each of many head masks."""

    def __init__(self, probe: str, model: str | None, corpus: list[str | Path], settings: RunSettings,
                 options: dict[str, Any], *, label: str = "overall", mode: str = "zero"):
        self.cls = get_probe(probe)
        self.probe = self.cls.name
        self.corpus = [str(p) for p in corpus] or None
        self.label, self.mode = label, mode
        self.settings = settings
        self.given_options = {k: v for k, v in options.items() if v is not None}  # probe options given (for probes.run)
        self.encoder = enc = load_encoder(model or default_model(), device=settings.device,
                                          max_length=settings.max_length, dtype=settings.dtype)
        if mode == "uniform" and enc.capture == "sdpa-qk":
            raise InputError(f"mode uniform rewrites a disabled head's reported map, which capture sdpa-qk (the "
                             f"default in {enc.dtype}) computes beside SDPA, not from the attention module's output: "
                             "use mode zero, or dtype float32")
        self.model, self.layers, self.heads, self.head_dim = enc.model, enc.layers, enc.heads, enc.head_dim
        self.modules = enc.attention_modules
        self.disabled: torch.Tensor | None = None  # [M,L,H] after evaluate()
        self.results: list[ProbeResult] = []
        self.probes: list = []  # one probe instance per mask (shared read)
        option_names = {o.name for o in self.cls.options}
        self.options = {k: v for k, v in self.given_options.items() if k in option_names}
        self.template = self.cls(enc.layers, enc.heads, **self.options)
        others = (set(self.given_options) - option_names) | (settings.changed() - set(SHARED_SETTINGS))
        self.shared = not (others or self.cls.needs_fit or self.cls.needs_vectors
                           or self.template.shuffle_seed() is not None)
        if self.shared:
            self._read()

    @property
    def name(self) -> str:
        return self.encoder.name

    @property
    def units(self) -> int | None:  # progress: sentences per mask (shared read; None: not known ahead) or one run
        if not self.shared:
            return 1
        return len(self.scoring.first.encoded) if self.scoring.single and self.scoring.first is not None else None

    def _read(self) -> None:
        """Stream the corpus as ``probes.run`` does (probes.running.chunks): the probe's whole-corpus ``prepare``, then
        the first chunk read, filtered and tokenised (the later ones while the masks are fed)."""
        settings = self.settings
        self.paths = self.corpus or [bundled_corpus()]
        kind = settings.format or guess_format(self.paths[0]) or self.cls.corpus_format
        self.source = CorpusStream(self.paths, kind, limit=settings.limit, **self.template.reader_options())
        self.template.prepare(self.source)
        self.scoring = Pass(self.source)
        first = self.scoring.start([self.template], self.encoder, settings.tokenize)
        if self.scoring.single and not first.encoded:
            self._check_scored()
        if self.scoring.single and not settings.allow_unknown:
            self.scoring.unknown.refuse(self.paths[0])

    def _check_scored(self) -> None:
        if not self.scoring.scored:
            raise InputError(f"no sentence can be scored (of {self.scoring.read}; model limit "
                             f"{self.encoder.max_length} subwords)", self.paths[0])

    def evaluate(self, masks: torch.Tensor, masker, bar, *, batch_size: int, masks_per_pass: int,
                 tokens_per_pass: int) -> None:
        """Feed every mask's probe (masks [M,L,H]): shared passes, or one probe run per mask."""
        self.disabled = masks
        if not self.shared:
            for mask in masks:
                masker.set(mask)
                self.results.append(run([self.probe], encoder=self.encoder, corpus=self.corpus, settings=self.settings,
                                        progress=False, **self.given_options)[self.probe])
                bar.update(1)
            return
        self.probes = [copy.deepcopy(self.template).to(self.encoder.device) for _ in range(masks.shape[0])]
        self.scoring.probes = self.probes  # the later chunks' skips are counted by every mask's probe
        groups = by_first_layer(masks)
        pool = self.settings.pool or "mean-sum"
        with SharedPrefix(self.model, self.modules) as prefix:
            for chunk in self.scoring:
                self._feed(chunk, groups, masks, masker, bar, pool, batch_size, masks_per_pass, tokens_per_pass,
                           prefix)
        self._check_scored()
        if not self.settings.allow_unknown:
            self.scoring.unknown.refuse(self.paths[0])
        self.scoring.unknown.warn(self.paths[0])

    def _feed(self, chunk: Chunk, groups: list, masks: torch.Tensor, masker, bar, pool: str, batch_size: int,
              masks_per_pass: int, tokens_per_pass: int, prefix: SharedPrefix) -> None:
        """One chunk's length-sorted batches, each run once per pass of masks."""
        for items in length_sorted_batches(chunk.encoded, batch_size):
            batch = Batch.from_encoded([chunk.usable[e.index] for e in items], items, self.encoder.tokenizer,
                                       pool)
            rows, length = batch.input_ids.shape
            unmasked: dict[int, LayerMaps] = {}  # layer -> its maps with nothing disabled, pooled once
            for start, picked in mask_passes(groups, rows * length, masks_per_pass, tokens_per_pass):
                masker.set(masks[picked].repeat_interleave(rows, dim=0))  # [G·B,L,H], mask-major
                attentions = self._forward(batch, len(picked), prefix, start)
                for layer, attention in enumerate(attentions):  # [G·B,H,T,T], or [B,H,T,T] where shared
                    if layer < start:
                        maps = unmasked.setdefault(layer, LayerMaps(batch, layer, attention[:rows]))
                        for m in picked:
                            self.probes[m].update(batch, maps)
                        continue
                    for g, m in enumerate(picked):
                        self.probes[m].update(batch, LayerMaps(batch, layer, attention[g * rows:(g + 1) * rows]))
                bar.update(rows * len(picked))

    def _forward(self, batch: Batch, copies: int, prefix: SharedPrefix, start: int) -> tuple[torch.Tensor, ...]:
        """L attention maps of `batch` repeated `copies` times (rows mask-major); blocks below `start` run on
        the B rows alone where the prefix can be shared."""
        shared = copies > 1 and start > 0 and prefix.usable
        repeat = 1 if shared else copies
        types = batch.token_type_ids
        if shared:
            prefix.set(copies, start)
        try:
            capture = self.encoder.forward(batch.input_ids.repeat(repeat, 1), batch.attention_mask.repeat(repeat, 1),
                                           token_type_ids=None if types is None else types.repeat(repeat, 1))
        finally:
            if shared:
                prefix.set(1, 0)
        return capture.attentions

    def finish(self, settings: dict, elapsed: float) -> tuple[dict[str, np.ndarray], np.ndarray, dict, RunInfo]:
        """Metrics [M], the label's grids [M,L,H] (NaN where it has no instance, and at disabled heads in zero
        mode), what to record, the run's info."""
        if self.shared:
            read = self.source.counts
            info = RunInfo(model=self.encoder.name, corpus=read.files, layers=self.layers, heads=self.heads,
                           sentences=self.scoring.scored,
                           skipped=with_counts(read.skipped, self.scoring.skips.counts()),
                           settings={"pool": self.settings.pool or "mean-sum",
                                     "max_length": self.encoder.max_length,
                                     "tokenize": self.settings.tokenize},
                           provenance=provenance(self.encoder, read.files, elapsed,
                                                 unknown_words=self.scoring.unknown.provenance(),
                                                 skipped_ids=read.skipped_ids),
                           notes=dict(read.notes))
            self.results = [p.to("cpu").compute(info) for p in self.probes]
        first = self.results[0]
        if self.label != "overall" and self.label not in first.labels:
            raise InputError(f"probe {self.probe!r} found no label {self.label!r} in the corpus; "
                             f"labels: {', '.join(first.labels)}")
        grids = np.stack([r.scores[self.label] for r in self.results]).astype(float)  # [M,L,H]
        if self.mode == "zero":
            grids[self.disabled.numpy()] = np.nan
        count = first.overall.count if self.label == "overall" else first.labels[self.label].count
        extra = {"probe": self.probe, "label": self.label, "count": count, "options": first.options,
                 "disabled_heads": "not scored (NaN)" if self.mode == "zero" else "scored on the uniform map"}
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
