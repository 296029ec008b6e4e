"""Which (query, key) token pairs the causal detectors read, from a batch's token ids alone, and the attention on them.

Shapes: B sequences, H heads, T positions (right-padded). Built once per batch (``Batch.memo``), shared by every
layer and detector of the run.

    previous   [B,T]   rows with a previous token: real positions i ≥ 1
    earlier    key j < i holds the same token id as query i (both real): duplicate-token targets
    induction  key k = j + 1 < i follows an earlier occurrence j of query i's token: induction targets
(each a list of (sequence, query, key) indices, with the rows that have at least one)

The attention on a set of targets is read at the targets alone (``mass_on``: a gather of their N entries per head
and a scatter-add into the rows, O(N·H)), not by a product with the whole [B,H,T,T] map: on random tokens
repeated a row has one target or two.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from probes.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import row_sum, sentence_sums
from probes.maps import LayerMaps


Targets = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (sequence b, query i, key k) of each target, [N] each


@dataclass(frozen=True)
class TokenPairs:
    """The batch's query rows and key targets (see the module docstring)."""

    real: torch.Tensor  # [B,T] bool
    previous: torch.Tensor  # [B,T] bool
    earlier: Targets  # duplicate-token targets
    earlier_rows: torch.Tensor  # [B,T] bool: rows with at least one
    induction: Targets  # induction targets
    induction_rows: torch.Tensor  # [B,T] bool: rows with at least one


def token_pairs(batch: Batch, device: torch.device) -> TokenPairs:
    """The batch's TokenPairs on `device`, built once per batch and device."""
    return batch.memo(("causal.token_pairs", device), lambda: _build(batch, device))


def _build(batch: Batch, device: torch.device) -> TokenPairs:
    ids = batch.input_ids.to(device)  # [B,T]
    real = batch.attention_mask.to(device).bool()  # [B,T]
    t = ids.shape[1]
    positions = torch.arange(t, device=device)  # [T]
    before = positions[None, :] < positions[:, None]  # [T,T] j < i
    pair = real[:, :, None] & real[:, None, :]  # [B,T,T] both real
    earlier = (ids[:, :, None] == ids[:, None, :]) & before & pair  # [B,T,T]
    induction = torch.nn.functional.pad(earlier[:, :, :-1], (1, 0)) & before  # [B,T,T] key k: an occurrence at k - 1
    return TokenPairs(real=real, previous=real & (positions >= 1), earlier=earlier.nonzero(as_tuple=True),
                      earlier_rows=earlier.any(-1), induction=induction.nonzero(as_tuple=True),
                      induction_rows=induction.any(-1))


def mass_on(maps: LayerMaps, targets: Targets) -> torch.Tensor:
    """[B,H,T] each query row's attention on its targets, Σ_k A[b,h,i,k] over the targets (b, i, k) of row i."""
    attention = maps.attention  # [B,H,T,T]
    b, i, k = targets
    values = attention[b, :, i, k].float()  # [N,H]
    rows = values.new_zeros(attention.shape[0], attention.shape[2], attention.shape[1])  # [B,T,H]
    return rows.index_put_((b, i), values, accumulate=True).transpose(1, 2)  # [B,H,T]


def mass_on_keys(maps: LayerMaps, keys: torch.Tensor) -> torch.Tensor:
    """[B,H,T] each query row's attention on the key positions `keys` [B,T] bool (the same keys for every row of a
    sequence), Σ_j A[b,h,i,j]·keys[b,j], from those columns alone."""
    attention = maps.attention  # [B,H,T,T]
    b, j = keys.nonzero(as_tuple=True)  # [N] each
    columns = attention[b, :, :, j].float()  # [N,H,T]
    return columns.new_zeros(attention.shape[:3]).index_add_(0, b, columns)  # [B,H,T]


def add_rows(probe: MeanAnalysis, maps: LayerMaps, measure: str, values: torch.Tensor, rows: torch.Tensor) -> None:
    """Add `measure`'s per-head mean over the query rows `rows` [B,T] bool of values [B,H,T], split by sequence for
    the bootstrap where it keeps replicates (probes.bootstrap)."""
    weights = rows.to(values.dtype)  # [B,T]
    per_sentence = (sentence_sums(values, weights), weights.sum(1)) if probe.bootstrap.replicates else None
    probe.add(maps, measure, row_sum(values, weights), int(rows.sum()), per_sentence=per_sentence)
