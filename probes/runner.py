"""One run: read the corpus, load the model, one forward pass per batch feeding every probe."""
from __future__ import annotations

import hashlib
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from probes.batching import Batch, encode, length_sorted_batches
from probes.corpus import guess_format, read_corpus
from probes.defaults import bundled_corpus, default_model
from probes.errors import InputError
from probes.model import Encoder, load_encoder
from probes.pooling import parse_rule
from probes.probe import Probe
from probes.registry import get_probe, load_code
from probes.results import ProbeResult, RunInfo
from probes.text_encoding import TOKENIZE_CHOICES, encode_text


def run(probes: str | Iterable[str], model: str | None = None, corpus: str | Path | Iterable[str | Path] | None = None,
        *, format: str | None = None, batch_size: int = 32, max_length: int | None = None, limit: int | None = None,
        device: str = "cpu", pool: str = "mean-sum", progress: bool | None = None,
        code: str | Path | Iterable[str | Path] | None = None, encoder: Encoder | None = None,
        tokenize: str = "words", **options: Any) -> dict[str, ProbeResult]:
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
    sentence's raw text, tokens mapped to words by character offsets; see probes.text_encoding).
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
    if tokenize not in TOKENIZE_CHOICES:
        raise InputError(f"tokenize must be one of {', '.join(TOKENIZE_CHOICES)}, not {tokenize!r}")
    _check_options(classes, options)

    paths = [str(p) for p in _as_list(corpus)] or [bundled_corpus()]
    reader_options: dict[str, Any] = {}
    for cls in classes:
        reader_options.update(cls(1, 1, **_own(cls, options)).reader_options())
    data = read_corpus(paths, format=format or guess_format(paths[0]) or classes[0].corpus_format, **reader_options)
    sentences = data.sentences[:limit] if limit else data.sentences
    skipped = dict(data.skipped)

    if encoder is None:
        encoder = load_encoder(model or default_model(), device=device, max_length=max_length)
    active: list[Probe] = [cls(encoder.layers, encoder.heads, **_own(cls, options)) for cls in classes]
    usable = []
    for s in sentences:
        reason = next((r for p in active if (r := p.skip_reason(s))), None)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
        else:
            usable.append(s)
    encoded, too_long = (encode_text if tokenize == "text" else encode)(encoder.tokenizer, usable, encoder.max_length)
    for reason, n in too_long.items():
        skipped[reason] = skipped.get(reason, 0) + n
    if not encoded:
        detail = ", ".join(f"{n} {r.replace('_', ' ')}" for r, n in skipped.items()) or "none read"
        raise InputError(f"no sentence can be scored (of {len(sentences)}: {detail}; "
                         f"model limit {encoder.max_length} subwords)", paths[0])

    vectors = any(p.needs_vectors for p in active)
    batches = length_sorted_batches(encoded, batch_size)
    with _progress_bar(len(encoded), progress) as bar:
        for items in batches:
            batch = Batch.from_encoded([usable[e.index] for e in items], items, encoder.tokenizer, pool, tokenize)
            capture = encoder.forward(batch.input_ids, batch.attention_mask, vectors=vectors)
            batch.attentions, batch.context = capture.attentions, capture.context
            for p in active:
                p.update(batch)
            bar.update(len(items))

    info = RunInfo(model=encoder.name, corpus=data.files, layers=encoder.layers, heads=encoder.heads,
                   sentences=len(encoded), skipped=skipped,
                   settings={"batch_size": batch_size, "pool": pool, "max_length": encoder.max_length,
                             "limit": limit, "device": str(encoder.device), "format": format, "tokenize": tokenize},
                   provenance=_provenance(encoder, data.files, time.perf_counter() - started))
    return {p.name: p.compute(info) for p in active}


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


class _progress_bar:
    """tqdm over sentences on stderr, or a silent stand-in."""

    def __init__(self, total: int, enabled: bool | None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total = total

    def __enter__(self):
        if self.enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, unit="sent", desc="probing", file=sys.stderr)
        return self

    def update(self, n: int) -> None:
        if self.enabled:
            self.bar.update(n)

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.close()


def _provenance(encoder: Encoder, files: list[str], elapsed: float) -> dict[str, Any]:
    import tokenizers
    import torch
    import transformers

    from probes import __version__

    return {
        "probes": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__, "python": platform.python_version(), "platform": platform.platform(),
        "model_class": type(encoder.model).__name__, "model_type": encoder.model.config.model_type,
        "model_commit": getattr(encoder.model.config, "_commit_hash", None),
        "corpus_sha256": {f: _sha256(f) for f in files},
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": round(elapsed, 3),
    }


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
