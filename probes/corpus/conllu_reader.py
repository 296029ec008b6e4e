"""CoNLL-U reader (UD): syntactic words, heads, relations, UPOS/XPOS, with file:line errors.

Multiword-token ranges (``3-4``) and empty nodes (``8.1``) are not words: the words given to
the tokenizer are the syntactic words (IDs 1..n). Relations keep the universal part before
``:`` unless ``subtypes=True``.

``iter_conllu`` reads a file line by line and yields its sentences one at a time (probes.corpus.iter_corpus);
``read_conllu`` collects them into a Corpus.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Iterator

from probes.corpus.entities import spans_from_iob2
from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import comment_pair, iter_text_lines
from probes.base.choices import check_invalid_trees
from probes.corpus.trees import TreeProblem, head_problem, id_problem
from probes.base.errors import InputError

_WORD_ID = re.compile(r"^[1-9][0-9]*$")
_RANGE_ID = re.compile(r"^[1-9][0-9]*-[1-9][0-9]*$")
_EMPTY_ID = re.compile(r"^[0-9]+\.[1-9][0-9]*$")
_INT = re.compile(r"^[0-9]+$")


def sentence_blocks(lines: Iterable[str]) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """Yield (first_line_number, [(line_number, text), ...]) per sentence block (lines between blank lines)."""
    block: list[tuple[int, str]] = []
    for number, text in enumerate(lines, 1):
        if text and not text.isspace():
            block.append((number, text))
        elif block:
            yield block[0][0], block
            block = []
    if block:
        yield block[0][0], block


def read_conllu(path: str | Path, *, subtypes: bool = False, extra_columns: bool = False,
                repair_i_after_o: bool = False, invalid_trees: str = "refuse") -> Corpus:
    """Read a CoNLL-U file into a Corpus.

    Each Sentence has words (syntactic word FORMs) and ann with
    ``head`` (list[int], 1-based, 0 = root; absent when HEAD is ``_``), ``deprel``,
    ``upos``, ``xpos``, ``text`` (the ``# text`` comment) and, with ``extra_columns``,
    ``extra`` (per word, the columns after the tenth, as lists of strings), and ``ner``
    (entity spans [(TYPE, start, end)], 0-based, end exclusive) where MISC holds IOB2 tags as
    ``NER=B-ORG`` (the silver output of `probes annotate`); an I- tag after O is an error unless
    ``repair_i_after_o`` (then read as B-).

    A sentence whose HEADs are not a tree, or whose multiword-token ranges or empty nodes are
    out of place (the rules of probes.corpus.trees), refuses the file at the line of the word or
    row at fault (probes.corpus.trees says which); with ``invalid_trees="skip"`` it is set aside and counted (``invalid_tree_cycle``,
    ``invalid_tree_roots``, ``invalid_tree_head``, ``invalid_tree_range``), its sent_id in
    ``corpus.skipped_ids``.
    """
    corpus = Corpus(sentences=[], files=[])
    corpus.sentences = list(iter_conllu(path, corpus, subtypes=subtypes, extra_columns=extra_columns,
                                        repair_i_after_o=repair_i_after_o, invalid_trees=invalid_trees))
    return corpus


def iter_conllu(path: str | Path, counts: Corpus | None = None, *, subtypes: bool = False,
                extra_columns: bool = False, repair_i_after_o: bool = False,
                invalid_trees: str = "refuse") -> Iterator[Sentence]:
    """The sentences :func:`read_conllu` reads, one at a time, the file read line by line; the file's name and
    the sentences set aside are added to `counts` (a Corpus whose sentences stay empty) as they come."""
    for sentence, _ in conllu_sentences(path, counts, subtypes=subtypes, extra_columns=extra_columns,
                                        repair_i_after_o=repair_i_after_o, invalid_trees=invalid_trees):
        yield sentence


def conllu_sentences(path: str | Path, counts: Corpus | None = None, *, subtypes: bool = False,
                     extra_columns: bool = False, repair_i_after_o: bool = False,
                     invalid_trees: str = "refuse") -> Iterator[tuple[Sentence, list[tuple[int, str]]]]:
    """:func:`iter_conllu`'s sentences, each with its block of (line number, text) (for readers of
    CoNLL-U extensions, e.g. probes.corpus.propbank)."""
    check_invalid_trees(invalid_trees)
    path = Path(path)
    counts = Corpus(sentences=[], files=[]) if counts is None else counts
    counts.files.append(str(path))
    found = False  # a sentence read or set aside
    for start, block in sentence_blocks(iter_text_lines(path)):
        if not found and (tool := annotated_by(_metadata(block).get("generator", ""))):
            counts.silver[str(path)] = tool
        sentence = _sentence(path, start, block, subtypes, extra_columns, repair_i_after_o)
        found = True
        if isinstance(sentence, Sentence):
            yield sentence, block
        elif invalid_trees == "refuse":
            raise sentence.error(path)
        else:
            counts.skip(sentence.reason, sent_id=_metadata(block).get("sent_id"))
    if not found:
        raise InputError("no sentences found (only comments or blank lines)", path)


def _sentence(path: Path, start: int, block, subtypes: bool, extra_columns: bool,
              repair_i_after_o: bool) -> Sentence | TreeProblem:
    """The block's Sentence, or the tree rule it breaks; InputError for a malformed block."""
    word_lines = [(number, text.split("\t")) for number, text in block if not text.startswith("#")]
    rows = [cols for _, cols in word_lines]
    if rows and _plain(rows):  # words alone, numbered 1..n, HEADs integers or _: _checked_rows would pass them
        ranges: list[tuple[str, int, int]] = []
        empty_nodes: list[tuple[str, int, int]] = []
        heads = [None if cols[6] == "_" else int(cols[6]) for cols in rows]
    else:
        word_lines, ranges, empty_nodes, heads = _checked_rows(path, start, word_lines, extra_columns)
        rows = [cols for _, cols in word_lines]
    problem = id_problem(ranges, empty_nodes, len(word_lines))
    if problem is not None:
        return problem
    metadata = _metadata(block)
    ann = {
        "deprel": [cols[7] or "_" for cols in rows] if subtypes else
                  [cols[7].partition(":")[0] if cols[7] else "_" for cols in rows],
        "upos": [cols[3] or "_" for cols in rows],
        "xpos": [cols[4] or "_" for cols in rows],
        "text": metadata.get("text"),
    }
    if None not in heads:
        problem = head_problem(heads, [number for number, _ in word_lines])
        if problem is not None:
            return problem
        ann["head"] = heads
    if extra_columns:
        ann["extra"] = [cols[10:] for cols in rows]
    tags = [_misc_value(cols[9], "NER") for cols in rows] if any("NER=" in cols[9] for cols in rows) else []
    if any(tags):  # silver entities (probes annotate): IOB2 tags as NER=... in MISC, a missing one is O
        ann["ner"] = spans_from_iob2([t or "O" for t in tags], path=path, lines=[n for n, _ in word_lines],
                                     repair_i_after_o=repair_i_after_o)
    return Sentence(words=[cols[1] for cols in rows], ann=ann, sent_id=metadata.get("sent_id"),
                    source=str(path), line=start)


def _checked_rows(path: Path, start: int, lines: list[tuple[int, list[str]]], extra_columns: bool):
    """The block's rows (line, columns) checked one by one (InputError, FILE:LINE, at the first malformed one): its
    word rows, its multiword-token ranges and empty nodes as id_problem takes them (ID, words before the row, its line),
    and each word's HEAD (None for _)."""
    word_lines = []
    ranges: list[tuple[str, int, int]] = []
    empty_nodes: list[tuple[str, int, int]] = []
    for number, cols in lines:
        if len(cols) == 1:
            raise InputError("no tab-separated columns, so not CoNLL-U: raw text needs --annotate spacy "
                             "(or --format NAME for another corpus format)", path, number)
        if len(cols) < 10 or (len(cols) > 10 and not extra_columns):
            raise InputError(f"expected 10 tab-separated columns, found {len(cols)}", path, number)
        if _WORD_ID.match(cols[0]):
            word_lines.append((number, cols))
        elif _RANGE_ID.match(cols[0]):
            ranges.append((cols[0], len(word_lines), number))
        elif _EMPTY_ID.match(cols[0]):
            empty_nodes.append((cols[0], len(word_lines), number))
        else:
            raise InputError(f"bad ID {cols[0]!r} (expected an integer, a range like 3-4, or an empty node like 8.1)", path, number)
    if not word_lines:
        raise InputError("sentence has no words", path, start)
    heads: list[int | None] = []
    for i, (number, cols) in enumerate(word_lines, 1):
        if int(cols[0]) != i:
            raise InputError(f"word IDs out of sequence: expected {i}, found {cols[0]}", path, number)
        head = cols[6]
        if head == "_":
            heads.append(None)
        elif _INT.match(head):
            heads.append(int(head))
        else:
            raise InputError(f"HEAD {head!r} is not an integer", path, number)
    return word_lines, ranges, empty_nodes, heads


def _plain(rows: list[list[str]]) -> bool:
    """Whether the rows are the common case the checks pass at once: ten columns each, IDs 1..n in order (no range,
    no empty node), every HEAD digits or _."""
    return (all(len(cols) == 10 for cols in rows)
            and [cols[0] for cols in rows] == list(map(str, range(1, len(rows) + 1)))
            and all(head == "_" or (head.isascii() and head.isdigit()) for head in (cols[6] for cols in rows)))


SILVER_GENERATOR = "probes annotate"  # the `# generator = ...` header of the CoNLL-U that `probes annotate` writes


def annotated_by(generator: str) -> str:
    """What made a file's silver labels, from its ``# generator`` header: "spaCy 3.8.0, en_core_web_sm 3.8.0" for
    "probes annotate (spaCy 3.8.0, en_core_web_sm 3.8.0)"; "" for any other generator (gold labels)."""
    if not generator.startswith(SILVER_GENERATOR):
        return ""
    return generator[len(SILVER_GENERATOR):].strip().removeprefix("(").removesuffix(")") or "spaCy"


def _metadata(block) -> dict[str, str]:
    """The block's ``# key = value`` comments (a later one wins)."""
    pairs = (comment_pair(text) for _, text in block if text.startswith("#"))
    return dict(pair for pair in pairs if pair is not None)


def _misc_value(misc: str, key: str) -> str | None:
    """The value of `key` in a MISC cell (``SpaceAfter=No|NER=B-ORG``); None when absent, empty or ``_``."""
    value = None
    for part in misc.split("|"):
        name, _, found = part.partition("=")
        if name == key:
            value = found if found not in ("", "_") else None
    return value
