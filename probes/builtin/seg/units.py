"""The units the seg probe scores: a batch's tokens, with the gold word boundaries mapped onto them.

Units are the tokens of the sentence's words: special tokens ([CLS], [SEP], <s>, </s>) and
padding are not units. [UNK] tokens are units like any other (the model has a position for them
and attends from and to it; alignment is by character offsets, so an [UNK] standing for one or
five characters aligns exactly); they are counted, and the gaps that touch one are flagged so that
boundary scores can also be given over gaps between two known tokens.

Gap i is the gap right after unit i. It is a gold boundary when the word holding unit i's last
character differs from the word holding unit i+1's first character. The gap after a sentence's
last unit is the sentence end: always a boundary, given rather than decided, so it is not a
decision. With pre-split words (``--tokenize words``) the word of a unit is its column. With raw
text (``--tokenize text``) a token may cross a gold boundary (its first and last characters lie
in different words): the words it touches cannot be produced by any segmentation into tokens,
so they count as gold words that no head can get right ("unreachable").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from probes.encoding.batching import Batch

LENGTH_LABELS = ("len1", "len2", "len3", "len4+")  # gold words of 1, 2, 3, 4 or more units
COUNTS = ("units", "unk_units", "decisions", "known_decisions", "gold_boundaries", "gold_words", "unreachable_words",
          "boundaries_inside_tokens")  # the keys of BatchUnits.counts


@dataclass
class Units:
    """Gold facts about N units (flattened sentence after sentence) and the W reachable gold words.

    gold_end [N] bool: a gold boundary after the unit (True at each sentence's last unit).
    final [N] bool: the sentence's last unit (its boundary is the sentence end, not a decision).
    known [N] bool: neither the unit nor the next one is [UNK].
    word_first, word_last [W] long: first and last unit of each reachable gold word.
    word_bucket [W] long: index into LENGTH_LABELS (the word's length in units).
    """

    gold_end: torch.Tensor
    final: torch.Tensor
    known: torch.Tensor
    word_first: torch.Tensor
    word_last: torch.Tensor
    word_bucket: torch.Tensor

    def __len__(self) -> int:
        return len(self.gold_end)

    def word_gaps(self) -> tuple[torch.Tensor, torch.Tensor]:
        """[W] start, stop of each word's gaps, from the one before its first unit (the gap after the previous
        unit) to the one after its last, as indices into a running count over the units with a leading 0
        (c[stop] − c[start] counts what lies in the word's gaps)."""
        return (self.word_first - 1).clamp(min=0), self.word_last + 1

    @staticmethod
    def cat(parts: list["Units"]) -> "Units":
        """Units of several batches one after the other (word indices shifted accordingly)."""
        shift = torch.tensor([0, *np.cumsum([len(p) for p in parts])[:-1]], dtype=torch.long)
        return Units(gold_end=torch.cat([p.gold_end for p in parts]), final=torch.cat([p.final for p in parts]),
                     known=torch.cat([p.known for p in parts]),
                     word_first=torch.cat([p.word_first + s for p, s in zip(parts, shift)]),
                     word_last=torch.cat([p.word_last + s for p, s in zip(parts, shift)]),
                     word_bucket=torch.cat([p.word_bucket for p in parts]))


@dataclass
class BatchUnits:
    """The units of one batch: where they sit, their gold facts, and counts for the report."""

    units: Units
    rows: torch.Tensor  # [N] batch row of each unit
    positions: torch.Tensor  # [N] token position of each unit
    starts: np.ndarray  # [B+1] first unit of each sentence, then N
    counts: dict[str, int]  # units, unk_units, decisions, gold_boundaries, gold_words, unreachable_words, ...
    bucket_words: np.ndarray  # [4] reachable gold words per LENGTH_LABELS bucket


def batch_units(batch: Batch) -> BatchUnits:
    """Units and gold boundaries of every sentence of a batch (index arrays built per sentence)."""
    columns = batch.columns.numpy()
    unk_ids = (batch.input_ids == batch.unk_token_id).numpy() if (
        batch.input_ids is not None and batch.unk_token_id is not None) else np.zeros(columns.shape, dtype=bool)
    from_text = batch.tokenized_from == "text"
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("rows", "pos", "gold", "final", "known", "first", "last",
                                                          "bucket")}
    starts = [0]
    counts = dict.fromkeys(COUNTS, 0)
    for b, sentence in enumerate(batch.sentences):
        n = len(sentence.words)
        pos = np.nonzero((columns[b] >= 1) & (columns[b] <= n))[0]  # [n_b] token positions of the units
        if from_text:
            first, last = _words_by_offsets(batch.offsets[b][pos], batch.word_spans[b])
        else:
            first = last = columns[b, pos] - 1
        gold = np.append(last[:-1] != first[1:], True)  # [n_b] boundary after each unit
        final = np.zeros(len(pos), dtype=bool)
        final[-1] = True
        unk = unk_ids[b, pos]
        known = ~unk & ~np.append(unk[1:], True)
        word_first, word_last, inside = _reachable_words(first, last, n)
        parts["rows"].append(np.full(len(pos), b))
        parts["pos"].append(pos)
        parts["gold"].append(gold)
        parts["final"].append(final)
        parts["known"].append(known)
        parts["first"].append(word_first + starts[-1])
        parts["last"].append(word_last + starts[-1])
        parts["bucket"].append(np.minimum(word_last - word_first + 1, len(LENGTH_LABELS)) - 1)
        starts.append(starts[-1] + len(pos))
        for key, value in (("units", len(pos)), ("unk_units", unk.sum()), ("decisions", len(pos) - 1),
                           ("known_decisions", known[:-1].sum()), ("gold_boundaries", gold[:-1].sum()),
                           ("gold_words", n), ("unreachable_words", n - len(word_first)),
                           ("boundaries_inside_tokens", inside)):
            counts[key] += int(value)
    flat = {k: np.concatenate(v) for k, v in parts.items()}
    units = Units(gold_end=torch.from_numpy(flat["gold"]), final=torch.from_numpy(flat["final"]),
                  known=torch.from_numpy(flat["known"]), word_first=torch.from_numpy(flat["first"]).long(),
                  word_last=torch.from_numpy(flat["last"]).long(), word_bucket=torch.from_numpy(flat["bucket"]).long())
    return BatchUnits(units=units, rows=torch.from_numpy(flat["rows"]).long(),
                      positions=torch.from_numpy(flat["pos"]).long(), starts=np.array(starts),
                      counts=counts, bucket_words=np.bincount(flat["bucket"], minlength=len(LENGTH_LABELS)))


def _words_by_offsets(offsets: np.ndarray, spans: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """0-based gold word of each unit's first and last character, from [n_b,2] offsets into the text."""
    ends = np.array([end for _, end in spans])
    top = len(spans) - 1
    first = np.minimum(np.searchsorted(ends, offsets[:, 0], side="right"), top)
    last = np.minimum(np.searchsorted(ends, np.maximum(offsets[:, 1] - 1, offsets[:, 0]), side="right"), top)
    return first, np.maximum(last, first)


def _reachable_words(first: np.ndarray, last: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """First and last unit of each gold word that no token crosses (and that has a unit), and the
    number of gold boundaries that fall inside a token."""
    crossing = first != last
    touched = np.zeros(n + 1, dtype=np.int64)  # difference array: +1 at a crossing token's first word,
    #                                              -1 after its last
    np.add.at(touched, first[crossing], 1)
    np.add.at(touched, last[crossing] + 1, -1)
    reachable = (np.cumsum(touched)[:n] == 0) & (np.bincount(first, minlength=n) > 0)
    words = np.nonzero(reachable)[0]
    word_first = np.searchsorted(first, words, side="left")
    word_last = np.searchsorted(last, words, side="right") - 1
    return word_first, word_last, int((last - first).sum())


def unit_surfaces(batch: Batch, b: int, positions: np.ndarray) -> list[str] | None:
    """The characters each unit of sentence b stands for (original case and accents), or None
    without offsets."""
    if batch.offsets is None:
        return None
    sentence = batch.sentences[b]
    offsets = batch.offsets[b][positions]
    if batch.tokenized_from == "text":
        return [sentence.ann["text"][s:e] for s, e in offsets]
    words = batch.columns[b, positions].numpy() - 1
    return [sentence.words[w][s:e] for w, (s, e) in zip(words, offsets)]
