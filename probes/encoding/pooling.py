"""Subword → word pooling: pooling matrices [B,C,T] applied as batched matrix products, or as segment sums over
each word's subwords for wide batches and a few rows of long inputs (no loops over tokens).

A pooling rule is "QUERY-KEY": how the rows of a word's subwords combine into the word's row
(attention FROM the word), and how their columns combine into its column (attention TO it).

    mean-sum   (default; Clark et al. 2019) row = mean of the subwords' rows, column = sum of their
               columns: each word row still sums to 1 over words + special columns.
    first-sum  row of the first subword, columns summed.
    last-sum   row of the last subword, columns summed.
    mean-mean  rows averaged, columns averaged (rows no longer sum to 1).
    first      row and column of the first subword only (= first-first).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from probes.base.choices import parse_rule
from probes.base.scratch import Scratch



def pooling_matrices(columns: torch.Tensor, width: int, rule: str = "mean-sum") -> tuple[torch.Tensor, torch.Tensor]:
    """Query and key pooling matrices [B,C,T] from the word column of each subword ([B,T], -1 = padding)."""
    query_rule, key_rule = parse_rule(rule)
    onehot = torch.zeros(columns.shape[0], width, columns.shape[1], device=columns.device)  # [B,C,T]
    valid = columns >= 0
    onehot.scatter_(1, columns.clamp(min=0).unsqueeze(1), valid.unsqueeze(1).float())
    return _combine(onehot, query_rule), _combine(onehot, key_rule)


def _combine(onehot: torch.Tensor, rule: str) -> torch.Tensor:
    if rule == "sum":
        return onehot
    if rule == "mean":
        return onehot / onehot.sum(-1, keepdim=True).clamp(min=1)
    position = torch.arange(onehot.shape[-1], device=onehot.device, dtype=onehot.dtype)
    if rule == "first":
        pick = (onehot * (position.max() + 1 - position)).argmax(-1, keepdim=True)  # [B,C,1]
    else:  # last
        pick = (onehot * (position + 1)).argmax(-1, keepdim=True)
    return torch.zeros_like(onehot).scatter_(-1, pick, 1.0) * (onehot.sum(-1, keepdim=True) > 0)


@dataclass(frozen=True)
class Segments:
    """A pooling matrix [B,C,T] (one nonzero per subword at most) as its segment sums read it, made once per
    batch (probes.encoding.batching.Batch.segments) for every layer's pooling: word [B,T] the word of each subword (C,
    a dropped extra word, for a subword of weight 0); weight [B,T] each subword's weight (its one nonzero), or
    None where every weight is 0 or 1 (sum, first: a multiplication would change nothing)."""

    word: torch.Tensor  # [B,T] int64
    weight: torch.Tensor | None  # [B,T] the pooling matrix's dtype, or None
    width: int  # C

    def of(self, rows: slice | torch.Tensor) -> "Segments":
        """These Segments for the batch's sentences `rows` (a slice, or an index tensor [R]) alone."""
        return Segments(self.word[rows], None if self.weight is None else self.weight[rows], self.width)


def segments(pooling: torch.Tensor) -> Segments:
    """The Segments of a pooling matrix [B,C,T]."""
    weight = pooling.sum(1)  # [B,T] each subword's weight (its one nonzero)
    width = pooling.shape[1]
    word = torch.where(weight != 0, pooling.argmax(1), width)  # [B,T]
    trivial = bool(((weight == 0) | (weight == 1)).all())
    return Segments(word, None if trivial else weight, width)


PRODUCT_WIDTH = 64  # word columns up to which pool_attention uses matrix products (the crossover with segment sums: docs/benchmarks.md)
# a layer-sized temporary (the key side's sums of pool_attention, entropy's a·ln a, the views' quantised maps) is made
# for part of the batch's sentences at a time (``at_once``): on the CPU for at most 1/PARTS of them, so that a layer
# holds its map, its word-level map and an eighth of a map, never a second map; on CUDA for as many as PART_BYTES hold
# where that is more: there each part costs the host its operations' launches, which the device waits for, while
# memory is to spare at the default token budget (probes.encoding.batching.DEVICE_TOKENS)
PARTS = 8
PART_BYTES = 1 << 28


def at_once(step: int, row_bytes: int, device: torch.device) -> int:
    """The sentences a layer-sized temporary is made for at a time: `step` (the CPU's rule, at least 1), or on CUDA
    as many as PART_BYTES hold at `row_bytes` a sentence, where that is more."""
    if device.type == "cuda":
        step = max(step, PART_BYTES // max(row_bytes, 1))
    return max(1, step)


def pool_attention(attention: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                   scratch: Scratch | None = None, *,
                   segmented: Callable[[], tuple[Segments, Segments]] | None = None,
                   queries: Callable[[], torch.Tensor] | None = None) -> torch.Tensor:
    """One layer's subword attention [B,H,T,T] → word attention [B,H,C,C]: Q · A · Kᵀ for the query and key
    pooling matrices Q, K [B,C,T].

    Up to PRODUCT_WIDTH word columns, as two batched matrix products (the key side over every head's rows at
    once, then the query side per head): on CPU faster than segment sums at sentence lengths. Wider, as two
    segment sums (the key side over each word's columns, then the query side over its rows) in
    O(B·H·T·(T + C)), where the products cost O(B·H·T²·C): each subword belongs to one word, so each column of
    Q and K holds at most one nonzero, and a word's entry is the sum over its subwords of weight × value; the key
    side's sums [B,H,T,C] are made for part of the sentences at a time (``at_once``).
    segmented: gives the matrices as Segments (query's, key's), e.g. the batch's (Batch.segments); made from
    the matrices when needed and not given. queries: gives ``per_head(query, H)`` [B*H,C,T] (as large as a
    layer's key-side sums), where the caller keeps it for every layer of a batch; called by the products alone
    (made here when not given). Either way each sentence is computed on its own, so a subset of a batch's rows
    pools to the same values as the whole batch.

    scratch: where the key side's sums (or products) go (its "temporary"; None: fresh tensors). The result is a
    tensor of its own.
    """
    b, h, t, _ = attention.shape
    c = query.shape[1]
    if c > PRODUCT_WIDTH:
        by_query, by_key = segmented() if segmented is not None else (segments(query), segments(key))
        word = attention.new_zeros(b, h, c + 1, c)  # [B,H,C+1,C]: row C sums the rows of the dropped word
        step = at_once(-(-b // PARTS), h * t * (c + 1) * attention.element_size(), attention.device)
        for start in range(0, b, step):
            rows = slice(start, start + step)
            part = attention[rows]  # [n,H,T,T]
            keyed = (scratch or _fresh)("temporary", (part.shape[0], h, t, c + 1), part.dtype, part.device).zero_()
            _segment_sum(part, by_key.of(rows), 3, keyed)  # [n,H,T,C+1]
            _segment_sum(keyed.narrow(3, 0, c), by_query.of(rows), 2, word[rows], in_place=True)
        return word.narrow(2, 0, c)  # [B,H,C,C]
    dtype, device = attention.dtype, attention.device
    keyed = (scratch or _fresh)("temporary", (b, h * t, c), dtype, device)  # [B,H*T,C]
    torch.bmm(attention.reshape(b, h * t, t), key.to(dtype).transpose(1, 2), out=keyed)
    queries = per_head(query, h, dtype) if queries is None else queries()  # [B*H,C,T]
    word = torch.empty(b * h, c, c, dtype=dtype, device=device)  # [B*H,C,C]
    torch.bmm(queries, keyed.view(b * h, t, c), out=word)
    return word.view(b, h, c, c)


def per_head(query: torch.Tensor, heads: int, dtype: torch.dtype) -> torch.Tensor:
    """[B*H,C,T] the query pooling matrix [B,C,T] in `dtype`, repeated for each of `heads` heads: the left operand
    of pool_attention's second product."""
    b, c, t = query.shape
    return query.to(dtype)[:, None].expand(b, heads, c, t).reshape(b * heads, c, t)


def _fresh(name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A Scratch that always gives a new tensor."""
    return torch.empty(shape, dtype=dtype, device=device)


def _segment_sum(values: torch.Tensor, pooling: Segments, dim: int, into: torch.Tensor, in_place: bool = False) -> None:
    """Add to `into` (C+1 words along `dim`, the last the dropped word's; zeroed by the caller) the sums along `dim`
    (T subwords) of values [n,H,.,.] weighted by `pooling` (of the same n sentences). in_place: the weights multiply
    `values` itself (a temporary of the caller's) rather than a copy of it."""
    shape = [values.shape[0], 1, 1, 1]
    shape[dim] = values.shape[dim]
    if pooling.weight is not None:
        weight = pooling.weight.to(values.dtype).view(shape)
        values = values.mul_(weight) if in_place else values * weight
    into.scatter_add_(dim, pooling.word.view(shape).expand_as(values), values)


def pool_vectors(context: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """One layer's subword context vectors [B,H,T,d] → word vectors [B,H,C,d]: query · V."""
    return query.to(context.dtype)[:, None] @ context
