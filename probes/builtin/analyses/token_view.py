"""The token-level view of one layer that the analyses share: the batch's token masks and the layer's attention.

Shapes: B sentences, H heads, T subword positions (padded).

The masks (real tokens, special tokens, punctuation, lengths) depend on the batch alone: they are
built once per batch (``Batch.memo``) and shared by every layer and every analysis of the run.
Per-row values are computed from the float32 maps; sums over rows and sentences are float64 (``row_sum``).
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from probes.base.devices import to_device
from probes.encoding.batching import Batch
from probes.capture.maps import LayerMaps


@dataclass(frozen=True)
class TokenMasks:
    """Which subword positions of a batch are what (every mask [B,T] bool)."""

    real: torch.Tensor  # the sentence's tokens (not padding)
    start: torch.Tensor  # start special tokens ([CLS], <s>): word column 0
    end: torch.Tensor  # every later special token ([SEP], </s>, the separator of a pair)
    punct: torch.Tensor  # subwords of words made only of punctuation (Unicode category P*)
    lengths: torch.Tensor  # [B] real tokens per sentence

    @property
    def special(self) -> torch.Tensor:
        """[B,T] bool: start and end special tokens."""
        return self.start | self.end

    @property
    def words(self) -> torch.Tensor:
        """[B,T] bool: subwords of the sentence's words."""
        return self.real & ~self.special


def token_masks(batch: Batch, device: torch.device) -> TokenMasks:
    """The batch's TokenMasks on `device`, built once per batch and device."""
    return batch.memo(("analyses.token_masks", device), lambda: _build(batch, device))


def _build(batch: Batch, device: torch.device) -> TokenMasks:
    columns = to_device(batch.columns, device)  # [B,T], copied without the host waiting
    real = to_device(batch.attention_mask, device).bool()
    start = real & (columns == 0)
    end = real & (columns == batch.end_column)
    punct_words = np.zeros((len(batch.sentences), batch.width), dtype=bool)  # [B,C], made on the host
    for b, sentence in enumerate(batch.sentences):
        punct_words[b, 1:len(sentence.words) + 1] = [is_punctuation(w) for w in sentence.words]
    punct = real & ~start & ~end & to_device(torch.from_numpy(punct_words), device).gather(1, columns.clamp(min=0))
    return TokenMasks(real=real, start=start, end=end, punct=punct, lengths=real.sum(1))


class TokenView:
    """One layer of a batch at token level: ``attention`` [B,H,T,T] (float32; rows: from, columns: to)
    and the batch's ``masks``."""

    def __init__(self, maps: LayerMaps):
        self.attention = maps.attention.float()  # [B,H,T,T]
        self.masks = token_masks(maps.batch, self.attention.device)

    @cached_property
    def argmax(self) -> torch.Tensor:
        """[B,H,T] each row's most attended token (padding holds no weight, so it is never the argmax)."""
        return self.attention.argmax(-1)

    def row_weights(self) -> torch.Tensor:
        """[B,T] float: 1 on real query rows, 0 on padding."""
        return self.masks.real.to(self.attention.dtype)

    def neighbour_mass(self, words_only: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's weight on the previous and on the next token: two [B,H,T] (0 where there is none;
        the last real token's next position is padding, which holds no weight). words_only: count a
        neighbour only when it is a word's subword, not a special token."""
        a = self.attention
        prev = torch.nn.functional.pad(a.diagonal(-1, -2, -1), (1, 0))  # [B,H,T]: A[i, i-1]
        nxt = torch.nn.functional.pad(a.diagonal(1, -2, -1), (0, 1))  # [B,H,T]: A[i, i+1]
        if words_only:
            words = self.masks.words.to(a.dtype)
            prev = prev * torch.nn.functional.pad(words[:, :-1], (1, 0))[:, None]  # key i-1 is a word
            nxt = nxt * torch.nn.functional.pad(words[:, 1:], (0, 1))[:, None]  # key i+1 is a word
        return prev, nxt


def row_sum(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """[H] float64: Σ over sentences b and query rows i of values[b,h,i] · rows[b,i] (values [B,H,T], rows [B,T]).

    The per-row values come from the float32 maps; the sum over rows is float64, so that the sums do not
    depend on how the corpus is cut into batches (a float32 sum of a batch's rows would, by ~1e-7 of it)."""
    return torch.einsum("bhi,bi->h", values.double(), rows.double())


def sentence_sums(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """[B,H] float64: ``row_sum`` per sentence, Σ over query rows i of values[b,h,i] · rows[b,i] (for the bootstrap)."""
    return torch.einsum("bhi,bi->bh", values.double(), rows.double())


def is_punctuation(word: str) -> bool:
    """True for a word made only of punctuation characters (Unicode categories Pc Pd Ps Pe Pi Pf Po)."""
    return bool(word) and all(unicodedata.category(ch).startswith("P") for ch in word)
