"""Word-shuffled twins of a batch: the same sentences with their words in a fixed, seeded order.

A probe that returns a seed from ``Probe.shuffle_seed()`` makes the runner build
``batch.twin = shuffled_twin(batch, seed)`` and run the model on it too (a second forward pass).
Words move as whole blocks of subwords (so every word keeps its own subwords and the twin has
the same length); special tokens stay where they are; the words of a sentence pair are shuffled
within their own segment. Each sentence's permutation depends only on the seed and the
sentence's words (not on batching, corpus order or sharding), and is never the identity when a
segment has two words or more.

``twin.position_of`` [B,T] gives, for each subword position of the original, its position in the
twin, so ``A_twin[position_of[i], position_of[j]]`` is the twin's attention between the same two
subwords as ``A[i, j]``. The twin's word columns are the original words' columns, so its
word-level maps come out in the original word order already.
"""
from __future__ import annotations

import zlib

import numpy as np
import torch

from probes.batching import Batch
from probes.corpus.sentence import Sentence


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


def shuffled_twin(batch: Batch, seed: int) -> Batch:
    """The twin batch (see the module docstring), with ``position_of`` and ``shuffled`` [B] (whether
    the sentence's order changed) set."""
    lengths = batch.attention_mask.sum(1).tolist()
    source = torch.arange(batch.columns.shape[1]).repeat(len(batch.sentences), 1)  # [B,T] twin position → original
    changed = []
    for b, sentence in enumerate(batch.sentences):
        cols = batch.columns[b, :lengths[b]].numpy()
        order = word_permutation(sentence, seed)
        rank = np.empty(len(sentence.words) + 1, dtype=np.int64)
        rank[order] = np.arange(len(order))
        word_pos = np.flatnonzero((cols >= 1) & (cols <= len(sentence.words)))
        moved = word_pos[np.argsort(rank[cols[word_pos]], kind="stable")]
        source[b, torch.from_numpy(word_pos)] = torch.from_numpy(moved)
        changed.append(not np.array_equal(moved, word_pos))
    columns = batch.columns.gather(1, source)
    return Batch(batch.sentences, [columns[b, :n].numpy() for b, n in enumerate(lengths)], pool=batch.pool,
                 input_ids=None if batch.input_ids is None else batch.input_ids.gather(1, source),
                 attention_mask=batch.attention_mask, indices=batch.indices,
                 token_type_ids=None if batch.token_type_ids is None else batch.token_type_ids.gather(1, source),
                 position_of=torch.empty_like(source).scatter_(1, source, torch.arange(source.shape[1]).expand_as(source)),
                 shuffled=torch.tensor(changed))
