"""The token-level view of a batch that the analyses share, built once per batch.

Shapes: B sentences, L layers, H heads, T subword positions (padded).
"""
from __future__ import annotations

import unicodedata
import weakref
from dataclasses import dataclass
from functools import cached_property

import torch

from probes.batching import Batch

_VIEWS: "weakref.WeakKeyDictionary[Batch, TokenView]" = weakref.WeakKeyDictionary()


@dataclass
class TokenView:
    attention: torch.Tensor  # [B,L,H,T,T] attention probabilities (rows: from, columns: to)
    real: torch.Tensor  # [B,T] bool: the sentence's tokens (not padding)
    start: torch.Tensor  # [B,T] bool: start special tokens ([CLS], <s>): word column 0
    end: torch.Tensor  # [B,T] bool: every later special token ([SEP], </s>, the separator of a pair)
    punct: torch.Tensor  # [B,T] bool: subwords of words made only of punctuation (Unicode category P*)
    lengths: torch.Tensor  # [B] real tokens per sentence

    @cached_property
    def argmax(self) -> torch.Tensor:
        """[B,L,H,T] each row's most attended token (padding holds no weight, so it is never the argmax)."""
        return self.attention.argmax(-1)

    @property
    def special(self) -> torch.Tensor:
        """[B,T] bool: start and end special tokens."""
        return self.start | self.end

    @property
    def words(self) -> torch.Tensor:
        """[B,T] bool: subwords of the sentence's words."""
        return self.real & ~self.special

    def row_weights(self) -> torch.Tensor:
        """[B,T] float: 1 on real query rows, 0 on padding."""
        return self.real.to(self.attention.dtype)

    def neighbour_mass(self, words_only: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's weight on the previous and on the next token: two [B,L,H,T] (0 where there is none;
        the last real token's next position is padding, which holds no weight). words_only: count a
        neighbour only when it is a word's subword, not a special token."""
        a = self.attention
        prev = torch.nn.functional.pad(a.diagonal(-1, -2, -1), (1, 0))  # [B,L,H,T]: A[i, i-1]
        nxt = torch.nn.functional.pad(a.diagonal(1, -2, -1), (0, 1))  # [B,L,H,T]: A[i, i+1]
        if words_only:
            words = self.words.to(a.dtype)
            prev = prev * torch.nn.functional.pad(words[:, :-1], (1, 0))[:, None, None]  # key i-1 is a word
            nxt = nxt * torch.nn.functional.pad(words[:, 1:], (0, 1))[:, None, None]  # key i+1 is a word
        return prev, nxt


def token_view(batch: Batch) -> TokenView:
    """The batch's TokenView (cached for the batch's lifetime, so the analyses of one run share it)."""
    view = _VIEWS.get(batch)
    if view is None:
        view = _VIEWS[batch] = _build(batch)
    return view


def _build(batch: Batch) -> TokenView:
    attention = torch.stack(tuple(batch.attentions), dim=1).float()  # [B,L,H,T,T]
    columns = batch.columns.to(attention.device)  # [B,T]
    real = batch.attention_mask.to(attention.device).bool()
    start = real & (columns == 0)
    end = real & (columns == batch.end_column)
    punct_words = torch.zeros(len(batch.sentences), batch.width, dtype=torch.bool)  # [B,C]
    for b, sentence in enumerate(batch.sentences):
        punct_words[b, 1:len(sentence.words) + 1] = torch.tensor([is_punctuation(w) for w in sentence.words])
    punct = real & ~start & ~end & punct_words.to(attention.device).gather(1, columns.clamp(min=0))
    return TokenView(attention=attention, real=real, start=start, end=end, punct=punct, lengths=real.sum(1))


def is_punctuation(word: str) -> bool:
    """True for a word made only of punctuation characters (Unicode categories Pc Pd Ps Pe Pi Pf Po)."""
    return bool(word) and all(unicodedata.category(ch).startswith("P") for ch in word)
