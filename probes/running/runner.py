"""One run: read the corpus, load the model, one forward pass per batch feeding every probe layer by layer.

The corpus is read, filtered, tokenised and length-sorted in bounded chunks (probes.running.chunks: a run holds one
chunk's sentences at a time, whatever the corpus' size; a corpus of one chunk is batched exactly as a
whole-corpus sort).

Memory: the model computes one layer at a time (probes.capture.model, capture "hooks"); each layer's maps are
handed to every probe as a LayerMaps and dropped before the next layer, so a batch holds the model,
its activations and ONE layer's maps ([B,H,T,T]). Batches are length-sorted and cut by a sentence cap
(batch_size) and a token budget (max_tokens: sentences × padded length; default from the model's
shape, the longest sentence (of a one-chunk corpus; else the model's limit) and the device's total
memory, on CUDA at most the positions that keep the device busy, probes.encoding.batching.default_max_tokens: the
same on every run). On CUDA a batch that runs out
of memory is split in two and retried, the probes' state restored to before it (said once on stderr).

The probes' state lives on the model's device from their first batch to the end of the pass (Probe.to): no
layer waits for the host; the state comes back to the CPU once, before it is saved and the results computed.
"""
from __future__ import annotations

import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Iterable

import torch

from probes.encoding.batching import Batch, default_max_tokens, length_sorted_batches, total_memory, transfer
from probes.running.chunks import Chunk, Pass, RunCorpus, with_counts
from probes.corpus import CorpusStream, guess_format
from probes.corpus.spacy_text import annotation_format
from probes.base.defaults import bundled_corpus, default_model
from probes.encoding.subwords import special_names
from probes.base.errors import InputError
from probes.results.examples import ExampleRecorder
from probes.results.fitting import choose_heads, plan_fit, split_settings
from probes.capture.maps import LayerMaps
from probes.capture.model import Encoder, load_encoder
from probes.running.prefetch import Ahead
from probes.scoring.probe import Probe
from probes.base.devices import CPU
from probes.base.progress import progress_bar
from probes.base.protocols import apply_protocol
from probes.base.provenance import provenance
from probes.settings.registry import get_probe, load_code
from probes.results.probe_result import ProbeResult, RunInfo, skip_summary
from probes.settings.run_settings import RunSettings, settings_from
from probes.running.state_files import save_states


def run(probes: str | Iterable[str], model: str | None = None, corpus: str | Path | Iterable[str | Path] | None = None,
        settings: RunSettings | None = None, *, encoder: Encoder | None = None, progress: bool | None = None,
        **overrides: Any) -> dict[str, ProbeResult]:
    """Score every head of `model` with each named probe on `corpus`; one forward pass feeds them all.

    model: a checkpoint directory or hub name (default: the packaged MiniLM).
    corpus: one or more files (default: the bundled UD English EWT sample).
    settings: how the corpus is read, batched, captured and scored (probes.settings.run_settings.RunSettings: the format, batch
    size and token budget, max length, limit, device, pooling, fit and selection splits, protocol, weights,
    bootstrap, shard and state, ...; its fields say what each does). Default: RunSettings().
    encoder: an already loaded ``probes.capture.model.Encoder`` (saves reloading across runs).
    progress: a progress bar on stderr (default: when stderr is a terminal).
    overrides: RunSettings fields by name, changing `settings` (``limit=50``), and probe options by name
    (e.g. ``subtypes=True`` for dep).
    Returns {probe name: ProbeResult}.
    """
    started = time.perf_counter()
    settings, options = settings_from(overrides, settings)
    names = [probes] if isinstance(probes, str) else list(probes)
    if not names:
        raise InputError("no probe named; see `probes list`")
    for path in settings.code:
        load_code(path)
    classes = [get_probe(n) for n in dict.fromkeys(names)]
    pool, options = apply_protocol(settings.protocol, classes, settings.pool, options)
    _check_options(classes, options)
    select_paths = list(settings.select_on)
    plan = plan_fit(classes, list(settings.fit), settings.fit_on, select_paths)
    format, limit, invalid_trees, tokenize = settings.format, settings.limit, settings.invalid_trees, settings.tokenize
    max_tokens, shard = settings.max_tokens, settings.shard

    paths = [str(p) for p in _as_list(corpus)] or [bundled_corpus()]
    reader_options: dict[str, Any] = {}
    for cls in classes:
        reader_options.update(cls(1, 1, **_own(cls, options)).reader_options())
    if settings.annotate:
        format = annotation_format(settings.annotate, format, reader_options)
    fit_paths = plan.paths if plan else []

    def reader(files: list[str]) -> str:  # the format named, else the first file's, else the first probe's
        return format or guess_format(files[0]) or classes[0].corpus_format

    data = RunCorpus(paths, reader(paths), limit=limit, invalid_trees=invalid_trees, reader_options=reader_options,
                     shard=shard, fit_paths=fit_paths, fit_format=reader(fit_paths) if fit_paths else None,
                     allow_unknown=settings.allow_unknown)
    select_source = None  # the selection split, read in chunks like the scored corpus
    if select_paths:
        select_source = CorpusStream(select_paths, reader(select_paths), limit=limit, invalid_trees=invalid_trees,
                                     **reader_options)

    if encoder is None:
        encoder = load_encoder(model or default_model(), device=settings.device, max_length=settings.max_length,
                               capture=settings.capture, dtype=settings.dtype)
    encoder = encoder.with_capture(settings.capture).in_dtype(settings.dtype if "dtype" in settings.changed() else None)
    active: list[Probe] = [cls(encoder.layers, encoder.heads, replicates=settings.replicates,
                               bootstrap_seed=settings.bootstrap_seed,
                               **_own(cls, options)) for cls in classes]
    for p in active:
        p.read_model(encoder)
        p.to(encoder.device)
    data.start(active, encoder, tokenize)
    feed = Feed(encoder, pool, settings.weights)
    batch_size = settings.batch_cap(encoder.device.type == "cuda")
    if max_tokens is None:
        layers_held = encoder.layers if encoder.backend.all_layers else 1
        max_tokens = feed.rows(active) * default_max_tokens(encoder.heads, encoder.heads * encoder.head_dim,
                                                         data.longest(encoder.max_length),
                                                         total_memory(encoder.device), layers_held,
                                                         cuda=encoder.device.type == "cuda")
    fit_settings = None
    fitting = [p for p in active if p.needs_fit]
    beside = [] if select_source is not None else _beside(fitting, active, data, encoder)
    phase = [p for p in fitting if p not in beside]
    if phase:  # fit phase: a forward pass over the fit corpus feeds fit_update before any update
        chunks = data.fit_chunks(phase, active, encoder, tokenize)
        feed.all(phase, "fit_update", chunks, batch_size, max_tokens, progress, data.fit_total())
        for p in phase:
            p.fitted(encoder.device)
    if fitting:
        fit_settings = data.fit_settings(plan)
    for p in beside:  # fitted in the scoring pass itself, scored after it
        p.fit_beside()
    selecting: list[Probe] = []  # fresh probes scored on the selection split, the fitted ones with the run's fit
    if select_source is not None:
        selecting = [cls(encoder.layers, encoder.heads, **_own(cls, options)) for cls in classes]
        for p, fitted in zip(selecting, active):
            p.read_model(encoder)
            p.to(encoder.device)
            p.prepare(select_source)
            if p.needs_fit:
                p.merge_fit(fitted)
                p.fitted(encoder.device)
        selection = Pass(select_source)
        selection.start(selecting, encoder, tokenize)
        feed.all(selecting, "update", selection, batch_size, max_tokens, progress, data.total(selection))
        select_skipped = with_counts(select_source.counts.skipped, selection.skips.counts())
        if not selection.scored:
            raise InputError(f"no sentence of the selection split can be scored ({skip_summary(select_skipped)})",
                             select_paths[0])
    recorder = ExampleRecorder(encoder.layers, encoder.heads, settings.views, settings.view_heads, active,
                               special_names(encoder.tokenizer))
    feed.all([*active, recorder], "update", data.scoring, batch_size, max_tokens, progress, data.total(data.scoring))
    for p in beside:
        p.fitted(encoder.device)
        p.score_kept(lambda batch, layer, p=p: recorder.late_view(p, batch, layer))
    data.finish(encoder)
    for p in [*active, *selecting]:  # the state read back to the host, once
        p.to(CPU)

    read = data.source.counts
    info = RunInfo(model=encoder.name, corpus=read.files, layers=encoder.layers, heads=encoder.heads,
                   sentences=data.scoring.scored, units=data.scoring.units, unit=data.scoring.unit,
                   skipped=data.skipped(),
                   settings=settings.recorded(
                       format=format, batch_size=batch_size, max_tokens=max_tokens, pool=pool,
                       max_length=encoder.max_length,
                       device=str(encoder.device), dtype=encoder.dtype,
                       fit=fit_settings, select_on=split_settings(select_source.counts.files, selection.scored,
                                                                  select_skipped) if selecting else None),
                   provenance=provenance(encoder, read.files, time.perf_counter() - started,
                                         unknown_words=data.scoring.unknown.provenance(), skipped_ids=read.skipped_ids),
                   notes=dict(read.notes), annotation="silver" if read.silver else "gold",
                   annotator="; ".join(sorted(set(read.silver.values()))))
    if settings.state is not None:
        save_states(settings.state, active, info, data.sharding.split(), encoder.tokenizer, read.skipped,
                    data.scoring.skips.counts())
    results = {p.name: p.compute(info) for p in active}
    if selecting:
        chosen_on = RunInfo(model=encoder.name, corpus=select_source.counts.files, layers=encoder.layers,
                            heads=encoder.heads, sentences=selection.scored, units=selection.units, unit=selection.unit,
                            skipped=select_skipped,
                            settings=info.settings, provenance=info.provenance, notes=dict(select_source.counts.notes))
        for p in selecting:
            choose_heads(results[p.name], p.compute(chosen_on))
    return {name: recorder.attach(result) for name, result in results.items()}


class Feed:
    """Feeds batches to probes (or anything with the probes' ``update``/``fit_update`` and ``retry_point``/
    ``restore``) one layer at a time: `method` of each, called with (batch, LayerMaps) per layer.

    A batch and its word-shuffled twin run in one forward pass (rows concatenated, split per layer), so
    each layer of the twin arrives with the same layer of the batch. One Feed serves a whole run (fit and
    scoring), so that an out-of-memory split is said once. weights: what the LayerMaps' attention holds
    (probes.capture.norms.WEIGHT_KINDS: the probabilities, or the norm-based maps).
    """

    # torch raises OutOfMemoryError on accelerators only (a CPU allocation that fails is a RuntimeError, and the
    # system's OOM killer strikes first): on the CPU no state is copied per batch to restore (tests set True)
    retry_on_cpu = False
    # read the next chunk and build the batches on worker threads while the model runs (probes.running.prefetch); the
    # same batches, in the same order, either way (tests set False to compare)
    prefetch = True

    def __init__(self, encoder: Encoder, pool: str, weights: str = "attention"):
        self.encoder, self.pool, self.weights = encoder, pool, weights
        self.split_told = False  # whether the out-of-memory split was said on stderr

    @staticmethod
    def rows(probes: list[Probe]) -> int:
        """Forward rows per sentence: 2 when a probe asks for the word-shuffled twin, else 1."""
        return 1 if _twin_seed(probes) is None else 2

    def all(self, probes: list[Probe], method: str, chunks: Iterable[Chunk], batch_size: int | None, max_tokens: int,
            progress: bool | None, total: int | None = None) -> None:
        """Every chunk (probes.running.chunks), length-sorted and cut into batches of at most `batch_size` sentences and
        `max_tokens` forward rows × padded length (probes.encoding.batching.length_sorted_batches), one progress bar
        over them all (`total` sentences, None where not known ahead). With ``prefetch``, two worker threads
        (probes.running.prefetch) read the next chunk of a Pass and build the chunk's batches ahead of the model, in
        order; both are joined before this returns or raises."""
        budget = max_tokens // self.rows(probes)
        seed = _twin_seed(probes)
        with Ahead(self.prefetch, "probes-read") as reading, Ahead(self.prefetch, "probes-batch") as building, \
                progress_bar(total, progress, "fitting" if method == "fit_update" else "probing") as bar:
            for chunk in chunks.ahead(reading) if isinstance(chunks, Pass) else chunks:
                cut = length_sorted_batches(chunk.encoded, batch_size, budget)
                sentences = [[chunk.usable[e.index] for e in items] for items in cut]
                built = deque(building.submit(self.build, s, items, seed) for s, items in zip(sentences, cut))
                for s, items in zip(sentences, cut):
                    self.batch(probes, method, s, items, built.popleft().result())  # each batch dropped after it
                    bar.update(len(items))
                del chunk, sentences  # dropped before the next chunk is prepared

    def build(self, sentences: list, items: list, seed: int | None) -> Batch:
        """The batch of `items` (sentences[b] the sentence of items[b]), with its word-shuffled twin where `seed`, and
        what its pooling reads from the host (Batch.ready: on the builder's thread, off the model's)."""
        return Batch.from_encoded(sentences, items, self.encoder.tokenizer, self.pool,
                                  shuffle_seed=seed).ready(self.encoder.device)

    def batch(self, probes: list[Probe], method: str, sentences: list, items: list, built: Batch | None = None) -> None:
        """One batch (`built`: already built, else built here); one that runs out of memory is split in two and
        retried, the state restored first (on an accelerator: see retry_on_cpu)."""
        retry = self.retry_on_cpu or self.encoder.device.type != "cpu"
        before = [p.retry_point(method) for p in probes] if retry else None
        try:
            if built is None:
                built = self.build(sentences, items, _twin_seed(probes))
            self._forward(built, probes, method)
            return
        except torch.OutOfMemoryError:
            if len(items) == 1 or before is None:
                raise
        # The halves run after the except block: until it ends, its exception's traceback holds the failed pass's
        # tensors (the batch's maps and pooling matrices), and on a full device the halves need that memory back.
        built = None
        if self.encoder.device.type == "cuda":
            torch.cuda.empty_cache()  # the failed pass's cached blocks, for the halves' other shapes
        for p, point in zip(probes, before):
            p.restore(point)
        if not self.split_told:
            print(f"probes: a batch of {len(items)} sentences ran out of memory on {self.encoder.device}; "
                  "splitting such batches in two and retrying (a lower --max-tokens avoids this)", file=sys.stderr)
            self.split_told = True
        half = len(items) // 2
        self.batch(probes, method, sentences[:half], items[:half])
        self.batch(probes, method, sentences[half:], items[half:])

    def _forward(self, batch: Batch, probes: list[Probe], method: str) -> None:
        b = len(batch.indices)
        twin = batch.twin

        def on_layer(layer: int, attention: torch.Tensor, context: torch.Tensor | None) -> None:
            # attention [rows·B,H,T,T]: the batch's rows, then its twin's (or, without a twin, a causal model's
            # AttentionEntries where every probe reads entries only); context [rows·B,H,T,d] or None
            if twin is None:
                maps = LayerMaps(batch, layer, attention, context)
            else:
                maps = LayerMaps(batch, layer, attention[:b], None if context is None else context[:b],
                                 twin=LayerMaps(twin, layer, attention[b:]))
            for p in probes:
                getattr(p, method)(batch, maps)

        inputs = [batch] if twin is None else [batch, twin]

        def rows(name: str) -> torch.Tensor | None:  # [rows·B,T] the batch's inputs, then its twin's, on the device
            if getattr(batch, name) is None:
                return None
            return transfer(torch.cat([getattr(x, name) for x in inputs]), self.encoder.device)

        self.encoder.layerwise(rows("input_ids"), rows("attention_mask"), on_layer,
                               vectors=any(p.needs_vectors for p in probes), token_type_ids=rows("token_type_ids"),
                               weights=self.weights,
                               full=twin is not None or not all(getattr(p, "reads_entries", False) for p in probes))


# the share of the device's memory (probes.encoding.batching.total_memory) that what the probes fitting in the
# scoring pass keep may take in all (``_beside``): 232 MB for pos on EWT dev with MiniLM, 2.5 GB with a 24 × 16 model
BESIDE_SHARE = 1 / 8


def _beside(fitting: list[Probe], active: list[Probe], data: RunCorpus, encoder: Encoder) -> list[Probe]:
    """The probes of `fitting` that fit in the scoring pass itself (``Probe.fit_beside``), saving their fit phase's
    forward pass: where their fit corpus is the scored corpus of one chunk (``RunCorpus.scored_as_fit``), the scoring
    pass's batches are those the fit phase would feed (no word-shuffled twin among `active`'s that the fit lacks), and
    what they keep takes at most BESIDE_SHARE of the device's memory. The pass's centroids are then the fit phase's,
    bit for bit: the same batches, in the same order."""
    sentences = data.scored_as_fit()
    if sentences is None or Feed.rows(active) != Feed.rows(fitting):
        return []
    room, chosen = int(total_memory(encoder.device) * BESIDE_SHARE), []
    for p in fitting:
        size = p.beside_bytes(sentences, encoder.head_dim)
        if size is not None and size <= room:
            chosen.append(p)
            room -= size
    return chosen


def _twin_seed(probes: list[Probe]) -> int | None:
    """The word-shuffle seed of the first probe that asks for a twin, or None."""
    return next((seed for p in probes if (seed := p.shuffle_seed()) is not None), None)


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, (str, Path)):
        return [value]
    return list(value)


def _own(cls: type[Probe], options: dict[str, Any]) -> dict[str, Any]:
    names = {o.name for o in cls.options}
    return {k: v for k, v in options.items() if k in names}


def _check_options(classes: list[type[Probe]], options: dict[str, Any]) -> None:
    known = {o.name for cls in classes for o in cls.options}
    for key in options:
        if key not in known:
            raise InputError(f"no selected probe has an option {key!r} (probes: {', '.join(c.name for c in classes)})")
