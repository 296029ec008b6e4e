"""Subword → word pooling: pooling matrices [B,C,T] applied as batched matrix products, or as segment sums over
each word's subwords for wide batches and a few rows of long inputs (no loops over tokens).

Segment sums are made by scatter_add_ on the CPU, which adds in index order. On CUDA scatter_add_ adds in any order
(probes.base.ordered), so a word of three subwords or more could get a sum that differs in its last bit from one run
to the next: there they are made by gathering each word's subwords into slots and summing the slots in order
(``Slots``), the same order on every run.

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
from probes.base.devices import to_device
from probes.base.ordered import in_order
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


@dataclass(frozen=True)
class Slots:
    """A pooling matrix [B,C,T] as fixed-order sums read it: position [B,C,K] the k-th subword of each word column
    (K the most subwords a word has in the batch; 0 past the word's own) and weight [B,C,K] its weight there (0 past
    them). A word's entry is Σ_k weight · value[position], summed over k in order."""

    position: torch.Tensor  # [B,C,K] int64
    weight: torch.Tensor  # [B,C,K] the pooling matrix's dtype

    def of(self, rows: slice | torch.Tensor) -> "Slots":
        """These Slots for the batch's sentences `rows` (a slice, or an index tensor [R]) alone."""
        return Slots(self.position[rows], self.weight[rows])

    def to(self, device: torch.device) -> "Slots":
        """On `device` (a copy the host does not wait for: probes.base.devices.to_device)."""
        return Slots(to_device(self.position, device), to_device(self.weight, device))


def slots(pooling: torch.Tensor) -> Slots:
    """The Slots of a pooling matrix [B,C,T] on the host (the batch's layout, host data: made there once a batch)."""
    b, c, _ = pooling.shape
    member = pooling != 0  # [B,C,T]
    rank = member.cumsum(-1) - 1  # [B,C,T] each subword's slot among its word's (where a member)
    count = max(1, int(member.sum(-1).max()))
    at = member.nonzero(as_tuple=True)  # [S] each: sentence, word column, subword of every member
    slot = (*at[:2], rank[at])  # [S] each: where each member goes in the slots
    position = torch.zeros(b, c, count, dtype=torch.long)
    weight = torch.zeros(b, c, count, dtype=pooling.dtype)
    position[slot] = at[2]
    weight[slot] = pooling[at]
    return Slots(position, weight)


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
                   slotted: Callable[[], tuple[Slots, Slots]] | None = None,
                   queries: Callable[[], torch.Tensor] | None = None) -> torch.Tensor:
    """One layer's subword attention [B,H,T,T] → word attention [B,H,C,C]: Q · A · Kᵀ for the query and key
    pooling matrices Q, K [B,C,T].

    Up to PRODUCT_WIDTH word columns, as two batched matrix products (the key side over every head's rows at
    once, then the query side per head): on CPU faster than segment sums at sentence lengths. Wider, as two
    segment sums (the key side over each word's columns, then the query side over its rows) in
    O(B·H·T·(T + C)), where the products cost O(B·H·T²·C): each subword belongs to one word, so each column of
    Q and K holds at most one nonzero, and a word's entry is the sum over its subwords of weight × value; the key
    side's sums [B,H,T,C] are made for part of the sentences at a time (``at_once``).
    segmented: gives the matrices as Segments (query's, key's), e.g. the batch's (Batch.segments); made from the
    matrices when needed and not given. slotted: the same as Slots (Batch.slots), read instead where the sums are
    made in order (``in_order``: on CUDA): the key side's values gathered into K slots a word, [n,H,T,C,K], summed
    over the slots, then the query side's likewise. queries: gives ``per_head(query, H)`` [B*H,C,T] (as large as a
    layer's key-side sums), where the caller keeps it for every layer of a batch; called by the products alone (made
    here when not given). Either way each sentence is computed on its own, so a subset of a batch's rows pools to
    the same values as the whole batch.

    scratch: where the key side's sums (or products) go (its "temporary"; None: fresh tensors). The result is a
    tensor of its own.
    """
    b, h, t, _ = attention.shape
    c = query.shape[1]
    if c > PRODUCT_WIDTH and in_order(attention.device):
        by_query, by_key = slotted() if slotted is not None else \
            (slots(query.cpu()).to(attention.device), slots(key.cpu()).to(attention.device))
        word = attention.new_empty(b, h, c, c)  # [B,H,C,C]
        k = max(by_query.position.shape[-1], by_key.position.shape[-1])
        step = at_once(-(-b // PARTS), h * t * c * k * attention.element_size(), attention.device)
        for start in range(0, b, step):
            rows = slice(start, start + step)
            keyed = slot_sum(attention[rows], by_key.of(rows), 3)  # [n,H,T,C]
            slot_sum(keyed, by_query.of(rows), 2, out=word[rows])  # [n,H,C,C]
        return word
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


def slot_sum(values: torch.Tensor, by: Slots, dim: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """Sums along `dim` (2 or 3: T subwords) of values [n,H,.,.] weighted by `by` (of the same n sentences), each
    word's slots summed in order: [n,H,C,T'] for dim 2, [n,H,T,C] for dim 3 (into `out` where given)."""
    n, h = values.shape[:2]
    c, k = by.position.shape[1:]
    weight = by.weight.to(values.dtype)
    if dim == 3:
        rows = values.shape[2]
        taken = values.gather(3, by.position.view(n, 1, 1, c * k).expand(n, h, rows, c * k))  # [n,H,T,C·K]
        return torch.sum(taken.view(n, h, rows, c, k).mul_(weight.view(n, 1, 1, c, k)), -1, out=out)
    columns = values.shape[3]
    taken = values.gather(2, by.position.view(n, 1, c * k, 1).expand(n, h, c * k, columns))  # [n,H,C·K,T']
    return torch.sum(taken.view(n, h, c, k, columns).mul_(weight.view(n, 1, c, k, 1)), 3, out=out)


def pool_vectors(context: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """One layer's subword context vectors [B,H,T,d] → word vectors [B,H,C,d]: query · V."""
    return query.to(context.dtype)[:, None] @ context
