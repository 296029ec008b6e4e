"""Gradient head importance against finite differences of the loss, and pruning curves, on a tiny fine-tuned
classifier: each point of a curve checked against a copy of the model with those heads' W_O columns zeroed."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from tiny_classifier import fine_tune, genre_split

import probes
from probes.tools.ablation.classifier import ClassifierTarget
from probes.tools.ablation.importance import gate_gradients, head_importance
from probes.tools.ablation.pruning import ascending, prune
from probes.cli import main
from probes.base.defaults import bundled_corpus
from probes.base.errors import InputError
from probes.capture.model import self_attention_modules


@pytest.fixture(scope="module")
def genre_data(tmp_path_factory):
    return genre_split(45, 60, tmp_path_factory.mktemp("genre"))


@pytest.fixture(scope="module")
def classifier_dir(tiny_model, tmp_path_factory, genre_data):
    return fine_tune(tiny_model("bert"), tmp_path_factory.mktemp("tiny_classifier"), genre_data[0], steps=30)


def _scaled(model, layer: int, head: int, factor: float, head_dim: int):
    """A copy whose head (layer, head) output is multiplied by `factor`: W_O's input columns of the head scaled
    (independent of the gate hooks)."""
    edited = copy.deepcopy(model)
    module = self_attention_modules(edited)[layer]
    parent = next(m for m in edited.modules() if getattr(m, "self", None) is module)
    with torch.no_grad():
        parent.output.dense.weight[:, head * head_dim:(head + 1) * head_dim] *= factor
    return edited


def _losses(model, target: ClassifierTarget) -> torch.Tensor:
    """[N] each example's cross-entropy, one example at a time (no padding), in the order of target.chunks."""
    out = []
    with torch.inference_mode():
        for chunk in target.chunks(8):
            for row in range(chunk.gold.shape[0]):
                n = int(chunk.inputs["attention_mask"][row].sum())
                inputs = {k: v[row:row + 1, :n] for k, v in chunk.inputs.items()}
                logits = model(**inputs).logits.double()
                out.append(torch.nn.functional.cross_entropy(logits, chunk.gold[row:row + 1]))
    return torch.stack(out)


@pytest.mark.slow
def test_importance_matches_finite_differences(classifier_dir, genre_data):
    target = ClassifierTarget(str(classifier_dir), [genre_data[1]], label_from="label")
    target.model.double()
    grads = gate_gradients(target, batch_size=8)  # [N,L,H]
    assert grads.shape == (target.scored, target.layers, target.heads)
    eps = 1e-5
    for layer, head in [(0, 0), (0, 3), (1, 1), (1, 2)]:
        up = _losses(_scaled(target.model, layer, head, 1 + eps, target.head_dim), target)
        down = _losses(_scaled(target.model, layer, head, 1 - eps, target.head_dim), target)
        numeric = (up - down) / (2 * eps)  # [N] dL(x)/dξ by central differences
        torch.testing.assert_close(grads[:, layer, head], numeric, rtol=1e-5, atol=1e-8)
    raw = head_importance(target, normalize=False, batch_size=5)  # another batching: same numbers
    np.testing.assert_allclose(raw, grads.abs().mean(0).numpy(), rtol=1e-10)
    normalised = head_importance(target, batch_size=8)
    np.testing.assert_allclose(normalised, raw / np.sqrt((raw ** 2).sum(1, keepdims=True)), rtol=1e-10)
    np.testing.assert_allclose((normalised ** 2).sum(1), 1.0)


def test_ascending_order():
    grid = np.array([[0.5, np.nan, 0.1], [0.1, 0.9, 0.0]])
    assert ascending(grid) == [(0, 1), (1, 2), (0, 2), (1, 0), (0, 0), (1, 1)]  # NaN first, ties by index


def _zeroed(model, heads, head_dim):
    edited = model
    for layer, head in heads:
        edited = _scaled(edited, layer, head, 0.0, head_dim)
    return edited


def _accuracy(model, target: ClassifierTarget) -> float:
    correct = total = 0
    with torch.inference_mode():
        for chunk in target.chunks(8):
            correct += int((model(**chunk.inputs).logits.argmax(-1) == chunk.gold).sum())
            total += chunk.gold.shape[0]
    return correct / total


@pytest.mark.slow
def test_pruning_curves(classifier_dir, genre_data, tmp_path):
    result = prune(str(classifier_dir), genre_data[1], ["importance", "random", "probe:dep:nsubj"],
                   order_data=bundled_corpus(), label_from="sent_id-prefix", step=25, repeats=2, seed=3,
                   progress=False)
    assert result.shares == [0.0, 25.0, 50.0, 75.0, 100.0]
    assert list(result.values) == ["importance", "random #0", "random #1", "probe:dep:nsubj"]
    target = ClassifierTarget(str(classifier_dir), [genre_data[1]], label_from="label")
    # the importance order is that of the importance on the order data
    order_target = ClassifierTarget(str(classifier_dir), [bundled_corpus()], label_from="sent_id-prefix")
    assert result.orders["importance"] == ascending(head_importance(order_target))
    dep = probes.run("dep", model=str(classifier_dir), corpus=bundled_corpus(), progress=False)["dep"]
    assert result.orders["probe:dep:nsubj"] == ascending(dep.scores["nsubj"])
    generator = np.random.default_rng(3)
    assert result.orders["random #0"] == [divmod(int(p), 4) for p in generator.permutation(8)]
    total = target.layers * target.heads
    for name, heads in result.orders.items():
        assert sorted(heads) == [(layer, h) for layer in range(2) for h in range(4)]
        for k, share in enumerate(result.shares):
            pruned = heads[:round(share * total / 100)]
            expected = _accuracy(_zeroed(target.model, pruned, target.head_dim), target)
            assert result.values[name]["accuracy"][k] == pytest.approx(expected, abs=1e-12), (name, share)
    band = result.random_band("accuracy")
    np.testing.assert_allclose(band["mean"], (result.values["random #0"]["accuracy"]
                                              + result.values["random #1"]["accuracy"]) / 2)
    written = result.save(tmp_path)
    assert sorted(p.name for p in written) == ["ablation-pruning-accuracy.png", "ablation-pruning-macro_f1.png",
                                                "ablation-pruning.csv", "ablation-pruning.json"]
    data = json.loads((tmp_path / "ablation-pruning.json").read_text())
    assert data["shares"] == result.shares and data["orders"]["importance"]["heads"][0] == \
        list(result.orders["importance"][0])
    assert data["random"]["accuracy"]["mean"] == pytest.approx(list(band["mean"]))


def test_pruning_cli(classifier_dir, genre_data, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["ablate", "classify", "--model", str(classifier_dir), "--corpus", str(genre_data[1]),
                 "--importance", "--order", "random", "--repeats", "1", "--prune-step", "50", "--quiet",
                 "--out", str(out)]) == 0
    data = json.loads((out / "ablation-pruning.json").read_text())
    assert list(data["orders"]) == ["random #0", "importance"] and data["shares"] == [0.0, 50.0, 100.0]
    assert np.array(data["importance"]).shape == (2, 4)
    assert main(["ablate", "classify", "--model", str(classifier_dir), "--corpus", str(genre_data[1]),
                 "--importance", "--no-normalize", "--out", str(tmp_path / "imp")]) == 0
    saved = json.loads((tmp_path / "imp" / "ablation-importance.json").read_text())
    target = ClassifierTarget(str(classifier_dir), [genre_data[1]], label_from="label")
    np.testing.assert_allclose(saved["importance"], head_importance(target, normalize=False), rtol=1e-6)
    assert saved["normalize"] is False


@pytest.mark.parametrize("order, problem", [
    ("sideways", "unknown pruning order 'sideways'"),
    ("probe:dep:nolabel", "probe 'dep' found no label 'nolabel'"),
])
def test_bad_orders(classifier_dir, genre_data, order, problem):
    with pytest.raises(InputError, match=problem):
        prune(str(classifier_dir), genre_data[1], [order], order_data=bundled_corpus(), label_from="sent_id-prefix",
              progress=False)


def test_importance_needs_classify(tmp_path, capsys):
    assert main(["ablate", "dep", "--importance", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip() == "probes: error: --importance and --order are for the classify target"
    assert not (tmp_path / "x").exists()
