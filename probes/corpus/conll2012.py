"""CoNLL-2012 / OntoNotes 5.0 ``*_conll`` reader.

File layout: ``#begin document (<doc>); part NNN`` ... ``#end document`` blocks, one token per
line, a blank line after each sentence. Whitespace-separated columns::

    0 document id   1 part   2 word index (0-based in the sentence)   3 word   4 POS
    5 parse bit (e.g. "(TOP(S(NP*", "*", "*))")   6 predicate lemma   7 predicate frameset
    8 word sense   9 speaker   10 named entities ("(PERSON*", "*", "*)", "(GPE)")
    11 .. n-2: one SRL column per predicate ("(ARG0*", "*", "*)", "(V*)")
    n-1: coreference

Per Sentence (``sent_id`` = ``"<document id>/<part>#<sentence number in the part>"``,
``line`` = line of its first token):

- ``words``: column 3; ``ann["pos"]``: column 4.
- ``ann["ner"]``: ``[(label, start, end_exclusive), ...]`` in order of start.
- ``ann["srl"]``: one dict per SRL column, in column order::

      {"predicate": 3, "lemma": "buy", "frameset": "01",
       "args": [("ARG0", 0, 2), ("V", 3, 4), ("ARG1", 4, 6), ("R-ARG0", ...), ...]}

  ``predicate`` is the first word of the column's V span; ``lemma``/``frameset`` come from
  columns 6/7 of that word. ``args`` keeps every span as given, V and C-V included (the
  probe decides what counts as an argument), sorted by (start, end). ``arg_words`` lists
  each argument's words, parallel to ``args`` (here always ``range(start, end)``; the
  Universal PropBank reader, whose dependency-subtree arguments can have gaps, gives the same
  keys, so the srl probe reads both alike).
- ``ann["parse"]``: the bracketed tree rebuilt from the parse bits, each ``*`` replaced by
  ``(POS word)``, e.g. ``(TOP (S (NP (DT The) (NN dog)) (VP (VBD barked)) (. .)))``; round
  brackets inside words or tags are written ``-LRB-``/``-RRB-``. ``None`` when every parse
  bit of the sentence is ``-`` (no tree).

Errors (:class:`InputError`, file and line): fewer than 12 columns, rows of one sentence with
different column counts, a number of SRL columns different from the number of predicates
(rows whose frameset column 7 is not ``-``), an SRL column without a V span, unbalanced or
malformed brackets in the NER, SRL or parse columns, a word index that is not a number or is
out of sequence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import read_text_lines
from probes.base.errors import InputError

__all__ = ["Block", "conll_blocks", "read_conll2012"]

_FIXED = 11  # columns before the SRL columns; the coreference column comes after them
_SPAN_CELL = re.compile(r"((?:\([^()*\s]+)*)(\*?)(\)*)")
_OPEN = re.compile(r"\(([^()*\s]+)")
_PARSE_BIT = re.compile(r"((?:\([^()*\s]+)*)\*(\)*)")


def _spans(cells: list[str], lines: list[int], path: Path, what: str) -> list[tuple[str, int, int]]:
    """Bracketed span column -> [(label, start, end_exclusive)], sorted by (start, end)."""
    stack: list[tuple[str, int, int]] = []  # (label, start, line)
    out: list[tuple[str, int, int]] = []
    for i, (cell, line) in enumerate(zip(cells, lines)):
        m = _SPAN_CELL.fullmatch(cell)
        if m is None or not cell:
            raise InputError(f"malformed {what} cell {cell!r} (expected e.g. '(LABEL*', '*', '*)')", path, line)
        for label in _OPEN.findall(m.group(1)):
            stack.append((label, i, line))
        for _ in range(len(m.group(3))):
            if not stack:
                raise InputError(f"unbalanced brackets in {what}: ')' closes no open span", path, line)
            label, start, _ = stack.pop()
            out.append((label, start, i + 1))
    if stack:
        label, _, line = stack[-1]
        raise InputError(f"unbalanced brackets in {what}: span {label!r} opened here is never closed", path, line)
    out.sort(key=lambda s: (s[1], s[2]))
    return out


def _escape(token: str) -> str:
    return token.replace("(", "-LRB-").replace(")", "-RRB-")


def _parse_tree(bits: list[str], pos: list[str], words: list[str], lines: list[int], path: Path) -> str | None:
    if all(b == "-" for b in bits):
        return None
    parts: list[str] = []
    depth = 0
    for bit, tag, word, line in zip(bits, pos, words, lines):
        m = _PARSE_BIT.fullmatch(bit)
        if m is None:
            raise InputError(f"malformed parse bit {bit!r} (expected e.g. '(S(NP*', '*', '*))')", path, line)
        for label in _OPEN.findall(m.group(1)):
            parts.append(f" ({label}")
            depth += 1
        parts.append(f" ({_escape(tag)} {_escape(word)})")
        closes = len(m.group(2))
        if closes > depth:
            raise InputError("unbalanced brackets in parse: ')' closes no open constituent", path, line)
        depth -= closes
        parts.append(")" * closes)
    if depth:
        raise InputError(f"unbalanced brackets in parse: {depth} constituent(s) never closed", path, lines[-1])
    return "".join(parts).strip()


def _sentence(rows: list[list[str]], lines: list[int], path: Path, k: int) -> Sentence:
    ncols = len(rows[0])
    for row, line in zip(rows, lines):
        if len(row) < _FIXED + 1:
            raise InputError(
                f"expected at least {_FIXED + 1} columns (11 fixed + coreference), got {len(row)}", path, line
            )
        if len(row) != ncols:
            raise InputError(
                f"{len(row)} columns, but the sentence's first row (line {lines[0]}) has {ncols}", path, line
            )
    for i, (row, line) in enumerate(zip(rows, lines)):
        try:
            index = int(row[2])
        except ValueError:
            raise InputError(f"word index {row[2]!r} is not a number", path, line) from None
        if index != i:
            raise InputError(f"word index {index}, expected {i} (missing blank line between sentences?)", path, line)
    n_srl = ncols - _FIXED - 1
    predicate_rows = [i for i, row in enumerate(rows) if row[7] != "-"]
    if n_srl != len(predicate_rows):
        raise InputError(
            f"{n_srl} SRL column(s) but {len(predicate_rows)} predicate(s) (rows whose predicate "
            f"frameset column is not '-') in this sentence",
            path,
            lines[0],
        )
    words = [row[3] for row in rows]
    pos = [row[4] for row in rows]
    ner = _spans([row[10] for row in rows], lines, path, "named-entity column")
    srl = []
    for c in range(n_srl):
        col = _FIXED + c
        args = _spans([row[col] for row in rows], lines, path, f"SRL column {c + 1}")
        v_starts = [start for role, start, _ in args if role == "V"]
        if not v_starts:
            raise InputError(f"SRL column {c + 1} has no V (predicate) span", path, lines[0])
        p = v_starts[0]
        srl.append({"predicate": p, "lemma": rows[p][6], "frameset": rows[p][7], "args": args,
                    "arg_words": [tuple(range(start, end)) for _, start, end in args]})
    parse = _parse_tree([row[5] for row in rows], pos, words, lines, path)
    return Sentence(
        words=words,
        ann={"pos": pos, "ner": ner, "srl": srl, "parse": parse},
        sent_id=f"{rows[0][0]}/{rows[0][1]}#{k}",
        source=str(path),
        line=lines[0],
    )


def read_conll2012(path: str | Path) -> Corpus:
    """Read one CoNLL-2012 ``*_conll`` file (see the module docstring for the format and the
    annotations produced)."""
    path = Path(path)
    corpus = Corpus(sentences=[], files=[str(path)])
    for block in conll_blocks(read_text_lines(path)):
        corpus.sentences.append(_sentence(block.rows, block.lines, path, block.number))
    if not corpus.sentences:
        raise InputError("no sentences found (not a CoNLL-2012 *_conll file?)", path)
    return corpus


@dataclass
class Block:
    """One sentence of a CoNLL-2012 file as its rows: the cells of each token line and their line numbers.

    document: the number of its document in the file (0 before any ``#begin document``, then 1, 2, ...),
    begun: the line of that ``#begin document`` (0 for none), number: the sentence's number in its document."""

    rows: list[list[str]]
    lines: list[int]
    document: int
    begun: int
    number: int


def conll_blocks(lines: Iterable[str], cells: Callable[[str], list[str]] = str.split) -> Iterator[Block]:
    """The sentences of a CoNLL-2012 file's lines (blank lines between sentences, ``#`` comment lines, ``#begin
    document`` / ``#end document`` around documents), each row cut into cells by `cells` (whitespace by
    default; the coreference reader keeps LitBank's empty last tab cell). Shared by read_conll2012 and
    probes.corpus.coref."""
    rows: list[list[str]] = []
    numbers: list[int] = []
    document = begun = k = 0
    for lineno, text in enumerate(lines, 1):
        if text.strip() and not text.startswith("#"):
            rows.append(cells(text))
            numbers.append(lineno)
            continue
        if rows:
            yield Block(rows, numbers, document, begun, k)
            k += 1
            rows, numbers = [], []
        if text.startswith("#begin document"):
            document, begun, k = document + 1, lineno, 0
        elif text.startswith("#end document"):
            k = 0
    if rows:
        yield Block(rows, numbers, document, begun, k)
