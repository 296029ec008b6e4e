"""Corpus readers, chosen by ``--format`` or by the file name."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from probes.corpus.conllu_reader import read_conllu
from probes.corpus.sentence import Corpus, Sentence
from probes.errors import InputError

# format name -> reader(path, **options) -> Corpus
READERS: dict[str, Callable[..., Corpus]] = {
    "conllu": read_conllu,
}
SUFFIXES = {".conllu": "conllu", ".conll": "conllu"}


def guess_format(path: str | Path) -> str | None:
    return SUFFIXES.get(Path(path).suffix.lower())


def read_corpus(paths: list[str | Path], format: str | None = None, **options) -> Corpus:
    """Read and concatenate corpus files with one reader (named, or guessed from the first file)."""
    if not paths:
        raise InputError("no corpus file given")
    name = format or guess_format(paths[0]) or "conllu"
    reader = READERS.get(name)
    if reader is None:
        raise InputError(f"unknown corpus format {name!r}; available: {', '.join(READERS)}")
    parts = [reader(p, **options) for p in paths]
    corpus = Corpus(sentences=[s for c in parts for s in c.sentences], files=[f for c in parts for f in c.files])
    for c in parts:
        for reason, n in c.skipped.items():
            corpus.skip(reason, n)
    return corpus


__all__ = ["Corpus", "Sentence", "READERS", "read_corpus", "guess_format"]
