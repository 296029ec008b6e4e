"""One layer's maps for one batch: what a probe's ``update`` receives, pooled to words on demand.

Shapes: B sentences, H heads, T subword positions (padded), C = W + 2 word columns (see
probes.encoding.batching: column 0 the start special / root, 1..n the words, C-1 the end specials), d head size.

The runner builds a LayerMaps for each layer as the model computes it, hands it to every probe, and
drops it before the next layer: peak memory holds about one layer's maps, never all L of them.
Word-level views are computed once per layer, on first use, and shared by the probes of the run.

A run whose probes all read the maps only through ``entries`` (``Probe.reads_entries``: the causal detectors) may
get a causal model's layer as probes.capture.sdpa_qk.AttentionEntries instead of its [B,H,T,T] map: ``entries``
computes the entries asked for, and the whole map (``attention`` and everything pooled from it) is not there.
"""
from __future__ import annotations

from functools import cached_property

import torch

from probes.base.devices import CPU, to_device
from probes.encoding.batching import Batch
from probes.capture.sdpa_qk import AttentionEntries
from probes.base.ordered import in_order
from probes.encoding.pooling import PARTS, at_once, per_head, pool_attention, pool_vectors, segment_sum
from probes.base.scratch import scratch_from


class LayerMaps:
    """Layer `layer`'s attention (and per-head context vectors, when a probe asked) for `batch`.

    attention: [B,H,T,T] attention probabilities (rows: from, columns: to); in a run with weights "norm",
               the norm-based map α_ij‖f_h(x_j)‖ instead, rows renormalised to sum to 1 (probes.capture.norms). Given as
               AttentionEntries (see the module docstring), only ``entries`` reads it.
    context:   [B,H,T,d] per-head context vectors softmax(QKᵀ/√d)·V before W_O, or None
    twin:      the same layer of the batch's word-shuffled twin (``batch.twin``), or None
    """

    def __init__(self, batch: Batch, layer: int, attention: torch.Tensor | AttentionEntries,
                 context: torch.Tensor | None = None, twin: "LayerMaps | None" = None):
        self.batch = batch
        self.layer = layer
        self._attention = attention  # [B,H,T,T] or its AttentionEntries
        self.context = context  # [B,H,T,d] or None
        self.twin = twin
        self._scratch: dict[tuple[str, torch.dtype, torch.device], torch.Tensor] = {}  # see scratch()

    @property
    def attention(self) -> torch.Tensor:
        """[B,H,T,T] the layer's map (see the class docstring)."""
        if isinstance(self._attention, AttentionEntries):
            raise RuntimeError("this layer's attention was computed only at the entries its probes read "
                               "(LayerMaps.entries): a probe that reads the whole map must not set reads_entries")
        return self._attention

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(B, H, T, T) of the layer's map."""
        return tuple(self._attention.shape)

    @property
    def device(self) -> torch.device:
        """Where the layer's attention is."""
        return self._attention.device

    def entries(self, b: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        """[N,H] float32 attention[b[n], :, i[n], j[n]] for every head (b, i, j [N] int64 on ``device``): gathered
        from the map, or computed at those entries alone (AttentionEntries)."""
        if isinstance(self._attention, AttentionEntries):
            return self._attention.at(b, i, j)
        return self._attention[b, :, i, j].float()

    def scratch(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """An uninitialised tensor of `shape` for a temporary of this layer, shared under (name, dtype, device) by
        the probes of the layer one after another: it holds what its caller wrote only until the next call with
        that name (probes.base.scratch). One allocation of a layer-sized temporary serves the word pooling, entropy
        and the views in turn; it goes with the layer, so that it is not held while the model computes the
        next one."""
        return scratch_from(self._scratch, name, shape, dtype, device)

    @cached_property
    def word_attention(self) -> torch.Tensor:
        """[B,H,C,C] word-level attention (rows: from, columns: to); made at the first use, dropped with the layer."""
        device, heads, dtype = self.attention.device, self.attention.shape[1], self.attention.dtype
        query, key = self.batch.pooling(device)
        return pool_attention(self.attention, query, key, self.scratch, segmented=lambda: self.batch.segments(device),
                              queries=lambda: self.batch.memo(("pooling.per_head", device, heads, dtype),
                                                              lambda: per_head(query, heads, dtype)))

    @cached_property
    def entropy(self) -> torch.Tensor:
        """[B,H,T] each row's entropy −Σ_j a_ij ln a_ij of ``attention`` (float32; a zero weight adds 0 · ln 1e-30 = 0),
        its a·ln a made for part of the sentences at a time (probes.encoding.pooling.at_once): on the CPU never a
        second [B,H,T,T]."""
        a = self.attention.float()  # [B,H,T,T]
        entropy = a.new_empty(a.shape[:-1])  # [B,H,T]
        step = at_once(-(-a.shape[0] // PARTS), a[0].numel() * a.element_size(), a.device)
        for start in range(0, a.shape[0], step):
            part = a[start:start + step]  # [n,H,T,T]
            terms = self.scratch("temporary", tuple(part.shape), a.dtype, a.device)
            torch.sum(torch.clamp(part, min=1e-30, out=terms).log_().mul_(part), -1, out=entropy[start:start + step])
        return entropy.neg_()

    @cached_property
    def word_vectors(self) -> torch.Tensor:
        """[B,H,C,d] word-level per-head context vectors (the mean of the word's subwords' by default)."""
        if self.context is None:
            raise RuntimeError("context vectors were not captured for this batch (the probe must set needs_vectors)")
        query, _ = self.batch.pooling(self.context.device)
        return pool_vectors(self.context, query)

    @cached_property
    def predictions(self) -> torch.Tensor:
        """[B,H,C] each head's most-attended column from each row, over the root column and the words.

        The end column (last) is left out; padding columns hold zero weight and come after a sentence's
        real columns, and attention weights are non-negative, so they can never win the argmax
        (a row with no weight anywhere points at column 0, the first maximum).
        """
        return self.word_attention[..., :-1].max(dim=-1).indices  # argmax's first maximum; max() is faster on CPU

    def word_attention_of(self, rows: list[int]) -> torch.Tensor:
        """[len(rows),H,C,C] ``word_attention[rows]``: the batch's where it is pooled already, else those rows'
        alone, the same arithmetic row by row (the views of a run's first sentences pool no more than
        their own rows: a batch of long windows holds one of them and thirty others). Consecutive rows of the
        pooled map are a view of it, held as ``word_attention`` is (until the next layer's), not a copy."""
        if "word_attention" in self.__dict__ or len(rows) == len(self.batch.sentences):
            if rows == list(range(rows[0], rows[0] + len(rows))):
                return self.word_attention[rows[0]:rows[0] + len(rows)]
            return self.word_attention[rows]
        device = self.attention.device
        index = self.batch.memo(("rows", tuple(rows), device), lambda: to_device(torch.tensor(rows), device))
        query, key = (p[index] for p in self.batch.pooling(device))
        return pool_attention(self.attention[index], query, key,  # the batch's Segments: no host read a layer
                              segmented=lambda: tuple(s.of(index) for s in self.batch.segments(device)))

    def predictions_at(self, rows: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """[N,H] ``predictions[rows, :, words]``: where word column words[n] of sentence rows[n] attends most,
        pooled from those words' subword rows alone (segment sums, key side then query side, as ``word_attention``
        for wide batches), without the whole batch's [B,H,C,C] map: for probes that read a few rows of long
        inputs (coref: the anaphors' head words of windows of hundreds of words). rows, words [N] on the host, the
        same tensors at every layer of a batch: which subwords they pick is found on the host once per batch."""
        device = self.attention.device
        query, key = self.batch.segments(device)
        pick, token, batch_row = self.batch.memo(("predictions_at", id(rows), id(words), device), lambda: (
            *(to_device(t, device) for t in _subword_rows(self.batch, rows, words)), rows, words))[:3]
        subword_rows = self.attention[batch_row, :, token]  # [S,H,T] each picked subword's attention row
        keyed = subword_rows.new_zeros(len(token), subword_rows.shape[1], 1, key.width + 1)  # [S,H,1,C+1]
        segment_sum(subword_rows[:, :, None], key.of(batch_row), 3, keyed)
        keyed = keyed[:, :, 0]  # [S,H,C+1]
        weight = None if query.weight is None else query.weight[batch_row, token].to(keyed.dtype)  # [S]
        if in_order(device):  # each item's rows summed by a product: the same order on every run
            items = (torch.arange(len(rows), device=device)[:, None] == pick).to(keyed.dtype)  # [N,S]
            items = items if weight is None else items * weight
            pooled = (items @ keyed.flatten(1)).view(len(rows), *keyed.shape[1:])
        else:
            weighted = keyed if weight is None else keyed * weight[:, None, None]
            pooled = keyed.new_zeros(len(rows), *keyed.shape[1:]).index_add_(0, pick, weighted)  # [N,H,C+1]
        return pooled[..., : key.width - 1].argmax(dim=-1)  # [N,H] the end column (C-1) and the dropped one left out


def _subword_rows(batch: Batch, rows: torch.Tensor, words: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The (item, subword) pairs [S] that pool word column words[n] of sentence rows[n] (rows, words [N] on the
    host), and each pair's batch row: from the batch's query pooling on the host (its layout is host data)."""
    query, _ = batch.segments(CPU)
    pick, token = (query.word[rows] == words[:, None]).nonzero(as_tuple=True)  # [S] each
    return pick, token, rows[pick]
