"""Sentence pairs (for term matching and the block attention pattern): a TSV file, one pair a line,

    sentence1<TAB>sentence2[<TAB>label]

Words are the whitespace-separated parts of each sentence (the tokenizer splits punctuation
further, as it does for running text). A first line whose first field is ``sentence1`` is a
header and is skipped; blank lines are ignored.

Each pair becomes one Sentence: words = words of sentence 1 + words of sentence 2,
ann["pair"] = the number of words of sentence 1 (so words[:pair] is the first segment), and
ann["label"] = the label where the line has one. The batcher encodes such a sentence as a
tokenizer pair (``[CLS] s1 [SEP] s2 [SEP]``, with the model's token type ids).
"""
from __future__ import annotations

from pathlib import Path

from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import read_text_lines
from probes.base.errors import InputError

COLUMNS = "sentence1, sentence2[, label]"


def read_pairs(path: str | Path) -> Corpus:
    """Read a sentence-pair TSV; InputError (file:line) for a line without 2 or 3 tab-separated
    columns or with an empty sentence."""
    p = Path(path)
    corpus = Corpus(sentences=[], files=[str(p)])
    for number, line in enumerate(read_text_lines(p), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if number == 1 and fields[0].strip().lower() == "sentence1":
            continue
        if len(fields) not in (2, 3):
            raise InputError(f"expected 2 or 3 tab-separated columns ({COLUMNS}), found {len(fields)}", p, number)
        first, second = fields[0].split(), fields[1].split()
        for name, words in (("sentence1", first), ("sentence2", second)):
            if not words:
                raise InputError(f"{name} is empty", p, number)
        ann = {"pair": len(first)}
        if len(fields) == 3:
            ann["label"] = fields[2].strip()
        corpus.sentences.append(Sentence(words=first + second, ann=ann, sent_id=f"{p.stem}:{number}",
                                         source=str(p), line=number))
    if not corpus.sentences:
        raise InputError(f"no sentence pair found (expected lines of {COLUMNS})", p)
    return corpus
