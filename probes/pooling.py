"""Subword → word pooling as batched matrix products (no loops over tokens).

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

import torch

QUERY_RULES = ("mean", "first", "last")
KEY_RULES = ("sum", "mean", "first")
POOLING_RULES = ("mean-sum", "first-sum", "last-sum", "mean-mean", "first")


def parse_rule(rule: str) -> tuple[str, str]:
    if rule == "first":
        return "first", "first"
    query, _, key = rule.partition("-")
    if query not in QUERY_RULES or key not in KEY_RULES:
        raise ValueError(f"unknown pooling rule {rule!r}; choose one of {', '.join(POOLING_RULES)}")
    return query, key


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


def pool_attention(attention: torch.Tensor, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """One layer's subword attention [B,H,T,T] → word attention [B,H,C,C]: query · A · keyᵀ.

    Two batched GEMMs over the whole batch (batch dimension B only, so BLAS sees large matrices):
    A·keyᵀ as [B, H·T, T] @ [B, T, C], then query · (that) as [B, C, T] @ [B, T, H·C].
    """
    b, heads, t, _ = attention.shape
    c = query.shape[1]
    to_words = torch.bmm(attention.reshape(b, heads * t, t), key.to(attention.dtype).transpose(1, 2))  # [B,HT,C]
    to_words = to_words.view(b, heads, t, c).transpose(1, 2).reshape(b, t, heads * c)  # [B,T,HC]
    pooled = torch.bmm(query.to(attention.dtype), to_words)  # [B,C,HC]
    return pooled.view(b, c, heads, c).transpose(1, 2)  # [B,H,C,C]


def pool_vectors(context: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """One layer's subword context vectors [B,H,T,d] → word vectors [B,H,C,d]: query · V."""
    return query.to(context.dtype)[:, None] @ context
