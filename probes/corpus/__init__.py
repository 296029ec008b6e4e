"""Corpus readers, chosen by ``--format`` or by the file name (see probes.corpus.readers).

``read_corpus`` reads corpus files whole (a Corpus holding every Sentence); ``iter_corpus`` yields the same
sentences one at a time, and ``CorpusStream`` reads them anew on every pass (the first `limit`), so that a
run over a large corpus never holds it whole (probes.running.chunks). The formats in STREAMING_READERS (CoNLL-U,
Universal PropBank, IOB2, coreference documents) read their files line by line; the others (FrameNet, PTB, CoNLL-2012, plugins,
annotation layers joined on sent_id, spaCy-annotated text) are read whole and then yielded.
"""
from __future__ import annotations

import inspect
from itertools import islice
from pathlib import Path
from typing import Callable, Iterator

from probes.corpus.conllu_reader import iter_conllu
from probes.corpus.coref import iter_coref, looks_like_coref
from probes.corpus.iob2 import iter_iob2
from probes.corpus.layers import read_layers
from probes.corpus.propbank import iter_propbank, looks_like_propbank
from probes.corpus.readers import ENTRY_POINT_GROUP, Reader, get_reader, reader_names
from probes.corpus.sentence import Corpus, Sentence
from probes.base.choices import INVALID_TREES, check_invalid_trees
from probes.base.errors import InputError

SUFFIXES = {".conllu": "conllu", ".conll": "conllu", ".conll2012": "conll2012", ".iob2": "iob2", ".tree": "ptb",
            ".mrg": "ptb", ".tsv": "pairs", ".ids": "token_ids"}

# format -> reader(path, counts, **options) yielding the format reader's sentences one at a time, the
# file read line by line, the file's name and the sentences set aside added to `counts` as they come
STREAMING_READERS: dict[str, Callable[..., Iterator[Sentence]]] = {
    "conllu": iter_conllu, "propbank": iter_propbank, "iob2": iter_iob2, "coref": iter_coref}


def guess_format(path: str | Path) -> str | None:
    """The reader for a path: a directory with ``fulltext/`` is FrameNet, ``*_conll`` (OntoNotes'
    ``.gold_conll``, ``.v4_gold_conll``) is CoNLL-2012, a CoNLL-U file whose word rows have more
    than 10 columns is Universal PropBank, a ``.conll`` file that opens with ``#begin document`` (LitBank) is
    coreference (coref); otherwise by suffix."""
    p = Path(path)
    if p.is_dir():
        return "framenet" if (p / "fulltext").is_dir() else None
    if p.name.lower().endswith("_conll"):
        return "conll2012"
    name = SUFFIXES.get(p.suffix.lower())
    if name == "conllu" and p.suffix.lower() == ".conll" and looks_like_coref(p):
        return "coref"
    if name == "conllu" and looks_like_propbank(p):
        return "propbank"
    return name


def read_corpus(paths: list[str | Path], format: str | None = None, *, invalid_trees: str = "refuse",
                **options) -> Corpus:
    """Read and concatenate corpus files with one reader (named, or guessed from the first file).

    Files whose names say different formats (en_ewt-ud-test.conllu and en_ewt-ud-test.iob2) are
    annotation layers of the same sentences: joined on sent_id (see probes.corpus.layers).

    invalid_trees: what the readers that yield dependency trees (conllu, propbank) do with a
    sentence whose HEADs are not a tree (probes.corpus.trees): "refuse" the file (InputError at
    the sentence's first line, the default) or "skip" the sentence and count it by rule.
    options: reader options; each reader gets those its signature names.
    """
    name = _format_name(paths, format, invalid_trees)
    if _layered(paths):  # annotation layers over the same sentences
        return read_layers(paths, name, guess_format,
                           lambda fmt, files: read_corpus(files, fmt, invalid_trees=invalid_trees, **options))
    reader = get_reader(name)
    accepted = _accepted(reader, {**options, "invalid_trees": invalid_trees})
    parts = [reader(p, **accepted) for p in paths]
    corpus = Corpus(sentences=[s for c in parts for s in c.sentences], files=[f for c in parts for f in c.files])
    for c in parts:
        corpus.add_counts(c)
    return corpus


def iter_corpus(paths: list[str | Path], format: str | None = None, *, counts: Corpus | None = None,
                invalid_trees: str = "refuse", **options) -> Iterator[Sentence]:
    """The sentences ``read_corpus(paths, format, invalid_trees=..., **options)`` reads, one at a time.

    A format with a streaming reader (STREAMING_READERS) reads each file line by line and holds one
    sentence at a time; any other (or annotation layers) is read whole by read_corpus first. counts: a
    Corpus whose sentences stay empty, given the files read, the sentences the reader set aside (skipped,
    skipped_ids) and its notes as they come: complete once the iterator is exhausted. Errors are
    read_corpus's, each raised when the reading reaches it."""
    name = _format_name(paths, format, invalid_trees)
    counts = Corpus(sentences=[], files=[]) if counts is None else counts
    stream = None if _layered(paths) else STREAMING_READERS.get(name)
    if stream is None:
        whole = read_corpus(paths, name, invalid_trees=invalid_trees, **options)
        counts.files.extend(whole.files)
        counts.add_counts(whole)
        yield from whole.sentences
        return
    accepted = _accepted(get_reader(name), {**options, "invalid_trees": invalid_trees})
    for p in paths:
        yield from stream(p, counts, **accepted)


def streams(paths: list[str | Path], format: str | None = None) -> bool:
    """Whether iter_corpus reads these files line by line (else whole)."""
    return not _layered(paths) and (format or guess_format(paths[0]) or "conllu") in STREAMING_READERS


class CorpusStream:
    """The first `limit` sentences (None: all) of corpus files, read anew by iter_corpus on every pass
    (``for sentence in stream``), so that a pass holds one sentence at a time where the format streams;
    a format that does not is read whole once, at the first pass, and kept.

    counts: the reader's Corpus of counts (files, skipped, skipped_ids, notes; no sentences) once a pass
    has read the files to the end, else None. The first pass cut short by `limit` reads on to the end of
    the files after its last sentence (nothing more is yielded), so that the counts and the errors cover
    whole files, as read_corpus's do."""

    def __init__(self, paths: list[str | Path], format: str | None = None, *, limit: int | None = None,
                 invalid_trees: str = "refuse", **options):
        _format_name(paths, format, invalid_trees)
        self.paths, self.format, self.limit = list(paths), format, limit
        self.options = {"invalid_trees": invalid_trees, **options}
        self.counts: Corpus | None = None
        self._whole: Corpus | None = None  # the corpus read whole, for a format that does not stream

    def __iter__(self) -> Iterator[Sentence]:
        if self._whole is None and not streams(self.paths, self.format):
            self._whole = read_corpus(self.paths, self.format, **self.options)
            self.counts = Corpus(sentences=[], files=list(self._whole.files))
            self.counts.add_counts(self._whole)
        if self._whole is not None:
            yield from islice(self._whole.sentences, self.limit)
            return
        counts = Corpus(sentences=[], files=[])
        sentences = iter_corpus(self.paths, self.format, counts=counts, **self.options)
        yield from islice(sentences, self.limit)
        if self.counts is None:
            for _ in sentences:  # the rest of the files, for their counts and errors
                pass
            self.counts = counts


def _format_name(paths: list[str | Path], format: str | None, invalid_trees: str) -> str:
    """The reader's name (named, or guessed from the first file); InputError for no file or a bad invalid_trees."""
    check_invalid_trees(invalid_trees)
    if not paths:
        raise InputError("no corpus file given")
    return format or guess_format(paths[0]) or "conllu"


def _layered(paths: list[str | Path]) -> bool:
    """Whether the files' names say different formats: annotation layers of the same sentences."""
    return len({guess_format(p) for p in paths} - {None}) > 1


def _accepted(reader: Reader, options: dict) -> dict:
    """The options a reader names (probes of one run ask for options of different readers); a
    reader that takes ``**options`` gets them all but ``invalid_trees`` unless it names it."""
    parameters = inspect.signature(reader).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return {k: v for k, v in options.items() if k != "invalid_trees" or k in parameters}
    return {k: v for k, v in options.items() if k in parameters}


__all__ = ["Corpus", "CorpusStream", "Sentence", "ENTRY_POINT_GROUP", "INVALID_TREES", "STREAMING_READERS",
           "get_reader", "reader_names", "read_corpus", "iter_corpus", "streams", "guess_format"]
