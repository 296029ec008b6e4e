"""Subword → word pooling: pooling matrices [B,C,T] applied as batched matrix products, or as segment sums over
each word's subwords for wide batches and a few rows of long inputs (no loops over tokens).

Segment sums are made by scatter_add_, which on the CPU adds in index order. On CUDA it adds in any order
(probes.base.ordered): a word's first two subwords still sum the same on every run (0 + a + b is b + a), but a third
could make the sum differ in its last bit from one run to the next. So there each word's subwords past its second
(``Tail``) are left out of the scatter and summed apart, by one small matrix product a side, then added to their
word's sum: the same order on every run, and the CPU's own sums for every word of at most three subwords.

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
class Tail:
    """The subwords past each word's second, summed apart from the scatter where sums must come in a fixed order
    (``in_order``): position [B,E] each such subword's position (E the most a sentence has; 0 past a sentence's
    own), word [B,M] the column of each word they belong to (M the most such words a sentence has; C, the dropped
    extra column, past them), and weight [B,E,M] each subword's weight in its word's column (0 elsewhere and past
    them): the right operand of the product that sums them."""

    position: torch.Tensor  # [B,E] int64
    word: torch.Tensor  # [B,M] int64
    weight: torch.Tensor  # [B,E,M] the pooling matrix's dtype

    def of(self, rows: slice | torch.Tensor) -> "Tail":
        """This Tail for the batch's sentences `rows` (a slice, or an index tensor [R]) alone."""
        return Tail(self.position[rows], self.word[rows], self.weight[rows])

    def to(self, device: torch.device) -> "Tail":
        """On `device` (a copy the host does not wait for: probes.base.devices.to_device)."""
        return Tail(*(to_device(t, device) for t in (self.position, self.word, self.weight)))


@dataclass(frozen=True)
class Segments:
    """A pooling matrix [B,C,T] (one nonzero per subword at most) as its segment sums read it, made on the host once
    per batch (probes.encoding.batching.Batch.segments) for every layer's pooling: word [B,T] the word of each subword
    (C, a dropped extra word, for a subword of weight 0, and where a tail is kept for one past its word's second);
    weight [B,T] each subword's weight (its one nonzero), or None where every weight is 0 or 1 (sum, first: a
    multiplication would change nothing); tail the subwords past each word's second, summed apart (``Tail``), where
    the sums must come in a fixed order and a word has three subwords or more, else None."""

    word: torch.Tensor  # [B,T] int64
    weight: torch.Tensor | None  # [B,T] the pooling matrix's dtype, or None
    width: int  # C
    tail: Tail | None = None

    def of(self, rows: slice | torch.Tensor) -> "Segments":
        """These Segments for the batch's sentences `rows` (a slice, or an index tensor [R]) alone."""
        return Segments(self.word[rows], None if self.weight is None else self.weight[rows], self.width,
                        None if self.tail is None else self.tail.of(rows))

    def to(self, device: torch.device) -> "Segments":
        """On `device` (copies the host does not wait for)."""
        return Segments(to_device(self.word, device), None if self.weight is None else to_device(self.weight, device),
                        self.width, None if self.tail is None else self.tail.to(device))


def segments(pooling: torch.Tensor, ordered: bool = False) -> Segments:
    """The Segments of a pooling matrix [B,C,T]; ordered: with the subwords past each word's second kept apart in a
    Tail (where there are any), for sums made in a fixed order. Past the matrix's two reductions, the work is on
    [B,T]: a batch of long inputs makes its Segments in milliseconds."""
    weight = pooling.sum(1)  # [B,T] each subword's weight (its one nonzero)
    width = pooling.shape[1]
    word = torch.where(weight != 0, pooling.argmax(1), width)  # [B,T]
    trivial = bool(((weight == 0) | (weight == 1)).all())
    late = (_rank(word, width) >= 2) & (word < width) if ordered else None  # [B,T] a word's third subword on
    if late is None or not bool(late.any()):
        return Segments(word, None if trivial else weight, width)
    return Segments(word.masked_fill(late, width), None if trivial else weight, width, _tail(word, weight, late, width))


def _rank(word: torch.Tensor, width: int) -> torch.Tensor:
    """[B,T] each subword's place among its word's subwords (in position order), for word [B,T] (the word of each
    subword; `width` for none)."""
    b, t = word.shape
    order = torch.sort(word, dim=1, stable=True).indices  # [B,T] the subwords grouped by word, in position order
    grouped = word.gather(1, order)  # [B,T]
    place = torch.arange(t).expand(b, t)  # [B,T]
    first = torch.ones_like(grouped, dtype=torch.bool)
    first[:, 1:] = grouped[:, 1:] != grouped[:, :-1]  # [B,T] where each word's group starts
    begins = torch.where(first, place, 0).cummax(1).values  # [B,T] the start of the group each place is in
    return torch.empty_like(order).scatter_(1, order, place - begins)


def _tail(word: torch.Tensor, weight: torch.Tensor, late: torch.Tensor, width: int) -> Tail:
    """The Tail of the subwords `late` [B,T], of words word [B,T] (of `width` columns) and weights weight [B,T] (on
    the host)."""
    b = len(word)
    sentence, position = late.nonzero(as_tuple=True)  # [S] each, by sentence, then position
    keys, slot = torch.unique(sentence * width + word[sentence, position], return_inverse=True)  # [W], [S]
    long_sentence, long_column = keys // width, keys % width  # [W] each long word's sentence and column
    place = _within(long_sentence, b)  # [W] each long word's place among its sentence's
    index = _within(sentence, b)  # [S] each subword's place among its sentence's
    words = torch.full((b, int(place.max()) + 1), width, dtype=torch.long)  # [B,M]: C, the dropped column, past them
    words[long_sentence, place] = long_column
    positions = torch.zeros(b, int(index.max()) + 1, dtype=torch.long)  # [B,E]
    positions[sentence, index] = position
    weights = torch.zeros(b, positions.shape[1], words.shape[1], dtype=weight.dtype)  # [B,E,M]
    weights[sentence, index, place[slot]] = weight[sentence, position]
    return Tail(positions, words, weights)


def _within(sentence: torch.Tensor, b: int) -> torch.Tensor:
    """[S] each item's place among its sentence's, for items [S] sorted by their sentence (of b)."""
    counts = torch.bincount(sentence, minlength=b)  # [B]
    return torch.arange(len(sentence)) - (counts.cumsum(0) - counts)[sentence]


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
    segmented: gives the matrices as Segments (query's, key's), e.g. the batch's (Batch.segments: on CUDA with
    their tails, ``in_order``); made from the matrices when needed and not given. queries: gives
    ``per_head(query, H)`` [B*H,C,T] (as large as a layer's key-side sums), where the caller keeps it for every layer
    of a batch; called by the products alone (made here when not given). Either way each sentence is computed on its
    own, so a subset of a batch's rows pools to the same values as the whole batch.

    scratch: where the key side's sums (or products) go (its "temporary"; None: fresh tensors). The result is a
    tensor of its own.
    """
    b, h, t, _ = attention.shape
    c = query.shape[1]
    if c > PRODUCT_WIDTH:
        ordered = in_order(attention.device)
        by_query, by_key = segmented() if segmented is not None else \
            tuple(segments(p.cpu(), ordered).to(attention.device) for p in (query, key))
        word = attention.new_zeros(b, h, c + 1, c)  # [B,H,C+1,C]: row C sums the rows of the dropped word
        tails = [s.tail.position.shape[1] for s in (by_query, by_key) if s.tail is not None]  # the most E
        step = at_once(-(-b // PARTS), h * t * (c + 1 + max(tails, default=0)) * attention.element_size(),
                       attention.device)
        for start in range(0, b, step):
            rows = slice(start, start + step)
            part = attention[rows]  # [n,H,T,T]
            keyed = (scratch or _fresh)("temporary", (part.shape[0], h, t, c + 1), part.dtype, part.device).zero_()
            segment_sum(part, by_key.of(rows), 3, keyed)  # [n,H,T,C+1]
            segment_sum(keyed.narrow(3, 0, c), by_query.of(rows), 2, word[rows], in_place=True)
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


def segment_sum(values: torch.Tensor, pooling: Segments, dim: int, into: torch.Tensor, in_place: bool = False) -> None:
    """Add to `into` (C+1 words along `dim`, the last the dropped word's; zeroed by the caller) the sums along `dim`
    (2 or 3: T subwords) of values [n,H,.,.] weighted by `pooling` (of the same n sentences). in_place: the weights
    multiply `values` itself (a temporary of the caller's) rather than a copy of it. A tail's sums are made first,
    from the values as given, and added to their words' sums last: one addition to each, the same on every run."""
    tail = None if pooling.tail is None else _tail_sum(values, pooling.tail, dim)
    shape = [values.shape[0], 1, 1, 1]
    shape[dim] = values.shape[dim]
    if pooling.weight is not None:
        weight = pooling.weight.to(values.dtype).view(shape)
        values = values.mul_(weight) if in_place else values * weight
    into.scatter_add_(dim, pooling.word.view(shape).expand_as(values), values)
    if tail is not None:
        shape[dim] = pooling.tail.word.shape[1]  # M
        into.scatter_add_(dim, pooling.tail.word.view(shape).expand_as(tail), tail)


def _tail_sum(values: torch.Tensor, tail: Tail, dim: int) -> torch.Tensor:
    """The tail's words' sums along `dim` (2 or 3) of values [n,H,.,.] (of the tail's n sentences): [n,H,M,T'] for
    dim 2, [n,H,T,M] for dim 3, each a product of the tail's subwords' values [.., E, ..] and its weights [E,M]."""
    n, h = values.shape[:2]
    e, m = tail.weight.shape[1:]
    weight = tail.weight.to(values.dtype)  # [n,E,M]
    if dim == 3:
        rows = values.shape[2]
        taken = values.gather(3, tail.position.view(n, 1, 1, e).expand(n, h, rows, e))  # [n,H,T,E]
        return torch.bmm(taken.view(n, h * rows, e), weight).view(n, h, rows, m)
    columns = values.shape[3]
    taken = values.gather(2, tail.position.view(n, 1, e, 1).expand(n, h, e, columns))  # [n,H,E,T']
    across = weight.transpose(1, 2)[:, None].expand(n, h, m, e).reshape(n * h, m, e)  # [n·H,M,E]
    return torch.bmm(across, taken.view(n * h, e, columns)).view(n, h, m, columns)


def pool_vectors(context: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """One layer's subword context vectors [B,H,T,d] → word vectors [B,H,C,d]: query · V."""
    return query.to(context.dtype)[:, None] @ context
