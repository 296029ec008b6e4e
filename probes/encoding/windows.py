"""Documents longer than the model: overlapping windows of whole sentences, each one row of a batch.

A document (a Sentence whose ann["sentences"] gives its sentences' word offsets, e.g. probes.corpus.coref's) is
cut into windows of at most `window` subwords, special tokens included (the model's limit by default), each
made of whole sentences: a window starts at a sentence and takes as many of the following sentences as fit;
the next window starts at the first sentence at least `stride` subwords (half the window by default) after
the previous window's start, and never after its end, so that the windows cover the document and overlap
where the stride is shorter than the window; the last window is the first to reach the document's end. A
document that fits is one window, the document whole.

A window (``Window``) is a Sentence of its sentences' words, so that tokenising, pooling, batching and the
layer-by-layer scoring see it as any sentence; its identity is its document's (``Sentence.unit``): all the
windows of a document get the document's bootstrap weights and go to the same shard (probes.encoding.identity).
Subword counts are the tokenizer's for the words alone (``is_split_into_words``), as probes.encoding.subwords
tokenises a window.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probes.corpus.sentence import Sentence
from probes.base.errors import InputError


@dataclass
class Window(Sentence):
    """A window of a document: document[start:start + len(words)], whole sentences."""

    document: Sentence | None = None
    start: int = 0  # document offset of the window's first word

    def unit(self) -> Sentence:
        return self.document


def window_sizes(window: int, stride: int, limit: int) -> tuple[int, int]:
    """(window, stride) in subwords: 0 gives the model's `limit` and half the window; InputError for a window over
    the model's limit or a negative size."""
    if window < 0 or stride < 0:
        raise InputError(f"window and stride must be 0 (the default) or more subwords, not {window} and {stride}")
    window = window or limit
    if window > limit:
        raise InputError(f"window of {window} subwords is longer than the model's limit ({limit})")
    return window, stride or max(1, window // 2)


def sentence_subwords(tokenizer, document: Sentence) -> np.ndarray:
    """[S] subwords of each sentence of `document`, special tokens left out."""
    words = [document.words[a:b] for a, b in document.ann["sentences"]]
    enc = tokenizer(words, is_split_into_words=True, add_special_tokens=False, truncation=False,
                    return_attention_mask=False, return_token_type_ids=False)
    return np.array([len(ids) for ids in enc["input_ids"]], dtype=np.int64)


def window_spans(subwords: np.ndarray, budget: int, stride: int) -> list[tuple[int, int]]:
    """[(first sentence, end sentence exclusive)] of each window, for sentences of `subwords` [S] subwords and
    windows of at most `budget` subwords (special tokens left out), starts `stride` subwords apart (see the module
    docstring). Every sentence must fit the budget alone."""
    ends = np.concatenate([[0], np.cumsum(subwords)])  # [S+1] subwords before each sentence
    spans: list[tuple[int, int]] = []
    first, n = 0, len(subwords)
    while True:
        end = int(np.searchsorted(ends, ends[first] + budget, side="right")) - 1  # most sentences that fit
        spans.append((first, end))
        if end >= n:
            return spans
        after = int(np.searchsorted(ends, ends[first] + stride, side="left"))  # first start ≥ stride subwords on
        first = min(max(after, first + 1), end)


def cut(document: Sentence, tokenizer, window: int, stride: int) -> list[Window]:
    """The windows of `document` (see the module docstring), window and stride in subwords (special tokens counted
    in the window). InputError naming the first sentence longer than the window."""
    subwords = sentence_subwords(tokenizer, document)
    budget = window - tokenizer.num_special_tokens_to_add(pair=False)
    too_long = np.flatnonzero(subwords > budget)
    if len(too_long):
        k = int(too_long[0])
        raise InputError(f"sentence {k + 1} of document {document.sent_id} has {int(subwords[k])} subwords, more than "
                         f"a window of {window} holds with its special tokens; give a larger --window",
                         document.source, document.ann["sentence_lines"][k])
    sentences = document.ann["sentences"]
    windows = []
    for k, (first, end) in enumerate(window_spans(subwords, budget, stride)):
        a, b = sentences[first][0], sentences[end - 1][1]
        windows.append(Window(words=document.words[a:b], ann={"sentences": (first, end)},
                              sent_id=f"{document.sent_id}@{k}", source=document.source,
                              line=document.ann["sentence_lines"][first], occurrence=document.occurrence,
                              document=document, start=a))
    return windows
