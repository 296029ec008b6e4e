"""PTB-style word splitting with character offsets (FrameNet's sentences)."""
from __future__ import annotations

from probes.corpus.ptb_words import ptb_word_spans

TEXT = "Kim didn't give Sandy's dog the book."


def words(text: str) -> list[str]:
    return [text[s:e] for s, e in ptb_word_spans(text)]


def test_ptb_style_with_offsets():
    assert ptb_word_spans(TEXT) == [
        (0, 3), (4, 7), (7, 10), (11, 15), (16, 21), (21, 23), (24, 27), (28, 31), (32, 36), (36, 37)
    ]
    assert words(TEXT) == ["Kim", "did", "n't", "give", "Sandy", "'s", "dog", "the", "book", "."]
    assert words('"We\'re here," he said (twice)...') == [
        '"', "We", "'re", "here", ",", '"', "he", "said", "(", "twice", ")", "..."
    ]
    assert words("Mr. Smith paid $300 in the U.S. on 1,000.5 days.") == [
        "Mr.", "Smith", "paid", "$", "300", "in", "the", "U.S.", "on", "1,000.5", "days", "."
    ]
    assert words("well-known O'Neil can't stop--really") == [
        "well-known", "O'Neil", "ca", "n't", "stop", "--", "really"
    ]
    # already-tokenized FrameNet text comes back as split on whitespace
    pre = "`` I 'd never finished high school . '' -- Maureen"
    assert words(pre) == pre.split()
    assert ptb_word_spans("") == [] and ptb_word_spans("   ") == []


def test_leading_colon_is_its_own_word():
    # FrameNet's CNN transcript: "Ed_Henry :An easy but rare maneuver ..." (speaker, colon, speech)
    text = "Ed_Henry :An easy maneuver"
    assert ptb_word_spans(text) == [(0, 8), (9, 10), (10, 12), (13, 17), (18, 26)]
    assert words(text) == ["Ed_Henry", ":", "An", "easy", "maneuver"]
    assert words("Allah said :5 times") == ["Allah", "said", ":", "5", "times"]
    # a colon inside or at the end of a word is handled as before
    assert words("at 10:30 : note: x") == ["at", "10:30", ":", "note", ":", "x"]
