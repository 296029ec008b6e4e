"""dep on hand-built attention: every expected number below is worked out in the comments."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from probes.builtin.dep import OFFSETS, DependencyProbe
from probes.capture.maps import LayerMaps
from probes.results.probe_result import RunInfo
from helpers import CAT, CAT_COLUMNS, CAT_TO_HEADS, HI, HI_COLUMNS, HI_TO_HEADS, attention, batch, feed
from state_checks import check_state, info, two_layers

# Sentence 1: "The playing cat", tokens [CLS] The play ##ing cat [SEP] (positions 0..5).
#   arcs: The -det-> cat (1→3), playing -amod-> cat (2→3), cat -root-> [CLS] (3→0)
# Sentence 2: "Hi", tokens [CLS] Hi [SEP]; arc Hi -root-> [CLS] (1→0).
S1, S2, C1, C2 = CAT, HI, CAT_COLUMNS, HI_COLUMNS  # see tests/helpers.py

# Head 0 is a perfect dependent→head head: each word's subwords look at its head's subword, the root at [CLS].
H0_S1, H0_S2 = CAT_TO_HEADS, HI_TO_HEADS
# Head 1 puts most weight on [SEP] (column never a target); the argmax is taken over the rest:
#   The   (pos 1): 0.7 SEP + 0.3 on "play"                 → pred = playing (2)  det wrong
#   playing (pos 2, 3): 0.6 SEP + 0.4 The / 0.5 SEP + 0.5 cat; mean row: The 0.20, cat 0.25 → pred = cat (3)
#   cat   (pos 4): 0.3 CLS + 0.2 play + 0.2 ##ing + 0.3 SEP; columns summed: CLS 0.3 < playing 0.4 → pred = playing (2)
#   [CLS] (pos 0): 0.1 CLS + 0.9 SEP                        → pred = CLS (0)
#   → det ✗; amod ✓ both ways (pred[2]=3, pred[3]=2); root ✗ (pred[3]=2, pred[CLS]=0)
H1_S1 = attention(6, {0: {0: 0.1, 5: 0.9}, 1: {5: 0.7, 2: 0.3}, 2: {5: 0.6, 1: 0.4}, 3: {5: 0.5, 4: 0.5},
                      4: {0: 0.3, 2: 0.2, 3: 0.2, 5: 0.3}})
#   Hi (pos 1): 0.9 SEP + 0.1 self → pred = Hi (1): root ✗ as dependent→head;
#   [CLS] (pos 0): 0.2 Hi + 0.8 SEP → pred[CLS] = Hi: root ✓ as head→dependent.
H1_S2 = attention(3, {0: {1: 0.2, 2: 0.8}, 1: {2: 0.9, 1: 0.1}})


def _run(groups, pool="mean-sum"):
    probe = DependencyProbe(1, 2)
    for sentences, columns, maps in groups:
        feed(probe, batch(sentences, columns, maps, pool=pool))
    info = RunInfo(model="hand", corpus=["hand"], layers=1, heads=2, sentences=2, skipped={}, settings={}, provenance={})
    return probe.compute(info)


def _both_in_one_batch(pool="mean-sum"):
    return _run([([S1, S2], [C1, C2], [[H0_S1, H1_S1], [H0_S2, H1_S2]])], pool)


def test_scores_worked_out_by_hand():
    r = _both_in_one_batch()
    assert r.labels["det"].count == 1 and r.labels["amod"].count == 1 and r.labels["root"].count == 2
    np.testing.assert_array_equal(r.labels["det"].scores, [[1.0, 0.0]])
    np.testing.assert_array_equal(r.labels["amod"].scores, [[1.0, 1.0]])
    np.testing.assert_array_equal(r.labels["root"].scores, [[1.0, 0.5]])
    assert r.overall.count == 4
    np.testing.assert_array_equal(r.overall.scores, [[1.0, 0.5]])


def test_directions_separately():
    r = _both_in_one_batch()
    # head 0: all four arcs dependent→head, none head→dependent (pred[cat]=CLS, pred[CLS]=CLS)
    np.testing.assert_array_equal(r.overall.extra["dep_to_head"], [[1.0, 0.25]])
    np.testing.assert_array_equal(r.overall.extra["head_to_dep"], [[0.0, 0.5]])
    np.testing.assert_array_equal(r.labels["root"].extra["head_to_dep"], [[0.0, 0.5]])
    np.testing.assert_array_equal(r.labels["amod"].extra["head_to_dep"], [[0.0, 1.0]])


def test_offset_baselines():
    r = _both_in_one_batch()
    b = r.baselines["labels"]
    assert r.baselines["offsets"] == list(OFFSETS) == [-3, -2, -1, 1, 2, 3]
    # det 1→3: dependent→head at +2, head→dependent at −2
    assert b["det"]["dep_to_head"] == [0, 0, 0, 0, 1, 0] and b["det"]["head_to_dep"] == [0, 1, 0, 0, 0, 0]
    assert b["det"]["either"] == [0, 1, 0, 0, 1, 0]
    # amod 2→3: ±1
    assert b["amod"]["either"] == [0, 0, 1, 1, 0, 0]
    # root 3→0 and 1→0: dependent→head at −3 and −1; head→dependent at +3 and +1; each 1 of 2 arcs
    assert b["root"]["dep_to_head"] == [0.5, 0, 0.5, 0, 0, 0]
    assert b["root"]["either"] == [0.5, 0, 0.5, 0.5, 0, 0.5]
    assert b["root"]["best"] == 0.5 and b["det"]["best_offset"] == -2


def test_batching_and_padding_do_not_change_scores():
    together = _both_in_one_batch()
    apart = _run([([S2], [C2], [[H0_S2, H1_S2]]), ([S1], [C1], [[H0_S1, H1_S1]])])
    for label in ("det", "amod", "root"):
        np.testing.assert_array_equal(together.labels[label].scores, apart.labels[label].scores)
        np.testing.assert_array_equal(together.labels[label].extra["head_to_dep"], apart.labels[label].extra["head_to_dep"])


def test_shards_merge_by_adding():
    full = _both_in_one_batch()
    a, b = DependencyProbe(1, 2), DependencyProbe(1, 2)
    feed(a, batch([S1], [C1], [[H0_S1, H1_S1]]))
    feed(b, batch([S2], [C2], [[H0_S2, H1_S2]]))
    a.merge(b)
    merged = a.compute(RunInfo("hand", ["hand"], 1, 2, 2, {}, {}, {}))
    np.testing.assert_array_equal(merged.overall.scores, full.overall.scores)
    assert merged.baselines == full.baselines


def test_state_merges_saves_and_resets():
    batches = [two_layers(batch([S1], [C1], [[H0_S1, H1_S1]])), two_layers(batch([S2], [C2], [[H0_S2, H1_S2]]))]
    r = check_state(lambda: DependencyProbe(2, 2), batches, info(2, 2))
    np.testing.assert_array_equal(r.overall.scores, [[1.0, 0.5], [0.5, 1.0]])  # layer 1: the heads reversed
    assert r.overall.count == 4 and r.labels["root"].count == 2  # arcs counted once, not once per layer
    assert r.baselines["labels"]["root"]["either"] == [0.5, 0, 0.5, 0.5, 0, 0.5]


def test_first_subword_pooling_changes_the_answer():
    # With "first" pooling, "playing" is its first subword "play" (row: 0.6 SEP + 0.4 The → pred The),
    # and the column of "playing" is only "play": cat's row has CLS 0.3 > play 0.2 → pred[cat] = CLS.
    r = _both_in_one_batch(pool="first")
    np.testing.assert_array_equal(r.labels["amod"].scores, [[1.0, 0.0]])
    # root of sentence 1 is now right for head 1 dependent→head (pred[cat] = CLS): 2 of 2 root arcs
    np.testing.assert_array_equal(r.labels["root"].scores, [[1.0, 1.0]])


def test_word_rows_sum_to_one_with_default_pooling():
    hand = batch([S1, S2], [C1, C2], [[H0_S1, H1_S1], [H0_S2, H1_S2]])
    words = LayerMaps(hand.batch, 0, hand.attentions[0]).word_attention  # [B,H,C,C]
    rows = words.sum(-1)  # [B,H,C]
    real = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 1]], dtype=torch.bool)  # CLS, words, (padding), SEP
    torch.testing.assert_close(rows[:, 0][real], torch.ones(int(real.sum())))
    # padding word columns of the short sentence receive nothing
    assert words[1, :, :, 2:4].abs().sum() == 0


def test_subtypes_kept_only_when_asked(tmp_path):
    from probes.corpus.conllu_reader import read_conllu

    f = tmp_path / "x.conllu"
    f.write_text("1\tMy\tmy\tPRON\tPRP$\t_\t2\tnmod:poss\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_\n\n")
    assert read_conllu(f).sentences[0].ann["deprel"] == ["nmod", "root"]
    assert read_conllu(f, subtypes=True).sentences[0].ann["deprel"] == ["nmod:poss", "root"]


@pytest.mark.parametrize("label", ["det", "amod", "root"])
def test_best_head(label):
    r = _both_in_one_batch()
    best = r.best(label)
    assert (best.layer, best.head) == (0, 0) and best.score == 1.0


def test_a_causal_model_states_the_constraint():
    """det 1→3 and amod 2→3 have their head after the dependent, the two root arcs (3→0, 1→0) before: half of the arcs.
    Offsets k < 0 only: dep_to_head reaches the roots (cat: k = −3, Hi: k = −1), one arc each, 1/4; head_to_dep det
    (k = −2) and amod (k = −1), 1/4; either way k = −1 gets Hi's root and amod, 2/4."""
    from types import SimpleNamespace

    probe = DependencyProbe(1, 1)
    probe.read_model(SimpleNamespace(causal=object()))
    feed(probe, batch([CAT, HI], [CAT_COLUMNS, HI_COLUMNS], [[CAT_TO_HEADS], [HI_TO_HEADS]]))
    stated = probe.compute(info(1, 1)).extra["causal_constraint"]
    assert stated["overall"] == {"head_precedes_share": 0.5, "causal_offset_baseline": {
        "either": 0.5, "dep_to_head": 0.25, "head_to_dep": 0.25}}
    assert stated["labels"]["root"]["head_precedes_share"] == 1.0 and stated["labels"]["det"]["head_precedes_share"] == 0
    encoder = DependencyProbe(1, 1)
    encoder.read_model(SimpleNamespace(causal=None))
    feed(encoder, batch([CAT, HI], [CAT_COLUMNS, HI_COLUMNS], [[CAT_TO_HEADS], [HI_TO_HEADS]]))
    assert "causal_constraint" not in encoder.compute(info(1, 1)).extra


def test_root_is_called_trivial_unless_words_only(tmp_path):
    """The result names root among its trivial labels (its head is [CLS], where most heads attend: the overview draws it
    last and faded), and keeps it through its JSON; under words_only root arcs are never right and it is not."""
    from probes.results.probe_result import load_result

    r = _both_in_one_batch()
    assert r.extra["trivial_labels"] == {"root": "attention to [CLS] counts as right"}
    r.save(tmp_path)
    assert load_result(tmp_path / "dep.json").extra["trivial_labels"] == r.extra["trivial_labels"]
    probe = DependencyProbe(1, 2, words_only=True)
    feed(probe, batch([S1, S2], [C1, C2], [[H0_S1, H1_S1], [H0_S2, H1_S2]]))
    assert "trivial_labels" not in probe.compute(info(1, 2)).extra
