"""Shards of a run and the probes' additive state on disk: ``probes run --shard I/N --state DIR`` and ``probes merge``.

A shard is a deterministic share of a run's sentences: sentence s belongs to shard
``key(s) mod N``, where key(s) is the SHA-256 of the sentence's identity (its words and its occurrence
among sentences with the same words: probes.encoding.identity, numbered over the whole corpus stream in every
shard), so the split is the same on every machine, in any corpus order and however the file
was written (line endings, byte-order mark, comments, empty nodes). Everything that reads the whole corpus stays whole in every shard: ``--limit``
(first N sentences) is applied before the split, ``Probe.prepare`` (e.g. rare's word frequencies)
sees every sentence, and the fit phase (pos, ner, con centroids) runs on the whole fit corpus in
every shard (with ``fit_on="same"``, the whole scored corpus), so every shard scores with the
centroids of the unsharded run and the merge only checks that the fits agree. The runner streams
the split (``ShardStream``: keys summed as the sentences pass, never held; see probes.running.chunks).

``save_states`` writes one file per probe, ``DIR/<probe>.<I>-of-<N>.state.pt`` (torch.save of
plain dicts, lists, numbers, strings and tensors: ``torch.load(weights_only=True)`` reads it),
holding the probe's ``state_dict``, the shard's counts (sentences scored, skipped by reason, [UNK]
words), what the results record (model, corpus, settings, provenance) and a fingerprint of
everything that must agree to merge: project version, probe and options, model shape, weights
sha256, tokenizer sha256, corpus files' sha256, every run setting (the bootstrap's replicates and seed among them; the fit corpus by its files'
sha256), the corpus' sentence count, the skips and notes of its reader, the sentence-identity
digest of the whole corpus, and the number of shards.

``merge`` loads state files, refuses states whose fingerprints differ (one line naming the field),
shards given twice or missing, and shards whose sentence digests (sums of the keys of their
sentences, mod 2^256) do not add up to the corpus' digest; then adds the states (``Probe.merge``)
and computes the results the unsharded run gives, every cell and every count.
"""
from __future__ import annotations

import hashlib
import io
import json
import shlex
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import torch

from probes.base.argtypes import Shard
from probes.corpus.sentence import Sentence
from probes.encoding.subwords import UnknownWords
from probes.base.errors import InputError
from probes.encoding.identity import Occurrences
from probes.scoring.probe import Probe
from probes.base.provenance import sha256
from probes.settings.registry import get_probe, load_code
from probes.results.figures import save_result
from probes.base.files import write_result_files
from probes.results.probe_result import ProbeResult, RunInfo

STATE_KIND = "probes-state"
STATE_VERSION = 1
STATE_SUFFIX = ".state.pt"
_DIGEST_MODULUS = 1 << 256


@dataclass
class Split:
    """The sentences of one shard, with the sentence-identity digests of the shard and of the whole corpus."""

    shard: Shard
    sentences: list[Sentence]  # the shard's, in corpus order (empty where they were streamed: ShardStream)
    digest: str  # sum of the shard's sentence keys mod 2^256, hex
    corpus_digest: str  # the same over every sentence of the run
    corpus_sentences: int


def split(sentences: Iterable[Sentence], shard: Shard) -> Split:
    """The sentences of `shard` (key mod count == index) among `sentences`."""
    stream = ShardStream(shard)
    return stream.split(list(stream.select(sentences)))


class ShardStream:
    """The split of a stream of sentences: ``select`` yields the shard's as they come, adding every key to
    the digests; ``split()`` is the Split of the sentences selected so far."""

    def __init__(self, shard: Shard):
        self.shard = shard
        self.sentences = 0  # sentences seen
        self.keys = 0  # sum of their keys
        self.mine = 0  # sum of the shard's keys

    def select(self, sentences: Iterable[Sentence]) -> Iterator[Sentence]:
        """The shard's sentences among `sentences` (the whole corpus stream, every shard's), in order, each
        numbered among identical sentences (``Sentence.occurrence``) for its key."""
        occurrences = Occurrences()
        for s in sentences:
            key = occurrences.key(s)
            self.sentences += 1
            self.keys += key
            if key % self.shard.count == self.shard.index:
                self.mine += key
                yield s

    def split(self, sentences: list[Sentence] | None = None) -> Split:
        """The Split of what ``select`` saw; `sentences`: the shard's, where they were kept."""
        return Split(self.shard, sentences or [], _digest([self.mine]), _digest([self.keys]), self.sentences)


def _digest(keys: Iterable[int]) -> str:
    return f"{sum(keys) % _DIGEST_MODULUS:064x}"


def tokenizer_sha256(tokenizer) -> str:
    """SHA-256 of a tokenizer's full definition (a fast tokenizer's JSON; else its vocabulary)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else repr(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# settings that only decide how sentences are batched and where they run: shards may differ in them (the
# default token budget follows each machine's total memory); scores move by float32 rounding at most
BATCHING = ("batch_size", "max_tokens", "device")


def state_file_name(probe: str, shard: Shard) -> str:
    return f"{probe}.{shard.index}-of-{shard.count}{STATE_SUFFIX}"


def save_states(directory: str | Path, probes: list[Probe], info: RunInfo, part: Split, tokenizer,
                corpus_skipped: dict[str, int], shard_skipped: dict[str, int]) -> list[Path]:
    """Write each probe's state file into `directory` (atomically; see the module docstring).

    info: the shard's RunInfo; corpus_skipped: the sentences the corpus reader set aside (the same in every
    shard); shard_skipped: those of this shard the probes or the tokenizer could not use."""
    fit = info.settings.get("fit")
    shared = {
        "probes_version": info.provenance.get("probes"),
        "layers": info.layers, "heads": info.heads,
        "model_weights_sha256": info.provenance.get("model_weights_sha256") or f"unknown (model {info.model})",
        "tokenizer_sha256": tokenizer_sha256(tokenizer),
        "corpus_sha256": [info.provenance["corpus_sha256"][f] for f in info.corpus],
        **{k: v for k, v in info.settings.items() if k not in ("fit", "shard", *BATCHING)},
        "fit": None if fit is None else {**{k: v for k, v in fit.items() if k != "corpus"},
                                         "corpus_sha256": [sha256(f) for f in fit["corpus"]]},
        "corpus_sentences": part.corpus_sentences, "corpus_digest": part.corpus_digest,
        "corpus_skipped": dict(corpus_skipped), "corpus_notes": dict(info.notes),
        "shards": part.shard.count,
    }
    record = {"kind": STATE_KIND, "version": STATE_VERSION, "shard": part.shard.index, "digest": part.digest,
              "sentences": info.sentences, "units": info.unit_count, "unit": info.unit,
              "skipped": dict(shard_skipped),
              "info": {"model": info.model, "corpus": list(info.corpus), "annotation": info.annotation,
                       "annotator": info.annotator,
                       "settings": {k: v for k, v in info.settings.items() if k != "shard"},
                       "provenance": info.provenance}}
    files = {}
    for p in probes:
        buffer = io.BytesIO()
        plain = _plain({**record, "probe": p.name, "fingerprint": {"probe": p.name, "options": p.config, **shared}})
        torch.save({**plain, "state": p.state_dict()}, buffer)
        files[state_file_name(p.name, part.shard)] = buffer.getvalue()
    return write_result_files(directory, files)


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    """`data` as JSON types only (str subclasses such as torch's version string as str), which
    ``torch.load(weights_only=True)`` reads back."""
    return json.loads(json.dumps(data, default=str))


@dataclass
class _Loaded:
    path: Path
    data: dict[str, Any]

    @property
    def fingerprint(self) -> dict[str, Any]:
        return self.data["fingerprint"]


def merge(states: str | Path | Iterable[str | Path], out: str | Path | None = None, *, plots: bool = True,
          code: str | Path | Iterable[str | Path] | None = None) -> dict[str, ProbeResult]:
    """Add the saved states of a sharded run (``run(..., shard=(i, n), state=DIR)``) and compute the results.

    states: state files, or folders whose ``*.state.pt`` files are all read (one folder may hold every
    shard's). out: also write the results files there, as ``probes run --out`` does (plots: the figures too).
    code: Python file(s) registering the probes, as for ``run``. Every check runs before anything is
    written; a refusal is an InputError naming the file and the field or shard at fault.
    Returns {probe name: ProbeResult}, equal to the unsharded run's."""
    for path in [code] if isinstance(code, (str, Path)) else list(code or []):
        load_code(path)
    by_probe: dict[str, list[_Loaded]] = {}
    for loaded in _load_all([states] if isinstance(states, (str, Path)) else list(states)):
        by_probe.setdefault(loaded.data["probe"], []).append(loaded)
    if not by_probe:
        raise InputError("no state files given")
    results = {name: _merge_probe(shards) for name, shards in by_probe.items()}
    if out is not None:
        for result in results.values():
            save_result(result, out, plots=plots)
    return results


def _load_all(paths: list[str | Path]) -> list[_Loaded]:
    """The state files of `paths` (files, or folders of them), each read once; InputError for a path that
    is missing, a folder without state files, or a state file reached twice (the same folder or file given
    twice, under any name: a shard given twice is refused, not merged once)."""
    files: dict[Path, Path] = {}  # the file's resolved path -> the path it was given as
    for given in map(Path, paths):
        if given.is_dir():
            found = sorted(given.glob(f"*{STATE_SUFFIX}"))
            if not found:
                raise InputError(f"no state files (*{STATE_SUFFIX}, written by `probes run --state`) here", given)
        elif given.exists():
            found = [given]
        else:
            raise InputError("file not found", given)
        for f in found:
            first = files.setdefault(f.resolve(), f)
            if first is not f:
                raise InputError(f"state file given twice (also as {first}): give each shard once", f)
    return [_load(f) for f in files.values()]


def _load(path: Path) -> _Loaded:
    try:
        data = torch.load(path, weights_only=True)
    except Exception as e:  # torch.load raises anything from a pickle or zip error to a RuntimeError
        raise InputError(f"not a probes state file ({type(e).__name__})", path) from None
    if not isinstance(data, dict) or data.get("kind") != STATE_KIND:
        raise InputError("not a probes state file (written by `probes run --state`)", path)
    if data.get("version") != STATE_VERSION:
        raise InputError(f"state file version {data.get('version')}, this probes reads {STATE_VERSION}", path)
    return _Loaded(path, data)


def _merge_probe(shards: list[_Loaded]) -> ProbeResult:
    first = shards[0]
    for other in shards[1:]:
        _check_agree(first, other)
    count = first.fingerprint["shards"]
    by_index: dict[int, _Loaded] = {}
    for s in shards:
        index = s.data["shard"]
        if index in by_index:
            raise InputError(f"shard {index}/{count} of {s.data['probe']} given twice (also {by_index[index].path}): "
                             "the shards overlap", s.path)
        by_index[index] = s
    missing = [str(i) for i in range(count) if i not in by_index]
    if missing:
        raise InputError(f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} of {count} of "
                         f"{first.data['probe']} missing: the shards do not cover the corpus", first.path.parent)
    ordered = [by_index[i] for i in range(count)]
    if _digest(int(s.data["digest"], 16) for s in ordered) != first.fingerprint["corpus_digest"]:
        raise InputError("the shards' sentences do not add up to the corpus (sentences overlap or are missing)",
                         first.path.parent)
    merged = _probe(first)
    fit = _fit_state(merged)
    for s in ordered[1:]:
        shard_probe = _probe(s)
        if not _same(_fit_state(shard_probe), fit):
            raise InputError(f"the fit state of shard {s.data['shard']}/{count} differs from shard 0's "
                             "(every shard fits on the same whole fit corpus)", s.path)
        merged.merge(shard_probe)
    return merged.compute(_merged_info(ordered))


def _check_agree(first: _Loaded, other: _Loaded) -> None:
    mine, theirs = first.fingerprint, other.fingerprint
    for key in dict.fromkeys([*mine, *theirs]):
        if mine.get(key) != theirs.get(key):
            raise InputError(f"cannot merge: {key} differs ({_short(theirs.get(key))} here, {_short(mine.get(key))} "
                             f"in {first.path})", other.path)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _probe(loaded: _Loaded) -> Probe:
    fp = loaded.fingerprint
    try:
        probe = get_probe(fp["probe"])(fp["layers"], fp["heads"], replicates=fp.get("replicates", 0),
                                       bootstrap_seed=fp.get("bootstrap_seed", 0), **fp["options"])
        probe.load_state_dict(loaded.data["state"])
    except ValueError as e:
        raise InputError(f"the state does not fit the probe: {e}", loaded.path) from None
    return probe


def _fit_state(probe: Probe) -> dict[str, Any]:
    """The probe's fit-phase state (in a fresh probe's state_dict: the rest at its initial value)."""
    fresh = type(probe)(probe.layers, probe.heads, replicates=probe.bootstrap.replicates,
                        bootstrap_seed=probe.bootstrap.seed, **probe.config)
    fresh.merge_fit(probe)
    return fresh.state_dict()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _merged_info(shards: list[_Loaded]) -> RunInfo:
    """The RunInfo of the unsharded run: counts added, settings and corpus as recorded, provenance of shard 0
    with the shards' seconds and [UNK] counts added and each shard's command, time and platform listed."""
    first, fp = shards[0].data, shards[0].fingerprint
    skipped = dict(fp["corpus_skipped"])
    for s in shards:
        for reason, n in s.data["skipped"].items():
            skipped[reason] = skipped.get(reason, 0) + n
    provenance = dict(first["info"]["provenance"])
    unknown = UnknownWords.added([s.data["info"]["provenance"].get("unknown_words", {}) for s in shards])
    provenance.update(
        unknown_words=unknown.provenance(),
        command=shlex.join(sys.argv), created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        seconds=round(sum(s.data["info"]["provenance"].get("seconds", 0.0) for s in shards), 3),
        shards=[{"shard": f"{s.data['shard']}/{fp['shards']}", "sentences": s.data["sentences"],
                 **{k: s.data["info"]["provenance"].get(k) for k in ("command", "created", "seconds", "platform")}}
                for s in shards])
    return RunInfo(model=first["info"]["model"], corpus=list(first["info"]["corpus"]), layers=fp["layers"],
                   heads=fp["heads"], sentences=sum(s.data["sentences"] for s in shards),
                   units=sum(s.data.get("units", s.data["sentences"]) for s in shards),
                   unit="document" if any(s.data.get("unit") == "document" for s in shards) else "sentence",
                   skipped=skipped,
                   settings=dict(first["info"]["settings"]), provenance=provenance, notes=dict(fp["corpus_notes"]),
                   annotation=first["info"].get("annotation", "gold"), annotator=first["info"].get("annotator", ""))
