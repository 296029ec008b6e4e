"""Tokenising each sentence's raw text (``--tokenize text``) and mapping its tokens onto the gold words.

With pre-split words (the default, ``probes.batching.encode``) every word boundary is a token
boundary: the model is shown the gold segmentation. For a language written without spaces
(Chinese, Japanese, Thai) or any study of segmentation that must not leak the gold boundaries
into the input, the tokenizer reads ``ann["text"]`` (CoNLL-U's ``# text``, the unsegmented line
of a SIGHAN file) and each token is assigned, through the fast tokenizer's character offsets, to
the gold word that holds its first character. Alignment is by offsets, never by token strings,
so an [UNK] standing for one or five characters aligns exactly.

A token may cover the end of one word and the start of the next (e.g. a SentencePiece piece
across a Chinese word boundary, or ``don`` across UD's ``do|n't``): it belongs to the word it
starts in, and probes that need exact boundaries (seg) see it through ``Batch.offsets``.
"""
from __future__ import annotations

import numpy as np

from probes.batching import Encoded, _columns
from probes.corpus.segmented import segmentation_from_conllu_words
from probes.corpus.sentence import Sentence
from probes.errors import InputError

TOKENIZE_CHOICES = ("words", "text")


def word_spans(sentence: Sentence) -> list[tuple[int, int]] | None:
    """Character spans of the sentence's words in ann["text"] (end exclusive), or None when the
    text does not spell out the words (whitespace aside), e.g. a multiword token written "del"
    for the words "de el". Readers that know the spans (SIGHAN) give them in ann["word_spans"]."""
    spans = sentence.ann.get("word_spans")
    if spans is not None:
        return spans
    try:
        return segmentation_from_conllu_words(sentence.words, sentence.ann["text"])[1]
    except InputError:
        return None


def encode_text(tokenizer, sentences: list[Sentence], max_length: int) -> tuple[list[Encoded], dict[str, int]]:
    """Tokenise each sentence's ann["text"]; return those that fit and the counts skipped, by reason.

    Encoded.columns maps each token to the word holding its first character (1..n; specials as in
    ``encode``), Encoded.offsets are its character spans in ann["text"]. Sets ann["word_spans"]
    where the reader did not. Skip reasons: no_text (no raw text), words_not_in_text (the text
    does not spell out the words), too_long, word_without_subwords (a word in which no token starts,
    so it would have no row or column in word-level maps).
    """
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    ready: list[tuple[int, Sentence, np.ndarray]] = []
    for i, sentence in enumerate(sentences):
        if not sentence.ann.get("text"):
            skip("no_text")
            continue
        spans = word_spans(sentence)
        if spans is None:
            skip("words_not_in_text")
            continue
        sentence.ann["word_spans"] = spans
        ready.append((i, sentence, np.array([end for _, end in spans], dtype=np.int64)))
    if not ready:
        return [], skipped
    enc = tokenizer([s.ann["text"] for _, s, _ in ready], add_special_tokens=True, truncation=False,
                    return_attention_mask=False, return_token_type_ids=False, return_offsets_mapping=True)
    kept = []
    for row, (i, sentence, ends) in enumerate(ready):
        ids = enc["input_ids"][row]
        if len(ids) > max_length:
            skip("too_long")
            continue
        offsets = np.array(enc["offset_mapping"][row], dtype=np.int64).reshape(-1, 2)  # [T,2]
        special = np.array([s is None for s in enc.sequence_ids(row)])
        word = np.minimum(np.searchsorted(ends, offsets[:, 0], side="right"), len(ends) - 1)  # 0-based word of 1st char
        word_ids = np.where(special, -1, word)
        if np.bincount(word_ids[~special], minlength=len(ends)).min(initial=1) == 0:
            skip("word_without_subwords")
            continue
        kept.append(Encoded(index=i, input_ids=ids, columns=_columns(word_ids), offsets=offsets))
    return kept, skipped
