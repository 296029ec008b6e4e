"""Tokenising sentences and aligning subwords to words: what the tokenizer reads, and which sentences are kept.

One entry point, ``encode(tokenizer, sentences, max_length, tokenize)``, picks the encoder:

    words  (default) the pre-split words, ``tokenizer(words, is_split_into_words=True)``: every word
           boundary is a token boundary, so the model is shown the gold segmentation.
    pairs  sentence pairs (``Sentence.ann["pair"]`` = words in the first segment; see probes.corpus.pairs),
           picked with "words" whenever a sentence carries ann["pair"]: ``tokenizer(words1, words2)``,
           [CLS] s1 [SEP] s2 [SEP] for BERT, <s> s1 </s></s> s2 </s> for RoBERTa, with the token type ids
           the model expects. The tokenizer numbers each segment's words from 0; the second is shifted by n1.
    text   each sentence's raw text ``ann["text"]`` (CoNLL-U's ``# text``, a SIGHAN line), for a language
           written without spaces or a study that must not leak the gold boundaries into the input: each
           token belongs to the gold word holding its first character, through the fast tokenizer's
           character offsets (never token strings, so an [UNK] standing for one or five characters aligns
           exactly). A token may cover the end of one word and the start of the next (a SentencePiece
           piece across a Chinese word boundary, ``don`` across UD's ``do|n't``): it belongs to the word it
           starts in, and probes that need exact boundaries (seg) see it through ``Batch.offsets`` and
           ``Batch.word_spans``.

    ids    sequences of token ids (``Sentence.ann["token_ids"]``, probes.corpus.token_ids), picked with "words"
           whenever a sentence carries them: the ids as they are, one word each, after the tokenizer's start
           token (a decoder-only model's BOS) where it adds one.

Word columns of the subwords (see probes.encoding.batching): 0 the start special, 1..n the words, and every later
special token (a pair's separator included) the end column. The three encoders share one skip loop
(``unusable``): a sentence longer than the model allows is skipped and counted, never cut, and so is one
with a word that no subword starts in (it would have no row or column in word-level maps).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from probes.base.choices import check_tokenize
from probes.corpus.segmented import segmentation_from_conllu_words
from probes.corpus.sentence import Sentence
from probes.base.errors import InputError
from probes.base.packing import FALLBACK_SPECIALS

END_COLUMN = -2  # placeholder for end specials until the batch width is known
UNKNOWN_SHARE_WARNED = 0.05  # a corpus where more words than this tokenize to the unknown token gets a warning
UNKNOWN_SHARE_REFUSED = 0.5  # a corpus where more words than this tokenize only to the unknown token is refused
#                              (unless allow_unknown): the model cannot read it
UNKNOWN_REFUSED_WORDS = 20  # ... of at least this many words (the share of a few words, e.g. a small shard's, is no
#                             evidence: those get the warning)
UNKNOWN_UNITS_DOMINATE = 0.20  # a run where more of the words' subword tokens than this are the unknown token is
#                                dominated by it: a stronger warning, and provenance says so


class UnknownWordsWarning(UserWarning):
    """Many words of the corpus tokenize to the unknown token: the model cannot read them."""


class UnknownTokensWarning(UnknownWordsWarning):
    """The run is dominated by the unknown token (e.g. Chinese text through an English vocabulary)."""


@dataclass
class Encoded:
    """One tokenised sentence."""

    index: int  # position in the list of sentences given to encode
    input_ids: list[int]
    columns: np.ndarray  # [T] word column of each subword (0 start special, 1..n words, END_COLUMN end specials)
    offsets: np.ndarray  # [T,2] character span of each subword: in its word (pre-split words, pairs) or in the
    #                      sentence's ann["text"] (raw text); (0, 0) for special tokens
    token_type_ids: list[int] | None = None  # segment id of each subword, for sentence pairs
    word_spans: list[tuple[int, int]] | None = None  # raw text: character span of each word in ann["text"]


def encode(tokenizer, sentences: list[Sentence], max_length: int,
           tokenize: str = "words") -> tuple[list[Encoded], dict[str, int]]:
    """Tokenise every sentence (see the module docstring for `tokenize`); return those that fit, in order,
    and the counts of those skipped, by reason: too_long, word_without_subwords, and for raw text no_text
    (the sentence has none) and words_not_in_text (the text does not spell out the words)."""
    check_tokenize(tokenize)
    skipped: dict[str, int] = {}
    if not sentences:
        return [], skipped
    if tokenize == "text":
        tokenised = _tokenise_text(tokenizer, sentences, skipped)
    elif any("token_ids" in s.ann for s in sentences):
        tokenised = _token_ids(tokenizer, sentences)
    elif any("pair" in s.ann for s in sentences):
        tokenised = _tokenise_pairs(tokenizer, sentences)
    else:
        tokenised = _tokenise_words(tokenizer, sentences)
    items = list(tokenised)  # (index, input_ids, word_ids [T], the other fields) per tokenised sentence
    lengths = np.fromiter((len(ids) for _, ids, _, _ in items), dtype=np.int64, count=len(items))  # [S]
    word_ids = np.concatenate([w for _, _, w, _ in items]) if items else np.zeros(0, dtype=np.int64)  # [ΣT]
    n_words = np.fromiter((len(sentences[index].words) for index, _, _, _ in items), dtype=np.int64,
                          count=len(items))  # [S]
    reasons = unusable_rows(lengths, word_ids, n_words, max_length)
    columns = subword_columns(word_ids, lengths)  # [ΣT]
    ends = np.cumsum(lengths)  # [S] where each sentence's subwords end in the flat arrays
    kept = []
    for (index, ids, _, fields), reason, end, length in zip(items, reasons, ends.tolist(), lengths.tolist()):
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        kept.append(Encoded(index=index, input_ids=ids, columns=columns[end - length:end], **fields))
    return kept, skipped


def unusable(ids: list[int], word_ids: np.ndarray, n_words: int, max_length: int) -> str | None:
    """Why a tokenised sentence cannot be scored (too long for the model, or a word with no subword), or None.
    word_ids: [T] 0-based word of each subword, -1 for special tokens."""
    return unusable_rows(np.array([len(ids)]), np.asarray(word_ids), np.array([n_words]), max_length)[0]


def unusable_rows(lengths: np.ndarray, word_ids: np.ndarray, n_words: np.ndarray, max_length: int) -> list[str | None]:
    """``unusable`` of S consecutive tokenised sentences at once: lengths [S] their subwords, word_ids [ΣT] their
    subwords' words one sentence after another, n_words [S] their words. Too long is asked first."""
    rows = np.repeat(np.arange(len(lengths)), lengths)  # [ΣT] the sentence of each subword
    word = word_ids >= 0  # [ΣT] a subword of a word
    top = np.full(len(lengths), -1)
    np.maximum.at(top, rows[word], word_ids[word])
    bins = np.maximum(n_words, top + 1)  # [S] word slots per sentence: its words (and any the tokenizer numbers past)
    first = np.cumsum(bins) - bins  # [S] each sentence's first slot
    held = np.bincount(first[rows[word]] + word_ids[word], minlength=int(bins.sum()))  # [Σbins] subwords per slot
    empty = np.bincount(np.repeat(np.arange(len(lengths)), bins)[held == 0], minlength=len(lengths)) > 0  # [S]
    return ["too_long" if long else "word_without_subwords" if none else None
            for long, none in zip((lengths > max_length).tolist(), empty.tolist())]


def subword_columns(word_ids: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
    """[T] word column per subword from its 0-based word ([T], -1 for specials): words → 1..n, specials
    before the first word → 0, after it → END_COLUMN. Given lengths [S], word_ids [ΣT] holds S consecutive
    sentences' subwords, and so does the result."""
    lengths = np.array([len(word_ids)]) if lengths is None else lengths
    cols = word_ids + 1
    special = word_ids < 0
    seen = np.cumsum(~special)  # [ΣT] subwords of words up to each position, from the first sentence's start
    starts = np.cumsum(lengths) - lengths  # [S]
    filled = lengths > 0
    at_start = (seen - ~special)[starts[filled]]  # [S'] the count before each non-empty sentence's first subword
    before = special & (seen == np.repeat(at_start, lengths[filled]))  # no word yet in its sentence
    cols[special] = END_COLUMN
    cols[before] = 0
    return cols


# Each encoder yields (index, input_ids, word_ids [T], the other Encoded fields) per tokenised sentence.
_Tokenised = Iterator[tuple[int, list[int], np.ndarray, dict]]


def _offsets(enc, row: int) -> np.ndarray:
    return np.array(enc["offset_mapping"][row], dtype=np.int64).reshape(-1, 2)  # [T,2]


def special_names(tokenizer) -> tuple[str, str]:
    """The names of the special tokens the tokenizer puts before a sequence's first word and after its last
    (word columns 0 and the end column): ("[CLS]", "[SEP]") for BERT, ("<s>", "</s>") for RoBERTa; where it puts
    none on a side (a decoder-only model without a BOS), that side's FALLBACK_SPECIALS name."""
    enc = tokenizer([["a"]], is_split_into_words=True, add_special_tokens=True)
    word_ids = _word_ids(enc, 0)  # [T]
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    words = np.flatnonzero(word_ids >= 0)  # [w] the positions of the word's tokens
    if not words.size:  # a tokenizer that gives the word no token: no side can be told
        return FALLBACK_SPECIALS
    before, after = tokens[:words[0]], tokens[words[-1] + 1:]
    return (before[0] if before else FALLBACK_SPECIALS[0]), (after[-1] if after else FALLBACK_SPECIALS[1])


def _word_ids(enc, row: int) -> np.ndarray:
    return np.array([-1 if w is None else w for w in enc.word_ids(row)])  # [T]


def _tokenise_words(tokenizer, sentences: list[Sentence]) -> _Tokenised:
    """Pre-split words through the fast tokenizer's own Rust tokenizer (``backend_tokenizer.encode_batch``, what
    the transformers call runs) where it neither truncates nor pads: the same encodings, without turning each
    into Python lists of every field; else the call."""
    words = [s.words for s in sentences]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.truncation is not None or backend.padding is not None:
        enc = tokenizer(words, is_split_into_words=True, add_special_tokens=True, truncation=False,
                        return_attention_mask=False, return_token_type_ids=False, return_offsets_mapping=True)
        for i in range(len(sentences)):
            yield i, enc["input_ids"][i], _word_ids(enc, i), {"offsets": _offsets(enc, i)}
        return
    for i, e in enumerate(backend.encode_batch(words, is_pretokenized=True, add_special_tokens=True)):
        word_ids = np.array([-1 if w is None else w for w in e.word_ids])  # [T]
        yield i, e.ids, word_ids, {"offsets": np.array(e.offsets, dtype=np.int64).reshape(-1, 2)}


def _tokenise_pairs(tokenizer, sentences: list[Sentence]) -> _Tokenised:
    """A sentence without ann["pair"] in a corpus of pairs is encoded with an empty second segment."""
    firsts = [s.words[:s.ann.get("pair", len(s.words))] for s in sentences]
    seconds = [s.words[len(f):] for s, f in zip(sentences, firsts)]
    types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
    enc = tokenizer(firsts, seconds, is_split_into_words=True, add_special_tokens=True, truncation=False,
                    return_attention_mask=False, return_token_type_ids=types, return_offsets_mapping=True)
    for i in range(len(sentences)):
        word_ids = _word_ids(enc, i)
        second = np.array([s == 1 for s in enc.sequence_ids(i)])
        word_ids[second & (word_ids >= 0)] += len(firsts[i])
        yield i, enc["input_ids"][i], word_ids, {"offsets": _offsets(enc, i),
                                                 "token_type_ids": enc["token_type_ids"][i] if types else None}


def _token_ids(tokenizer, sentences: list[Sentence]) -> _Tokenised:
    """Sequences of token ids (ann["token_ids"], probes.corpus.token_ids) given as they are, one word per id, after
    the start special tokens the tokenizer puts before a sequence's first word (a BOS), if any. InputError
    (file:line) for an id the tokenizer does not have."""
    enc = tokenizer([["a"]], is_split_into_words=True, add_special_tokens=True)
    word_ids = _word_ids(enc, 0)
    start = enc["input_ids"][0][:int(np.argmax(word_ids >= 0))]  # the special tokens before the first word
    size = len(tokenizer)
    for i, sentence in enumerate(sentences):
        ids = sentence.ann["token_ids"]
        if max(ids) >= size:
            raise InputError(f"token id {max(ids)} is not in the model's vocabulary of {size}", sentence.source,
                             sentence.line)
        columns = np.concatenate([np.full(len(start), -1), np.arange(len(ids))])  # [T] -1: the start tokens
        yield i, [*start, *ids], columns, {"offsets": np.zeros((len(start) + len(ids), 2), dtype=np.int64)}


def _tokenise_text(tokenizer, sentences: list[Sentence], skipped: dict[str, int]) -> _Tokenised:
    """Sentences without raw text, or whose text does not spell out the words, are counted in `skipped` (before
    the first sentence is yielded): they never reach the tokenizer."""
    ready: list[tuple[int, list[tuple[int, int]]]] = []  # (index, word spans) of the sentences to tokenise
    for i, sentence in enumerate(sentences):
        text = sentence.ann.get("text")
        spans = word_spans(sentence) if text else None
        if spans is None:
            reason = "words_not_in_text" if text else "no_text"
            skipped[reason] = skipped.get(reason, 0) + 1
        else:
            ready.append((i, spans))
    if not ready:
        return
    enc = tokenizer([sentences[i].ann["text"] for i, _ in ready], add_special_tokens=True, truncation=False,
                    return_attention_mask=False, return_token_type_ids=False, return_offsets_mapping=True)
    for row, (i, spans) in enumerate(ready):
        offsets = _offsets(enc, row)
        ends = np.array([end for _, end in spans], dtype=np.int64)  # [n]
        special = np.array([s is None for s in enc.sequence_ids(row)])  # [T]
        word = np.minimum(np.searchsorted(ends, offsets[:, 0], side="right"), len(ends) - 1)  # word of 1st char
        yield i, enc["input_ids"][row], np.where(special, -1, word), {"offsets": offsets, "word_spans": spans}


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


@dataclass
class UnknownWords:
    """The words of the encoded sentences that tokenize to the unknown token (any of their subwords), and the
    subword tokens of the words (units) that are the unknown token."""

    count: int  # such words (occurrences)
    words: int  # words in the encoded sentences
    examples: list[str]  # up to three distinct such words, in corpus order
    unknown_units: int = 0  # the words' subword tokens that are the unknown token
    units: int = 0  # the words' subword tokens (special tokens not counted)
    only: int = 0  # the words (occurrences) every subword of which is the unknown token

    @property
    def share(self) -> float:
        return self.count / self.words if self.words else 0.0

    @property
    def only_share(self) -> float:
        return self.only / self.words if self.words else 0.0

    @property
    def unit_share(self) -> float:
        return self.unknown_units / self.units if self.units else 0.0

    @property
    def dominated(self) -> bool:
        """Whether more than UNKNOWN_UNITS_DOMINATE of the units are the unknown token."""
        return self.unit_share > UNKNOWN_UNITS_DOMINATE

    def __add__(self, other: "UnknownWords") -> "UnknownWords":
        """The counts over this one's sentences followed by `other`'s (chunks of a corpus, in order): counts
        added, the examples the first three distinct of both in that order, as one count over all gives."""
        return UnknownWords(self.count + other.count, self.words + other.words,
                            list(dict.fromkeys([*self.examples, *other.examples]))[:3],
                            self.unknown_units + other.unknown_units, self.units + other.units,
                            self.only + other.only)

    def provenance(self) -> dict:
        """What the results record: {"count", "words", "share", "unknown_units", "units", "unit_share",
        "dominated", "only_unknown", "only_share"}."""
        return {"count": self.count, "words": self.words, "share": self.share, "unknown_units": self.unknown_units,
                "units": self.units, "unit_share": self.unit_share, "dominated": self.dominated,
                "only_unknown": self.only, "only_share": self.only_share}

    @classmethod
    def added(cls, recorded: list[dict]) -> "UnknownWords":
        """The counts of several runs' ``provenance()`` added up (the shards of one run), without examples."""
        total = {k: sum(r.get(k, 0) for r in recorded)
                 for k in ("count", "words", "unknown_units", "units", "only_unknown")}
        return cls(total["count"], total["words"], [], total["unknown_units"], total["units"], total["only_unknown"])

    def refuse(self, where: str) -> None:
        """InputError naming `where` (the corpus file) when more than UNKNOWN_SHARE_REFUSED of the words (of at least
        UNKNOWN_REFUSED_WORDS) tokenize only to the unknown token: the scores would describe attention between unknown
        tokens, not words."""
        if self.words >= UNKNOWN_REFUSED_WORDS and self.only_share > UNKNOWN_SHARE_REFUSED:
            raise InputError(f"{self.only_share:.1%} of the words ({self.only} of {self.words}) tokenize only to the "
                             f"unknown token, e.g. {', '.join(self.examples)}: the model cannot read this corpus; "
                             "give --allow-unknown (allow_unknown=True) to score it anyway", where)

    def warn(self, where: str) -> None:
        """A warning, one line naming `where`: UnknownTokensWarning when the run is ``dominated`` by the unknown
        token, else an UnknownWordsWarning when the share of words is above UNKNOWN_SHARE_WARNED."""
        if self.dominated:
            message = (f"the unknown token dominates this run: {self.unit_share:.1%} of the words' subword tokens "
                       f"({self.unknown_units} of {self.units}) are unknown, e.g. {', '.join(self.examples)}: the model "
                       "cannot read this corpus, and its scores describe attention between unknown tokens, not words")
            warnings.warn_explicit(message, UnknownTokensWarning, where, 0)
        elif self.share > UNKNOWN_SHARE_WARNED:
            message = (f"{self.share:.1%} of the words ({self.count} of {self.words}) tokenize to the unknown token, "
                       f"e.g. {', '.join(self.examples)}: the model's vocabulary does not cover this corpus")
            # lineno 0: no source line is printed under the message, which stays on one line
            warnings.warn_explicit(message, UnknownWordsWarning, where, 0)


def unknown_words(unk_token_id: int | None, sentences: list[Sentence], encoded: list[Encoded]) -> UnknownWords:
    """Count the words with a subword `unk_token_id` (None: the tokenizer has none), over all encoded ids at once.
    Additive: the counts of consecutive parts of a corpus, added in order (``+``), are those of the whole."""
    total = sum(len(sentences[e.index].words) for e in encoded)
    if unk_token_id is None or not encoded:
        return UnknownWords(0, total, [], 0, sum(int((e.columns >= 1).sum()) for e in encoded))
    ids = np.concatenate([e.input_ids for e in encoded])  # [ΣT]
    columns = np.concatenate([e.columns for e in encoded])  # [ΣT]
    row = np.repeat(np.arange(len(encoded)), [len(e.input_ids) for e in encoded])  # [ΣT] encoded item of each id
    word = columns >= 1  # [ΣT] a subword of a word (not a special token)
    hit = (ids == unk_token_id) & word  # [ΣT] an unknown subword of a word
    units = int(word.sum())
    width = int(columns.max()) + 1
    keys = np.unique(row[hit] * width + columns[hit])  # [U] one per (sentence, word), in corpus order
    words, per_word = np.unique(row[word] * width + columns[word], return_counts=True)  # [W] each word, its subwords
    unknown_per_word = np.bincount(np.searchsorted(words, row[hit] * width + columns[hit]), minlength=len(words))  # [W]
    only = int((unknown_per_word == per_word).sum())
    examples: list[str] = []
    for key in keys:
        word = sentences[encoded[key // width].index].words[key % width - 1]
        if word not in examples:
            examples.append(word)
            if len(examples) == 3:
                break
    return UnknownWords(len(keys), total, examples, int(hit.sum()), units, only)
