"""frames on hand-built attention: every expected number below is worked out in the comments.

Word-level map A (rows: from, columns: to) with mean-sum pooling: a word's row is the mean of its
subwords' rows, its column the sum of their columns. Columns: 0 = [CLS], 1..n = words, n+1 = [SEP].
"""
from __future__ import annotations

import numpy as np
import pytest

from probes.builtin.frames import FILTERS, FrameElementProbe
from probes.base.errors import InputError
from probes.results.probe_result import RunInfo
from helpers import E, attention, batch, feed, sentence
from state_checks import check_state, info, two_layers


def fe(name, words, core=True):
    return {"name": name, "core": core, "coreType": "Core" if core else "Peripheral", "words": words}


# F1 "Kim quickly gave the boy flowers": tokens [CLS]0 Kim1 quickly2 gave3 the4 boy5 flow6 ##ers7 [SEP]8;
#   columns CLS0 Kim1 quickly2 gave3 the4 boy5 flowers6.
#   Giving, target gave (word 2): Donor {Kim} core, 2 words away → kept; Manner {quickly} non-core (and adjacent);
#   Recipient {the, boy} core but adjacent; Theme {flowers} core, 3 away → kept.
#   Plants, target flowers: Plant {flowers} overlaps its target.
F1 = sentence(["Kim", "quickly", "gave", "the", "boy", "flowers"], frames=[
    {"frame": "Giving", "lu": "give.v", "target": [2],
     "fes": [fe("Donor", [0]), fe("Manner", [1], core=False), fe("Recipient", [3, 4]), fe("Theme", [5])]},
    {"frame": "Plants", "lu": "flower.n", "target": [5], "fes": [fe("Plant", [5])]}])
C1 = [0, 1, 2, 3, 4, 5, 6, 6, E]
# Head 0:
#   gave: 0.5 Kim + 0.2 flow + 0.2 ##ers + 0.1 SEP → A[gave, Kim] = 0.5, A[gave, flowers] = 0.4 (sum); pred = Kim
#   Kim: 0.3 gave + 0.7 SEP → A[Kim, gave] = 0.3; pred[Kim] = gave ([SEP] is never a prediction)
#   flowers: rows flow (0.6 gave, 0.4 SEP) and ##ers (0.1 gave, 0.9 the) averaged → A[flowers, gave] = 0.35,
#            A[flowers, the] = 0.45 → pred[flowers] = the
#   the, boy, quickly: attend to themselves.
#   Donor: score max(0.5, 0.3) = 0.5, target→FE 0.5, FE→target 0.3; argmax right both ways.
#   Theme: score max(0.4, 0.35) = 0.4, target→FE 0.4, FE→target 0.35; argmax wrong (pred[gave] = Kim,
#          pred[flowers] = the).
#   Recipient {the, boy}: all weights with gave 0 → score 0, wrong.   Manner {quickly}: 0, wrong.
H0_F1 = attention(9, {3: {1: 0.5, 6: 0.2, 7: 0.2, 8: 0.1}, 1: {3: 0.3, 8: 0.7}, 6: {3: 0.6, 8: 0.4},
                      7: {3: 0.1, 4: 0.9}})
# Head 1 attends to the previous token (each token i → i − 1, [CLS] to itself): gave → quickly, the → gave.
#   Donor, Theme: 0 and wrong.  Recipient: A[the, gave] = 1 → score 1, FE→target 1, target→FE 0; pred[the] = gave
#   → right (FE→target).  Manner: A[gave, quickly] = 1 → score 1; pred[gave] = quickly → right (target→FE).
H1_F1 = attention(9, {i: {max(i - 1, 0): 1.0} for i in range(9)})

# F2 "cars were sold": tokens [CLS]0 cars1 were2 sold3 [SEP]4. Commerce_sell, target sold (2): Goods {cars} kept.
F2 = sentence(["cars", "were", "sold"], frames=[
    {"frame": "Commerce_sell", "lu": "sell.v", "target": [2], "fes": [fe("Goods", [0])]}])
C2 = [0, 1, 2, 3, E]
# Head 0: sold → 0.7 cars + 0.3 SEP: score 0.7, target→FE 0.7, FE→target 0 (cars looks at itself); argmax right
#   (target→FE).  Head 1 (previous token): sold → were, cars → [CLS]: 0, wrong.
H0_F2 = attention(5, {3: {1: 0.7, 4: 0.3}})
H1_F2 = attention(5, {i: {max(i - 1, 0): 1.0} for i in range(5)})

INFO = RunInfo(model="hand", corpus=["hand"], layers=1, heads=2, sentences=2, skipped={}, settings={}, provenance={})
MAPS = {id(F1): (C1, [H0_F1, H1_F1]), id(F2): (C2, [H0_F2, H1_F2])}


def _probe(batches, pool="mean-sum", **options) -> FrameElementProbe:
    """As the runner does: skip_reason on every sentence first, then one update per batch of kept sentences."""
    probe = FrameElementProbe(1, 2, **options)
    kept = {id(s) for group in batches for s in group if probe.skip_reason(s) is None}
    for group in batches:
        group = [s for s in group if id(s) in kept]
        if group:
            feed(probe, batch(group, [MAPS[id(s)][0] for s in group], [MAPS[id(s)][1] for s in group], pool=pool))
    return probe


def _result(batches=((F1, F2),), **options):
    return _probe(batches, **options).compute(INFO)


def test_scores_worked_out_by_hand():
    r = _result()
    assert {k: v.count for k, v in r.labels.items()} == {"Donor": 1, "Theme": 1, "Goods": 1}
    np.testing.assert_allclose(r.labels["Donor"].scores, [[0.5, 0.0]])
    np.testing.assert_allclose(r.labels["Theme"].scores, [[0.4, 0.0]])
    np.testing.assert_allclose(r.labels["Goods"].scores, [[0.7, 0.0]])
    assert r.overall.count == 3
    np.testing.assert_allclose(r.overall.scores, [[1.6 / 3, 0.0]])  # (0.5 + 0.4 + 0.7) / 3
    extra = r.overall.extra
    np.testing.assert_allclose(extra["weight_target_to_fe"], [[1.6 / 3, 0.0]])
    np.testing.assert_allclose(extra["weight_fe_to_target"], [[0.65 / 3, 0.0]])  # (0.3 + 0.35 + 0) / 3
    np.testing.assert_allclose(extra["accuracy"], [[2 / 3, 0.0]])  # Donor, Goods
    np.testing.assert_allclose(extra["accuracy_target_to_fe"], [[2 / 3, 0.0]])
    np.testing.assert_allclose(extra["accuracy_fe_to_target"], [[1 / 3, 0.0]])  # Donor only


def test_filter_counts_in_the_json():
    r = _result()
    assert r.to_json()["instances"] == {
        "annotated": 6, "scored": 3, "in_sentences_skipped_otherwise": 0,  # F1: 5 FEs, F2: 1
        "removed": {"no_words": 0, "not_core": 1, "sentence_too_long": 0, "fe_too_long": 0, "overlaps_target": 1,
                    "adjacent_to_target": 1},
        "labels_below_min_count": 0, "instances_below_min_count": 0}


def test_adjacent_frame_elements_kept():
    r = _result(adjacent_fes=True)
    # Recipient joins: head 0 (0.5 + 0.4 + 0 + 0.7) / 4 = 0.4; head 1 (0 + 0 + 1 + 0) / 4 = 0.25
    np.testing.assert_allclose(r.overall.scores, [[0.4, 0.25]])
    np.testing.assert_allclose(r.labels["Recipient"].extra["accuracy_fe_to_target"], [[0.0, 1.0]])
    assert "adjacent_to_target" not in r.extra["instances"]["removed"]


def test_non_core_frame_elements_and_filter_order():
    # --all-fes alone: Manner is no longer removed as non-core but as adjacent (the first filter it fails)
    r = _result(all_fes=True)
    removed = r.extra["instances"]["removed"]
    assert removed["adjacent_to_target"] == 2 and "not_core" not in removed
    # with adjacent FEs too: Donor, Manner, Recipient, Theme, Goods; head 1 right for Manner and Recipient
    r = _result(all_fes=True, adjacent_fes=True)
    assert r.overall.count == 5
    np.testing.assert_allclose(r.overall.scores, [[1.6 / 5, 0.4]])
    np.testing.assert_allclose(r.overall.extra["accuracy"], [[0.4, 0.4]])


def test_length_filters_and_skip_reasons():
    r = _result(adjacent_fes=True, max_fe_words=1)  # Recipient has two words
    assert r.extra["instances"]["removed"]["fe_too_long"] == 1 and r.overall.count == 3
    probe = FrameElementProbe(1, 2, max_sentence_words=5)
    # F1 has 6 words: Manner goes as non-core (first), Donor, Recipient, Theme and Plant as too long
    assert probe.skip_reason(F1) == "longer_than_5_words"
    assert dict(zip(FILTERS, probe.removed.tolist())) == {"no_words": 0, "not_core": 1, "sentence_too_long": 4,
                                                          "fe_too_long": 0, "overlaps_target": 0,
                                                          "adjacent_to_target": 0}
    lee = sentence(["Lee", "arrived"], frames=[{"frame": "Arriving", "lu": "arrive.v", "target": [1],
                                                "fes": [fe("Theme", [0])]}])
    assert probe.skip_reason(lee) == "no_frame_instance_left"  # Theme is adjacent
    assert probe.skip_reason(sentence(["Hi"], frames=[])) == "no_frame_elements"
    assert probe.skip_reason(sentence(["Hi"])) == "no_frames"
    assert probe.annotated == 6 and probe.skip_reason(F2) is None


def test_min_count_marks_rare_labels_and_moves_no_score():
    """The run's minimum count keeps every frame element, marked; the instances extras count the rare ones."""
    plain = _result()
    info = RunInfo(model="hand", corpus=["hand"], layers=1, heads=2, sentences=2, skipped={},
                   settings={"min_count": 2}, provenance={})
    r = _probe(((F1, F2),)).compute(info)
    assert set(r.labels) == {"Donor", "Theme", "Goods"} and r.overall.count == 3
    assert all(r.below_min_count(label) for label in r.labels) and not r.below_min_count("overall")
    assert r.shown() == [] and [name for name, _ in r.shown(all_labels=True)] == ["Donor", "Goods", "Theme"]
    for label, entry in [*plain.labels.items(), ("overall", plain.overall)]:
        np.testing.assert_array_equal(r.entry(label).scores, entry.scores)
    instances = r.extra["instances"]
    assert instances["labels_below_min_count"] == 3 and instances["instances_below_min_count"] == 3
    assert {k: v["below_min_count"] for k, v in r.to_json()["labels"].items()} == {
        "Donor": True, "Theme": True, "Goods": True}
    assert "below_min_count" not in plain.to_json()["labels"]["Donor"]  # a run that records no minimum count


def test_pooling_rule_changes_raw_weights():
    # first-sum: flowers' row is its first subword's (0.6 gave) instead of the mean (0.35) → Theme 0.6
    r = _result(pool="first-sum")
    np.testing.assert_allclose(r.labels["Theme"].scores, [[0.6, 0.0]])


def test_padding_batching_and_merging_do_not_change_scores():
    together = _result()
    apart = _result(batches=((F2,), (F1,)))
    first, second = _probe(((F1,),)), _probe(((F2,),))
    first.merge(second)
    merged = first.compute(INFO)
    for other in (apart, merged):
        assert other.extra == together.extra and set(other.labels) == set(together.labels)
        for label, entry in [*together.labels.items(), ("overall", together.overall)]:
            o = other.overall if label == "overall" else other.labels[label]
            np.testing.assert_allclose(o.scores, entry.scores, rtol=0, atol=1e-12)
            for key, grid in entry.extra.items():
                np.testing.assert_allclose(o.extra[key], grid, rtol=0, atol=1e-12)


def test_state_merges_saves_and_resets():
    batches = [two_layers(batch([F1], [C1], [[H0_F1, H1_F1]])), two_layers(batch([F2], [C2], [[H0_F2, H1_F2]]))]
    r = check_state(lambda: FrameElementProbe(2, 2), batches, info(2, 2))
    np.testing.assert_allclose(r.overall.scores, [[1.6 / 3, 0.0], [0.0, 1.6 / 3]], rtol=0, atol=1e-7)
    # instances counted once, not once per layer; the filter counts come from skip_reason
    assert r.overall.count == 3 and r.extra["instances"]["annotated"] == 6 and r.extra["instances"]["scored"] == 3


def test_documents_option(tmp_path):
    from probes.corpus.framenet import STANDARD_TEST_DOCUMENTS

    listed = tmp_path / "docs.txt"
    listed.write_text("# two documents\nANC__110CYL067.xml\nKBEval__atm\n", encoding="utf-8")
    assert FrameElementProbe(1, 1, documents=str(listed)).reader_options() == {
        "documents": ["ANC__110CYL067", "KBEval__atm"]}
    assert FrameElementProbe(1, 1, documents="standard-test").reader_options() == {
        "documents": STANDARD_TEST_DOCUMENTS, "allow_missing": True}
    assert FrameElementProbe(1, 1).reader_options() == {}
    with pytest.raises(InputError, match="missing.txt: file not found"):
        FrameElementProbe(1, 1, documents=str(tmp_path / "missing.txt")).reader_options()
    with pytest.raises(InputError, match="--max-fe-words must be 0 or more"):
        FrameElementProbe(1, 1, max_fe_words=-1)


def test_a_causal_model_states_the_constraint():
    """Donor {Kim} and Goods {cars} precede their targets (gave, sold), Theme {flowers} follows gave: target→FE can
    reach 2 of the 3 instances, FE→target 1."""
    from types import SimpleNamespace

    probe = FrameElementProbe(1, 2)
    probe.read_model(SimpleNamespace(causal=object()))
    for s in (F1, F2):
        probe.skip_reason(s)
    feed(probe, batch([F1, F2], [C1, C2], [MAPS[id(F1)][1], MAPS[id(F2)][1]]))
    stated = probe.compute(INFO).extra["causal_constraint"]
    assert stated["overall"] == {"fe_before_target_share": round(2 / 3, 6), "target_before_fe_share": round(1 / 3, 6)}
    assert stated["labels"] == {"Donor": {"fe_before_target_share": 1.0, "target_before_fe_share": 0.0},
                                "Theme": {"fe_before_target_share": 0.0, "target_before_fe_share": 1.0},
                                "Goods": {"fe_before_target_share": 1.0, "target_before_fe_share": 0.0}}
    assert "causal_constraint" not in _result().extra  # an encoder's results: no constraint
