"""srl on hand-built attention: every expected number below is worked out in the comments.

Columns of a word-level map: 0 = [CLS], 1..n = words, n+1 = [SEP] (never a prediction).
pred[i] = argmax over [CLS] and the words of word i's row; a word's row is the mean of its
subwords' rows, its column the sum of their columns (mean-sum pooling).
"""
from __future__ import annotations

import numpy as np
import torch

from probes.builtin.srl import OFFSETS, SemanticRoleProbe
from probes.results.probe_result import RunInfo
from helpers import E, attention, batch, feed, sentence
from state_checks import check_state, info, two_layers

# S1 "Kim ate red apples": tokens [CLS]0 Kim1 ate2 red3 app4 ##les5 [SEP]6; columns CLS0 Kim1 ate2 red3 apples4.
#   predicate ate (word 1, column 2); ARG0 = {Kim}; ARG1 = subtree {red, apples}, head token apples.
S1 = sentence(["Kim", "ate", "red", "apples"], srl=[{
    "predicate": 1, "lemma": "eat", "frameset": "01", "args": [("ARG0", 0, 1), ("V", 1, 2), ("ARG1", 2, 4)],
    "arg_words": [(0,), (1,), (2, 3)], "arg_heads": [0, 1, 3]}])
C1 = [0, 1, 2, 3, 4, 4, E]
# Head 0:
#   ate: 0.4 Kim + 0.3 app + 0.3 ##les → columns summed: apples 0.6 > Kim 0.4 → pred[ate] = apples
#        (each subword alone, 0.3, would lose to Kim: the key sum matters)
#   Kim: 0.7 [SEP] + 0.3 ate → [SEP] is never a prediction → pred[Kim] = ate
#   apples: rows app (0.6 red, 0.4 SEP) and ##les (0.9 ate, 0.1 SEP) averaged: red 0.30, ate 0.45 → pred = ate
#   → ARG0: pred[ate] ∉ {Kim}, pred[Kim] = ate → right, by arg_to_pred only
#   → ARG1: pred[ate] = apples ∈ {red, apples} and pred[apples] = ate → right both ways
H0_S1 = attention(7, {2: {1: 0.4, 4: 0.3, 5: 0.3}, 1: {6: 0.7, 2: 0.3}, 4: {3: 0.6, 6: 0.4}, 5: {2: 0.9, 6: 0.1}})
# Head 1:
#   ate: 0.8 red + 0.2 SEP → pred[ate] = red;  Kim → [CLS];  app, ##les → red, so pred[apples] = red;
#   red: 0.5 app + 0.5 ##les → pred[red] = apples
#   → ARG0 wrong both ways; ARG1 right by pred_to_arg only (red is in the subtree), and wrong with
#     --arg-span head (head token apples: pred[ate] = red ∉ {apples}, pred[apples] = red ≠ ate)
H1_S1 = attention(7, {2: {3: 0.8, 6: 0.2}, 1: {0: 1.0}, 4: {3: 1.0}, 5: {3: 1.0}, 3: {4: 0.5, 5: 0.5}})

# S2 "Yesterday Kim left": tokens [CLS]0 Yester1 ##day2 Kim3 left4 [SEP]5; columns CLS0 Yesterday1 Kim2 left3.
#   predicate left (word 2, column 3); ARGM-TMP = {Yesterday}; ARG0 = {Kim}.
S2 = sentence(["Yesterday", "Kim", "left"], srl=[{
    "predicate": 2, "lemma": "leave", "frameset": "01", "args": [("ARGM-TMP", 0, 1), ("ARG0", 1, 2), ("V", 2, 3)],
    "arg_words": [(0,), (1,), (2,)], "arg_heads": [0, 1, 2]}])
C2 = [0, 1, 1, 2, 3, E]
# Head 0: left: 0.35 Yester + 0.35 ##day + 0.3 Kim → Yesterday 0.7 → pred[left] = Yesterday; the rest attend to
#   themselves (pred[Kim] = Kim) → ARGM-TMP right by pred_to_arg; ARG0 wrong.
H0_S2 = attention(6, {4: {1: 0.35, 2: 0.35, 3: 0.3}})
# Head 1: left: 0.6 Kim + 0.4 SEP → pred[left] = Kim; Kim → left (1.0) → ARG0 right both ways;
#   Yesterday: rows Yester (0.5 left, 0.5 SEP) and ##day (0.6 Kim, 0.4 SEP) averaged: left 0.25, Kim 0.30 →
#   pred = Kim ≠ left, and pred[left] = Kim ∉ {Yesterday} → ARGM-TMP wrong.
H1_S2 = attention(6, {4: {3: 0.6, 5: 0.4}, 3: {4: 1.0}, 1: {4: 0.5, 5: 0.5}, 2: {3: 0.6, 5: 0.4}})

INFO = RunInfo(model="hand", corpus=["hand"], layers=1, heads=2, sentences=2, skipped={}, settings={}, provenance={})


def _probe(groups, **options) -> SemanticRoleProbe:
    probe = SemanticRoleProbe(1, 2, **options)
    for sentences, columns, maps in groups:
        feed(probe, batch(sentences, columns, maps))
    return probe


def _one_batch(**options):
    return _probe([([S1, S2], [C1, C2], [[H0_S1, H1_S1], [H0_S2, H1_S2]])], **options).compute(INFO)


def test_scores_worked_out_by_hand():
    r = _one_batch()
    assert {k: v.count for k, v in r.labels.items()} == {"ARG0": 2, "ARG1": 1, "ARGM-TMP": 1}
    # ARG0: head 0 right in S1 only, head 1 right in S2 only
    np.testing.assert_array_equal(r.labels["ARG0"].scores, [[0.5, 0.5]])
    np.testing.assert_array_equal(r.labels["ARG1"].scores, [[1.0, 1.0]])
    np.testing.assert_array_equal(r.labels["ARGM-TMP"].scores, [[1.0, 0.0]])
    assert r.overall.count == 4
    np.testing.assert_array_equal(r.overall.scores, [[0.75, 0.5]])
    # V is part of the predicate, not an argument
    assert r.extra == {"predicates": 2, "not_arguments": {"V": 2}}


def test_each_direction_alone():
    r = _one_batch()
    # head 0: pred_to_arg right for ARG1 and ARGM-TMP; arg_to_pred for ARG0 (S1) and ARG1
    # head 1: pred_to_arg right for ARG1 and ARG0 (S2); arg_to_pred for ARG0 (S2) only
    np.testing.assert_array_equal(r.overall.extra["pred_to_arg"], [[0.5, 0.5]])
    np.testing.assert_array_equal(r.overall.extra["arg_to_pred"], [[0.5, 0.25]])
    np.testing.assert_array_equal(r.labels["ARG0"].extra["pred_to_arg"], [[0.0, 0.5]])
    np.testing.assert_array_equal(r.labels["ARG1"].extra["arg_to_pred"], [[1.0, 0.0]])


def test_head_token_only():
    r = _one_batch(arg_span="head")
    # only ARG1 changes: head 1's prediction pred[ate] = red is in the subtree but is not the head token apples
    np.testing.assert_array_equal(r.labels["ARG1"].scores, [[1.0, 0.0]])
    np.testing.assert_array_equal(r.overall.scores, [[0.75, 0.25]])


def test_offset_baselines():
    r = _one_batch()
    b = r.baselines["labels"]
    assert r.baselines["offsets"] == list(OFFSETS) == [-3, -2, -1, 1, 2, 3]
    # ARG0 {Kim} of ate (S1): ate − 1 = Kim (pred_to_arg at −1), Kim + 1 = ate (arg_to_pred at +1);
    # ARG0 {Kim} of left (S2): the same offsets
    assert b["ARG0"]["pred_to_arg"] == [0, 0, 1, 0, 0, 0] and b["ARG0"]["arg_to_pred"] == [0, 0, 0, 1, 0, 0]
    # ARG1 {red, apples} of ate: ate + 1, ate + 2 in the span; red − 1 = ate, apples − 2 = ate
    assert b["ARG1"]["either"] == [0, 1, 1, 1, 1, 0]
    # ARGM-TMP {Yesterday} of left: left − 2 = Yesterday, Yesterday + 2 = left
    assert b["ARGM-TMP"]["either"] == [0, 1, 0, 0, 1, 0]
    # overall, 4 arguments: −2: ARG1, TMP; −1: ARG0 ×2, ARG1; +1: ARG0 ×2, ARG1; +2: ARG1, TMP
    assert r.baselines["overall"]["either"] == [0, 0.5, 0.75, 0.75, 0.5, 0]
    assert r.baselines["overall"]["best_offset"] == -1 and r.baselines["overall"]["best"] == 0.75


# S3 "a b c d e": tokens [CLS] a b c d e [SEP]; predicate d (word 3, column 4).
#   ARG1 = {a, c} (a gap at b: extent 0..3); ARG2 = {b, d} as given, but the predicate's own word is dropped → {b};
#   C-V on e is part of the predicate.
S3 = sentence(["a", "b", "c", "d", "e"], srl=[{
    "predicate": 3, "lemma": "d", "frameset": "01",
    "args": [("ARG1", 0, 3), ("ARG2", 1, 4), ("V", 3, 4), ("C-V", 4, 5)],
    "arg_words": [(0, 2), (1, 3), (3,), (4,)], "arg_heads": [0, 1, 3, 4]}])
C3 = [0, 1, 2, 3, 4, 5, E]
# Head 0: d → b: pred[d] = b, inside ARG1's extent but not in its words → ARG1 wrong; ARG2 right.
# Head 1: every token attends to itself: pred[d] = d would be "in" ARG2 if the predicate were kept → both wrong.
H0_S3 = attention(7, {4: {2: 1.0}})
H1_S3 = attention(7, {})


def test_gaps_and_the_predicate_never_in_its_argument():
    r = _probe([([S3], [C3], [[H0_S3, H1_S3]])]).compute(INFO)
    np.testing.assert_array_equal(r.labels["ARG1"].scores, [[0.0, 0.0]])
    np.testing.assert_array_equal(r.labels["ARG2"].scores, [[1.0, 0.0]])
    assert r.extra["not_arguments"] == {"V": 1, "C-V": 1}


def test_padding_batching_and_merging_do_not_change_scores():
    together = _one_batch()
    apart = _probe([([S1], [C1], [[H0_S1, H1_S1]]), ([S2], [C2], [[H0_S2, H1_S2]])]).compute(INFO)
    first, second = _probe([([S2], [C2], [[H0_S2, H1_S2]])]), _probe([([S1], [C1], [[H0_S1, H1_S1]])])
    first.merge(second)
    merged = first.compute(INFO)
    for other in (apart, merged):
        assert set(other.labels) == set(together.labels) and other.extra == together.extra
        for label, entry in together.labels.items():
            np.testing.assert_array_equal(other.labels[label].scores, entry.scores)
            np.testing.assert_array_equal(other.labels[label].extra["arg_to_pred"], entry.extra["arg_to_pred"])
        assert other.baselines == together.baselines


def test_skip_reasons():
    probe = SemanticRoleProbe(1, 1)
    head_only = SemanticRoleProbe(1, 1, arg_span="head")
    conll2012 = sentence(["Kim", "left"], srl=[{"predicate": 1, "lemma": "leave", "frameset": "01",
                                                "args": [("ARG0", 0, 1), ("V", 1, 2)], "arg_words": [(0,), (1,)]}])
    assert probe.skip_reason(S1) is None and probe.skip_reason(conll2012) is None
    assert head_only.skip_reason(conll2012) == "no_argument_heads"  # CoNLL-2012 spans have no head token
    assert probe.skip_reason(sentence(["Nice"], head=[0], propbank="no-up")) == "propbank_no_up"
    assert probe.skip_reason(sentence(["Nice"], head=[0])) == "no_srl"
    assert probe.skip_reason(sentence(["Hello"], srl=[])) is None  # no predicate: scored, adds nothing


def test_batch_without_arguments():
    probe = _probe([([sentence(["Hello"], srl=[])], [[0, 1, E]], [[attention(3, {}), attention(3, {})]])])
    r = probe.compute(INFO)
    assert r.overall.count == 0 and r.labels == {} and np.isnan(r.overall.scores).all()
    assert torch.equal(probe.hits.sums, torch.zeros(0, 3, 1, 2, dtype=torch.float64))


def test_state_merges_saves_and_resets():
    batches = [two_layers(batch([S1, S3], [C1, C3], [[H0_S1, H1_S1], [H0_S3, H1_S3]])),
               two_layers(batch([S2], [C2], [[H0_S2, H1_S2]]))]
    r = check_state(lambda: SemanticRoleProbe(2, 2), batches, info(2, 2))
    # ARG0 ×2, ARG1 ×2 (S1, S3), ARG2, ARGM-TMP; head 0: ARG0 (S1), ARG1 (S1), ARG2, ARGM-TMP = 4 of 6;
    # head 1: ARG0 (S2), ARG1 (S1) = 2 of 6; layer 1 holds the heads reversed
    assert r.overall.count == 6 and r.labels["ARG1"].count == 2
    np.testing.assert_array_equal(r.overall.scores, [[4 / 6, 2 / 6], [2 / 6, 4 / 6]])
    assert r.extra == {"predicates": 3, "not_arguments": {"V": 3, "C-V": 1}}  # counted once, not once per layer


def test_a_causal_model_states_the_constraint():
    """S1: ARG0 {Kim} precedes ate, ARG1 {red, apples} follows it; S2: ARGM-TMP {Yesterday} and ARG0 {Kim} precede
    left. pred_to_arg can reach 3 of the 4 arguments, arg_to_pred 1. Offsets k < 0 only (test_offset_baselines):
    pred_to_arg: −1 ARG0 ×2, −2 ARGM-TMP → 2/4; arg_to_pred: −1 and −2 ARG1 → 1/4; either: −1 ARG0 ×2 and ARG1 → 3/4."""
    from types import SimpleNamespace

    probe = _probe([])
    probe.read_model(SimpleNamespace(causal=object()))
    feed(probe, batch([S1, S2], [C1, C2], [[H0_S1, H1_S1], [H0_S2, H1_S2]]))
    stated = probe.compute(INFO).extra["causal_constraint"]
    assert stated["overall"] == {"argument_before_predicate_share": 0.75, "argument_after_predicate_share": 0.25,
                                 "causal_offset_baseline": {"either": 0.75, "pred_to_arg": 0.5, "arg_to_pred": 0.25}}
    assert stated["labels"]["ARG1"] == {"argument_before_predicate_share": 0.0, "argument_after_predicate_share": 1.0,
                                        "causal_offset_baseline": {"either": 1.0, "pred_to_arg": 0.0,
                                                                   "arg_to_pred": 1.0}}
    assert stated["labels"]["ARG0"]["argument_before_predicate_share"] == 1.0
    assert "causal_constraint" not in _one_batch().extra  # an encoder's results: no constraint
