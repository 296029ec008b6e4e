"""The causal detectors on a real model: the 2-layer attention-only GPT-2 that benchmarks/train_induction.py trained
(seed 29) on repeated spans, committed under tests/data/induction-gpt2 with its initial weights under init/.

Olsson et al. 2022's composition: a previous-token head in layer 0, an induction head in layer 1 whose OV circuit
copies; neither at initialisation."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from probes.tools.detect import DETECTORS, detect

TRAINED = Path(__file__).resolve().parent / "data" / "induction-gpt2"


@pytest.fixture(scope="module")
def scored():
    """Both models on the same 32 sequences of 24 random tokens repeated (seed 0), 100 bootstrap replicates."""
    def run(folder: Path):
        return detect(DETECTORS, str(folder), count=32, length=24, sequence_seed=0, replicates=100, progress=False)
    return run(TRAINED), run(TRAINED / "init")


def test_an_induction_head_in_layer_1_far_above_initialisation(scored):
    trained, init = scored
    prefix = trained["induction"].labels["prefix_matching"].scores  # [2,4]
    best = trained["induction"].overall.best
    assert best.layer == 1 and prefix[1, best.head] == prefix.max()
    assert best.ci_low > 0.5  # the selection-aware interval's lower bound
    assert prefix.max() > 5 * init["induction"].labels["prefix_matching"].scores.max()
    assert {(h["layer"], h["head"]) for h in trained["induction"].extra["induction_heads"]} >= {(1, best.head)}


def test_a_previous_token_head_in_layer_0_far_above_initialisation(scored):
    trained, init = scored
    previous = trained["prev_token"].overall
    assert previous.best.layer == 0 and previous.best.ci_low > 0.5
    assert previous.scores.max() > 5 * init["prev_token"].overall.scores.max()


def test_the_copying_score_separates_the_induction_heads(scored):
    """The heads that prefix-match copy what they attend to (eigenvalues of W_U·W_O·W_V·W_E all but positive); the
    previous-token head does not (it moves the previous token's identity for layer 1's keys, not to the logits);
    at initialisation no head does either. Only attention and copying together single out the induction heads: a
    layer-0 head that attends nowhere in particular may copy too."""
    trained, init = scored
    induction = trained["induction"]
    prefix, copying = induction.labels["prefix_matching"].scores, induction.labels["copying"].scores  # [2,4]
    assert (prefix >= 0.5).sum() >= 2 and np.all(copying[prefix >= 0.5] > 0.99)
    previous = trained["prev_token"].overall.best
    assert copying[previous.layer, previous.head] < 0
    assert np.all(np.abs(init["induction"].labels["copying"].scores) < 0.2)
    found = {(h["layer"], h["head"]) for h in induction.extra["induction_heads"]}
    assert {layer for layer, _ in found} == {1} and (1, induction.overall.best.head) in found


def test_the_entries_give_the_scores_the_full_maps_give(scored, monkeypatch):
    """Alone the detectors read each layer's entries only (AttentionEntries from SDPA's logsumexp); beside a probe
    that reads the whole map (entropy) they read the same entries out of the full maps: the same scores, within
    float32 rounding, and the same counts."""
    from probes.capture.sdpa_qk import AttentionEntries

    trained, _ = scored
    computed = []
    at = AttentionEntries.at
    monkeypatch.setattr(AttentionEntries, "at", lambda self, *entry: computed.append(len(entry[0])) or at(self, *entry))
    detect(DETECTORS, str(TRAINED), count=2, length=24, sequence_seed=0, progress=False)
    assert len(computed) == 2 * 4  # 2 layers × (prev_token, duplicate, induction, sink's first: no start token), 1 batch
    beside = detect([*DETECTORS, "entropy"], str(TRAINED), count=32, length=24, sequence_seed=0, replicates=100,
                    progress=False)
    for name in DETECTORS:
        for label, entry in trained[name].labels.items():
            assert beside[name].labels[label].count == entry.count, (name, label)
            np.testing.assert_allclose(beside[name].labels[label].scores, entry.scores, atol=1e-6, rtol=0,
                                       err_msg=f"{name} {label}")
    assert len(computed) == 8  # none more: with entropy the maps are full
