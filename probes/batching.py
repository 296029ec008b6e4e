"""Tokenising pre-split words, word↔subword alignment, and length-sorted batches.

Column layout of word-level maps (W = longest sentence of the batch, in words):
    column 0        the start special token ([CLS], <s>): the dependency root
    columns 1..n    the sentence's words, so CoNLL-U IDs index columns directly
    column W+1      the end special token(s) ([SEP], </s>): kept, never a target
Columns n+1..W of a shorter sentence are padding (all zero).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Hashable

import numpy as np
import torch

from probes.corpus.sentence import Sentence
from probes.pooling import pooling_matrices

PAD_COLUMN = -1
END_COLUMN = -2  # placeholder for end specials until the batch width is known


@dataclass
class Encoded:
    """One tokenised sentence."""

    index: int  # position in the corpus
    input_ids: list[int]
    columns: np.ndarray  # [T] word column of each subword (0 start special, 1..n words, END_COLUMN end specials)
    offsets: np.ndarray | None = None  # [T,2] character span of each subword: in its word (pre-split words) or in
    #                                     the sentence's ann["text"] (raw-text input); (0, 0) for special tokens
    token_type_ids: list[int] | None = None  # segment id of each subword, for sentence pairs (probes.pair_encoding)


def encode(tokenizer, sentences: list[Sentence], max_length: int) -> tuple[list[Encoded], dict[str, int]]:
    """Tokenise every sentence; return those that fit and the counts of those skipped, by reason."""
    skipped: dict[str, int] = {}
    if not sentences:
        return [], skipped
    if any("pair" in s.ann for s in sentences):
        from probes.pair_encoding import encode_pairs

        return encode_pairs(tokenizer, sentences, max_length)
    enc = tokenizer([s.words for s in sentences], is_split_into_words=True, add_special_tokens=True,
                    truncation=False, return_attention_mask=False, return_token_type_ids=False,
                    return_offsets_mapping=True)
    kept = []
    for i, sentence in enumerate(sentences):
        ids = enc["input_ids"][i]
        word_ids = np.array([-1 if w is None else w for w in enc.word_ids(i)])
        reason = unusable(ids, word_ids, len(sentence.words), max_length)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        kept.append(Encoded(index=i, input_ids=ids, columns=_columns(word_ids),
                            offsets=np.array(enc["offset_mapping"][i], dtype=np.int64).reshape(-1, 2)))
    return kept, skipped


def unusable(ids: list[int], word_ids: np.ndarray, n_words: int, max_length: int) -> str | None:
    """Why a tokenised sentence cannot be scored (too long for the model, or a word with no subword), or None."""
    if len(ids) > max_length:
        return "too_long"
    if np.bincount(word_ids[word_ids >= 0], minlength=n_words).min(initial=1) == 0:
        return "word_without_subwords"
    return None


def _columns(word_ids: np.ndarray) -> np.ndarray:
    """Word column per subword: words → 1..n, specials before the first word → 0, after → END_COLUMN."""
    cols = word_ids + 1
    special = word_ids < 0
    first_word = np.argmax(~special) if (~special).any() else len(word_ids)
    before = special & (np.arange(len(word_ids)) < first_word)
    cols[special] = END_COLUMN
    cols[before] = 0
    return cols


def length_sorted_batches(encoded: list[Encoded], batch_size: int) -> list[list[Encoded]]:
    """Sort by subword length (ties by corpus order) and cut into batches."""
    ordered = sorted(encoded, key=lambda e: (len(e.input_ids), e.index))
    return [ordered[i:i + batch_size] for i in range(0, len(ordered), batch_size)]


class Batch:
    """One forward pass's worth of sentences: the model's inputs and the word↔subword layout.

    Token level:  input_ids, attention_mask [B,T]; columns [B,T] (PAD_COLUMN on padding).
    The maps of each layer come separately, as ``probes.maps.LayerMaps``.
    offsets:      per sentence, [T_b,2] character span of each subword (see ``Encoded.offsets``), or None;
                  tokenized_from says what they index: "words" (each word) or "text" (ann["text"]).
    unk_token_id: the tokenizer's unknown-token id (None where not known).
    twin:         the word-shuffled twin of this batch (see probes.shuffle), or None; a twin has
                  position_of [B,T] (original position → position in the twin) and shuffled [B] (whether
                  the sentence's order changed).
    """

    def __init__(self, sentences: list[Sentence], columns: list[np.ndarray], *, pool: str = "mean-sum",
                 input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                 indices: list[int] | None = None, offsets: list[np.ndarray] | None = None,
                 tokenized_from: str = "words", unk_token_id: int | None = None,
                 token_type_ids: torch.Tensor | None = None, twin: "Batch | None" = None,
                 position_of: torch.Tensor | None = None, shuffled: torch.Tensor | None = None):
        """columns[b]: word column of each subword of sentence b (see ``Encoded.columns``)."""
        self.sentences = sentences
        self.indices = indices if indices is not None else list(range(len(sentences)))
        self.n_words = torch.tensor([len(s.words) for s in sentences])  # [B]
        self.width = int(self.n_words.max()) + 2  # C
        length = max(len(c) for c in columns)
        padded = torch.full((len(sentences), length), PAD_COLUMN, dtype=torch.long)
        for row, c in enumerate(columns):
            padded[row, :len(c)] = torch.as_tensor(c, dtype=torch.long)
        self.columns = padded.masked_fill(padded == END_COLUMN, self.width - 1)  # [B,T]
        self.input_ids = input_ids  # [B,T]
        self.attention_mask = attention_mask if attention_mask is not None else (padded != PAD_COLUMN).long()  # [B,T]
        self.token_type_ids = token_type_ids  # [B,T] segment ids of sentence pairs, else None
        self.pool = pool
        self.offsets = offsets
        self.tokenized_from = tokenized_from
        self.unk_token_id = unk_token_id  # the tokenizer's [UNK] id, where known
        self.twin = twin
        self.position_of = position_of  # [B,T] on a twin: each original position's place in the twin
        self.shuffled = shuffled  # [B] bool on a twin: whether the sentence's word order changed
        self._pooling: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}  # device -> query, key [B,C,T]
        self._memo: dict[Hashable, Any] = {}  # see memo()

    @classmethod
    def from_encoded(cls, sentences: list[Sentence], items: list[Encoded], tokenizer, pool: str,
                     tokenized_from: str = "words", shuffle_seed: int | None = None) -> "Batch":
        """A batch of tokenised sentences, padded by the tokenizer (its own attention mask); with
        `shuffle_seed`, its word-shuffled twin too (see probes.shuffle)."""
        from probes.shuffle import shuffled_twin

        features = {"input_ids": [e.input_ids for e in items]}
        if any(e.token_type_ids is not None for e in items):
            features["token_type_ids"] = [e.token_type_ids or [0] * len(e.input_ids) for e in items]
        padded = tokenizer.pad(features, padding=True, return_tensors="pt", return_attention_mask=True)
        fields = dict(pool=pool, input_ids=padded["input_ids"], attention_mask=padded["attention_mask"],
                      indices=[e.index for e in items],
                      offsets=[e.offsets for e in items] if all(e.offsets is not None for e in items) else None,
                      tokenized_from=tokenized_from, unk_token_id=tokenizer.unk_token_id,
                      token_type_ids=padded.get("token_type_ids"))
        columns = [e.columns for e in items]
        twin = None if shuffle_seed is None else shuffled_twin(cls(sentences, columns, **fields), shuffle_seed)
        return cls(sentences, columns, twin=twin, **fields)

    @property
    def end_column(self) -> int:
        return self.width - 1

    @cached_property
    def word_columns(self) -> torch.Tensor:
        """[B,C] True for the columns of real words (1..n)."""
        c = torch.arange(self.width)
        return (c[None, :] >= 1) & (c[None, :] <= self.n_words[:, None])

    def memo(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """`make()` computed once per batch under `key` and shared: what a probe derives from the batch
        alone (gold arcs, token masks) is computed at the first layer, not again at every layer."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def pooling(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Query and key pooling matrices [B,C,T] on `device` (see probes.pooling), made once per device."""
        if device not in self._pooling:
            self._pooling[device] = pooling_matrices(self.columns.to(device), self.width, self.pool)
        return self._pooling[device]


def token_segments(batch: Batch) -> torch.Tensor:
    """[B,T] segment of each subword: 0 or 1 for the words of a pair's first or second sentence (0 for
    every word of a single sentence), -1 for special tokens and padding."""
    split = torch.tensor([s.ann.get("pair", len(s.words)) for s in batch.sentences])  # [B] words in segment 0
    columns = batch.columns  # [B,T]
    words = (columns >= 1) & (columns < batch.end_column)
    segment = (columns > split[:, None]).long()
    return segment.masked_fill(~words, -1)
