"""Which (query, key) token pairs the causal detectors read, from a batch's token ids alone, and the attention on them.

Shapes: B sequences, H heads, T positions (right-padded). Built once per batch (``Batch.memo``), shared by every
layer and detector of the run.

    previous   [B,T]   rows with a previous token: real positions i ≥ 1
    earlier    key j < i holds the same token id as query i (both real): duplicate-token targets
    induction  key k = j + 1 < i follows an earlier occurrence j of query i's token: induction targets
    first      key 0, the sequence's first token, for every query row (real or not): sink's targets
    start      the start special token (word column 0) where there is one, for every query row of its sequence
(each a list of (sequence, query, key) indices, with the rows that have at least one, or the rows sink scores)

Everything is derived on the host, from the batch's token ids and word columns, and moved to the device once: the
targets' counts are shapes, which a device could only give by waiting for its own work (``nonzero``); so no layer
reads anything back to the host.

The attention on a set of targets is read at the targets alone (``mass_on``: their N entries per head,
``LayerMaps.entries``, scatter-added into the rows, O(N·H)), not by a product with the whole [B,H,T,T] map: on
random tokens repeated a row has one target or two. The detectors read nothing else of the maps
(``Probe.reads_entries``), so a causal model's capture computes those entries alone (probes.capture.sdpa_qk).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from probes.base.devices import to_device
from probes.encoding.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import row_sum, sentence_sums
from probes.capture.maps import LayerMaps


Targets = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (sequence b, query i, key k) of each target, [N] each


@dataclass(frozen=True)
class TokenPairs:
    """The batch's query rows and key targets (see the module docstring)."""

    previous: torch.Tensor  # [B,T] bool
    earlier: Targets  # duplicate-token targets
    earlier_rows: torch.Tensor  # [B,T] bool: rows with at least one
    induction: Targets  # induction targets
    induction_rows: torch.Tensor  # [B,T] bool: rows with at least one
    first: Targets  # sink: (b, i, 0) for every row i of every sequence b
    start: Targets  # sink: (b, i, j) for every row i of a sequence b whose start special token is at j
    start_rows: torch.Tensor  # [B,T] bool: rows with a previous token in sequences with a start special token


def token_pairs(batch: Batch, device: torch.device) -> TokenPairs:
    """The batch's TokenPairs on `device`, built once per batch and device."""
    return batch.memo(("causal.token_pairs", device), lambda: _build(batch, device))


def _build(batch: Batch, device: torch.device) -> TokenPairs:
    ids = batch.input_ids  # [B,T] on the host, as the batch is built
    real = batch.attention_mask.bool()  # [B,T]
    t = ids.shape[1]
    previous = real & (torch.arange(t) >= 1)  # [B,T]
    earlier = earlier_occurrences(ids, real)
    follows = earlier[2] + 1 < earlier[1]  # [N] the key after the occurrence, k = j + 1, is before the query
    induction = (earlier[0][follows], earlier[1][follows], earlier[2][follows] + 1)
    first = torch.nn.functional.pad(real[:, :1], (0, t - 1))  # [B,T] position 0
    start = (batch.columns == 0) & real  # [B,T] start special tokens
    pairs = TokenPairs(previous=previous, earlier=earlier, earlier_rows=_rows(earlier, real.shape),
                       induction=induction, induction_rows=_rows(induction, real.shape), first=key_targets(first),
                       start=key_targets(start), start_rows=previous & start.any(1, keepdim=True))
    return TokenPairs(**{name: tuple(to_device(x, device) for x in value) if isinstance(value, tuple)
                         else to_device(value, device) for name, value in vars(pairs).items()})  # without waiting


def earlier_occurrences(ids: torch.Tensor, real: torch.Tensor) -> Targets:
    """Every (b, i, j) with j < i real positions of sequence b holding the same id, in (b, i, j) order; from a stable
    sort of the real positions by (sequence, id), in which each position's earlier occurrences are the ones just
    before it in its group: O(N + B·T·log(B·T)), never a [B,T,T] comparison."""
    t = ids.shape[1]
    flat = real.flatten().nonzero().squeeze(1)  # [P] real positions b·T + i
    keys = ids.flatten()[flat] + (flat // t) * (int(ids.max()) + 1) if len(flat) else flat  # [P] (sequence, id)
    order = torch.sort(keys, stable=True).indices  # [P] by (sequence, id), positions in order within each
    sorted_keys = keys[order]
    start = torch.searchsorted(sorted_keys, sorted_keys)  # [P] where each one's group starts
    counts = torch.arange(len(order), device=ids.device) - start  # [P] earlier occurrences of each
    query = torch.repeat_interleave(torch.arange(len(order), device=ids.device), counts)  # [N] sorted index
    first = torch.cumsum(counts, 0) - counts  # [P] each one's first pair
    partner = start[query] + torch.arange(len(query), device=ids.device) - first[query]  # [N] sorted index
    i, j = flat[order[query]], flat[order[partner]]  # [N] b·T + position each
    pairs = torch.sort(i * t + j % t).values  # [N] (b, i, j) order
    return pairs // (t * t), pairs // t % t, pairs % t


def _rows(targets: Targets, shape: torch.Size) -> torch.Tensor:
    """[B,T] bool: the query rows with at least one of `targets`."""
    rows = torch.zeros(shape, dtype=torch.bool, device=targets[0].device)
    rows[targets[0], targets[1]] = True
    return rows


def mass_on(maps: LayerMaps, targets: Targets) -> torch.Tensor:
    """[B,H,T] each query row's attention on its targets, Σ_k A[b,h,i,k] over the targets (b, i, k) of row i."""
    b, i, k = targets
    rows = torch.zeros(*maps.batch.attention_mask.shape, maps.shape[1], device=maps.device)  # [B,T,H]
    if len(b):  # (no start token: sink's "start" has none)
        rows.index_put_((b, i), maps.entries(b, i, k), accumulate=True)
    return rows.transpose(1, 2)  # [B,H,T]


def key_targets(keys: torch.Tensor) -> Targets:
    """The targets of each query row's attention on the key positions `keys` [B,T] bool (the same keys for every row
    of a sequence): (b, i, j) for every key j of sequence b and every row i, keys in (b, j) order."""
    t = keys.shape[1]
    b, j = keys.nonzero(as_tuple=True)  # [N] each
    rows = torch.arange(t, device=keys.device).repeat(len(b))  # [N·T] every query row of each key
    return b.repeat_interleave(t), rows, j.repeat_interleave(t)


def previous_token(maps: LayerMaps) -> torch.Tensor:
    """[B,H,T] A[b,h,i,i-1], the attention on the token before (0 at i = 0)."""
    b, t = maps.batch.attention_mask.shape
    i = torch.arange(1, t, device=maps.device).repeat(b)  # [B·(T-1)]
    sequences = torch.arange(b, device=maps.device).repeat_interleave(t - 1)  # [B·(T-1)]
    values = maps.entries(sequences, i, i - 1).view(b, t - 1, maps.shape[1])  # [B,T-1,H]; none where T = 1
    return torch.nn.functional.pad(values.transpose(1, 2), (1, 0))  # [B,H,T]


def add_rows(probe: MeanAnalysis, maps: LayerMaps, measure: str, values: torch.Tensor, rows: torch.Tensor) -> None:
    """Add `measure`'s per-head mean over the query rows `rows` [B,T] bool of values [B,H,T], split by sequence for
    the bootstrap where it keeps replicates (probes.results.bootstrap)."""
    weights = rows.to(values.dtype)  # [B,T]
    per_sentence = (sentence_sums(values, weights), weights.sum(1)) if probe.bootstrap.replicates else None
    probe.add(maps, measure, row_sum(values, weights), rows.sum(), per_sentence=per_sentence)  # count: read at layer 0
