"""One run: read the corpus, load the model, one forward pass per batch feeding every probe layer by layer.

The corpus is read, filtered, tokenised and length-sorted in bounded chunks (probes.chunks: a run holds one
chunk's sentences at a time, whatever the corpus' size; a corpus of one chunk is batched exactly as a
whole-corpus sort).

Memory: the model computes one layer at a time (probes.model, capture "hooks"); each layer's maps are
handed to every probe as a LayerMaps and dropped before the next layer, so a batch holds the model,
its activations and ONE layer's maps ([B,H,T,T]). Batches are length-sorted and cut by a sentence cap
(batch_size) and a token budget (max_tokens: sentences × padded length; default from the model's
shape, the longest sentence (of a one-chunk corpus; else the model's limit) and the device's total
memory, probes.batching.default_max_tokens: the same on every run). On CUDA a batch that runs out
of memory is split in two and retried, the probes' state restored to before it (said once on stderr).
Importing this module fixes glibc's mmap threshold (probes.allocator), so that freed maps leave the process.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Iterable

import torch

from probes.allocator import return_large_blocks
from probes.argtypes import Shard, as_shard, check_output_folder
from probes.batching import Batch, default_max_tokens, length_sorted_batches, total_memory
from probes.bootstrap import check_bootstrap
from probes.choices import DEFAULT_MIN_COUNT, DEFAULT_REPLICATES, DEFAULT_SEED, DEFAULT_SENTENCES
from probes.chunks import Chunk, Pass, RunCorpus, with_counts
from probes.corpus import CorpusStream, check_invalid_trees, guess_format
from probes.corpus.spacy_text import annotation_format
from probes.defaults import bundled_corpus, default_model
from probes.encoding import check_tokenize
from probes.errors import InputError
from probes.examples import ExampleRecorder
from probes.fitting import choose_heads, plan_fit, split_settings
from probes.maps import LayerMaps
from probes.model import Encoder, load_encoder
from probes.norms import check_weights
from probes.pooling import parse_rule
from probes.probe import Probe
from probes.progress import progress_bar
from probes.protocols import apply_protocol
from probes.provenance import provenance
from probes.registry import get_probe, load_code
from probes.results import ProbeResult, RunInfo, skip_summary
from probes.state_files import save_states

return_large_blocks()  # each layer's maps and temporaries go back to the system when freed (probes.allocator)


def run(probes: str | Iterable[str], model: str | None = None, corpus: str | Path | Iterable[str | Path] | None = None,
        *, format: str | None = None, batch_size: int | None = 32, max_tokens: int | None = None,
        max_length: int | None = None, limit: int | None = None, invalid_trees: str = "refuse",
        device: str = "cpu", pool: str | None = None, progress: bool | None = None,
        code: str | Path | Iterable[str | Path] | None = None, encoder: Encoder | None = None,
        tokenize: str = "words", fit: str | Path | Iterable[str | Path] | None = None, fit_on: str | None = None,
        annotate: str | None = None, views: int = DEFAULT_SENTENCES, view_heads: Iterable[tuple[int, int]] = (),
        protocol: str | None = None, shard: Shard | tuple[int, int] | str | None = None,
        state: str | Path | None = None, weights: str = "attention", min_count: int = DEFAULT_MIN_COUNT,
        select_on: str | Path | Iterable[str | Path] | None = None, replicates: int = DEFAULT_REPLICATES,
        bootstrap_seed: int = DEFAULT_SEED, **options: Any) -> dict[str, ProbeResult]:
    """Score every head of `model` with each named probe on `corpus`; one forward pass feeds them all.

    model: a checkpoint directory or hub name (default: the packaged MiniLM).
    corpus: one or more files (default: the bundled UD English EWT sample).
    format: corpus reader (default: from the file name, e.g. .conllu).
    batch_size: most sentences per forward pass (None: no cap); max_tokens: most padded subword positions
    (sentences × longest length) per forward pass, a word-order twin's rows counted too (default: from
    the model's shape and the device's total memory, probes.batching.default_max_tokens).
    max_length (subwords, special tokens included; longer sentences are skipped and counted, never cut),
    limit (first N sentences), device, pool (see probes.pooling; default mean-sum, or the protocol's).
    invalid_trees: a CoNLL-U sentence whose heads are not a tree: "refuse" the file (the default) or
    "skip" the sentence, counted by rule (probes.corpus.INVALID_TREES).
    progress: a progress bar on stderr (default: when stderr is a terminal).
    code: Python file(s) to import first, registering more probes.
    encoder: an already loaded ``probes.model.Encoder`` (saves reloading across runs).
    tokenize: what the tokenizer reads: "words" (the pre-split words, default) or "text" (each
    sentence's raw text, tokens mapped to words by character offsets; see probes.encoding).
    fit: corpus file(s) that probes with a fit phase (pos, ner, con: centroids) are fitted on before
    `corpus` is scored, e.g. the dev split (read like `corpus`; `limit` applies to it too).
    fit_on: "same" fits them on `corpus` itself (He & Choi 2021's same-split setting; two passes over
    it); the default is `fit` where given, else "same". Results record it under fit.on.
    annotate: "spacy" (or "spacy:PIPELINE") reads the corpus (and fit) files as raw text, one
    passage a line, tagged and parsed by spaCy (silver UPOS, XPOS, dependencies, entities).
    views: keep the per-sentence views of the first N scored sentences (default 20; 0 for none) in each
    result's ``extra["sentence_views"]`` (probes.examples). view_heads: [(layer, head), ...] whose
    attention maps the views keep besides each label's best head.
    protocol: a named protocol (probes.protocols: "hechoi2021", "clark2019", "kovaleva2019") setting the
    pooling and the probes' options at once; a contrary `pool` or option is refused. Recorded in settings.
    weights: what every probe reads as the attention: "attention" (the probabilities, default) or "norm",
    the norm-based maps of Kobayashi et al. 2020, α_ij‖f_h(x_j)‖ with rows renormalised to sum to 1
    (probes.norms). Recorded in settings as "weights".
    shard: (i, n) or "i/n": score only shard i of n, a deterministic split by sentence (see
    probes.state_files; --limit, prepare and the fit phase still see the whole corpus); the results
    are the shard's, with settings["shard"] = "i/n". state: a folder to save each probe's additive state
    in (DIR/<probe>.<i>-of-<n>.state.pt), for ``probes.merge`` to add up into the unsharded run's results.
    min_count: labels with fewer instances stay in the results, marked (settings["min_count"], each label's
    "below_min_count" in the JSON), and are left out of `probes show`, `probes compare` and the figures
    unless asked (default 20).
    select_on: corpus file(s) of a selection split (e.g. dev): every probe is scored on it too, each label's
    best head is chosen there and reported with its score on `corpus` (``LabelScores.selected``,
    settings["select_on"]; see probes.fitting). Probes with a fit phase are fitted on it unless `fit` or
    `fit_on` say otherwise. Not with `shard` or `state`.
    replicates, bootstrap_seed: the bootstrap's replicates (0: no intervals) and seed (probes.bootstrap): each
    sentence's Poisson(1) weights follow from the seed and its identity, so shards and checkpoints over one
    corpus share them. Recorded in settings.
    options: probe options by name (e.g. ``subtypes=True`` for dep).
    Returns {probe name: ProbeResult}.
    """
    started = time.perf_counter()
    names = [probes] if isinstance(probes, str) else list(probes)
    if not names:
        raise InputError("no probe named; see `probes list`")
    for path in _as_list(code):
        load_code(path)
    classes = [get_probe(n) for n in dict.fromkeys(names)]
    pool, options = apply_protocol(protocol, classes, pool, options)
    check_settings(batch_size, max_tokens, max_length, limit, pool)
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 0:
        raise InputError(f"min count must be a whole number, 0 or more, not {min_count!r}")
    check_invalid_trees(invalid_trees)
    check_tokenize(tokenize)
    check_weights(weights)
    check_bootstrap(replicates, bootstrap_seed)
    shard = as_shard(shard)
    if state is not None:
        check_output_folder(state)
    _check_options(classes, options)
    select_paths = [str(p) for p in _as_list(select_on)]
    if select_paths and (shard.count > 1 or state is not None):
        raise InputError("--select-on cannot be combined with --shard or --state (the selection split's scores are "
                         "not saved in the states; give --fit to fit on a split)")
    plan = plan_fit(classes, [str(p) for p in _as_list(fit)], fit_on, select_paths)

    paths = [str(p) for p in _as_list(corpus)] or [bundled_corpus()]
    reader_options: dict[str, Any] = {}
    for cls in classes:
        reader_options.update(cls(1, 1, **_own(cls, options)).reader_options())
    if annotate:
        format = annotation_format(annotate, format, reader_options)
    fit_paths = plan.paths if plan else []

    def reader(files: list[str]) -> str:  # the format named, else the first file's, else the first probe's
        return format or guess_format(files[0]) or classes[0].corpus_format

    data = RunCorpus(paths, reader(paths), limit=limit, invalid_trees=invalid_trees, reader_options=reader_options,
                     shard=shard, fit_paths=fit_paths, fit_format=reader(fit_paths) if fit_paths else None)
    select_source = None  # the selection split, read in chunks like the scored corpus
    if select_paths:
        select_source = CorpusStream(select_paths, reader(select_paths), limit=limit, invalid_trees=invalid_trees,
                                     **reader_options)

    if encoder is None:
        encoder = load_encoder(model or default_model(), device=device, max_length=max_length)
    active: list[Probe] = [cls(encoder.layers, encoder.heads, replicates=replicates, bootstrap_seed=bootstrap_seed,
                               **_own(cls, options)) for cls in classes]
    for p in active:
        p.read_model(encoder)
    data.start(active, encoder, tokenize)
    feed = Feed(encoder, pool, weights)
    if max_tokens is None:
        layers_held = 1 if encoder.capture == "hooks" else encoder.layers
        max_tokens = feed.rows(active) * default_max_tokens(encoder.heads, encoder.heads * encoder.head_dim,
                                                         data.longest(encoder.max_length),
                                                         total_memory(encoder.device), layers_held)
    fit_settings = None
    fitting = [p for p in active if p.needs_fit]
    if fitting:  # fit phase: a forward pass over the fit corpus feeds fit_update before any update
        chunks = data.fit_chunks(fitting, active, encoder, tokenize)
        feed.all(fitting, "fit_update", chunks, batch_size, max_tokens, progress, data.fit_total())
        fit_settings = data.fit_settings(plan)
    selecting: list[Probe] = []  # fresh probes scored on the selection split, the fitted ones with the run's fit
    if select_source is not None:
        selecting = [cls(encoder.layers, encoder.heads, **_own(cls, options)) for cls in classes]
        for p, fitted in zip(selecting, active):
            p.read_model(encoder)
            p.prepare(select_source)
            if p.needs_fit:
                p.merge_fit(fitted)
        selection = Pass(select_source)
        selection.start(selecting, encoder, tokenize)
        feed.all(selecting, "update", selection, batch_size, max_tokens, progress, data.total(selection))
        select_skipped = with_counts(select_source.counts.skipped, selection.skips.counts())
        if not selection.scored:
            raise InputError(f"no sentence of the selection split can be scored ({skip_summary(select_skipped)})",
                             select_paths[0])
    recorder = ExampleRecorder(encoder.layers, encoder.heads, views, view_heads, active)
    feed.all([*active, recorder], "update", data.scoring, batch_size, max_tokens, progress, data.total(data.scoring))
    data.finish(encoder)

    read = data.source.counts
    info = RunInfo(model=encoder.name, corpus=read.files, layers=encoder.layers, heads=encoder.heads,
                   sentences=data.scoring.scored, skipped=data.skipped(),
                   settings={"batch_size": batch_size, "max_tokens": max_tokens, "pool": pool, "max_length": encoder.max_length,
                             "limit": limit, "device": str(encoder.device), "format": format, "tokenize": tokenize,
                             "weights": weights, "replicates": replicates, "bootstrap_seed": bootstrap_seed,
                             **({"protocol": protocol} if protocol else {}),
                             "min_count": min_count,
                             **({"fit": fit_settings} if fit_settings else {}),
                             **({"select_on": split_settings(select_source.counts.files, selection.scored,
                                                             select_skipped)} if selecting else {}),
                             **({"shard": str(shard)} if shard.count > 1 else {})},
                   provenance=provenance(encoder, read.files, time.perf_counter() - started,
                                         unknown_words=data.scoring.unknown.provenance(), skipped_ids=read.skipped_ids),
                   notes=dict(read.notes))
    if state is not None:
        save_states(state, active, info, data.sharding.split(), encoder.tokenizer, read.skipped,
                    data.scoring.skips.counts())
    results = {p.name: p.compute(info) for p in active}
    if selecting:
        chosen_on = RunInfo(model=encoder.name, corpus=select_source.counts.files, layers=encoder.layers,
                            heads=encoder.heads, sentences=selection.scored, skipped=select_skipped,
                            settings=info.settings, provenance=info.provenance, notes=dict(select_source.counts.notes))
        for p in selecting:
            choose_heads(results[p.name], p.compute(chosen_on))
    return {name: recorder.attach(result) for name, result in results.items()}


class Feed:
    """Feeds batches to probes (or anything with the probes' ``update``/``fit_update`` and ``state_dict``/
    ``load_state_dict``) one layer at a time: `method` of each, called with (batch, LayerMaps) per layer.

    A batch and its word-shuffled twin run in one forward pass (rows concatenated, split per layer), so
    each layer of the twin arrives with the same layer of the batch. One Feed serves a whole run (fit and
    scoring), so that an out-of-memory split is said once. weights: what the LayerMaps' attention holds
    (probes.norms.WEIGHT_KINDS: the probabilities, or the norm-based maps).
    """

    # torch raises OutOfMemoryError on accelerators only (a CPU allocation that fails is a RuntimeError, and the
    # system's OOM killer strikes first): on the CPU no state is copied per batch to restore (tests set True)
    retry_on_cpu = False

    def __init__(self, encoder: Encoder, pool: str, weights: str = "attention"):
        self.encoder, self.pool, self.weights = encoder, pool, weights
        self.split_told = False  # whether the out-of-memory split was said on stderr

    @staticmethod
    def rows(probes: list[Probe]) -> int:
        """Forward rows per sentence: 2 when a probe asks for the word-shuffled twin, else 1."""
        return 1 if _twin_seed(probes) is None else 2

    def all(self, probes: list[Probe], method: str, chunks: Iterable[Chunk], batch_size: int | None, max_tokens: int,
            progress: bool | None, total: int | None = None) -> None:
        """Every chunk (probes.chunks), length-sorted and cut into batches of at most `batch_size` sentences and
        `max_tokens` forward rows × padded length (probes.batching.length_sorted_batches), one progress bar
        over them all (`total` sentences, None where not known ahead)."""
        budget = max_tokens // self.rows(probes)
        with progress_bar(total, progress, "fitting" if method == "fit_update" else "probing") as bar:
            for chunk in chunks:
                for items in length_sorted_batches(chunk.encoded, batch_size, budget):
                    self.batch(probes, method, [chunk.usable[e.index] for e in items], items)
                    bar.update(len(items))
                del chunk  # dropped before the next chunk is read and prepared

    def batch(self, probes: list[Probe], method: str, sentences: list, items: list) -> None:
        """One batch; one that runs out of memory is split in two and retried, the state restored first
        (on an accelerator: see retry_on_cpu)."""
        retry = self.retry_on_cpu or self.encoder.device.type != "cpu"
        before = [p.state_dict() for p in probes] if retry else None
        try:
            batch = Batch.from_encoded(sentences, items, self.encoder.tokenizer, self.pool, shuffle_seed=_twin_seed(probes))
            self._forward(batch, probes, method)
        except torch.OutOfMemoryError:
            if len(items) == 1 or before is None:
                raise
            for p, state in zip(probes, before):
                p.load_state_dict(state)
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
            # attention [rows·B,H,T,T]: the batch's rows, then its twin's; context [rows·B,H,T,d] or None
            maps = LayerMaps(batch, layer, attention[:b], None if context is None else context[:b],
                             twin=None if twin is None else LayerMaps(twin, layer, attention[b:]))
            for p in probes:
                getattr(p, method)(batch, maps)

        inputs = [batch] if twin is None else [batch, twin]

        def rows(name: str) -> torch.Tensor | None:  # [rows·B,T] the batch's inputs, then its twin's
            return None if getattr(batch, name) is None else torch.cat([getattr(x, name) for x in inputs])

        self.encoder.layerwise(rows("input_ids"), rows("attention_mask"), on_layer,
                               vectors=any(p.needs_vectors for p in probes), token_type_ids=rows("token_type_ids"),
                               weights=self.weights)


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


def check_settings(batch_size: int | None, max_tokens: int | None, max_length: int | None, limit: int | None,
                   pool: str | None) -> None:
    """InputError for a batch size, token budget, max length or limit out of range, or a pooling rule that
    does not parse (None: the default, nothing to check)."""
    if batch_size is not None and batch_size < 1:
        raise InputError(f"batch size must be at least 1, not {batch_size}")
    if max_tokens is not None and max_tokens < 1:
        raise InputError(f"max tokens must be at least 1, not {max_tokens}")
    if max_length is not None and max_length < 3:
        raise InputError(f"max length must be at least 3 subwords, not {max_length}")
    if limit is not None and limit < 1:
        raise InputError(f"limit must be at least 1, not {limit}")
    try:
        if pool is not None:
            parse_rule(pool)
    except ValueError as e:
        raise InputError(str(e)) from None
