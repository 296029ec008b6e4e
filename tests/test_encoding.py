"""probes.encoding.subwords (the three encoders, their one skip loop, the [UNK] share) and whole batches with their twin.

The hand vocabulary below tokenises by hand: "ab" is one token, "abc" is ab ##c, 我 用 6 照 are tokens,
anything else ("x", "xy", 拍) is [UNK] (id 1); a control character ("\\x00") is cleaned away: no token.
"""
from __future__ import annotations

import shlex
import sys
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import probes
from probes.encoding.batching import Batch
from probes.corpus import read_corpus
from probes.corpus.sentence import Sentence
from probes.base.defaults import bundled_corpus
from probes.encoding.subwords import (END_COLUMN, UnknownTokensWarning, UnknownWords, UnknownWordsWarning, encode,
                             subword_columns, unknown_words, unusable, unusable_rows)
from probes.base.errors import InputError
from probes.capture.maps import LayerMaps
from probes.encoding.shuffle import word_permutation
from helpers import E, attention, batch, sentence

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "我", "用", "i", "##p", "##h", "##o", "##n", "##e", "6", "照",
         "ab", "##c"]
ID = {t: i for i, t in enumerate(VOCAB)}
CLS, SEP, UNK = ID["[CLS]"], ID["[SEP]"], ID["[UNK]"]


@pytest.fixture(scope="module")
def tokenizer():
    import transformers

    return transformers.BertTokenizerFast(vocab=ID, do_lower_case=True)


# ---------------------------------------------------------------------------------------------- word columns
def test_subword_columns():
    # [CLS] w0 w1 w1 [SEP] w2 [SEP] (a pair's layout): start special 0, words 1..3, every later special the end
    assert subword_columns(np.array([-1, 0, 1, 1, -1, 2, -1])).tolist() == [0, 1, 2, 2, E, 3, E]
    assert E == END_COLUMN == -2


def test_unusable_reasons():
    ids = [CLS, 5, 5, SEP]
    assert unusable(ids, np.array([-1, 0, 1, -1]), 2, 4) is None
    assert unusable(ids, np.array([-1, 0, 1, -1]), 2, 3) == "too_long"
    assert unusable(ids, np.array([-1, 0, 0, -1]), 2, 4) == "word_without_subwords"  # word 1 has no subword
    assert unusable(ids, np.array([-1, 0, 0, -1]), 2, 3) == "too_long"  # too long is asked first


def test_a_chunks_columns_and_reasons_are_each_sentences():
    # [CLS] w0 [SEP] | nothing | a sentence of specials only | [CLS] w0 w0 [SEP] with 2 words | 5 subwords at limit 4
    lengths = np.array([3, 0, 2, 4, 5])
    word_ids = np.array([-1, 0, -1, -1, -1, -1, 0, 0, -1, -1, 0, 1, 2, -1])
    assert subword_columns(word_ids, lengths).tolist() == [0, 1, E, 0, 0, 0, 1, 1, E, 0, 1, 2, 3, E]
    assert unusable_rows(lengths, word_ids, np.array([1, 0, 1, 2, 3]), 4) == \
        [None, None, "word_without_subwords", "word_without_subwords", "too_long"]


def _columns_one(word_ids: np.ndarray) -> list[int]:  # a sentence's columns, worked out position by position
    seen, out = False, []
    for w in word_ids.tolist():
        seen = seen or w >= 0
        out.append(w + 1 if w >= 0 else E if seen else 0)
    return out


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(st.lists(st.integers(-1, 4), max_size=8), st.integers(0, 5)), max_size=6),
       st.integers(0, 8))
def test_chunk_at_once_equals_sentence_by_sentence(sentences, limit):
    lengths = np.array([len(w) for w, _ in sentences], dtype=np.int64)
    flat = np.array([x for w, _ in sentences for x in w], dtype=np.int64)
    n_words = np.array([n for _, n in sentences], dtype=np.int64)
    expected = []
    for w, n in sentences:  # the rules one sentence at a time: too long first, then a word without a subword
        counts = np.bincount([x for x in w if x >= 0], minlength=n)
        expected.append("too_long" if len(w) > limit else "word_without_subwords" if (counts == 0).any() else None)
    assert unusable_rows(lengths, flat, n_words, limit) == expected
    assert subword_columns(flat, lengths).tolist() == [c for w, _ in sentences for c in _columns_one(np.array(w))]


# ---------------------------------------------------------------------------------------------- the three encoders
def test_words_encoder(tokenizer):
    s = sentence(["ab", "abc", "我"])
    (e,), skipped = encode(tokenizer, [s], 64)
    # [CLS] ab ab ##c 我 [SEP]; offsets inside each word
    assert skipped == {} and e.index == 0
    assert e.input_ids == [CLS, ID["ab"], ID["ab"], ID["##c"], ID["我"], SEP]
    assert e.columns.tolist() == [0, 1, 2, 2, 3, E]
    assert e.offsets.tolist() == [[0, 0], [0, 2], [0, 2], [2, 3], [0, 1], [0, 0]]
    assert e.token_type_ids is None and e.word_spans is None


def test_words_encoder_counts_its_skips(tokenizer):
    sentences = [sentence(["我"] * 62),  # 64 tokens: fits
                 sentence(["我"] * 63),  # 65 tokens > 64
                 sentence(["ab", "\x00", "我"]),  # "\x00" is cleaned away: no subword
                 sentence(["x", "用"])]
    kept, skipped = encode(tokenizer, sentences, 64, "words")
    assert [e.index for e in kept] == [0, 3] and len(kept[0].input_ids) == 64
    assert kept[1].input_ids == [CLS, UNK, ID["用"], SEP]
    assert skipped == {"too_long": 1, "word_without_subwords": 1}


def test_pairs_encoder(tokenizer):
    pair = sentence(["ab", "我", "用", "6"], pair=2)
    alone = sentence(["abc"])  # no ann["pair"] in a corpus of pairs: an empty second segment
    too_long = sentence(["我"] * 30 + ["用"] * 31, pair=30)  # [CLS] 30 [SEP] 31 [SEP]: 64 tokens
    empty = sentence(["ab", "\x00", "6"], pair=1)  # "\x00" (first word of the second segment) has no subword
    kept, skipped = encode(tokenizer, [pair, alone, too_long, empty], 63)
    assert skipped == {"too_long": 1, "word_without_subwords": 1} and [e.index for e in kept] == [0, 1]
    p, a = kept
    # [CLS] ab 我 [SEP] 用 6 [SEP]: the second segment's words are columns 3 and 4, the middle [SEP] the end column
    assert p.input_ids == [CLS, ID["ab"], ID["我"], SEP, ID["用"], ID["6"], SEP]
    assert p.columns.tolist() == [0, 1, 2, E, 3, 4, E]
    assert p.token_type_ids == [0, 0, 0, 0, 1, 1, 1]
    assert p.offsets.tolist() == [[0, 0], [0, 2], [0, 1], [0, 0], [0, 1], [0, 1], [0, 0]]
    # [CLS] ab ##c [SEP] [SEP]
    assert a.input_ids == [CLS, ID["ab"], ID["##c"], SEP, SEP] and a.columns.tolist() == [0, 1, 1, E, E]
    assert a.token_type_ids == [0, 0, 0, 0, 1]


def test_text_encoder_leaves_the_sentence_alone(tokenizer):
    # 我用 ab 6: [CLS] 我 用 ab 6 [SEP], each token in the word holding its first character
    s = Sentence(words=["我用", "ab", "6"], ann={"text": "我用 ab 6", "head": [0, 1, 1]})
    before = {k: list(v) if isinstance(v, list) else v for k, v in s.ann.items()}
    (e,), skipped = encode(tokenizer, [s], 64, "text")
    assert skipped == {}
    assert e.columns.tolist() == [0, 1, 1, 2, 3, E]
    assert e.offsets.tolist() == [[0, 0], [0, 1], [1, 2], [3, 5], [6, 7], [0, 0]]
    assert e.word_spans == [(0, 2), (3, 5), (6, 7)]
    assert s.ann == before and "word_spans" not in s.ann


def test_text_encoder_counts_every_reason(tokenizer):
    sentences = [Sentence(words=["我"], ann={"text": "我"}),
                 Sentence(words=["我"], ann={}),  # no text
                 Sentence(words=["我", "们"], ann={"text": "我用"}),  # the text spells other words
                 Sentence(words=["我"] * 63, ann={"text": "我" * 63}),  # 65 tokens
                 Sentence(words=["a", "b", "c"], ann={"text": "abc"}),  # "ab" is one token: b holds no token start
                 # the text does not spell out the words, but the reader gave their spans: [CLS] ab - 6 [SEP]
                 Sentence(words=["ab", "6"], ann={"text": "ab-6", "word_spans": [(0, 2), (3, 4)]})]
    kept, skipped = encode(tokenizer, sentences, 64, "text")
    assert [e.index for e in kept] == [0, 5]
    assert skipped == {"no_text": 1, "words_not_in_text": 1, "too_long": 1, "word_without_subwords": 1}
    assert kept[1].columns.tolist() == [0, 1, 2, 2, E]  # "-" (2..3) starts after word 1's end: in word 2
    assert kept[1].word_spans == [(0, 2), (3, 4)]


@pytest.mark.parametrize("tokenize", ["words", "text"])
def test_nothing_to_encode(tokenizer, tokenize):
    assert encode(tokenizer, [], 64, tokenize) == ([], {})


def test_tokenize_choice_is_checked(tokenizer):
    with pytest.raises(InputError, match="tokenize must be one of words, text, not 'pairs'"):
        encode(tokenizer, [sentence(["ab"])], 64, "pairs")


# ---------------------------------------------------------------------------------------------- whole batches
def test_batch_from_encoded_carries_spans_and_builds_its_twin(tokenizer):
    texts = [Sentence(words=["我用", "ab", "6"], ann={"text": "我用 ab 6"}), Sentence(words=["ab"], ann={"text": "ab"})]
    items, _ = encode(tokenizer, texts, 64, "text")
    b = Batch.from_encoded(texts, items, tokenizer, "mean-sum", shuffle_seed=0)
    assert b.tokenized_from == "text" and b.word_spans == [[(0, 2), (3, 5), (6, 7)], [(0, 2)]]
    assert b.unk_token_id == UNK and b.offsets[1].tolist() == [[0, 0], [0, 2], [0, 0]]
    twin = b.twin
    assert twin.twin is None and b.position_of is None and b.shuffled is None
    assert set(vars(twin)) == set(vars(b))  # one class, every attribute declared by __init__
    # sentence 0's words reorder (never the identity for 3 words); a one-word sentence cannot
    order = word_permutation(texts[0], 0).tolist()
    assert sorted(order) == [1, 2, 3] and order != [1, 2, 3]
    word_tokens = {1: [ID["我"], ID["用"]], 2: [ID["ab"]], 3: [ID["6"]]}
    assert twin.input_ids[0].tolist() == [CLS, *[t for w in order for t in word_tokens[w]], SEP]
    assert twin.input_ids[1].tolist() == b.input_ids[1].tolist()
    assert twin.shuffled.tolist() == [True, False]
    assert torch.equal(twin.attention_mask, b.attention_mask)
    # the twin's columns are the original words' own: gathered back through position_of they are the original's
    assert torch.equal(twin.columns.gather(1, twin.position_of), b.columns)
    assert torch.equal(twin.input_ids.gather(1, twin.position_of), b.input_ids)
    words = Batch.from_encoded(texts, encode(tokenizer, texts, 64)[0], tokenizer, "mean-sum")
    assert words.tokenized_from == "words" and words.word_spans is None and words.twin is None


def test_twin_moves_whole_words():
    # "ab cd" tokenised as [CLS] a ##b c ##d [SEP]: the twin is [CLS] c ##d a ##b [SEP]
    hand = batch([sentence(["ab", "cd"])], [[0, 1, 1, 2, 2, E]], [[attention(6, {})]],
                 input_ids=torch.tensor([[101, 11, 12, 21, 22, 102]]), shuffle_seed=0)
    twin = hand.batch.twin
    assert twin.input_ids.tolist() == [[101, 21, 22, 11, 12, 102]]
    assert twin.columns.tolist() == [[0, 2, 2, 1, 1, 3]]  # still the original words' columns
    assert twin.position_of.tolist() == [[0, 3, 4, 1, 2, 5]] and twin.shuffled.tolist() == [True]


def test_twin_of_a_pair_shuffles_within_segments():
    # [CLS] a b [SEP] c d [SEP]: two words a segment, so each segment's only other order: b a | d c
    hand = batch([sentence(["a", "b", "c", "d"], pair=2)], [[0, 1, 2, E, 3, 4, E]], [[attention(7, {})]],
                 input_ids=torch.tensor([[101, 1, 2, 102, 3, 4, 102]]),
                 token_type_ids=torch.tensor([[0, 0, 0, 0, 1, 1, 1]]), shuffle_seed=5)
    twin = hand.batch.twin
    assert twin.input_ids.tolist() == [[101, 2, 1, 102, 4, 3, 102]]
    assert twin.token_type_ids.tolist() == [[0, 0, 0, 0, 1, 1, 1]]
    assert twin.position_of.tolist() == [[0, 2, 1, 3, 5, 4, 6]]


def test_nothing_is_added_to_a_batch_after_construction():
    from probes.builtin.dep import DependencyProbe

    hand = batch([sentence(["The", "cat"], head=[2, 0], deprel=["det", "root"])], [[0, 1, 2, E]],
                 [[attention(4, {1: {2: 1.0}})]], shuffle_seed=0)
    b = hand.batch
    declared = set(vars(b))
    maps = LayerMaps(b, 0, hand.attentions[0], twin=LayerMaps(b.twin, 0, hand.attentions[0]))
    _ = maps.predictions, maps.twin.word_attention  # pooling matrices: made once per device, kept in the batch
    DependencyProbe(1, 1).update(b, maps)
    assert set(vars(b)) == declared and set(vars(b.twin)) == declared


# ---------------------------------------------------------------------------------------------- the [UNK] share
def test_unknown_words_counted_by_hand(tokenizer):
    sentences = [sentence(["ab", "x", "我", "xy"]), sentence(["abc", "x"]), sentence(["照"])]
    items, _ = encode(tokenizer, sentences, 64)
    unknown = unknown_words(UNK, sentences, items)
    # "x" twice and "xy" once are [UNK]; 7 words; units: ab [UNK] 我 [UNK] | ab ##c [UNK] | 照 = 8, 3 of them [UNK]
    assert (unknown.count, unknown.words, unknown.examples) == (3, 7, ["x", "xy"])
    assert unknown.provenance() == {"count": 3, "words": 7, "share": 3 / 7, "unknown_units": 3, "units": 8,
                                    "unit_share": 3 / 8, "dominated": True, "only_unknown": 3, "only_share": 3 / 7}
    pairs = [sentence(["ab", "我", "x", "6"], pair=2)]  # the [UNK] in the second segment is word 3
    assert unknown_words(UNK, pairs, encode(tokenizer, pairs, 64)[0]).examples == ["x"]
    # raw text: 拍 is [UNK] and starts in 拍照
    texts = [Sentence(words=["我", "拍照"], ann={"text": "我拍照"})]
    unknown = unknown_words(UNK, texts, encode(tokenizer, texts, 64, "text")[0])
    assert (unknown.count, unknown.words, unknown.examples) == (1, 2, ["拍照"])
    assert unknown.only == 0  # 拍照 is [UNK] 照: unknown in part, so not a word that tokenizes only to [UNK]
    assert unknown_words(None, sentences, items).count == 0
    assert unknown_words(None, sentences, items).provenance()["units"] == 8


def _warned(unknown) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        unknown.warn("corpus.conllu")
    return caught


def test_unknown_tokens_dominating_a_run_get_the_stronger_warning(tokenizer):
    # 4 words, 1 [UNK] (25% of the words), 7 units (ab ##c three times, [UNK]): 1 / 7 = 14% ≤ 20%: the word warning
    mild = [sentence(["abc", "abc", "abc", "x"])]
    unknown = unknown_words(UNK, mild, encode(tokenizer, mild, 64)[0])
    assert (unknown.unknown_units, unknown.units, unknown.dominated) == (1, 7, False)
    (w,) = _warned(unknown)
    assert w.category is UnknownWordsWarning and str(w.message).startswith("25.0% of the words (1 of 4)")
    # one more [UNK] word: 2 / 8 = 25% of the units > 20%: dominated, the distinct warning instead
    strong = [sentence(["abc", "abc", "abc", "x", "xy"])]
    unknown = unknown_words(UNK, strong, encode(tokenizer, strong, 64)[0])
    assert (unknown.unknown_units, unknown.units, unknown.dominated) == (2, 8, True)
    (w,) = _warned(unknown)
    assert w.category is UnknownTokensWarning and issubclass(w.category, UnknownWordsWarning)
    assert str(w.message).startswith("the unknown token dominates this run: 25.0% of the words' subword tokens "
                                     "(2 of 8) are unknown, e.g. x, xy:")
    # the shards of a run add up
    added = UnknownWords.added([unknown.provenance(), unknown.provenance()])
    assert (added.count, added.words, added.unknown_units, added.units) == (4, 10, 4, 16)


def _independent_unknown(tokenizer, sentences):
    """Each word tokenised alone: the words with an [UNK] among their subwords."""
    words = [w for s in sentences for w in s.words]
    return [w for w in words if tokenizer.unk_token_id in tokenizer(w, add_special_tokens=False)["input_ids"]], words


def _run_recording(minilm, corpus, limit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = probes.run(["dep"], encoder=minilm, corpus=corpus, limit=limit, progress=False)["dep"]
    return result, [w for w in caught if issubclass(w.category, UnknownWordsWarning)]


@pytest.mark.integration
def test_english_vocabulary_on_chinese_warns_once(minilm, shared_corpora):
    corpus = shared_corpora / "ud-chinese-gsdsimp" / "zh_gsdsimp-ud-dev.conllu"
    result, caught = _run_recording(minilm, corpus, 5)
    unknown, words = _independent_unknown(minilm.tokenizer, read_corpus([corpus]).sentences[:5])
    only = [w for w in words if set(minilm.tokenizer(w, add_special_tokens=False)["input_ids"]) ==
            {minilm.tokenizer.unk_token_id}]
    assert result.info.sentences == 5 and len(unknown) > 0.05 * len(words) and 0 < len(only) <= 0.5 * len(words)
    examples = list(dict.fromkeys(unknown))[:3]
    units = [t for w in words for t in minilm.tokenizer(w, add_special_tokens=False)["input_ids"]]
    unknown_units = units.count(minilm.tokenizer.unk_token_id)
    assert unknown_units > 0.2 * len(units)  # Chinese through an English vocabulary: dominated by [UNK]
    assert result.info.provenance["unknown_words"] == {
        "count": len(unknown), "words": len(words), "share": len(unknown) / len(words), "unknown_units": unknown_units,
        "units": len(units), "unit_share": unknown_units / len(units), "dominated": True,
        "only_unknown": len(only), "only_share": len(only) / len(words)}
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith(f"the unknown token dominates this run: {unknown_units / len(units):.1%} of the words' "
                              f"subword tokens ({unknown_units} of {len(units)}) are unknown, e.g. {', '.join(examples)}:")
    w = caught[0]
    printed = warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line)
    assert printed == f"{corpus}:0: UnknownTokensWarning: {message}\n"  # one line on stderr
    assert result.info.provenance["command"] == shlex.join(sys.argv)


@pytest.mark.integration
def test_english_sample_stays_silent(minilm):
    result, caught = _run_recording(minilm, None, 40)
    sample = read_corpus([bundled_corpus()]).sentences[:40]
    unknown, words = _independent_unknown(minilm.tokenizer, sample)
    assert caught == [] and result.info.sentences == 40
    recorded = result.info.provenance["unknown_words"]
    assert {k: recorded[k] for k in ("count", "words", "share", "dominated")} == {
        "count": len(unknown), "words": len(words), "share": len(unknown) / len(words), "dominated": False}
    assert len(unknown) <= 0.05 * len(words)


def _wrapper_encoding(tok, sentences):
    """What transformers' own call gives for pre-split words: ids, word ids (-1 special), offsets."""
    enc = tok([s.words for s in sentences], is_split_into_words=True, add_special_tokens=True, truncation=False,
              return_offsets_mapping=True)
    return [(enc["input_ids"][i], [-1 if w is None else w for w in enc.word_ids(i)], enc["offset_mapping"][i])
            for i in range(len(sentences))]


@pytest.mark.parametrize("kind", ["minilm", "hand", "bert", "roberta", "deberta", "deberta-v2", "byte-level",
                                  "word-level-bos"])
def test_words_through_the_rust_tokenizer_equal_transformers_call(kind, tokenizer, minilm):
    """encode() reads pre-split words through backend_tokenizer.encode_batch: the same ids, word ids and offsets as
    the transformers call, for WordPiece, byte-level BPE (prefix space), SentencePiece unigram and a word-level
    vocabulary with a start token; and again once the backend was left truncating (the call's path)."""
    import transformers
    from causal_models import byte_level_tokenizer
    from causal_models import tokenizer as word_level
    from tiny_models import build_tokenizer

    tok = {"minilm": lambda: minilm.tokenizer, "hand": lambda: tokenizer,
           "byte-level": byte_level_tokenizer, "word-level-bos": lambda: word_level(bos=True)}.get(
        kind, lambda: build_tokenizer(kind))()
    if kind in ("roberta", "deberta", "byte-level"):  # as load_encoder loads byte-level BPE: a space before each word
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tok.backend_tokenizer, add_prefix_space=True,
                                                       **{k: v for k, v in tok.special_tokens_map.items()
                                                          if isinstance(v, str)})
    sentences = read_corpus([bundled_corpus()]).sentences[:60]
    sentences.append(Sentence(["naïve", "café", "x-ray", "“quoted”", "\u200b", "l'été", "10,000"], {}))
    for truncating in (False, True):
        if truncating:
            tok.backend_tokenizer.enable_truncation(4)
        assert (tok.backend_tokenizer.truncation is not None) == truncating  # the Rust path, then the call's
        kept, skipped = encode(tok, sentences, 10_000)
        expected = _wrapper_encoding(tok, sentences)
        by_index = {e.index: e for e in kept}
        for i, (ids, word_ids, offsets) in enumerate(expected):
            if i not in by_index:  # a sentence encode() skips (a word without subwords) is counted
                assert unusable(ids, np.array(word_ids), len(sentences[i].words), 10_000) is not None
                continue
            e = by_index[i]
            assert e.input_ids == ids, (kind, i)
            assert e.columns.tolist() == subword_columns(np.array(word_ids)).tolist(), (kind, i)
            assert e.offsets.tolist() == [list(o) for o in offsets], (kind, i)
        assert len(kept) + sum(skipped.values()) == len(sentences)
        assert len(kept) >= 50


def test_the_refusal_needs_more_than_half_of_twenty_words():
    """More than half of the words tokenize only to the unknown token, of at least 20 words (issue 42 item 6); a
    word unknown in part does not count."""
    def refused(only: int, words: int, count: int | None = None) -> bool:
        try:
            UnknownWords(only if count is None else count, words, ["x"], only, words, only).refuse("c.conllu")
        except InputError as e:
            assert str(e).startswith(f"c.conllu: {only / words:.1%} of the words ({only} of {words}) tokenize only")
            return True
        return False

    assert [refused(11, 20), refused(10, 20), refused(19, 19), refused(0, 20, count=20)] == [True, False, False, False]
