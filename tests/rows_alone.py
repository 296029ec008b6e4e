"""A forward pass whose maps do not depend on the batch: every row run alone, unpadded.

On CPUs whose float32 matrix kernels depend on the shapes and the thread count (AVX-512, AMX), a real
model's maps of one sentence differ in their last bits between a batch of 1 and a padded batch (MiniLM:
~1e-6). ``rows_alone(monkeypatch)`` replaces ``Encoder.layerwise`` by a stand-in that runs each row of the
batch (a sentence, or its word-shuffled twin) alone, at its own length, through the real ``layerwise`` (same
capture mode, weights and context vectors as asked), and hands ``on_layer`` the batch's [rows,H,T,T] maps
(and [rows,H,T,d] context) made of them: the maps of a sentence are then the same bits in every batch, and
whatever still differs between two batchings comes from the scoring. Each row's maps are computed once per
(capture, weights, vectors, thread count) and reused, so the settings compared cost one pass per sentence.

Padding is filled as a real model fills it, so that a probe that read it would move with the batch: a padded
query row attends uniformly to the row's real positions (the real model's padded rows also spread over
them), its context vector is the mean of the real positions' (what that uniform row gives), and no row
attends to a padded position (the real model's mask gives those columns exactly 0).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch

from probes.capture.model import Encoder


def rows_alone(monkeypatch) -> dict:
    """Patch ``Encoder.layerwise`` for the test; returns the cache of each row's maps ({key: L × (attention
    [1,H,n,n], context [1,H,n,d] or None)}), e.g. to count the distinct rows run."""
    layerwise = Encoder.layerwise
    cache: dict = {}

    @torch.inference_mode()
    def alone(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, on_layer, *, vectors: bool = False,
              token_type_ids: torch.Tensor | None = None, weights: str = "attention", full: bool = True) -> None:
        # full=False allows entries (probes.capture.sdpa_qk.AttentionEntries); whole maps always serve as well
        lengths = attention_mask.sum(1).tolist()  # [rows] real positions, padded on the right
        assert all(attention_mask[r, :n].all() and not attention_mask[r, n:].any() for r, n in enumerate(lengths))
        per_row = []  # per row: L × (attention [1,H,n,n], context [1,H,n,d] or None)
        for r, n in enumerate(lengths):
            ids = input_ids[r:r + 1, :n]  # [1,n]
            types = None if token_type_ids is None else token_type_ids[r:r + 1, :n]
            key = (self.capture, weights, vectors, torch.get_num_threads(), tuple(ids[0].tolist()),
                   None if types is None else tuple(types[0].tolist()))
            if key not in cache:
                layers: list = []
                layerwise(self, ids, attention_mask[r:r + 1, :n], lambda _, a, c: layers.append(
                    (a.clone(), None if c is None else c.clone())), vectors=vectors, token_type_ids=types,
                    weights=weights)
                cache[key] = layers
            per_row.append(cache[key])
        rows, t = input_ids.shape
        for layer in range(self.layers):
            attention = torch.zeros(rows, self.heads, t, t)  # [rows,H,T,T]
            context = torch.zeros(rows, self.heads, t, self.head_dim) if vectors else None  # [rows,H,T,d]
            for r, n in enumerate(lengths):
                a, c = per_row[r][layer]  # [1,H,n,n], [1,H,n,d] or None
                attention[r, :, :n, :n] = a[0]
                attention[r, :, n:, :n] = 1 / n  # padded query rows: uniform over the real positions
                if context is not None:
                    context[r, :, :n] = c[0]
                    context[r, :, n:] = c[0].mean(1, keepdim=True)
            on_layer(layer, attention, context)

    monkeypatch.setattr(Encoder, "layerwise", alone)
    return cache


# Given the same maps, how far two batchings of the same sentences may leave a number, relative to its scale
# (probe_corpora.same): four float32 roundings, 4 · 2^-24. Some probes compute per-token terms in float32 from the
# maps (entropy's Σ a ln a, patterns' and word_order's row sums) with reductions over the padded length T, whose
# vectorised order (which elements fall in the lanes, which in the remainder) depends on T: a term may round
# otherwise in another batch (each rounding within 2^-24 of the exact value). Every sum over sentences is float64,
# regrouped by the batching (Σ over batches of Σ within each): ~1e-16 relative. Measured on this project's test
# corpora (2-core AVX-512 Xeon): at most 3.8e-8 of the scale (patterns), 4e-9 (entropy), 4e-15 (head_distance,
# float64 only), 1e-16 (mass); dep, pos, positional, rare, trees and frames were equal bit for bit.
FLOAT32_ROUNDING = 4 * 2.0 ** -24

THREADS = (1, 2)  # torch's intra-op threads the invariance tests run at: the maps' last bits depend on them


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch.set_num_threads(n) within, the thread count before restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
