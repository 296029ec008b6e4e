"""Word-shuffled twins of a batch: the same sentences with their words in a fixed, seeded order.

A probe that returns a seed from ``Probe.shuffle_seed()`` makes the runner build each batch with
its twin (``Batch(..., shuffle_seed=seed)``, laid out here) and run the model on the twin too (a
second forward pass). Words move as whole blocks of subwords (so every word keeps its own subwords
and the twin has the same length); special tokens stay where they are; the words of a sentence pair
are shuffled within their own segment. Each sentence's permutation depends only on the seed and the
sentence's words (not on batching, corpus order or sharding), and is never the identity when a
segment has two words or more.

``twin.position_of`` [B,T] gives, for each subword position of the original, its position in the
twin, so ``A_twin[position_of[i], position_of[j]]`` is the twin's attention between the same two
subwords as ``A[i, j]``. The twin's word columns are the original words' columns, so its
word-level maps come out in the original word order already.
"""
from __future__ import annotations

import zlib
from typing import NamedTuple

import numpy as np
import torch

from probes.corpus.sentence import Sentence


class TwinLayout(NamedTuple):
    """Where each subword of a batch goes in its twin."""

    source: torch.Tensor  # [B,T] twin position → original position (gather the original's inputs with it)
    position_of: torch.Tensor  # [B,T] original position → twin position
    shuffled: torch.Tensor  # [B] bool: whether the sentence's word order changed


def word_permutation(sentence: Sentence, seed: int) -> np.ndarray:
    """New order of the words 1..n (word columns): out[k] = the word placed k-th. Within segments."""
    n = len(sentence.words)
    split = sentence.ann.get("pair", n)
    rng = np.random.default_rng([seed, zlib.crc32("\x1f".join(sentence.words).encode("utf-8"))])
    identity = np.arange(1, n + 1)
    while True:
        order = np.concatenate([rng.permutation(identity[:split]), rng.permutation(identity[split:])])
        if max(split, n - split) < 2 or not np.array_equal(order, identity):
            return order


def twin_layout(sentences: list[Sentence], columns: torch.Tensor, lengths: list[int], seed: int) -> TwinLayout:
    """The twin's layout from a batch's word columns [B,T] (see probes.encoding.batching) and real lengths [B]."""
    source = torch.arange(columns.shape[1]).repeat(len(sentences), 1)  # [B,T]
    changed = []
    every = columns.numpy()  # [B,T] read once, not once per sentence
    for b, sentence in enumerate(sentences):
        cols = every[b, :lengths[b]]
        order = word_permutation(sentence, seed)
        rank = np.empty(len(sentence.words) + 1, dtype=np.int64)
        rank[order] = np.arange(len(order))
        word_pos = np.flatnonzero((cols >= 1) & (cols <= len(sentence.words)))
        moved = word_pos[np.argsort(rank[cols[word_pos]], kind="stable")]
        source[b, torch.from_numpy(word_pos)] = torch.from_numpy(moved)
        changed.append(not np.array_equal(moved, word_pos))
    position_of = torch.empty_like(source).scatter_(1, source, torch.arange(source.shape[1]).expand_as(source))
    return TwinLayout(source, position_of, torch.tensor(changed))
