"""Encoding sentence pairs (``Sentence.ann["pair"]`` = words in the first segment; see probes.corpus.pairs).

A pair is tokenised as the tokenizer's own pair, ``tokenizer(words1, words2)``: [CLS] s1 [SEP] s2
[SEP] for BERT, <s> s1 </s></s> s2 </s> for RoBERTa, with the token type ids the model expects.
Word columns follow probes.batching: 0 = the start special, 1..n1 the first segment's words,
n1+1..n1+n2 the second's (the tokenizer numbers each segment from 0; the second is shifted by n1),
and every later special token (the separator between the segments included) is the end column.
"""
from __future__ import annotations

import numpy as np

from probes.batching import Encoded, _columns, unusable
from probes.corpus.sentence import Sentence


def encode_pairs(tokenizer, sentences: list[Sentence], max_length: int) -> tuple[list[Encoded], dict[str, int]]:
    """Tokenise sentence pairs; return those that fit and the counts of those skipped, by reason.
    A sentence without ann["pair"] in a corpus of pairs is encoded with an empty second segment."""
    firsts = [s.words[:s.ann.get("pair", len(s.words))] for s in sentences]
    seconds = [s.words[len(f):] for s, f in zip(sentences, firsts)]
    types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
    enc = tokenizer(firsts, seconds, is_split_into_words=True, add_special_tokens=True, truncation=False,
                    return_attention_mask=False, return_token_type_ids=types, return_offsets_mapping=True)
    skipped: dict[str, int] = {}
    kept = []
    for i, sentence in enumerate(sentences):
        ids = enc["input_ids"][i]
        word_ids = np.array([-1 if w is None else w for w in enc.word_ids(i)])
        second = np.array([s == 1 for s in enc.sequence_ids(i)])
        word_ids[second & (word_ids >= 0)] += len(firsts[i])
        reason = unusable(ids, word_ids, len(sentence.words), max_length)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        kept.append(Encoded(index=i, input_ids=ids, columns=_columns(word_ids),
                            offsets=np.array(enc["offset_mapping"][i], dtype=np.int64).reshape(-1, 2),
                            token_type_ids=enc["token_type_ids"][i] if types else None))
    return kept, skipped
