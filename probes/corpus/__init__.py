"""Corpus readers, chosen by ``--format`` or by the file name."""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Callable

from probes.corpus.conll2012 import read_conll2012
from probes.corpus.conllu_reader import read_conllu
from probes.corpus.craft import read_craft_list
from probes.corpus.framenet import read_framenet
from probes.corpus.iob2 import read_iob2
from probes.corpus.layers import read_layers
from probes.corpus.pairs import read_pairs
from probes.corpus.propbank import looks_like_propbank, read_propbank
from probes.corpus.ptb import read_ptb
from probes.corpus.segmented import read_segmented
from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.spacy_text import read_spacy
from probes.errors import InputError

# format name -> reader(path, **options) -> Corpus
READERS: dict[str, Callable[..., Corpus]] = {
    "conllu": read_conllu,
    "propbank": read_propbank,
    "conll2012": read_conll2012,
    "framenet": read_framenet,
    "segmented": read_segmented,  # SIGHAN: one sentence a line, words separated by blanks
    "iob2": read_iob2,  # Universal NER: ID FORM TAG - annotator
    "ptb": read_ptb,  # Penn-Treebank bracketed trees
    "craft": read_craft_list,  # a CRAFT ids file (craft-ids-test.txt): the listed articles' penn/<id>.tree
    "spacy": read_spacy,  # raw text, one passage a line, annotated by spaCy (--annotate spacy)
    "pairs": read_pairs,  # sentence pairs: sentence1<TAB>sentence2[<TAB>label]
}
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


def read_corpus(paths: list[str | Path], format: str | None = None, **options) -> Corpus:
    """Read and concatenate corpus files with one reader (named, or guessed from the first file).

    Files whose names say different formats (en_ewt-ud-test.conllu and en_ewt-ud-test.iob2) are
    annotation layers of the same sentences: joined on sent_id (see probes.corpus.layers)."""
    if not paths:
        raise InputError("no corpus file given")
    name = format or guess_format(paths[0]) or "conllu"
    if len({guess_format(p) for p in paths} - {None}) > 1:  # annotation layers over the same sentences
        return read_layers(paths, name, guess_format, lambda fmt, files: read_corpus(files, fmt, **options))
    reader = READERS.get(name)
    if reader is None:
        raise InputError(f"unknown corpus format {name!r}; available: {', '.join(READERS)}")
    parts = [reader(p, **_accepted(reader, options)) for p in paths]
    corpus = Corpus(sentences=[s for c in parts for s in c.sentences], files=[f for c in parts for f in c.files])
    for c in parts:
        for reason, n in c.skipped.items():
            corpus.skip(reason, n)
        for what, n in c.notes.items():
            corpus.note(what, n)
    return corpus


def _accepted(reader: Callable[..., Corpus], options: dict) -> dict:
    """The options a reader takes (probes of one run ask for options of different readers)."""
    parameters = inspect.signature(reader).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return options
    return {k: v for k, v in options.items() if k in parameters}


__all__ = ["Corpus", "Sentence", "READERS", "read_corpus", "guess_format"]
