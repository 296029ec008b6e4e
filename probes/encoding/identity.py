"""A sentence's identity: a key that names it on any machine, with any model, however its file was written.

Sharding (probes.running.state_files) splits a corpus by it, and the bootstrap (probes.results.bootstrap) draws each
sentence's replicate weights from it, so that shards and checkpoints over one corpus agree.

The key is made of what every probe reads, and nothing else: the sentence's words (``content_digest``) and
its occurrence (``Sentence.occurrence``, below). Not the file's name, the sentence's line or sent_id, nor
the bytes around the words: CR LF line endings, a byte-order mark, comments and empty nodes change no key,
so they change no interval and no shard.

Not the annotation (``Sentence.ann``) either, though probes read it: what a reader puts there follows its
options and the probes asked for (``--subtypes`` keeps ``nmod:poss``, srl reads the same CoNLL-U file as
Universal PropBank, ner joins a layer of entities, ``--annotate`` adds silver tags), and a key made of it
would give the same sentence of the same file other replicate weights in two such runs, which
``probes compare`` (probes.results.intervals.paired_delta, which checks the corpus files' sha256) would then pair as
if they were one draw. Two sentences with the same words but another annotation are told apart as
duplicates are, by their occurrence.

The occurrence: how many earlier sentences of the corpus stream have the same words (0 for the first). A
corpus may hold the very same sentence more than once: 88 of UD English EWT's 2,001 dev sentences repeat an
earlier one ("( Laughter . )", "Thanks ,", "?" and the like), 106 of its 2,077 test sentences. Each is a
draw of its own from what the corpus samples, so each must get replicate weights of its own: with one key
for both, every replicate would give them the same Poisson weight, resampling them as one unit of double
weight (per pair a variance of 4 instead of 2), which widens the intervals of whatever such sentences weigh
on. The occurrence tells them apart, and it is the same in every shard and every run: ``Occurrences``
numbers the sentences of a whole corpus stream (probes.running.state_files.ShardStream sees every sentence in every
shard, its own or not), and the numbering follows the words, not the files' order or bytes: sentences with
the same words are interchangeable to the numbering, so the corpus' keys are the same set whichever of them
comes first. Its cost: one 64-bit number and a count per distinct sentence of the corpus, about 100 bytes
each (10 MB for 100,000 sentences).

A key is made once: ``sentence_key`` keeps it on the sentence (``Sentence.identity``, with the words and the
occurrence it was made of), so the bootstrap's weights read the key the run's reading made; a sentence whose
words or occurrence changed since gets its key made again.
"""
from __future__ import annotations

import hashlib
import json

from probes.corpus.sentence import Sentence


def content_digest(sentence: Sentence) -> bytes:
    """SHA-256 of the sentence's words: of their JSON list (``["Hi","there"]``, no spaces, non-ASCII as is); a
    window of a document, its document's words (``Sentence.unit``)."""
    text = json.dumps(sentence.unit().words, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).digest()


def sentence_key(sentence: Sentence, digest: bytes | None = None) -> int:
    """A 256-bit number naming the sentence: SHA-256 of its content digest (`digest`, computed where not given)
    and its occurrence (8 bytes, big-endian); a window of a document, its document's (``Sentence.unit``)."""
    unit = sentence.unit()
    known = unit.identity  # made once, where the run numbered its corpus; made again if the words or occurrence moved
    if digest is None and known is not None and known[0] == unit.occurrence and known[1] == unit.words:
        return known[2]
    digest = content_digest(sentence) if digest is None else digest
    key = int.from_bytes(hashlib.sha256(digest + unit.occurrence.to_bytes(8, "big")).digest(), "big")
    unit.identity = (unit.occurrence, list(unit.words), key)
    return key


class Occurrences:
    """The numbering of one corpus stream: ``key(sentence)``, called on every sentence of the stream in order,
    sets ``sentence.occurrence`` to the number of earlier sentences with its words and returns its key."""

    def __init__(self) -> None:
        # 64 bits of a content digest -> sentences with it so far (two contents that share them, 2^-64 a pair,
        # would only share a count: their keys still differ)
        self._seen: dict[int, int] = {}

    def key(self, sentence: Sentence) -> int:
        digest = content_digest(sentence)
        content = int.from_bytes(digest[:8], "big")
        sentence.occurrence = self._seen.get(content, 0)
        self._seen[content] = sentence.occurrence + 1
        return sentence_key(sentence, digest)
