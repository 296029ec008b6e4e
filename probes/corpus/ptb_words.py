"""PTB-style word splitting of running text, with character offsets (FrameNet's sentences).

    ptb_word_spans("Kim didn't give Sandy's dog the book.")
    # [(0, 3), (4, 7), (7, 10), (11, 15), (16, 21), (21, 23), (24, 27), (28, 31), (32, 36), (36, 37)]
    # Kim | did | n't | give | Sandy | 's | dog | the | book | .
"""
from __future__ import annotations

import re

__all__ = ["ptb_word_spans"]

_CHUNK = re.compile(r"\S+")
# A whole chunk that is a clitic by itself (pre-tokenized text: "I 'd", "are n't", "don 't").
_CLITIC_WORD = re.compile(r"(?i)(?:n['’]t|['’](?:s|re|ve|ll|d|m|t))")
# A clitic at the end of a word: "don't" -> "do n't", "John's" -> "John 's".
_CLITIC_END = re.compile(r"(?i)(?<=[^\W\d_])(?:n['’]t|['’](?:s|re|ve|ll|d|m))$")
_LEAD = re.compile(r"``|''|--+|\.\.\.+|[…—–]|[\"“‘«(\[{<¿¡$#?!:]|['’](?!\d)")
_TRAIL = re.compile(r"(?:''|--+|\.\.\.+|[…—–]|[\"”’»)\]}>,;:!?%]|')$")
_INTERNAL = re.compile(r"--+|\.\.\.+|[…—]")
# Words whose final period belongs to them (PTB keeps "Mr." and "U.S." whole).
_ABBREV_SHAPE = re.compile(r"(?:[^\W\d_]\.){2,}|[A-HJ-Z]\.")
_ABBREVIATIONS = frozenset(
    w.lower() + "."
    for w in (
        "Mr Mrs Ms Dr Prof Sr Jr St Mt Ft Gen Col Lt Sgt Capt Sen Rep Gov Pres Rev Hon "
        "Inc Corp Co Ltd Bros vs etc al approx dept est fig no nos vol Jan Feb Mar Apr Jun "
        "Jul Aug Sep Sept Oct Nov Dec Ave Blvd"
    ).split()
)


def _is_abbreviation(word: str) -> bool:
    return word.lower() in _ABBREVIATIONS or _ABBREV_SHAPE.fullmatch(word) is not None


def _split_chunk(text: str, a: int, b: int, out: list[tuple[int, int]]) -> None:
    """Append the (start, end) spans of the words of text[a:b] (no whitespace inside)."""
    if _CLITIC_WORD.fullmatch(text, a, b):
        out.append((a, b))
        return
    while a < b:  # leading punctuation
        m = _LEAD.match(text, a, b)
        if m is None or m.end() == b and _CLITIC_WORD.fullmatch(text, a, b):
            break
        out.append((a, m.end()))
        a = m.end()
    tail: list[tuple[int, int]] = []
    while a < b:  # trailing punctuation, then one clitic
        m = _TRAIL.search(text, a, b)
        if m is not None and m.start() > a:
            tail.append((m.start(), b))
            b = m.start()
            continue
        if text[b - 1] == "." and b - 1 > a and not _is_abbreviation(text[a:b]):
            tail.append((b - 1, b))
            b -= 1
            continue
        m = _CLITIC_END.search(text, a, b)
        if m is not None and m.start() > a:
            tail.append((m.start(), b))
            b = m.start()
        break
    if a < b:
        inner = list(_INTERNAL.finditer(text, a, b))
        if not inner:
            out.append((a, b))
        else:  # "word--word": split at the dashes/ellipses, then split each side again
            pos = a
            for m in inner:
                if m.start() > pos:
                    _split_chunk(text, pos, m.start(), out)
                out.append((m.start(), m.end()))
                pos = m.end()
            if pos < b:
                _split_chunk(text, pos, b, out)
    out.extend(reversed(tail))


def ptb_word_spans(text: str) -> list[tuple[int, int]]:
    """PTB-style word spans ``(start, end_exclusive)`` of ``text``, in order, non-overlapping.

    Splits on whitespace, then splits off leading/trailing punctuation (quotes, brackets,
    ``, ; : ! ? % $ #``, ``--``, ``...``), a final period unless the word is an abbreviation
    ("Mr.", "U.S.", "J."), and the clitics ``n't 's 're 've 'll 'd 'm`` (straight or curly
    apostrophe). Hyphenated words, numbers ("1,000", "3.5") and inner apostrophes
    ("O'Neil") stay whole; a colon is split off at either end (FrameNet's transcripts write
    "Ed_Henry :An easy ...": ``:An`` gives ``:`` ``An``). Text that is already tokenized comes
    back unchanged.
    """
    spans: list[tuple[int, int]] = []
    for m in _CHUNK.finditer(text):
        _split_chunk(text, m.start(), m.end(), spans)
    return spans
