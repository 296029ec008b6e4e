"""Subword → word pooling as segment sums over each word's subwords (no loops over tokens).

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

import torch

from probes.choices import parse_rule
from probes.scratch import Scratch



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
    batch (probes.batching.Batch.segments) for every layer's pooling: word [B,T] the word of each subword (C,
    a dropped extra word, for a subword of weight 0); weight [B,T] each subword's weight (its one nonzero), or
    None where every weight is 0 or 1 (sum, first: a multiplication would change nothing)."""

    word: torch.Tensor  # [B,T] int64
    weight: torch.Tensor | None  # [B,T] the pooling matrix's dtype, or None
    width: int  # C


def segments(pooling: torch.Tensor) -> Segments:
    """The Segments of a pooling matrix [B,C,T]."""
    weight = pooling.sum(1)  # [B,T] each subword's weight (its one nonzero)
    width = pooling.shape[1]
    word = torch.where(weight != 0, pooling.argmax(1), width)  # [B,T]
    trivial = bool(((weight == 0) | (weight == 1)).all())
    return Segments(word, None if trivial else weight, width)


def pool_attention(attention: torch.Tensor, query: Segments, key: Segments,
                   scratch: Scratch | None = None, keep: Scratch | None = None) -> torch.Tensor:
    """One layer's subword attention [B,H,T,T] → word attention [B,H,C,C]: Q · A · Kᵀ for the query and key
    pooling matrices Q, K [B,C,T] (given as their Segments), computed as two segment sums (the key side over
    each word's columns, then the query side over its rows) in O(B·H·T·(T + C)), where the matrix products
    cost O(B·H·T²·C).

    Each subword belongs to one word, so each column of Q and K holds at most one nonzero: a word's entry
    is the sum over its subwords of weight × value, the products of the matrix form, added in position
    order.

    scratch: where the key side's sums go (its "temporary"); keep: where the result goes (its
    "word_attention"), e.g. memory reused layer after layer (probes.batching.Batch.scratch), the result then
    holding only until the next layer's. None: fresh tensors.
    """
    keyed = _segment_sum(attention, key, dim=3, scratch=scratch, name="temporary")  # [B,H,T,C], weighted in place
    return _segment_sum(keyed, query, dim=2, in_place=True, scratch=keep, name="word_attention")  # [B,H,C,C]


def _segment_sum(values: torch.Tensor, pooling: Segments, dim: int, in_place: bool = False,
                 scratch: Scratch | None = None, name: str = "") -> torch.Tensor:
    """Σ along `dim` (T subwords) of values [B,H,.,.] weighted by `pooling`, into C words along `dim`.
    in_place: the weights multiply `values` itself (a temporary of the caller's) rather than a copy of it.
    scratch: the sums go to scratch(name, ...), zeroed first, instead of a fresh tensor."""
    shape = [values.shape[0], 1, 1, 1]
    shape[dim] = values.shape[dim]
    if pooling.weight is not None:
        weight = pooling.weight.to(values.dtype).view(shape)
        values = values.mul_(weight) if in_place else values * weight
    sized = list(values.shape)
    sized[dim] = pooling.width + 1
    if scratch is None:
        summed = values.new_zeros(sized)
    else:
        summed = scratch(name, tuple(sized), values.dtype, values.device).zero_()
    summed.scatter_add_(dim, pooling.word.view(shape).expand_as(values), values)
    return summed.narrow(dim, 0, pooling.width)


def pool_vectors(context: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """One layer's subword context vectors [B,H,T,d] → word vectors [B,H,C,d]: query · V."""
    return query.to(context.dtype)[:, None] @ context
