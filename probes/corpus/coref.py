"""Coreference documents: the CoNLL-2012 coreference column (LitBank's ``*.conll``, OntoNotes' ``*_conll``).

Layout (probes.corpus.conll2012.conll_blocks): ``#begin document (NAME); part N`` ... ``#end document``
blocks, one token a line (document, part, word index from 0 in each sentence, word, ..., coreference last), a
blank line after each sentence. LitBank separates cells by tabs and leaves the last one empty where no mention
starts or ends; OntoNotes separates them by blanks and writes ``-``. The coreference cell: ``(12`` opens a
mention of chain 12, ``12)`` closes the innermost open one, ``(12)`` is a one-word mention, several joined by
``|``. Mentions nest and may be singletons (a chain of one).

One Sentence per document (streamed: ``iter_coref`` holds one document at a time), sent_id ``NAME/part``,
line the ``#begin document`` line (the first token's where there is none):

- ``words``: every word of the document, in order.
- ``ann["sentences"]``: [(start, end_exclusive)] word offsets of its sentences; ``ann["sentence_lines"]``:
  the line of each sentence's first token.
- ``ann["mentions"]``: [(start, end_exclusive, chain)] in document order, (start, -end): an outer mention before
  the mentions nested in it; chain a string (the file's id).
- ``ann["upos"]``: each word's universal POS from spaCy's parse of its sentence (probes.corpus.mention_heads).
- ``ann["mention_heads"]``: each mention's head word (document offset) by the rule `mention_head`: "spacy" (the
  syntactic head, default), "first" or "last" word.

A file argument may be a directory: its ``*.conll`` and ``*_conll`` files, in name order.

Errors (InputError at FILE:LINE, nothing yielded after): a malformed coreference cell, a bracket closing a
chain with no open mention, a mention never closed, a chain id used in an earlier document of the file, a
document without any mention, a word index out of sequence, a row with fewer than 5 cells.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from probes.corpus.conll2012 import Block, conll_blocks
from probes.corpus.mention_heads import MENTION_HEADS, annotate_heads
from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import iter_text_lines
from probes.base.errors import InputError

__all__ = ["coref_files", "iter_coref", "looks_like_coref", "read_coref"]

EMPTY_CELLS = ("", "-", "_")
_PART = re.compile(r"\((\d+)\)|\((\d+)|(\d+)\)")  # one-word mention | opening | closing


def coref_files(path: str | Path) -> list[Path]:
    """The files a path names: itself, or a directory's ``*.conll`` and ``*_conll`` files in name order."""
    p = Path(path)
    if not p.is_dir():
        return [p]
    files = sorted(f for f in p.iterdir() if f.is_file() and (f.suffix == ".conll" or f.name.endswith("_conll")))
    if not files:
        raise InputError("is a directory with no *.conll or *_conll file", p)
    return files


def looks_like_coref(path: str | Path) -> bool:
    """Whether a ``.conll`` file is CoNLL-2012 (LitBank's layout) rather than CoNLL-U: its first line opens a
    document (``#begin document``)."""
    try:
        with open(path, "rb") as f:
            return f.readline().lstrip(b"\xef\xbb\xbf").startswith(b"#begin document")
    except OSError:
        return False


def read_coref(path: str | Path, *, mention_head: str = "spacy") -> Corpus:
    """Every document of a file (or directory); see the module docstring."""
    counts = Corpus(sentences=[], files=[])
    counts.sentences = list(iter_coref(path, counts, mention_head=mention_head))
    return counts


def iter_coref(path: str | Path, counts: Corpus | None = None, *, mention_head: str = "spacy") -> Iterator[Sentence]:
    """The documents of a file (or directory), one at a time; the files read are added to `counts`."""
    if mention_head not in MENTION_HEADS:
        raise InputError(f"mention head must be one of {', '.join(MENTION_HEADS)}, not {mention_head!r}")
    for file in coref_files(path):
        if counts is not None:
            counts.files.append(str(file))
        yield from _documents(file, mention_head)


def _cells(text: str) -> list[str]:
    """A token line's cells: tab-separated where there are tabs (LitBank's empty last cell kept), else blanks."""
    return text.rstrip("\r\n").split("\t") if "\t" in text else text.split()


def _documents(path: Path, mention_head: str) -> Iterator[Sentence]:
    blocks: list[Block] = []
    earlier: set[str] = set()  # chain ids of the file's earlier documents
    for block in conll_blocks(iter_text_lines(path), _cells):
        if blocks and block.document != blocks[0].document:
            yield _document(blocks, path, earlier, mention_head)
            blocks = []
        blocks.append(block)
    if not blocks:
        raise InputError("no sentences found (not a CoNLL-2012 coreference file?)", path)
    yield _document(blocks, path, earlier, mention_head)


def _document(blocks: list[Block], path: Path, earlier: set[str], mention_head: str) -> Sentence:
    """One document from its sentences' blocks; its chain ids are added to `earlier`."""
    words: list[str] = []
    sentences, sentence_lines = [], []
    mentions: list[tuple[int, int, str]] = []
    open_: dict[str, list[tuple[int, int]]] = {}  # chain -> stack of (start word, line) of its open mentions
    first_line: dict[str, int] = {}  # chain -> line of its first bracket, for the reuse error
    for block in blocks:
        start = len(words)
        for i, (row, line) in enumerate(zip(block.rows, block.lines)):
            if len(row) < 5:
                raise InputError(f"expected at least 5 cells (document, part, index, word, ..., coreference), "
                                 f"got {len(row)}", path, line)
            if row[2] != str(i):
                raise InputError(f"word index {row[2]!r}, expected {i} (missing blank line between sentences?)",
                                 path, line)
            if not row[3].strip():
                raise InputError("empty word (column 4)", path, line)
            _brackets(row[-1].strip(), len(words), line, path, open_, mentions, first_line)
            words.append(row[3])
        sentences.append((start, len(words)))
        sentence_lines.append(block.lines[0])
    begun = blocks[0].begun or blocks[0].lines[0]
    for chain, stack in open_.items():
        if stack:
            raise InputError(f"unbalanced brackets in coreference: a mention of chain {chain} opened here is never "
                             "closed", path, stack[-1][1])
    if not mentions:
        raise InputError("document without any coreference mention", path, begun)
    for chain, line in first_line.items():
        if chain in earlier:
            raise InputError(f"chain id {chain} was used in an earlier document of this file (ids are per "
                             "document)", path, line)
    earlier.update(first_line)
    mentions.sort(key=lambda m: (m[0], -m[1]))
    row = blocks[0].rows[0]
    document = Sentence(words=words, ann={"sentences": sentences, "sentence_lines": sentence_lines,
                                          "mentions": mentions},
                        sent_id=f"{row[0]}/{row[1]}", source=str(path), line=begun)
    annotate_heads(document, mention_head)
    return document


def _brackets(cell: str, word: int, line: int, path: Path, open_: dict, mentions: list, first_line: dict) -> None:
    """Read one coreference cell at document word `word` into `open_` (open mentions) and `mentions`."""
    if cell in EMPTY_CELLS:
        return
    for part in cell.split("|"):
        m = _PART.fullmatch(part)
        if m is None:
            raise InputError(f"malformed coreference cell {cell!r} (expected e.g. '(12', '12)', '(12)', "
                             "'(3|(5')", path, line)
        single, opening, closing = m.groups()
        chain = single or opening or closing
        first_line.setdefault(chain, line)
        if single:
            mentions.append((word, word + 1, chain))
        elif opening:
            open_.setdefault(chain, []).append((word, line))
        elif not open_.get(chain):
            raise InputError(f"unbalanced brackets in coreference: {part!r} closes no open mention of chain "
                             f"{chain}", path, line)
        else:
            start, _ = open_[chain].pop()
            mentions.append((start, word + 1, chain))
