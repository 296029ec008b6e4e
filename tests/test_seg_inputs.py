"""seg's inputs: raw-text tokenisation aligned by offsets, and bad input through the CLI
(exit 2 with one line, or a counted skip)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from probes.cli import main
from probes.corpus.sentence import Sentence
from probes.encoding.subwords import encode

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "我", "用", "i", "##p", "##h", "##o", "##n", "##e", "6", "照",
         "ab", "##c"]


@pytest.fixture(scope="module")
def tokenizer():
    import transformers

    return transformers.BertTokenizerFast(vocab={t: i for i, t in enumerate(VOCAB)}, do_lower_case=True)


def _s(words, text):
    return Sentence(words=words, ann={"text": text})


def test_raw_text_tokens_map_to_words_by_offsets(tokenizer):
    # 我用iPhone 6拍照 → [CLS] 我 用 i ##p ##h ##o ##n ##e 6 [UNK] 照 [SEP]; 拍 is not in the vocabulary, so
    # [UNK] stands for it: its offsets (10, 11) still put it in 拍照 (word 5).
    s = _s(["我", "用", "iPhone", "6", "拍照"], "我用iPhone 6拍照")
    (e,), skipped = encode(tokenizer, [s], 64, "text")
    assert skipped == {}
    assert e.columns.tolist() == [0, 1, 2, 3, 3, 3, 3, 3, 3, 4, 5, 5, 13 - 15]  # END_COLUMN (-2) for [SEP]
    assert e.offsets[10].tolist() == [10, 11] and e.input_ids[10] == VOCAB.index("[UNK]")
    assert e.word_spans == [(0, 1), (1, 2), (2, 8), (9, 10), (10, 12)]
    assert s.ann == {"text": "我用iPhone 6拍照"}  # encoding writes nothing into the sentence


def test_raw_text_skips_are_counted(tokenizer):
    sentences = [
        _s(["a", "bc"], "abc"),  # token "ab" crosses a|bc; both words still hold a token start: kept
        _s(["a", "b", "c"], "abc"),  # "b" holds no token start (inside "ab"): skipped
        Sentence(words=["我"], ann={}),  # no raw text
        _s(["我", "们"], "我用"),  # text does not spell the words
        _s(["我"] * 70, "我" * 70),  # 72 tokens > 64
    ]
    kept, skipped = encode(tokenizer, sentences, 64, "text")
    assert [e.index for e in kept] == [0] and kept[0].columns.tolist() == [0, 1, 2, -2]
    assert skipped == {"word_without_subwords": 1, "no_text": 1, "words_not_in_text": 1, "too_long": 1}


def _run(capsys, *args):
    capsys.readouterr()  # drop what building the tiny model printed
    code = main(["run", "seg", "--quiet", "--no-plots", *args])
    return code, capsys.readouterr()


def test_segmented_file_with_an_empty_line(tmp_path, capsys, tiny_model):
    f = tmp_path / "gold.txt"
    f.write_text("我们 喜欢 北京\n\n他 来 了\n", encoding="utf-8")
    out = tmp_path / "out"
    code, io = _run(capsys, "--model", str(tiny_model("bert")), "--corpus", str(f), "--out", str(out))
    assert code == 2 and not out.exists()
    assert io.err.strip() == f"probes: error: {f}:2: empty line: one sentence per line expected"


def test_sentence_longer_than_the_model_allows_is_counted(tmp_path, capsys, tiny_model):
    # The tiny BERT's vocabulary has no CJK characters: every character is one [UNK] token.
    f = tmp_path / "gold.txt"
    f.write_text("我们 喜欢 北京\n" + "他 来 了 " * 30 + "\n好\n", encoding="utf-8")
    out = tmp_path / "out"
    code, _ = _run(capsys, "--model", str(tiny_model("bert")), "--corpus", str(f), "--out", str(out),
                   "--tokenize", "text")
    assert code == 0
    result = json.loads((out / "seg.json").read_text(encoding="utf-8"))
    assert result["sentences"] == 2 and result["skipped_reasons"] == {"too_long": 1}
    assert result["units"]["units"] == 7 and result["units"]["unk_units"] == 7 and result["units"]["gold_words"] == 4
    assert result["settings"]["tokenize"] == "text"


def test_text_that_does_not_match_the_words(tmp_path, capsys, tiny_model):
    rows = "1\t我们\t_\tPRON\t_\t_\t0\troot\t_\t_\n2\t好\t_\tADJ\t_\t_\t1\tamod\t_\t_\n"
    good = "# text = 我们好\n" + rows + "\n"
    bad = "# text = 我门好\n" + rows + "\n"
    f = tmp_path / "zh.conllu"
    f.write_text(good + bad, encoding="utf-8")
    out = tmp_path / "out"
    code, _ = _run(capsys, "--model", str(tiny_model("bert")), "--corpus", str(f), "--out", str(out),
                   "--tokenize", "text")
    assert code == 0
    assert json.loads((out / "seg.json").read_text(encoding="utf-8"))["skipped_reasons"] == {"words_not_in_text": 1}
    f.write_text(bad, encoding="utf-8")
    code, io = _run(capsys, "--model", str(tiny_model("bert")), "--corpus", str(f), "--out", str(tmp_path / "o2"),
                    "--tokenize", "text")
    assert code == 2 and "no sentence can be scored (of 1: 1 words not in text" in io.err
    assert not (tmp_path / "o2").exists()


def test_bad_options(tmp_path, capsys, tiny_model):
    f = tmp_path / "gold.txt"
    f.write_text("我们 喜欢 北京\n", encoding="utf-8")
    code, io = _run(capsys, "--model", str(tiny_model("bert")), "--corpus", str(f), "--ensemble-size", "-1")
    assert code == 2 and io.err.strip() == "probes: error: seg: ensemble-size must be 0 or more, not -1"
    out = tmp_path / "out"
    assert _run(capsys, "--model", str(tiny_model("bert")), "--corpus", str(f), "--out", str(out))[0] == 0
    capsys.readouterr()
    assert main(["show", str(out / "seg.json"), "--head", "L7-H0"]) == 2
    assert "no head L7-H0: the model has 2 layers × 4 heads" in capsys.readouterr().err
    assert main(["show", str(out / "seg.json"), "--head", "L1-H3", "--sentences", "1"]) == 0
    shown = capsys.readouterr().out
    assert "gold            我们 喜欢 北京" in shown and "L1-H3" in shown
    np.testing.assert_equal(shown.count("\n  gold "), 1)
