"""One run: read the corpus, load the model, one forward pass per batch feeding every probe."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

from probes.batching import Batch, length_sorted_batches
from probes.corpus import guess_format, read_corpus
from probes.corpus.spacy_text import annotation_format
from probes.defaults import bundled_corpus, default_model
from probes.encoding import check_tokenize, encode, unknown_words
from probes.errors import InputError
from probes.fitting import plan_fit
from probes.maps import LayerMaps
from probes.model import Encoder, load_encoder
from probes.pooling import parse_rule
from probes.probe import Probe
from probes.progress import progress_bar
from probes.provenance import provenance
from probes.registry import get_probe, load_code
from probes.results import ProbeResult, RunInfo, check_output_folder
from probes.state_files import Shard, as_shard, save_states, split


def run(probes: str | Iterable[str], model: str | None = None, corpus: str | Path | Iterable[str | Path] | None = None,
        *, format: str | None = None, batch_size: int = 32, max_length: int | None = None, limit: int | None = None,
        device: str = "cpu", pool: str = "mean-sum", progress: bool | None = None,
        code: str | Path | Iterable[str | Path] | None = None, encoder: Encoder | None = None,
        tokenize: str = "words", fit: str | Path | Iterable[str | Path] | None = None, fit_on: str | None = None,
        annotate: str | None = None, shard: Shard | tuple[int, int] | str | None = None,
        state: str | Path | None = None, **options: Any) -> dict[str, ProbeResult]:
    """Score every head of `model` with each named probe on `corpus`; one forward pass feeds them all.

    model: a checkpoint directory or hub name (default: the packaged MiniLM).
    corpus: one or more files (default: the bundled UD English EWT sample).
    format: corpus reader (default: from the file name, e.g. .conllu).
    batch_size, max_length (subwords, special tokens included; longer sentences are skipped and
    counted, never cut), limit (first N sentences), device, pool (see probes.pooling).
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
    shard: (i, n) or "i/n": score only shard i of n, a deterministic split by sentence (see
    probes.state_files; --limit, prepare and the fit phase still see the whole corpus); the results
    are the shard's, with settings["shard"] = "i/n". state: a folder to save each probe's additive state
    in (DIR/<probe>.<i>-of-<n>.state.pt), for ``probes.merge`` to add up into the unsharded run's results.
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
    _check_settings(batch_size, max_length, limit, pool)
    check_tokenize(tokenize)
    shard = as_shard(shard)
    if state is not None:
        check_output_folder(state)
    _check_options(classes, options)
    plan = plan_fit(classes, [str(p) for p in _as_list(fit)], fit_on)

    paths = [str(p) for p in _as_list(corpus)] or [bundled_corpus()]
    reader_options: dict[str, Any] = {}
    for cls in classes:
        reader_options.update(cls(1, 1, **_own(cls, options)).reader_options())
    if annotate:
        format = annotation_format(annotate, format, reader_options)
    data = read_corpus(paths, format=format or guess_format(paths[0]) or classes[0].corpus_format, **reader_options)
    sentences = data.sentences[:limit] if limit else data.sentences
    fit_data = None
    if plan and plan.paths:
        fit_data = read_corpus(plan.paths, format=format or guess_format(plan.paths[0]) or classes[0].corpus_format,
                               **reader_options)

    if encoder is None:
        encoder = load_encoder(model or default_model(), device=device, max_length=max_length)
    active: list[Probe] = [cls(encoder.layers, encoder.heads, **_own(cls, options)) for cls in classes]
    for p in active:
        p.prepare(sentences)
    part = split(sentences, shard)
    whole = None  # the whole corpus, where a sharded run fits on it (fit_on "same")
    if shard.count > 1 and plan and not plan.paths:
        before = [p.state_dict() for p in active]
        whole = _prepare(sentences, active, encoder, tokenize, {})
        for p, saved in zip(active, before):  # undo what skip_reason counted (frames): the shard counts its own
            p.load_state_dict(saved)
    shard_skipped: dict[str, int] = {}
    usable, encoded = _prepare(part.sentences, active, encoder, tokenize, shard_skipped)
    skipped = dict(data.skipped)
    for reason, n in shard_skipped.items():
        skipped[reason] = skipped.get(reason, 0) + n
    if not encoded and shard.count == 1:
        raise InputError(f"no sentence can be scored (of {len(sentences)}: {_skip_summary(skipped)}; "
                         f"model limit {encoder.max_length} subwords)", paths[0])
    unknown = unknown_words(encoder.tokenizer.unk_token_id, usable, encoded)
    unknown.warn(paths[0])

    fit_settings = None
    fitting = [p for p in active if p.needs_fit]
    if fitting:  # fit phase: a forward pass over the fit corpus feeds fit_update before any update
        fit_usable, fit_encoded, fit_skipped = *(whole or (usable, encoded)), {}
        if fit_data is not None:
            fit_skipped = dict(fit_data.skipped)
            fit_usable, fit_encoded = _prepare(fit_data.sentences[:limit] if limit else fit_data.sentences,
                                               fitting, encoder, tokenize, fit_skipped)
            if not fit_encoded:
                raise InputError(f"no sentence of the fit corpus can be used ({_skip_summary(fit_skipped)})",
                                 plan.paths[0])
        _feed(encoder, fit_usable, fit_encoded, fitting, "fit_update", batch_size, pool, progress)
        fit_settings = plan.settings(fit_data.files if fit_data else data.files, len(fit_encoded), fit_skipped)
    _feed(encoder, usable, encoded, active, "update", batch_size, pool, progress)

    info = RunInfo(model=encoder.name, corpus=data.files, layers=encoder.layers, heads=encoder.heads,
                   sentences=len(encoded), skipped=skipped,
                   settings={"batch_size": batch_size, "pool": pool, "max_length": encoder.max_length,
                             "limit": limit, "device": str(encoder.device), "format": format, "tokenize": tokenize,
                             **({"fit": fit_settings} if fit_settings else {}),
                             **({"shard": str(shard)} if shard.count > 1 else {})},
                   provenance=provenance(encoder, data.files, time.perf_counter() - started,
                                         unknown_words=unknown.provenance(), skipped_ids=data.skipped_ids),
                   notes=dict(data.notes))
    if state is not None:
        save_states(state, active, info, part, encoder.tokenizer, data.skipped, shard_skipped)
    return {p.name: p.compute(info) for p in active}


def _prepare(sentences: list, probes: list[Probe], encoder: Encoder, tokenize: str,
             skipped: dict[str, int]) -> tuple[list, list]:
    """The sentences every probe can score, tokenised; the others counted in `skipped` by reason."""
    usable = []
    for s in sentences:
        reason = next((r for p in probes if (r := p.skip_reason(s))), None)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
        else:
            usable.append(s)
    encoded, unfit = encode(encoder.tokenizer, usable, encoder.max_length, tokenize)
    for reason, n in unfit.items():
        skipped[reason] = skipped.get(reason, 0) + n
    return usable, encoded


def _feed(encoder: Encoder, usable: list, encoded: list, probes: list[Probe], method: str, batch_size: int,
          pool: str, progress: bool | None) -> None:
    """One forward pass per length-sorted batch; each layer's maps handed to `method` ("update" or
    "fit_update") of every probe, layer by layer."""
    vectors = any(p.needs_vectors for p in probes)
    twin_seed = next((seed for p in probes if (seed := p.shuffle_seed()) is not None), None)
    with progress_bar(len(encoded), progress, "fitting" if method == "fit_update" else "probing") as bar:
        for items in length_sorted_batches(encoded, batch_size):
            batch = Batch.from_encoded([usable[e.index] for e in items], items, encoder.tokenizer, pool,
                                       shuffle_seed=twin_seed)
            capture = encoder.forward(batch.input_ids, batch.attention_mask, vectors=vectors,
                                      token_type_ids=batch.token_type_ids)
            twin = None
            if batch.twin is not None:  # a second forward pass, on the word-shuffled sentences
                twin = encoder.forward(batch.twin.input_ids, batch.twin.attention_mask,
                                       token_type_ids=batch.twin.token_type_ids)
            for layer in range(encoder.layers):
                maps = LayerMaps(batch, layer, capture.attentions[layer],
                                 None if capture.context is None else capture.context[layer],
                                 twin=None if twin is None else LayerMaps(batch.twin, layer, twin.attentions[layer]))
                for p in probes:
                    getattr(p, method)(batch, maps)
            bar.update(len(items))


def _skip_summary(skipped: dict[str, int]) -> str:
    return ", ".join(f"{n} {r.replace('_', ' ')}" for r, n in skipped.items()) or "none read"


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


def _check_settings(batch_size: int, max_length: int | None, limit: int | None, pool: str) -> None:
    if batch_size < 1:
        raise InputError(f"batch size must be at least 1, not {batch_size}")
    if max_length is not None and max_length < 3:
        raise InputError(f"max length must be at least 3 subwords, not {max_length}")
    if limit is not None and limit < 1:
        raise InputError(f"limit must be at least 1, not {limit}")
    try:
        parse_rule(pool)
    except ValueError as e:
        raise InputError(str(e)) from None
