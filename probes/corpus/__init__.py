"""Corpus readers, chosen by ``--format`` or by the file name (see probes.corpus.readers)."""
from __future__ import annotations

import inspect
from pathlib import Path

from probes.corpus.layers import read_layers
from probes.corpus.propbank import looks_like_propbank
from probes.corpus.readers import ENTRY_POINT_GROUP, Reader, get_reader, reader_names
from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.trees import INVALID_TREES, check_invalid_trees
from probes.errors import InputError

SUFFIXES = {".conllu": "conllu", ".conll": "conllu", ".conll2012": "conll2012", ".iob2": "iob2", ".tree": "ptb",
            ".mrg": "ptb", ".tsv": "pairs"}


def guess_format(path: str | Path) -> str | None:
    """The reader for a path: a directory with ``fulltext/`` is FrameNet, ``*_conll`` (OntoNotes'
    ``.gold_conll``, ``.v4_gold_conll``) is CoNLL-2012, a CoNLL-U file whose word rows have more
    than 10 columns is Universal PropBank; otherwise by suffix."""
    p = Path(path)
    if p.is_dir():
        return "framenet" if (p / "fulltext").is_dir() else None
    if p.name.lower().endswith("_conll"):
        return "conll2012"
    name = SUFFIXES.get(p.suffix.lower())
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
    check_invalid_trees(invalid_trees)
    if not paths:
        raise InputError("no corpus file given")
    name = format or guess_format(paths[0]) or "conllu"
    if len({guess_format(p) for p in paths} - {None}) > 1:  # annotation layers over the same sentences
        return read_layers(paths, name, guess_format,
                           lambda fmt, files: read_corpus(files, fmt, invalid_trees=invalid_trees, **options))
    reader = get_reader(name)
    accepted = _accepted(reader, {**options, "invalid_trees": invalid_trees})
    parts = [reader(p, **accepted) for p in paths]
    corpus = Corpus(sentences=[s for c in parts for s in c.sentences], files=[f for c in parts for f in c.files])
    for c in parts:
        corpus.add_counts(c)
    return corpus


def _accepted(reader: Reader, options: dict) -> dict:
    """The options a reader names (probes of one run ask for options of different readers); a
    reader that takes ``**options`` gets them all but ``invalid_trees`` unless it names it."""
    parameters = inspect.signature(reader).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return {k: v for k, v in options.items() if k != "invalid_trees" or k in parameters}
    return {k: v for k, v in options.items() if k in parameters}


__all__ = ["Corpus", "Sentence", "ENTRY_POINT_GROUP", "INVALID_TREES", "get_reader", "reader_names", "read_corpus",
           "guess_format"]
