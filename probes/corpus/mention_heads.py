"""Each mention's head word and each word's part of speech, from spaCy's parse of the gold sentences.

Every sentence of a coreference document (probes.corpus.coref) is parsed on its own, as the gold words
(no retokenising), by the pipeline probes.corpus.spacy_text loads (its tagger and parser; ``describe()``
names it and its version). ``ann["upos"]`` gets each word's ``pos_`` and ``ann["mention_heads"]`` each
mention's head word by MENTION_HEADS:

    spacy  the mention's word highest in the parse: of the words whose syntactic head lies outside the mention
           (or that are a root), the one with the fewest arcs up to its sentence's root, the last on a tie
           (English phrases are head-final); a mention across sentences has one such word per sentence
    first  the mention's first word
    last   the mention's last word

``anaphor_type`` reads a head word's POS as the coref probe's types: PRON pronoun, PROPN proper, else nominal.
"""
from __future__ import annotations

from probes.corpus.sentence import Sentence
from probes.corpus.spacy_text import load_pipeline
from probes.base.errors import require

MENTION_HEADS = ("spacy", "first", "last")
ANAPHOR_TYPES = ("pronoun", "proper", "nominal")
_SKIPPED_PIPES = ("ner", "lemmatizer")  # not needed for tags and arcs


def annotate_heads(document: Sentence, rule: str) -> None:
    """Set document.ann["upos"] (each word's POS) and ann["mention_heads"] (each mention's head word, by `rule`).
    InputError (naming the extra to install) without spaCy or its pipeline."""
    tokens = require("spacy.tokens", "spacy", "coref (spaCy's parse gives the mention heads and anaphor types)")

    nlp = load_pipeline()
    spans = document.ann["sentences"]
    parsed = nlp.pipe((tokens.Doc(nlp.vocab, words=document.words[a:b]) for a, b in spans),
                      disable=list(_SKIPPED_PIPES))
    upos: list[str] = []
    head: list[int] = []  # document offset of each word's syntactic head (itself for a root)
    for (a, _), doc in zip(spans, parsed):
        upos += [t.pos_ or "X" for t in doc]
        head += [a + t.head.i for t in doc]
    depth = [_depth(head, w) for w in range(len(head))]
    document.ann["upos"] = upos
    document.ann["mention_heads"] = [mention_head(start, end, rule, head, depth)
                                     for start, end, _ in document.ann["mentions"]]


def mention_head(start: int, end: int, rule: str, head: list[int], depth: list[int]) -> int:
    """The head word (document offset) of the mention of words start..end-1 by `rule` (MENTION_HEADS); head and
    depth: each word's syntactic head and its arcs up to the root."""
    if rule == "first":
        return start
    if rule == "last":
        return end - 1
    tops = [w for w in range(start, end) if not start <= head[w] < end or head[w] == w]
    return min(reversed(tops), key=lambda w: depth[w])


def anaphor_type(upos: str) -> str:
    """pronoun (PRON), proper (PROPN) or nominal (anything else)."""
    return {"PRON": "pronoun", "PROPN": "proper"}.get(upos, "nominal")


def _depth(head: list[int], word: int) -> int:
    """Arcs from `word` up to its root (a word that heads itself)."""
    n = 0
    while head[word] != word:
        word, n = head[word], n + 1
    return n
