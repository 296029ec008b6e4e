"""A sentence's identity: a key that names it on any machine, with any model.

Sharding (probes.state_files) splits a corpus by it, and the bootstrap (probes.bootstrap) draws each
sentence's replicate weights from it, so that shards and checkpoints over one corpus agree.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from probes.corpus.sentence import Sentence


def sentence_key(sentence: Sentence) -> int:
    """A 256-bit number naming the sentence: SHA-256 of its file's name, sent_id, line and words."""
    identity = "\x1e".join((Path(sentence.source).name, sentence.sent_id or "", str(sentence.line),
                            "\x1f".join(sentence.words)))
    return int.from_bytes(hashlib.sha256(identity.encode("utf-8")).digest(), "big")
