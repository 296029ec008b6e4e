"""The bounded sample of the selection split that head ensembles are chosen on.

Choosing heads greedily means decoding averaged matrices of many candidate ensembles, which no running
sum can stand in for; so the sentences themselves are kept, at most `capacity` of them. Which ones does
not depend on the order or the sharding of the corpus: each sentence gets a key, a hash of its words and
gold heads, and the sample is the `capacity` smallest keys seen (a bottom-k sample: uniform over distinct
sentences, and two shards' samples merge into the one of the whole split). Identical sentences (same words
and heads) count once. Memory: a sentence of n words keeps L·H·(n+1)² float32 weights (MiniLM, 6×12
heads: 0.1 MB at 17 words), so the sample holds about capacity × that.
"""
from __future__ import annotations

import hashlib
import heapq
import json
from typing import Any, Iterable

import torch

from probes.corpus.sentence import Sentence
from probes.encoding.batching import Batch


def sentence_key(sentence: Sentence) -> int:
    """A sentence's sample key: 63 bits of a hash of its words and gold heads."""
    digest = hashlib.blake2b(json.dumps([sentence.words, sentence.ann["head"]]).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def sentence_keys(batch: Batch) -> list[int]:
    """The sample key of each sentence of a batch."""
    return [sentence_key(s) for s in batch.sentences]


def smallest_keys(keys: Iterable[int], capacity: int) -> set[int]:
    """The `capacity` smallest distinct keys of `keys`: those a sample of that capacity keeps when fed them all."""
    return set(heapq.nsmallest(capacity, set(keys)))


class SelectionSample:
    """Additive state (``merge``, ``state_dict``): the `capacity` sentences of smallest key, each with its gold
    heads [n] and word-level attention [L,H,n+1,n+1] over the root and its words, ordered by key."""

    def __init__(self, capacity: int, layers: int, heads: int):
        self.capacity, self.layers, self.heads = capacity, layers, heads
        self.keys: list[int] = []
        self.gold: list[torch.Tensor] = []  # [n] int64 each
        self.maps: list[torch.Tensor] = []  # [L,H,n+1,n+1] float32 each

    def __len__(self) -> int:
        return len(self.keys)

    def admit(self, keys: list[int], gold: list[list[int]]) -> None:
        """Layer 0 of a batch: make room for the batch's sentences that enter the sample (maps filled by ``fill``)."""
        entries = {k: (g, m) for k, g, m in zip(self.keys, self.gold, self.maps)}
        for k, heads in zip(keys, gold):
            if k not in entries:
                n = len(heads)
                entries[k] = (torch.tensor(heads, dtype=torch.long),
                              torch.zeros(self.layers, self.heads, n + 1, n + 1, dtype=torch.float32))
        self._keep(entries)

    def rows(self, keys: list[int]) -> list[int]:
        """The rows of a batch (sentence keys `keys`) whose sentences are in the sample."""
        held = set(self.keys)
        return [b for b, k in enumerate(keys) if k in held]

    def fill(self, keys: list[int], attention: torch.Tensor, lengths: list[int]) -> None:
        """Write the word attention of every layer [L,k,H,C,C] of k sentences of the sample (their keys and lengths
        [k]), over the root and their words."""
        where = {k: i for i, k in enumerate(self.keys)}
        for row, (k, n) in enumerate(zip(keys, lengths)):
            self.maps[where[k]].copy_(attention[:, row, :, : n + 1, : n + 1])

    def merge(self, other: "SelectionSample") -> None:
        entries = {k: (g, m) for k, g, m in zip(self.keys, self.gold, self.maps)}
        for k, g, m in zip(other.keys, other.gold, other.maps):
            entries.setdefault(k, (g.clone(), m.clone()))
        self._keep(entries)

    def _keep(self, entries: dict[int, tuple[torch.Tensor, torch.Tensor]]) -> None:
        kept = sorted(entries)[: self.capacity]
        self.keys = kept
        self.gold = [entries[k][0] for k in kept]
        self.maps = [entries[k][1] for k in kept]

    def state_dict(self) -> dict[str, Any]:
        return {"keys": torch.tensor(self.keys, dtype=torch.long), "gold": [g.clone() for g in self.gold],
                "maps": [m.clone() for m in self.maps]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["gold"]) != len(state["keys"]) or len(state["maps"]) != len(state["keys"]):
            raise ValueError(f"selection sample of {len(state['keys'])} keys, {len(state['gold'])} trees and "
                             f"{len(state['maps'])} maps")
        self.keys = [int(k) for k in state["keys"]]
        self.gold = [g.clone() for g in state["gold"]]
        self.maps = [m.clone() for m in state["maps"]]
