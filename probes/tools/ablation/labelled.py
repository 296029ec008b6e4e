"""Sentence-level labelled data for a classifier target: TSV, or CoNLL-U with a label per sentence.

TSV (``.tsv``, ``.txt``; or ``format="tsv"``): ``text<TAB>label`` or ``text<TAB>text_pair<TAB>label``,
one example per line, every line with the same number of columns; blank lines are skipped; a first
line whose last column is ``label`` is a header.

CoNLL-U (``.conllu``, ``.conll``): the text is the ``# text = ...`` comment (the word FORMs joined
by spaces where there is none). The label is the comment ``# <key> = ...`` named by
``label_from`` (default ``label``), or, with ``label_from="sent_id-prefix"``, the part of
``# sent_id`` before its first ``-`` (UD English EWT: answers, email, newsgroup, reviews, weblog).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from probes.corpus.textio import read_text_lines
from probes.base.errors import InputError

FORMATS = {".tsv": "tsv", ".txt": "tsv", ".conllu": "conllu", ".conll": "conllu"}
SENT_ID_PREFIX = "sent_id-prefix"


@dataclass
class Example:
    text: str
    pair: str | None
    label: str
    source: str
    line: int


def read_labelled(paths: list[str | Path], format: str | None = None, label_from: str = "label") -> list[Example]:
    """All examples of the files, in order."""
    examples: list[Example] = []
    for path in paths:
        kind = format or FORMATS.get(Path(path).suffix.lower())
        if kind == "tsv":
            examples += _read_tsv(Path(path))
        elif kind == "conllu":
            examples += _read_conllu(Path(path), label_from)
        else:
            problem = (f"unknown data format {format!r}; choose tsv or conllu" if format else
                       "cannot tell the data format from the file name (.tsv or .conllu); give the format")
            raise InputError(problem, path)
    return examples


def _read_tsv(path: Path) -> list[Example]:
    lines = read_text_lines(path)
    rows = [(number, text.split("\t")) for number, text in enumerate(lines, 1) if text.strip()]
    if rows and rows[0][1][-1].strip().lower() == "label":
        rows = rows[1:]
    if not rows:
        raise InputError("no examples found", path)
    width = len(rows[0][1])
    examples = []
    for number, cols in rows:
        if len(cols) not in (2, 3):
            raise InputError(f"expected 2 or 3 tab-separated columns (text[, text_pair], label), found {len(cols)}",
                             path, number)
        if len(cols) != width:
            raise InputError(f"found {len(cols)} columns where the first example has {width}", path, number)
        if not all(c.strip() for c in cols):
            raise InputError("empty column (text, text pair and label must not be empty)", path, number)
        examples.append(Example(cols[0].strip(), cols[1].strip() if width == 3 else None, cols[-1].strip(),
                                str(path), number))
    return examples


def _read_conllu(path: Path, label_from: str) -> list[Example]:
    examples = []
    meta: dict[str, str] = {}
    forms: list[str] = []
    start = 0
    for number, text in enumerate([*read_text_lines(path), ""], 1):
        if not text.strip():
            if meta or forms:
                examples.append(_conllu_example(path, start, meta, forms, label_from))
            meta, forms = {}, []
            continue
        if not (meta or forms):
            start = number
        if text.startswith("#"):
            key, sep, value = text[1:].partition("=")
            if sep:
                meta.setdefault(key.strip(), value.strip())
            continue
        cols = text.split("\t")
        if len(cols) < 10:
            raise InputError(f"expected 10 tab-separated columns, found {len(cols)}", path, number)
        if cols[0].isdigit():
            forms.append(cols[1])
    if not examples:
        raise InputError("no sentences found", path)
    return examples


def _conllu_example(path: Path, start: int, meta: dict[str, str], forms: list[str], label_from: str) -> Example:
    if label_from == SENT_ID_PREFIX:
        sent_id = meta.get("sent_id")
        if not sent_id:
            raise InputError("sentence has no '# sent_id = ...' comment to take the label from", path, start)
        label = sent_id.split("-", 1)[0]
    else:
        label = meta.get(label_from, "")
        if not label:
            raise InputError(f"sentence has no '# {label_from} = ...' comment (the label)", path, start)
    text = meta.get("text") or " ".join(forms)
    if not text:
        raise InputError("sentence has no text and no words", path, start)
    return Example(text, None, label, str(path), start)
