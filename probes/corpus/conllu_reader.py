"""CoNLL-U reader (UD): syntactic words, heads, relations, UPOS/XPOS, with file:line errors.

Multiword-token ranges (``3-4``) and empty nodes (``8.1``) are not words: the words given to
the tokenizer are the syntactic words (IDs 1..n). Relations keep the universal part before
``:`` unless ``subtypes=True``.
"""
from __future__ import annotations

import re
from pathlib import Path

import conllu

from probes.corpus.entities import spans_from_iob2
from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import read_text_lines
from probes.errors import InputError

_WORD_ID = re.compile(r"^[1-9][0-9]*$")
_RANGE_ID = re.compile(r"^[1-9][0-9]*-[1-9][0-9]*$")
_EMPTY_ID = re.compile(r"^[0-9]+\.[1-9][0-9]*$")
_INT = re.compile(r"^[0-9]+$")


def _blocks(lines: list[str]):
    """Yield (first_line_number, [(line_number, text), ...]) per sentence block."""
    block: list[tuple[int, str]] = []
    for number, text in enumerate(lines, 1):
        if text.strip():
            block.append((number, text))
        elif block:
            yield block[0][0], block
            block = []
    if block:
        yield block[0][0], block


def read_conllu(path: str | Path, *, subtypes: bool = False, extra_columns: bool = False,
                repair_i_after_o: bool = False) -> Corpus:
    """Read a CoNLL-U file into a Corpus.

    Each Sentence has words (syntactic word FORMs) and ann with
    ``head`` (list[int], 1-based, 0 = root; absent when HEAD is ``_``), ``deprel``,
    ``upos``, ``xpos``, ``text`` (the ``# text`` comment) and, with ``extra_columns``,
    ``extra`` (per word, the columns after the tenth, as lists of strings), and ``ner``
    (entity spans [(TYPE, start, end)], 0-based, end exclusive) where MISC holds IOB2 tags as
    ``NER=B-ORG`` (the silver output of `probes annotate`); an I- tag after O is an error unless
    ``repair_i_after_o`` (then read as B-).
    """
    path = Path(path)
    lines = read_text_lines(path)
    sentences = [_sentence(path, start, block, subtypes, extra_columns, repair_i_after_o)
                 for start, block in _blocks(lines)]
    if not sentences:
        raise InputError("no sentences found (only comments or blank lines)", path)
    return Corpus(sentences=sentences, files=[str(path)])


def _sentence(path: Path, start: int, block, subtypes: bool, extra_columns: bool, repair_i_after_o: bool) -> Sentence:
    word_lines = []
    for number, text in block:
        if text.startswith("#"):
            continue
        cols = text.split("\t")
        if len(cols) < 10 or (len(cols) > 10 and not extra_columns):
            raise InputError(f"expected 10 tab-separated columns, found {len(cols)}", path, number)
        if _WORD_ID.match(cols[0]):
            word_lines.append((number, cols))
        elif not (_RANGE_ID.match(cols[0]) or _EMPTY_ID.match(cols[0])):
            raise InputError(f"bad ID {cols[0]!r} (expected an integer, a range like 3-4, or an empty node like 8.1)", path, number)
    if not word_lines:
        raise InputError("sentence has no words", path, start)
    n = len(word_lines)
    for i, (number, cols) in enumerate(word_lines, 1):
        if int(cols[0]) != i:
            raise InputError(f"word IDs out of sequence: expected {i}, found {cols[0]}", path, number)
        head = cols[6]
        if head != "_" and not _INT.match(head):
            raise InputError(f"HEAD {head!r} is not an integer", path, number)
        if head != "_" and int(head) > n:
            raise InputError(f"HEAD {head} is out of range (sentence has {n} words)", path, number)
        if head != "_" and int(head) == i:
            raise InputError(f"HEAD {head} points to the word itself", path, number)
    try:
        tokens = conllu.parse_token_and_metadata("\n".join(text for _, text in block), fields=_fields(block),
                                                 field_parsers=_FIELD_PARSERS)
    except conllu.exceptions.ParseException as e:
        raise InputError(f"CoNLL-U parse error: {e}", path, start) from None
    words = [t for t in tokens if isinstance(t["id"], int)]
    heads = [t["head"] for t in words]
    ann = {
        "deprel": [_relation(t["deprel"], subtypes) for t in words],
        "upos": [t["upos"] or "_" for t in words],
        "xpos": [t["xpos"] or "_" for t in words],
        "text": tokens.metadata.get("text"),
    }
    if all(h is not None for h in heads):
        ann["head"] = heads
    if extra_columns:
        ann["extra"] = [cols[10:] for _, cols in word_lines]
    tags = [(t["misc"] or {}).get("NER") for t in words]
    if any(tags):  # silver entities (probes annotate): IOB2 tags as NER=... in MISC, a missing one is O
        ann["ner"] = spans_from_iob2([t or "O" for t in tags], path=path, lines=[n for n, _ in word_lines],
                                     repair_i_after_o=repair_i_after_o)
    return Sentence(words=[t["form"] for t in words], ann=ann, sent_id=tokens.metadata.get("sent_id"),
                    source=str(path), line=start)


def _raw(line: list[str], i: int) -> str:
    return line[i]


# FEATS and DEPS are not used by any probe: kept as raw strings, which halves the reading time.
_FIELD_PARSERS = {"feats": _raw, "deps": _raw}


def _fields(block) -> tuple[str, ...]:
    width = max(len(text.split("\t")) for _, text in block if not text.startswith("#"))
    return tuple(conllu.parser.DEFAULT_FIELDS) + tuple(f"extra{i}" for i in range(width - 10))


def _relation(deprel: str | None, subtypes: bool) -> str:
    if not deprel:
        return "_"
    return deprel if subtypes else deprel.split(":", 1)[0]
