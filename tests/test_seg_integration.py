"""seg end to end: a tiny character-level Chinese BERT through the CLI and the real MiniLM through the
library on the full UD Chinese GSDSimp test file (raw text), MiniLM through the CLI on UD English EWT
test (subwords of pre-split words, first 200 sentences). Expected counts are computed here
independently, from the corpus files and the tokenizer."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import probes
from probes.cli import main
from probes.corpus.conllu_reader import read_conllu
from tiny_chinese_bert import MAX_POSITIONS, build_tiny_chinese_bert

pytestmark = [pytest.mark.integration, pytest.mark.shared, pytest.mark.slow]


@pytest.fixture(scope="module")
def gsd(shared_corpora) -> Path:
    return shared_corpora / "ud-chinese-gsdsimp"


@pytest.fixture(scope="module")
def tiny_zh(gsd, tmp_path_factory) -> Path:
    """The tiny random character-level Chinese BERT, its vocabulary from GSDSimp dev + test characters."""
    return build_tiny_chinese_bert(tmp_path_factory.mktemp("tiny_zh"),
                                   [gsd / "zh_gsdsimp-ud-dev.conllu", gsd / "zh_gsdsimp-ud-test.conllu"])


def _cli(out: Path, *args) -> dict:
    assert main(["run", "seg", "--quiet", "--no-plots", "--out", str(out), *args]) == 0
    return json.loads((out / "seg.json").read_text(encoding="utf-8"))


def _all_ends_f1(single_unit_words: int, units: int, gold_words: int) -> float:
    """Word F1 of "every unit a word": right = the one-unit gold words."""
    return 2 * single_unit_words / (units + gold_words)


@pytest.fixture(scope="module")
def tiny_zh_result(tiny_zh, gsd, tmp_path_factory):
    out = tmp_path_factory.mktemp("seg_tiny_zh")
    return out, _cli(out, "--model", str(tiny_zh), "--corpus", str(gsd / "zh_gsdsimp-ud-test.conllu"),
                     "--tokenize", "text")


def test_tiny_chinese_bert_on_gsdsimp_test(tiny_zh_result, gsd):
    _, r = tiny_zh_result
    sentences = read_conllu(gsd / "zh_gsdsimp-ud-test.conllu").sentences
    # one token per character with this vocabulary; [CLS] + [SEP] must fit in 128 positions
    scored = [s for s in sentences if len("".join(s.ann["text"].split())) + 2 <= MAX_POSITIONS]
    assert len(scored) == 499 and r["sentences"] == 499 and r["skipped_reasons"] == {"too_long": 1}
    units = sum(len("".join(s.ann["text"].split())) for s in scored)
    words = sum(len(s.words) for s in scored)
    assert r["units"] == {"units": units, "unk_units": 0, "decisions": units - 499, "known_decisions": units - 499,
                          "gold_boundaries": words - 499, "gold_words": words, "unreachable_words": 0,
                          "boundaries_inside_tokens": 0}
    one_char = sum(len(w) == 1 for s in scored for w in s.words)
    assert r["baselines"]["all_ends"]["word_f1"] == pytest.approx(_all_ends_f1(one_char, units, words), abs=1e-6)
    assert r["labels"]["len1"]["count"] == one_char
    best = max(x for row in r["overall"]["scores"] for x in row)
    assert r["ensembles"]["oracle"][0]["word_f1"] == best  # the kept bits agree with the additive counts
    curve = [s["word_f1"] for s in r["ensembles"]["oracle"]]
    assert curve == sorted(curve) and len(set(curve)) == len(curve)
    assert r["union"]["oracle"]["word_f1"] >= curve[-1]


def test_tiny_chinese_bert_show(tiny_zh_result, capsys):
    out, _ = tiny_zh_result
    capsys.readouterr()
    assert main(["show", str(out / "seg.json"), "--sentences", "2"]) == 0
    shown = capsys.readouterr().out
    assert "gold            然而 ， 这样 的 处理 也 衍生 了 一些 问题 。" in shown
    assert "[test-s2]" in shown and "[test-s3]" not in shown and "greedy oracle: word F1 by k" in shown


def _same(a, b):
    ja, jb = a.to_json(), b.to_json()
    for key in ("overall", "labels", "baselines", "union", "ensembles", "units", "examples", "sentences"):
        assert ja[key] == jb[key], key


def test_batch_size_and_tokenize_mode_do_not_change_scores(tiny_zh, gsd):
    encoder = probes.load_encoder(str(tiny_zh))
    corpus = [gsd / "zh_gsdsimp-ud-test.conllu"]
    runs = {bs: probes.run("seg", encoder=encoder, corpus=corpus, tokenize="text", batch_size=bs, limit=40)["seg"]
            for bs in (1, 7, 64)}
    _same(runs[1], runs[7])
    _same(runs[1], runs[64])
    # A character-level BERT tokenizer splits pre-split Chinese words into the same characters as the raw
    # text, so the two inputs must give the same scores (this checks the offset alignment end to end).
    _same(runs[7], probes.run("seg", encoder=encoder, corpus=corpus, tokenize="words", batch_size=7, limit=40)["seg"])


@pytest.fixture(scope="module")
def minilm_gsd(minilm, gsd):
    """The full test file, through the library with the session's loaded MiniLM (EWT below goes through the CLI)."""
    return probes.run("seg", encoder=minilm, corpus=gsd / "zh_gsdsimp-ud-test.conllu", tokenize="text")["seg"].to_json()


def test_minilm_on_gsdsimp_test(minilm_gsd, minilm, gsd):
    r = minilm_gsd
    sentences = read_conllu(gsd / "zh_gsdsimp-ud-test.conllu").sentences
    tok = minilm.tokenizer
    ids = tok([s.ann["text"] for s in sentences], add_special_tokens=False)["input_ids"]
    units = sum(len(x) for x in ids)
    assert r["sentences"] == 500 and r["skipped"] == 0
    assert r["units"]["units"] == units == 18207
    assert r["units"]["unk_units"] == sum(x.count(tok.unk_token_id) for x in ids) == 10819  # 59%: few CJK in its vocab
    one_token = sum(len(tok.tokenize(w)) == 1 for s in sentences for w in s.words)
    assert r["baselines"]["all_ends"]["word_f1"] == pytest.approx(_all_ends_f1(one_token, units, 12012), abs=1e-6)
    # Real figures of this model (see the report): no single head beats "every character a word" by much,
    # while the oracle union of heads looks high because heads that always end complement heads that
    # always look at the next token.
    best = max(x for row in r["overall"]["scores"] for x in row)
    assert best == pytest.approx(0.431, abs=0.002) and best >= r["baselines"]["all_ends"]["word_f1"]
    assert r["ensembles"]["oracle"][0]["word_f1"] == best
    assert r["ensembles"]["oracle"][4]["word_f1"] == pytest.approx(0.939, abs=0.002)
    assert r["union"]["oracle"]["word_f1"] == pytest.approx(0.946, abs=0.002)


def test_minilm_on_ewt_subwords(minilm, shared_corpora, tmp_path):
    from probes.base.defaults import default_model

    path = shared_corpora / "ud-english-ewt" / "en_ewt-ud-test.conllu"
    r = _cli(tmp_path, "--model", default_model(), "--corpus", str(path), "--limit", "200")
    sentences = read_conllu(path).sentences[:200]
    tok = minilm.tokenizer
    pieces = [len(tok.tokenize(w)) for s in sentences for w in s.words]
    assert r["sentences"] == 200 and r["units"]["units"] == sum(pieces) and r["units"]["gold_words"] == len(pieces)
    assert r["units"]["decisions"] == sum(pieces) - 200 and r["units"]["unreachable_words"] == 0
    assert r["labels"]["len1"]["count"] == pieces.count(1)
    assert r["baselines"]["all_ends"]["word_f1"] == pytest.approx(
        _all_ends_f1(pieces.count(1), sum(pieces), len(pieces)), abs=1e-6)
    best = max(x for row in r["overall"]["scores"] for x in row)
    assert r["ensembles"]["oracle"][0]["word_f1"] == best
    oracle5 = r["ensembles"]["oracle"][4]["word_f1"]
    assert oracle5 > 0.95 and r["union"]["oracle"]["word_f1"] >= oracle5
    # some head keeps a word's subwords together: it finds multi-piece words that "every piece a word" never can
    assert np.nanmax(np.array(r["labels"]["len2"]["scores"], dtype=float)) > 0.4
