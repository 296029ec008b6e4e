"""Named entities in IOB2 (Universal NER).

UNER files look like CoNLL-U without the syntax: optional comment lines (`# sent_id = ...`,
`# text = ...`, `# newdoc id = ...`), then one line per word with 5 tab-separated columns

    ID  FORM  TAG  -  annotator

(ID counts 1, 2, 3, ... within the sentence; TAG is `O`, `B-TYPE` or `I-TYPE`), and a blank
line after each sentence.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import comment_pair, iter_text_lines
from probes.corpus.entities import spans_from_iob2
from probes.base.errors import InputError

N_COLUMNS = 5


def read_iob2(path: str | Path, *, repair_i_after_o: bool = False) -> Corpus:
    """Read a UNER IOB2 file (5 tab-separated columns `ID FORM TAG - annotator`).

    Each sentence becomes a `Sentence` with
      words            the FORM column, in order;
      sent_id          from the `# sent_id = ...` comment (None if the sentence has none);
      line             the first line of the sentence's block (its first comment, else word 1);
      ann["ner_tags"]  the TAG column exactly as written (list of str, one per word);
      ann["ner"]       entity spans: list of (label, start, end) tuples, word indices 0-based,
                       end exclusive, in order of start; e.g. `B-LOC I-LOC` on words 6-7
                       gives ("LOC", 6, 8);
      ann["ner_repaired"]  0-based indices of the words whose `I-` tag was repaired (see below);
                       always present, an empty list when nothing was repaired.

    An `I-TYPE` that follows `O`, the start of the sentence, or a tag of another type is
    illegal in IOB2. By default it is an InputError naming the file and line. With
    `repair_i_after_o=True` it is read as `B-TYPE` (it starts a new span) and its index is
    recorded in that sentence's ann["ner_repaired"]; the total number of repairs in a corpus
    is `sum(len(s.ann["ner_repaired"]) for s in corpus.sentences)`. Repairs are deliberately
    not put in `corpus.skipped`, which counts sentences set aside. (The UNER English EWT
    dev and test files contain no such tag.)

    Also an InputError (file:line): a word line without exactly 5 tab-separated columns, an
    ID that is not an integer or not the next number in the sentence, an empty FORM, a tag
    that is not O/B-TYPE/I-TYPE, a comment between the words of a sentence, and a sent_id
    used twice in the file. Comment blocks with no words after them are ignored.
    """
    corpus = Corpus(sentences=[], files=[])
    corpus.sentences = list(iter_iob2(path, corpus, repair_i_after_o=repair_i_after_o))
    return corpus


def iter_iob2(path: str | Path, counts: Corpus | None = None, *, repair_i_after_o: bool = False) -> Iterator[Sentence]:
    """The sentences :func:`read_iob2` reads, one at a time, the file read line by line; the file's name is
    added to `counts` (IOB2 sets no sentence aside)."""
    path = Path(path)
    if counts is not None:
        counts.files.append(str(path))
    seen_ids: dict[str, int] = {}

    # state of the sentence being read
    start = 0  # first line of the block, 0 = no block open
    sent_id: str | None = None
    sent_id_line = 0
    words: list[str] = []
    tags: list[str] = []
    tag_lines: list[int] = []

    def finish() -> Sentence | None:
        """The sentence read (None for a block without words); the state reset for the next."""
        nonlocal start, sent_id, words, tags, tag_lines
        sentence = None
        if words:
            repaired: list[int] = []
            spans = spans_from_iob2(tags, path=path, lines=tag_lines, repair_i_after_o=repair_i_after_o,
                                    repaired=repaired)
            if sent_id is not None:
                if sent_id in seen_ids:
                    raise InputError(
                        f"sent_id {sent_id!r} used twice (first at line {seen_ids[sent_id]})",
                        path, sent_id_line)
                seen_ids[sent_id] = sent_id_line
            sentence = Sentence(words=words, ann={"ner": spans, "ner_tags": tags, "ner_repaired": repaired},
                                sent_id=sent_id, source=str(path), line=start)
        start, sent_id = 0, None
        words, tags, tag_lines = [], [], []
        return sentence

    for n, text in enumerate(iter_text_lines(path), start=1):
        if not text.strip():
            if (sentence := finish()) is not None:
                yield sentence
            continue
        if text.startswith("#"):
            if words:
                raise InputError("comment line inside a sentence: a blank line must end each "
                                 "sentence", path, n)
            if not start:
                start = n
            pair = comment_pair(text)
            if pair is not None and pair[0] == "sent_id":
                sent_id, sent_id_line = pair[1], n
            continue
        if not start:
            start = n
        cols = text.split("\t")
        if len(cols) != N_COLUMNS:
            raise InputError(f"{len(cols)} tab-separated columns, expected {N_COLUMNS} "
                             "(ID FORM TAG - annotator)", path, n)
        wid, form, tag = cols[0].strip(), cols[1], cols[2].strip()
        try:
            wid_int = int(wid)
        except ValueError:
            raise InputError(f"ID {wid!r} is not an integer", path, n) from None
        if wid_int != len(words) + 1:
            raise InputError(f"ID {wid_int} out of sequence, expected {len(words) + 1}", path, n)
        if not form.strip():
            raise InputError("empty FORM", path, n)
        words.append(form)
        tags.append(tag)
        tag_lines.append(n)
    if (sentence := finish()) is not None:
        yield sentence
