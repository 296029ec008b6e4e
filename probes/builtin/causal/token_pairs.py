"""Which (query, key) token pairs the causal detectors read, from a batch's token ids alone, and the attention on them.

Shapes: B sequences, H heads, T positions (right-padded). Built once per batch (``Batch.memo``), shared by every
layer and detector of the run.

    previous   [B,T]   rows with a previous token: real positions i ≥ 1
    earlier    [B,T,T] key j < i holds the same token id as query i (both real): duplicate-token targets
    induction  [B,T,T] key k = j + 1 < i follows an earlier occurrence j of query i's token: induction targets
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from probes.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import row_sum, sentence_sums
from probes.maps import LayerMaps


@dataclass(frozen=True)
class TokenPairs:
    """The batch's query rows and key targets (see the module docstring)."""

    real: torch.Tensor  # [B,T] bool
    previous: torch.Tensor  # [B,T] bool
    earlier: torch.Tensor  # [B,T,T] bool
    induction: torch.Tensor  # [B,T,T] bool


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
    shifted = torch.nn.functional.pad(earlier[:, :, :-1], (1, 0))  # [B,T,T] key k marks an occurrence at k - 1
    return TokenPairs(real=real, previous=real & (positions >= 1), earlier=earlier, induction=shifted & before)


def mass_on(maps: LayerMaps, targets: torch.Tensor) -> torch.Tensor:
    """[B,H,T] each query row's attention on its target keys (targets [B,T,T] bool), Σ_k A[b,h,i,k]·targets[b,i,k];
    the product is formed in the layer's scratch memory (one [B,H,T,T] temporary, shared by the detectors)."""
    attention = maps.attention.float()  # [B,H,T,T]
    product = maps.scratch("causal.mass", tuple(attention.shape), attention.dtype, attention.device)
    torch.mul(attention, targets[:, None].to(attention.dtype), out=product)
    return product.sum(-1)


def add_rows(probe: MeanAnalysis, maps: LayerMaps, measure: str, values: torch.Tensor, rows: torch.Tensor) -> None:
    """Add `measure`'s per-head mean over the query rows `rows` [B,T] bool of values [B,H,T], split by sequence for
    the bootstrap where it keeps replicates (probes.bootstrap)."""
    weights = rows.to(values.dtype)  # [B,T]
    per_sentence = (sentence_sums(values, weights), weights.sum(1)) if probe.bootstrap.replicates else None
    probe.add(maps, measure, row_sum(values, weights), int(rows.sum()), per_sentence=per_sentence)
