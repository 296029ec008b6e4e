"""The analyses and the checkpoint comparison end to end with real models on real data, through the CLI.

One module-scoped run of the whole analysis set (with dep) on the first LIMIT sentences of UD English
EWT dev for each of the real pair, all-MiniLM-L6-v2 (the packaged default) and its fine-tuned
derivative sre-embedding-model; then `probes compare` and `probes similarity` on them.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import probes
from probe_corpora import grids, same
from probes.cli import main
from probes.encoding.subwords import encode
from probes.settings.registry import available
from rows_alone import FLOAT32_ROUNDING, THREADS, rows_alone, torch_threads

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ANALYSES = ["mass", "entropy", "positional", "rare", "patterns", "head_distance", "word_order"]
LIMIT = 40


def sre_model() -> str:
    if importlib.util.find_spec("sre_embedding_model") is None:
        pytest.skip("sre-embedding-model is not installed")
    import sre_embedding_model

    return str(Path(sre_embedding_model.__file__).parent / "model_weights")


@pytest.fixture(scope="module")
def runs(shared_corpora, tmp_path_factory, minilm):
    dev = str(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")
    root = tmp_path_factory.mktemp("pair")
    for name, model in (("minilm", minilm.name), ("sre", sre_model())):
        assert main(["run", "dep", *ANALYSES, "--model", model, "--corpus", dev, "--limit", str(LIMIT),
                     "--out", str(root / name), "--quiet", "--no-plots"]) == 0  # pictures: one `probes plot` below
    assert main(["compare", str(root / "minilm"), str(root / "sre"), "--out", str(root / "compare"), "--no-plots"]) == 0
    assert main(["similarity", "--model", minilm.name, "--model", sre_model(), "--corpus", dev,
                 "--limit", str(LIMIT), "--out", str(root / "similarity")]) == 0
    assert main(["plot", str(root / "minilm" / "head_distance.json"), "--out", str(root / "plots")]) == 0
    return root


def load(root: Path, folder: str, probe: str) -> dict:
    return json.loads((root / folder / f"{probe}.json").read_text())


def test_every_analysis_ran_on_the_same_sentences(runs):
    for probe in ANALYSES:
        data = load(runs, "minilm", probe)
        assert data["sentences"] == LIMIT and data["skipped"] == 0 and (data["layers"], data["heads"]) == (6, 12)
    assert sorted(p.name for p in (runs / "plots").iterdir()) == [
        "head_distance-dendrogram.png", "head_distance-layout.png", "head_distance-matrix.png",
        "head_distance-nearest.png", "head_distance-overall.png", "head_distance.png"]
    assert (runs / "similarity" / "similarity.png").exists()
    assert (runs / "similarity" / "similarity-change.png").exists()


def test_minilm_mass_and_positional_heads(runs):
    mass, positional = load(runs, "minilm", "mass"), load(runs, "minilm", "positional")
    rows = mass["overall"]["count"]
    assert rows == positional["labels"]["offset+0"]["count"] > 600  # every real token of the 40 sentences
    assert mass["labels"]["prev"]["count"] == rows - LIMIT  # all but each sentence's first token
    # every row's mass splits over [CLS], [SEP] and the rest: cls + sep = overall, all in [0, 1]
    cls, sep = (np.array(mass["labels"][k]["scores"]) for k in ("cls", "sep"))
    np.testing.assert_allclose(cls + sep, np.array(mass["overall"]["scores"]), atol=2e-6)
    # MiniLM layer 0 head 2 is a previous-token head: its argmax is the previous token on > 99% of tokens
    assert positional["positional_heads"][0]["layer"] == 0 and positional["positional_heads"][0]["offset"] == -1
    assert np.array(positional["labels"]["offset-1"]["scores"])[0, 2] > 0.99
    assert np.array(mass["labels"]["prev"]["scores"])[0, 2] > 0.95


def test_minilm_entropy_patterns_distance_word_order(runs):
    entropy = load(runs, "minilm", "entropy")
    h, gap = np.array(entropy["overall"]["scores"]), np.array(entropy["labels"]["gap"]["scores"])
    np.testing.assert_allclose(h + gap, entropy["baselines"]["uniform_entropy"], atol=1e-5)  # gap = ln n − H
    assert np.all(gap >= -1e-6)  # no head is flatter than uniform
    patterns = load(runs, "minilm", "patterns")
    shares = np.stack([np.array(patterns["labels"][c]["scores"]) for c in patterns["labels"]])
    np.testing.assert_allclose(shares.sum(0), 1.0, atol=5e-6)  # each map has exactly one class
    assert np.array(patterns["labels"]["diagonal"]["scores"])[0, 2] > 0.9  # the previous-token head
    assert patterns["labels"]["block"]["scores"] == [[0.0] * 12] * 6  # single sentences are never blocks
    distance = load(runs, "minilm", "head_distance")
    d = np.array(distance["distance"])
    assert d.shape == (72, 72) and np.allclose(d, d.T) and np.all((d >= 0) & (d <= 1))
    order = load(runs, "minilm", "word_order")
    moved = np.array(order["overall"]["scores"])
    assert moved[0, 2] > 0.8  # the previous-token head follows positions: shuffling moves its attention
    assert order["unshuffled_sentences"] + order["overall"]["count"] > 0


def test_real_pair_compare_and_similarity(runs):
    sim = load(runs, "similarity", "similarity")
    grid = np.array(sim["overall"]["scores"])
    assert sim["sentences"] == LIMIT and grid.shape == (6, 12) and np.all((grid > 0) & (grid <= 1 + 1e-6))
    layer_means = grid.mean(1)
    np.testing.assert_allclose(layer_means, sim["layer_means"], atol=1e-6)
    # fine-tuning changed the top layers most and left layer 0 almost untouched
    assert layer_means[0] > 0.99 and layer_means[-1] < layer_means[0] and np.argmin(layer_means) >= 4
    compare = json.loads((runs / "compare" / "compare.json").read_text())
    rows = {(r["probe"], r["label"]): r for r in compare["labels"]}
    dep_a, dep_b = load(runs, "minilm", "dep"), load(runs, "sre", "dep")
    overall = rows[("dep", "overall")]
    grid_a, grid_b = np.array(dep_a["overall"]["scores"]), np.array(dep_b["overall"]["scores"])
    assert overall["score_a"] == pytest.approx(grid_a.max()) and overall["score_b"] == pytest.approx(grid_b.max())
    np.testing.assert_allclose(np.array(overall["delta"], dtype=float), grid_b - grid_a, atol=2e-6)
    # the layer-0 previous-token head survives fine-tuning
    assert rows[("positional", "offset-1")]["best_b"] == "L0-H2"


@pytest.mark.parametrize("threads", THREADS)
def test_analyses_do_not_depend_on_batch_size(minilm, shared_corpora, tmp_path, monkeypatch, threads):
    # Issue 16 §5, issue 24 item 1: given the same maps (each sentence run alone, tests/rows_alone.py), every number
    # of every registered analysis is the same at batch sizes 1 and 128 (within float32 rounding of the probes' own
    # terms, FLOAT32_ROUNDING), on 60 EWT sentences and on 30 pairs made of them (the analyses that need pairs run
    # on those only), at torch threads 1 and 2. Before its terms were float64, head_distance's distances moved by
    # ~1e-5 here; a float32 sum over a batch's rows moved entropy by ~1e-6.
    ewt = shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu"
    words = [" ".join(s.words) for s in probes.corpus.read_corpus([str(ewt)]).sentences[:60]]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in zip(words[::2], words[1::2])))
    classes = [cls for cls in available().values() if cls.__module__.startswith("probes.builtin.analyses.")]
    assert {"head_distance", "entropy", "term_matching"} <= {cls.name for cls in classes}
    single = [c.name for c in classes if "pair" not in c.needs]
    with torch_threads(threads):
        rows_alone(monkeypatch)
        for corpus, names in ((ewt, single), (pairs, [c.name for c in classes])):
            runs = {bs: probes.run(names, encoder=minilm, corpus=corpus, limit=60, batch_size=bs, progress=False)
                    for bs in (1, 128)}
            for name in names:
                assert runs[1][name].info.sentences == runs[128][name].info.sentences > 0
                same(grids(runs[1][name]), grids(runs[128][name]), f"{name} on {corpus.name}", atol=0,
                     rtol=FLOAT32_ROUNDING)


PAIRS = ("the cat sat on the mat\tthe dog sat on the rug\tneutral\n"
         "a storm hit the coast\tthe coast was hit by a storm\tentailment\n"
         "prices rose sharply\tprices fell\tcontradiction\n")


def test_term_matching_on_sentence_pairs(minilm, tmp_path):
    f = tmp_path / "pairs.tsv"
    f.write_text("sentence1\tsentence2\tlabel\n" + PAIRS)
    assert main(["run", "term_matching", "patterns", "--corpus", str(f), "--out", str(tmp_path / "out"),
                 "--quiet"]) == 0
    data = json.loads((tmp_path / "out" / "term_matching.json").read_text())
    # query tokens with an identical token in the other sentence: the cat sat on the mat / the dog sat on the rug
    # → the, sat, on, the (4 each side: 8); storm pair → a, storm, hit, the, coast (5 each side: 10);
    # prices pair → prices (1 each side: 2); total 20 (every word here is one MiniLM token)
    assert data["overall"]["count"] == 20 and data["sentences"] == 3
    uniform = data["baselines"]["uniform"]
    # uniform share: per query token, its matches / tokens of the pair; pair 1 has 15 tokens: "the" matches 2 → 2/15
    # (4 rows), sat/on 1/15 (4 rows); pair 2 (15 tokens): 1/15 × 10; pair 3 (8 tokens): 1/8 × 2
    assert uniform == pytest.approx((4 * 2 / 15 + 4 / 15 + 10 / 15 + 2 / 8) / 20, abs=1e-6)
    best = np.nanmax(np.array(data["overall"]["scores"], dtype=float))
    assert best > 3 * uniform  # some head looks at the same word in the other sentence
    patterns = json.loads((tmp_path / "out" / "patterns.json").read_text())
    shares = np.stack([np.array(patterns["labels"][c]["scores"]) for c in patterns["labels"]])
    np.testing.assert_allclose(shares.sum(0), 1.0, atol=5e-6)  # on pairs too, each map has exactly one class


def test_pairs_encode_as_tokenizer_pairs(minilm):
    pair = probes.corpus.Sentence(words=["the", "cat", "a", "dog"], ann={"pair": 2})
    (item,), skipped = encode(minilm.tokenizer, [pair], 512)
    # [CLS] the cat [SEP] a dog [SEP]: columns 0, 1, 2, end, 3, 4, end; token types 0 for sentence 1, 1 for 2
    assert not skipped and item.columns.tolist() == [0, 1, 2, -2, 3, 4, -2]
    assert item.token_type_ids == [0, 0, 0, 0, 1, 1, 1]
    assert minilm.tokenizer.convert_ids_to_tokens(item.input_ids)[3] == "[SEP]"
