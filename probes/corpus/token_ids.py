"""Sequences given as token ids (the causal detectors' generated sequences, probes.encoding.sequences): a ``.ids``
file, one sequence a line, the model's token ids separated by blanks; lines starting with "#" say how the
sequences were made and are skipped.

Each line becomes a Sentence (sent_id "<file stem>:<line>") whose words are the ids as text, one word per id, and
ann["token_ids"] the ids: the encoding (probes.encoding.subwords) gives the model those ids as they are, after the start
token its tokenizer adds, if any.
"""
from __future__ import annotations

from pathlib import Path

from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import read_text_lines
from probes.base.errors import InputError


def read_token_ids(path: str | Path) -> Corpus:
    """Read a ``.ids`` file (see the module docstring); InputError (file:line) for a word that is not a whole
    number of at least 0."""
    sentences = []
    for number, line in enumerate(read_text_lines(path), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if not all(f.isascii() and f.isdigit() for f in fields):  # isdigit alone takes "²", which int() refuses
            bad = next(f for f in fields if not (f.isascii() and f.isdigit()))
            raise InputError(f"token ids must be whole numbers of at least 0, not {bad!r}", path, number)
        sentences.append(Sentence(words=fields, ann={"token_ids": [int(f) for f in fields]},
                                  sent_id=f"{Path(path).stem}:{number}", source=str(path), line=number))
    return Corpus(sentences=sentences, files=[str(path)])
