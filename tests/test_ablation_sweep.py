"""Ablation sweeps: mask sets, metrics by hand, and a sweep on a tiny fine-tuned classifier checked head by head
against copies of the model with the heads removed by editing weights."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from tiny_classifier import fine_tune, genre_split

import probes
from probes.tools.ablation import ablate, load_classifier
from probes.tools.ablation.classifier import ClassifierTarget, confusion_scores
from probes.tools.ablation.labelled import SENT_ID_PREFIX, read_labelled
from probes.capture.masking import HeadMasker
from probes.capture.ablation_masks import build_masks, halves, mask_tensor, parse_mask, random_heads
from probes.capture.sharing import SharedPrefix
from probes.base.defaults import bundled_corpus
from probes.base.errors import InputError
from probes.capture.model import self_attention_modules

N_TEST = 50  # 25 email + 25 weblog sentences


# ---------------------------------------------------------------------------------------------
# Mask sets
# ---------------------------------------------------------------------------------------------

def test_sweep_masks():
    masks = build_masks(2, 4, ["heads", "layers", "halves"], ["1:2, 0:*"], percents=[25.0], repeats=3, seed=0)
    assert [m.name for m in masks[:3]] == ["none", "L0-H0", "L0-H1"]
    assert len(masks) == 1 + 8 + 2 + 2 + 1
    assert masks[9].name == "L0" and masks[9].heads == ((0, 0), (0, 1), (0, 2), (0, 3))
    assert [m.name for m in masks[11:13]] == ["bottom", "top"]
    assert masks[-1].heads == ((0, 0), (0, 1), (0, 2), (0, 3), (1, 2)) and masks[-1].sweep == "list"
    # 5 layers: the bottom half is layers 0-1, the top half 2-4 (it takes the odd one)
    bottom, top = halves(5, 1)
    assert bottom.heads == ((0, 0), (1, 0)) and top.heads == ((2, 0), (3, 0), (4, 0))
    table = mask_tensor(masks, 2, 4)  # [M,L,H]
    assert table.shape == (14, 2, 4) and not table[0].any()
    assert table[1].nonzero().tolist() == [[0, 0]] and table[9, 0].all() and not table[9, 1].any()


def test_random_masks_are_seeded_and_sized():
    draws = random_heads(6, 12, [10.0, 50.0], repeats=4, seed=7)
    assert [len(m.heads) for m in draws] == [7] * 4 + [36] * 4  # round(72 × 10%) = 7, 72 × 50% = 36
    assert all(len(set(m.heads)) == len(m.heads) for m in draws)  # without replacement
    assert len({m.heads for m in draws[:4]}) == 4  # four different draws
    assert draws == random_heads(6, 12, [10.0, 50.0], repeats=4, seed=7)
    assert draws != random_heads(6, 12, [10.0, 50.0], repeats=4, seed=8)
    assert len(random_heads(2, 4, [1.0], 1, 0)[0].heads) == 1  # at least one head


@pytest.mark.parametrize("spec, problem", [
    ("2:0", "head 2:0 in mask '2:0' is out of range: the model has 2 layers × 4 heads (layers 0-1, heads 0-3)"),
    ("0:1,1:4", "head 1:4 in mask '0:1,1:4' is out of range"),
    ("1-2", "bad head '1-2' in mask '1-2': expected LAYER:HEAD or LAYER:* (0-indexed)"),
    ("", "bad head '' in mask ''"),
])
def test_bad_masks(spec, problem):
    with pytest.raises(InputError) as e:
        parse_mask(spec, 2, 4)
    assert str(e.value).startswith(problem)


def test_nothing_to_ablate():
    with pytest.raises(InputError, match="nothing to ablate"):
        build_masks(2, 4, [], [], percents=[10.0], repeats=1, seed=0)


def test_read_labelled(tmp_path):
    conllu = tmp_path / "labelled.conllu"
    conllu.write_text("# sent_id = email-x-0001\n# label = positive\n# genre = mail\n# text = Hi there\n"
                      "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n2\tthere\tthere\tADV\tRB\t_\t1\tadvmod\t_\t_\n\n"
                      "# sent_id = weblog-y-0002\n# label = negative\n# genre = blog\n"
                      "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdo\tdo\tAUX\tVBP\t_\t0\troot\t_\t_\n"
                      "2\tn't\tnot\tPART\tRB\t_\t1\tadvmod\t_\t_\n\n", encoding="utf-8")
    by_label = read_labelled([conllu])
    assert [(e.text, e.label, e.line) for e in by_label] == [("Hi there", "positive", 1), ("do n't", "negative", 8)]
    assert [e.label for e in read_labelled([conllu], label_from="genre")] == ["mail", "blog"]
    assert [e.label for e in read_labelled([conllu], label_from=SENT_ID_PREFIX)] == ["email", "weblog"]
    tsv = tmp_path / "pairs.txt"
    tsv.write_text("premise\thypothesis\tlabel\n\nA man sleeps.\tNobody sleeps.\tcontradiction\n", encoding="utf-8")
    (e,) = read_labelled([tsv], format="tsv")
    assert (e.text, e.pair, e.label, e.line) == ("A man sleeps.", "Nobody sleeps.", "contradiction", 3)
    with pytest.raises(InputError, match="cannot tell the data format from the file name"):
        read_labelled([tmp_path / "data.csv"])


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------

def test_confusion_scores_by_hand():
    gold = [0, 0, 1, 1, 2]
    predictions = [[0, 1, 1, 1, 0],   # acc 3/5; F1: c0 2·1/(2+2)=.5, c1 2·2/(2+3)=.8, c2 0 → macro 1.3/3
                   [0, 0, 0, 0, 0],   # acc 2/5; F1: c0 2·2/(2+5)=4/7, c1 0, c2 0 → macro (4/7)/3
                   [3, 0, 1, 1, 2]]   # acc 4/5; c0 2·1/(2+1)=2/3, c1 1, c2 1, c3 (predicted, never gold) 0 → /4
    counts = torch.zeros(3, 4, 4, dtype=torch.long)  # [M, gold, predicted]; class 3 is absent from mask 0 and 1
    for m, pred in enumerate(predictions):
        for g, p in zip(gold, pred):
            counts[m, g, p] += 1
    scores = confusion_scores(counts)
    np.testing.assert_allclose(scores["accuracy"], [0.6, 0.4, 0.8])
    np.testing.assert_allclose(scores["macro_f1"], [1.3 / 3, (4 / 7) / 3, (2 / 3 + 1 + 1 + 0) / 4])


# ---------------------------------------------------------------------------------------------
# A tiny fine-tuned classifier
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def genre_data(tmp_path_factory):
    """Train on 40 short email and 40 short weblog sentences; evaluate on the next 25 of each (a TSV)."""
    return genre_split(65, 80, tmp_path_factory.mktemp("genre"))


@pytest.fixture(scope="module")
def classifier_dir(tiny_model, tmp_path_factory, genre_data):
    return fine_tune(tiny_model("bert"), tmp_path_factory.mktemp("tiny_classifier"), genre_data[0], steps=30)


def _without_heads(model, heads, mode, head_dim):
    """A copy of the classifier with the heads removed by editing weights: zero: W_O's input columns of the
    head are 0; uniform: its query and key rows are 0 (every score 0, so softmax is 1/n over real tokens)."""
    edited = copy.deepcopy(model)
    modules = self_attention_modules(edited)
    parents = {id(m.self): m for m in edited.modules() if hasattr(m, "self") and hasattr(m, "output")}
    with torch.no_grad():
        for layer, head in heads:
            cols = slice(head * head_dim, (head + 1) * head_dim)
            if mode == "zero":
                parents[id(modules[layer])].output.dense.weight[:, cols] = 0
            else:
                for proj in (modules[layer].query, modules[layer].key):
                    proj.weight[cols] = 0
                    proj.bias[cols] = 0
    return edited


def _plain_accuracy(model, target: ClassifierTarget) -> float:
    """Plain evaluation: all examples in one padded batch, no hooks."""
    picked = sorted(target.ids)
    inputs = target.classifier.tokenizer.pad([target.ids[i] for i in picked], return_tensors="pt")
    with torch.inference_mode():
        predicted = model(**inputs).logits.argmax(-1)
    return (predicted == target.gold[picked]).double().mean().item()


@pytest.fixture(scope="module")
def sweeps(classifier_dir, genre_data):
    common = dict(model=str(classifier_dir), corpus=genre_data[1],
                  sweeps=["heads", "layers", "halves", "random"], masks=["0:1,1:2"], percents=[25.0], repeats=3)
    return {mode: ablate("classify", mode=mode, progress=False, **common) for mode in ("zero", "uniform")} | {
        "regrouped": ablate("classify", mode="zero", batch_size=7, masks_per_pass=3, progress=False, **common)}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("mode", ["zero", "uniform"])
def test_sweep_matches_models_without_the_heads(sweeps, classifier_dir, genre_data, mode):
    result = sweeps[mode]
    target = ClassifierTarget(str(classifier_dir), [genre_data[1]])
    model, head_dim = target.classifier.model, target.head_dim
    assert len(result.masks) == 1 + 8 + 2 + 2 + 3 + 1
    assert result.info.sentences == target.scored == N_TEST - sum(result.info.skipped.values()) > 30
    assert result.baseline["accuracy"] == _plain_accuracy(model, target)
    for k, mask in enumerate(result.masks):
        if mask.sweep in ("heads", "layers", "list"):
            expected = _plain_accuracy(_without_heads(model, mask.heads, mode, head_dim), target)
            assert result.values["accuracy"][k] == expected, mask.name


@pytest.mark.integration
def test_sweep_does_not_depend_on_grouping(sweeps):
    a, b = sweeps["zero"], sweeps["regrouped"]
    assert [m.name for m in a.masks] == [m.name for m in b.masks]
    for metric in ("accuracy", "macro_f1"):
        np.testing.assert_array_equal(a.values[metric], b.values[metric])


@pytest.mark.integration
def test_sweep_summaries(sweeps, tmp_path):
    result = sweeps["zero"]
    acc = result.values["accuracy"]
    delta = acc - acc[0]
    grid = result.head_grid("accuracy")  # [L,H]
    assert grid.shape == (2, 4)
    np.testing.assert_array_equal(grid.ravel(), delta[1:9])  # masks 1..8 are L0-H0 .. L1-H3
    np.testing.assert_array_equal(result.layer_deltas("accuracy"), delta[9:11])
    random = result.random_summary("accuracy")["25%"]
    assert random["heads"] == 2 and random["repeats"] == 3
    assert random["mean"] == pytest.approx(np.mean(delta[13:16]))
    assert random["std"] == pytest.approx(np.std(delta[13:16], ddof=1))
    ranked = result.ranked("accuracy", "heads")
    assert [d for _, d in ranked] == sorted(delta[1:9].tolist())
    written = result.save(tmp_path, plots=True)
    names = {p.name for p in written}
    assert {"ablation-classify.json", "ablation-classify.csv", "ablation-classify-heads-accuracy.png",
            "ablation-classify-layers-macro_f1.png"} <= names
    data = json.loads((tmp_path / "ablation-classify.json").read_text())
    assert data["baseline"]["accuracy"] == pytest.approx(acc[0]) and data["labels"] == ["email", "weblog"]
    assert np.array(data["sweeps"]["heads"]["accuracy"], dtype=float).shape == (2, 4)
    assert sum(map(sum, data["confusion"])) == result.info.sentences
    assert data["masks"][-1]["name"] == "0:1,1:2" and data["masks"][-1]["heads"] == [[0, 1], [1, 2]]
    assert len(result.to_frame()) == len(result.masks) * 2
    assert "single heads, hurt most" in result.summary()


FAMILIES = [pytest.param("bert", marks=pytest.mark.bert), pytest.param("roberta", marks=pytest.mark.roberta),
            pytest.param("electra", marks=pytest.mark.electra),
            pytest.param("deberta-v2", marks=pytest.mark.deberta), pytest.param("deberta", marks=pytest.mark.deberta)]


@pytest.mark.integration
@pytest.mark.parametrize("family", FAMILIES)
def test_shared_prefix_equals_repeated_inputs(family, tiny_model, genre_data, tmp_path):
    """Running layer 0 once and repeating the batch at layer 1 gives the logits of repeating the inputs, for
    masks whose first disabled head is in layer 1, in both modes, for every family's classifier."""
    model_dir = fine_tune(tiny_model(family), tmp_path / "classifier", genre_data[0], steps=0)
    target = ClassifierTarget(str(model_dir), [genre_data[1]])
    chunk = target.chunks(8)[0]
    b = chunk.gold.shape[0]
    masks = torch.zeros(3, 2, 4, dtype=torch.bool)  # [G,L,H]: 1:0 | 1:2,1:3 | nothing
    masks[0, 1, 0] = masks[1, 1, 2] = masks[1, 1, 3] = True
    for mode in ("zero", "uniform"):
        with HeadMasker(target.model, target.modules, target.heads, target.head_dim, mode) as masker, \
                SharedPrefix(target.model, target.modules) as prefix, torch.inference_mode():
            assert prefix.usable
            masker.set(masks.repeat_interleave(b, dim=0))
            repeated = target.model(**{k: v.repeat(3, 1) for k, v in chunk.inputs.items()}).logits  # [3B,K]
            prefix.set(3, 1)
            shared = target.model(**chunk.inputs).logits
            prefix.set(1, 0)
            predicted = target.predict(chunk, 3), target.predict(chunk, 3, prefix, 1)  # [3,B] each
        torch.testing.assert_close(shared, repeated, rtol=1e-5, atol=1e-6)
        assert not torch.equal(repeated[:b], repeated[2 * b:])  # the masks do change the logits
        assert shared.shape == (3 * b, 2) and torch.equal(*predicted)


@pytest.mark.integration
def test_text_pairs(classifier_dir, tmp_path):
    """A 3-column TSV is read as (text, text_pair, label): both segments, token types 0 and 1."""
    data = tmp_path / "pairs.tsv"
    data.write_text("text\tpair\tlabel\nthe cat sat\ton the mat\temail\nwe went home\tit was late\tweblog\n",
                    encoding="utf-8")
    target = ClassifierTarget(str(classifier_dir), [data])
    chunk = target.chunks(8)[0]
    assert chunk.inputs["token_type_ids"].max() == 1 and target.gold.tolist() == [0, 1]
    sep = target.classifier.tokenizer.sep_token_id
    assert (chunk.inputs["input_ids"] == sep).sum(1).tolist() == [2, 2]


@pytest.mark.integration
def test_probe_target_matches_run(tiny_model):
    """A probe target's baseline is probes.run's result; zero-masking the last layer leaves every other dep score as
    is (attention maps of earlier layers cannot change) and its own heads are not scored (NaN)."""
    model = str(tiny_model("bert"))
    result = ablate("dep", model=model, corpus=bundled_corpus(), masks=["1:*", "0:*"], limit=30, progress=False)
    plain = probes.run("dep", model=model, corpus=bundled_corpus(), limit=30, progress=False)["dep"]
    np.testing.assert_array_equal(result.grids[0], plain.scores["overall"])
    np.testing.assert_array_equal(result.grids[1][0], plain.scores["overall"][0])  # 1:* changes nothing below
    assert np.isnan(result.grids[1][1]).all() and np.isnan(result.grids[2][0]).all()  # disabled: not scored
    assert result.values["best"][0] == np.nanmax(plain.scores["overall"])
    assert result.values["best"][1] == np.nanmax(plain.scores["overall"][0])
    assert result.metrics == ["best", "mean"] and result.extra["label"] == "overall"


def test_load_classifier_needs_a_head(tiny_model):
    with pytest.raises(InputError, match=r"no sequence-classification head \(architectures: BertModel\)"):
        load_classifier(str(tiny_model("bert")))
