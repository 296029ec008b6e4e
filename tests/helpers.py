"""Building hand-made batches: sentences, subword→column maps and attention written out by hand."""
from __future__ import annotations

import numpy as np
import torch

from probes.batching import END_COLUMN, Batch
from probes.corpus.sentence import Sentence

E = END_COLUMN  # the end special token's column, fixed per batch


def attention(length: int, rows: dict[int, dict[int, float]], pad_to: int | None = None) -> torch.Tensor:
    """One head's [T,T] map from {query position: {key position: weight}}; rows not given attend to themselves."""
    t = pad_to or length
    a = torch.zeros(t, t)
    for q in range(length):
        for k, w in rows.get(q, {q: 1.0}).items():
            a[q, k] = w
    return a


def batch(sentences: list[Sentence], columns: list[list[int]], heads_per_sentence: list[list[torch.Tensor]],
          pool: str = "mean-sum") -> Batch:
    """A one-layer Batch; heads_per_sentence[b][h] is a [T_b,T_b] map, padded here to the batch length."""
    b = Batch(sentences, [np.array(c) for c in columns], pool=pool)
    t = b.columns.shape[1]
    maps = torch.zeros(len(sentences), len(heads_per_sentence[0]), t, t)
    for i, head_maps in enumerate(heads_per_sentence):
        for h, m in enumerate(head_maps):
            maps[i, h, : m.shape[0], : m.shape[1]] = m
    b.attentions = (maps,)
    return b


def sentence(words: list[str], head: list[int] | None = None, deprel: list[str] | None = None, **ann) -> Sentence:
    if head is not None:
        ann["head"] = head
    if deprel is not None:
        ann["deprel"] = deprel
    return Sentence(words=words, ann=ann)
