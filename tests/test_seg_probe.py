"""seg on hand-built attention: every expected number below is worked out in the comments."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from probes.base.argtypes import parse_head
from probes.encoding.batching import Batch
from probes.builtin.seg.probe import SegmentationProbe
from probes.builtin.seg.scoring import STATS, greedy, metrics, tally
from probes.builtin.seg.show import segmentations
from probes.builtin.seg.units import Units, batch_units
from probes.base.errors import InputError
from probes.results.probe_result import ProbeResult, RunInfo
from helpers import E, HandBatch, attention, feed, sentence
from state_checks import check_state, info, two_layers

# Sentence 1, pre-split words "The playing cats": [CLS] The play ##ing cat ##s [SEP] (positions 0..6).
#   units (positions 1..5): The play ##ing cat ##s; gaps after The, play, ##ing, cat are the 4 decisions,
#   gold [1, 0, 1, 0] (end, inside, end, inside); the gap after ##s is the sentence end.
#   gold words (in units): The [0,0], playing [1,2], cats [3,4]  → lengths 1, 2, 2
# Sentence 2 "Hi": [CLS] Hi [SEP]; one unit, no decision, one gold word that every head gets right.
S1 = sentence(["The", "playing", "cats"])
S2 = sentence(["Hi"])
C1 = [0, 1, 2, 2, 3, 3, E]
C2 = [0, 1, E]
O1 = [(0, 0), (0, 3), (0, 4), (4, 7), (0, 3), (3, 4), (0, 0)]  # offsets in each word
O2 = [(0, 0), (0, 2), (0, 0)]

# Head "perfect": The → [SEP], play → ##ing, ##ing → [SEP], cat → ##s, ##s → [SEP]: ends [1,0,1,0] = gold.
PERFECT_1 = attention(7, {1: {6: 1.0}, 2: {3: 1.0}, 3: {6: 1.0}, 4: {5: 1.0}, 5: {6: 1.0}})
# Head "next": every unit looks at the next token: no ends; one predicted word per sentence.
NEXT_1 = attention(7, {i: {i + 1: 1.0} for i in range(6)})
# Head "mixed": The → play (next: inside, wrong), play → [CLS] (not next: end, wrong),
#   ##ing → [SEP] (end, right), cat → ##s (inside, right).
MIXED_1 = attention(7, {1: {2: 0.9, 6: 0.1}, 2: {0: 0.6, 3: 0.4}, 3: {6: 0.7, 4: 0.3}, 4: {5: 0.8, 6: 0.2},
                        5: {6: 1.0}})
HI = attention(3, {0: {1: 1.0}, 1: {2: 1.0}})  # Hi → [SEP]


def _batch(sentences, columns, offsets, maps, word_spans=None, input_ids=None, unk=None) -> HandBatch:
    """A one-layer batch with hand-made maps[b][h] [T_b,T_b], padded to the batch length."""
    b = Batch(sentences, [np.array(c) for c in columns], offsets=[np.array(o) for o in offsets],
              word_spans=word_spans, unk_token_id=unk, input_ids=input_ids)
    t = b.columns.shape[1]
    heads = torch.zeros(len(sentences), len(maps[0]), t, t)
    for i, head_maps in enumerate(maps):
        for h, m in enumerate(head_maps):
            heads[i, h, :m.shape[0], :m.shape[1]] = m
    return HandBatch(b, (heads,))


def _info(heads, layers=1):
    return RunInfo(model="hand", corpus=["hand"], layers=layers, heads=heads, sentences=2, skipped={},
                   settings={"tokenize": "words"}, provenance={})


def _score(batches, heads, **options) -> ProbeResult:
    probe = SegmentationProbe(1, heads, **options)
    for b in batches:
        feed(probe, b)
    return probe.compute(_info(heads))


def _three_heads():
    return _batch([S1, S2], [C1, C2], [O1, O2], [[PERFECT_1, NEXT_1, MIXED_1], [HI, HI, HI]])


def _grid(r, name):
    return r.overall.scores if name == "word_f1" else r.overall.extra[name]


def test_per_head_scores_worked_out():
    r = _score([_three_heads()], 3)
    # perfect: all right.  next: ends [0,0,0,0]: tp 0, fp 0, fn 2, tn 2.  mixed: ends [0,1,1,0]: tp 1, fp 1, fn 1, tn 1.
    np.testing.assert_array_equal(_grid(r, "boundary_accuracy"), [[1.0, 0.5, 0.5]])
    np.testing.assert_array_equal(_grid(r, "boundary_recall"), [[1.0, 0.0, 0.5]])
    np.testing.assert_array_equal(_grid(r, "boundary_f1"), [[1.0, 0.0, 0.5]])
    p = _grid(r, "boundary_precision")
    assert p[0, 0] == 1.0 and math.isnan(p[0, 1]) and p[0, 2] == 0.5  # next predicts no boundary: P undefined
    # words (4 gold): perfect 4 predicted, 4 right.  next: "Theplayingcats" + "Hi": 2 predicted, 1 right (Hi).
    # mixed: "Theplay" "ing" "cats" + "Hi": 4 predicted, 2 right (cats, Hi) → P = R = F1 = 0.5.
    np.testing.assert_allclose(_grid(r, "word_precision"), [[1.0, 0.5, 0.5]])
    np.testing.assert_allclose(_grid(r, "word_recall"), [[1.0, 0.25, 0.5]])
    np.testing.assert_allclose(r.overall.scores, [[1.0, 2 * 1 / (2 + 4), 2 * 2 / (4 + 4)]])
    assert r.overall.count == 4
    # recall by gold word length: len1 = The, Hi; len2 = playing, cats
    assert r.labels["len1"].count == 2 and r.labels["len2"].count == 2 and r.labels["len3"].count == 0
    np.testing.assert_allclose(r.labels["len1"].scores, [[1.0, 0.5, 0.5]])  # next and mixed: only Hi
    np.testing.assert_allclose(r.labels["len2"].scores, [[1.0, 0.0, 0.5]])  # mixed: cats
    assert np.isnan(r.labels["len3"].scores).all()
    assert r.best().head == 0


def test_counts_and_baselines():
    r = _score([_three_heads()], 3)
    assert r.extra["units"] == {"units": 6, "unk_units": 0, "decisions": 4, "known_decisions": 4,
                                "gold_boundaries": 2, "gold_words": 4, "unreachable_words": 0,
                                "boundaries_inside_tokens": 0}
    # all_ends: every unit a word: 6 predicted, right The, Hi → F1 = 4/10; decisions: tp 2, fp 2 → acc 0.5
    assert r.baselines["all_ends"]["word_f1"] == 0.4 and r.baselines["all_ends"]["boundary_accuracy"] == 0.5
    assert r.baselines["all_ends"]["boundary_recall"] == 1.0
    # no_ends: each sentence one word: 2 predicted, right Hi → F1 = 2/6
    assert r.baselines["no_ends"]["word_f1"] == pytest.approx(1 / 3) and r.baselines["no_ends"]["boundary_precision"] is None


def test_sep_rule():
    # mixed under "sep": play → [CLS] is no longer an end: ends [0,0,1,0]: tp 1, fn 1, tn 2 → acc 0.75, P 1, R 0.5
    # words: "Theplaying" "cats" "Hi": 3 predicted, 2 right → F1 4/7
    r = _score([_three_heads()], 3, end_rule="sep")
    assert _grid(r, "boundary_accuracy")[0, 2] == 0.75 and _grid(r, "boundary_precision")[0, 2] == 1.0
    assert r.overall.scores[0, 2] == pytest.approx(4 / 7)
    np.testing.assert_array_equal(_grid(r, "boundary_accuracy")[0, :2], [1.0, 0.5])  # perfect and next unchanged


def test_union_and_greedy_worked_out():
    # Two heads: next and mixed. Oracle union: gap0 (gold end) both wrong → inside; gap1 next right;
    # gap2 mixed right; gap3 both right → ends [0,0,1,0]: "Theplaying" "cats" "Hi" → F1 4/7, acc 0.75.
    # any_end union: next ∨ mixed = mixed → F1 0.5.
    b = _batch([S1, S2], [C1, C2], [O1, O2], [[NEXT_1, MIXED_1], [HI, HI]])
    r = _score([b], 2)
    assert r.extra["union"]["oracle"]["word_f1"] == pytest.approx(4 / 7)
    assert r.extra["union"]["oracle"]["boundary_accuracy"] == 0.75
    assert r.extra["union"]["any_end"]["word_f1"] == 0.5
    # greedy oracle: mixed first (0.5 > 1/3), then next raises it to 4/7; greedy any_end stops after mixed
    oracle, any_end = r.extra["ensembles"]["oracle"], r.extra["ensembles"]["any_end"]
    assert [s["heads"] for s in oracle] == [[[0, 1]], [[0, 1], [0, 0]]]
    assert [s["word_f1"] for s in oracle] == [0.5, pytest.approx(4 / 7)]
    assert [s["heads"] for s in any_end] == [[[0, 1]]] and any_end[0]["word_f1"] == 0.5


@pytest.mark.parametrize("rule", ["next", "sep"])
def test_batching_padding_and_merge_do_not_change_scores(rule):
    one = _score([_three_heads()], 3, end_rule=rule)  # S2 padded to S1's length
    split = _score([_batch([S2], [C2], [O2], [[HI, HI, HI]]), _batch([S1], [C1], [O1], [[PERFECT_1, NEXT_1, MIXED_1]])],
                   3, end_rule=rule)
    a, b = SegmentationProbe(1, 3, end_rule=rule), SegmentationProbe(1, 3, end_rule=rule)
    feed(a, _batch([S1], [C1], [O1], [[PERFECT_1, NEXT_1, MIXED_1]]))
    feed(b, _batch([S2], [C2], [O2], [[HI, HI, HI]]))
    a.merge(b)
    merged = a.compute(_info(3))
    for r in (split, merged):
        assert r.to_json()["overall"] == one.to_json()["overall"]
        assert r.to_json()["labels"] == one.to_json()["labels"]
        assert r.extra["ensembles"] == one.extra["ensembles"] and r.extra["union"] == one.extra["union"]
        assert r.extra["units"] == one.extra["units"]


def test_state_merges_saves_and_resets():
    batches = [two_layers(_batch([S1], [C1], [O1], [[PERFECT_1, NEXT_1, MIXED_1]])),
               two_layers(_batch([S2], [C2], [O2], [[HI, HI, HI]]))]
    r = check_state(lambda: SegmentationProbe(2, 3), batches, info(2, 3, tokenize="words"))
    np.testing.assert_allclose(r.overall.scores, [[1.0, 1 / 3, 0.5], [0.5, 1 / 3, 1.0]])  # layer 1: heads reversed
    # units and gold words counted once, not once per layer; the union of both layers is that of one
    assert r.extra["units"]["units"] == 6 and r.overall.count == 4 and r.labels["len2"].count == 2
    assert r.extra["union"]["oracle"]["word_f1"] == 1.0 and r.baselines["all_ends"]["word_f1"] == 0.4
    assert [s["heads"] for s in r.extra["ensembles"]["any_end"]] == [[[0, 0]]]
    assert [e["ends"] for e in r.extra["examples"]][0] == ["10100", "00000", "01100", "01100", "00000", "10100"]


def test_examples_and_segmentations():
    r = _score([_three_heads()], 3)
    ex = r.extra["examples"]
    assert [e["units"] for e in ex] == [["The", "play", "ing", "cat", "s"], ["Hi"]]
    # raw predictions: the last unit (##s → [SEP], the next token) reads "inside"; the sentence end is forced
    assert ex[0]["gold_ends"] == "10101" and ex[0]["ends"] == ["10100", "00000", "01100"]
    assert [s["predicted"] for s in segmentations(r, [(0, 2)])] == [["Theplay", "ing", "cats"], ["Hi"]]
    assert segmentations(r, [(0, 1), (0, 2)], "oracle")[0]["predicted"] == ["Theplaying", "cats"]
    assert segmentations(r, [(0, 1)])[0]["gold"] == ["The", "playing", "cats"]
    assert _score([_three_heads()], 3, seg_examples=1).extra["examples"][0]["units"][0] == "The"
    assert len(_score([_three_heads()], 3, seg_examples=1).extra["examples"]) == 1
    assert _score([_three_heads()], 3, seg_examples=0).extra["examples"] == []
    with pytest.raises(InputError, match="no head L1-H0"):
        segmentations(r, [(1, 0)])


def test_text_input_token_across_a_gold_boundary():
    # words "ab" "cd" "e", text "abcd e" (spans (0,2) (2,4) (5,6)); tokens a(0,1) bc(1,3) d(3,4) e(5,6).
    # "bc" crosses ab|cd: ab and cd are unreachable (no segmentation into tokens yields them), the
    # boundary inside "bc" is not a gap. Gaps: a|bc inside, bc|d inside (both in the words bc touches), d|e end.
    s = sentence(["ab", "cd", "e"], text="abcd e")
    cols = [0, 1, 1, 2, 3, E]
    offs = [(0, 0), (0, 1), (1, 3), (3, 4), (5, 6), (0, 0)]
    ends_gold = attention(6, {1: {2: 1.0}, 2: {3: 1.0}, 3: {5: 1.0}, 4: {5: 1.0}})  # ends [0,0,1]
    always_next = attention(6, {i: {i + 1: 1.0} for i in range(5)})
    b = _batch([s], [cols], [offs], [[ends_gold, always_next]], word_spans=[[(0, 2), (2, 4), (5, 6)]])
    found = batch_units(b.batch)
    assert found.units.gold_end.tolist() == [False, False, True, True]
    assert found.counts["unreachable_words"] == 2 and found.counts["boundaries_inside_tokens"] == 1
    assert found.units.word_first.tolist() == [3] and found.units.word_last.tolist() == [3]  # only "e"
    r = _score([b], 2)
    # head 0: every gap right (acc 1) but words "abcd" "e": 1 right of 3 gold, 2 predicted → F1 2/5
    assert _grid(r, "boundary_accuracy")[0, 0] == 1.0 and r.overall.scores[0, 0] == pytest.approx(0.4)
    # head 1 (always next): one word "abcde" → 0 right; gaps right 2 of 3
    assert r.overall.scores[0, 1] == 0.0 and _grid(r, "boundary_accuracy")[0, 1] == pytest.approx(2 / 3)
    assert r.extra["examples"][0]["units"] == ["a", "bc", "d", "e"]


def test_unk_units_kept_and_known_gaps():
    # "The playing cats" with play = [UNK] (id 100): units stay 5; gaps touching it (The|play, play|##ing)
    # are left out of the "known" scores: known decisions = ##ing|cat, cat|##s (gold end, inside).
    ids = torch.tensor([[101, 7, 100, 8, 9, 10, 102]])
    b = _batch([S1], [C1], [O1], [[PERFECT_1, NEXT_1, MIXED_1]], input_ids=ids, unk=100)
    r = _score([b], 3)
    assert r.extra["units"]["unk_units"] == 1 and r.extra["units"]["known_decisions"] == 2
    # mixed on the known gaps: ##ing end (right), cat inside (right) → 1.0; next: cat right, ##ing wrong → 0.5
    np.testing.assert_array_equal(_grid(r, "boundary_accuracy_known"), [[1.0, 0.5, 1.0]])


def test_options_checked():
    with pytest.raises(InputError, match="ensemble-size must be 0 or more"):
        SegmentationProbe(1, 1, ensemble_size=-1)
    r = _score([_three_heads()], 3, ensemble_size=0)
    assert r.extra["ensembles"] == {} and r.extra["union"]["oracle"]["word_f1"] == 1.0
    assert parse_head("L3-H5") == (3, 5) and parse_head("3,5") == (3, 5)
    with pytest.raises(InputError):
        parse_head("head 3")


def _brute_force(ends: np.ndarray, sentences: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Counts [STATS,K] by building each segmentation and comparing word spans, one sentence at a time.
    sentences: (gold_end [n], word spans [(first, last), ...] of the reachable words) per sentence."""
    out = np.zeros((len(STATS), ends.shape[1]), dtype=np.int64)
    for k in range(ends.shape[1]):
        row, total = 0, np.zeros(len(STATS), dtype=np.int64)
        for gold, spans in sentences:
            n = len(gold)
            pred = ends[row:row + n, k].copy()
            pred[-1] = True
            dec = np.arange(n) < n - 1
            total[0] += (pred & gold & dec).sum()
            total[1] += (pred & ~gold & dec).sum()
            total[2] += (~pred & gold & dec).sum()
            words, start = set(), 0
            for i in range(n):
                if pred[i]:
                    words.add((start, i))
                    start = i + 1
            total[6] += len(words)
            for first, last in spans:
                if (first, last) in words:
                    total[7] += 1
                    total[8 + min(last - first + 1, 4) - 1] += 1
            row += n
        total[3:6] = total[0:3]  # every unit known here
        out[:, k] = total
    return out


def _random_corpus(rng, n_sentences):
    gold_parts, final_parts, firsts, lasts, buckets, sentences = [], [], [], [], [], []
    base = 0
    for _ in range(n_sentences):
        n = int(rng.integers(1, 9))
        gold = rng.random(n) < 0.5
        gold[-1] = True
        starts = np.concatenate([[0], np.nonzero(gold[:-1])[0] + 1])
        stops = np.nonzero(gold)[0]
        spans = list(zip(starts.tolist(), stops.tolist()))
        sentences.append((gold, spans))
        gold_parts.append(gold)
        final = np.zeros(n, dtype=bool)
        final[-1] = True
        final_parts.append(final)
        firsts += [a + base for a, _ in spans]
        lasts += [b + base for _, b in spans]
        buckets += [min(b - a + 1, 4) - 1 for a, b in spans]
        base += n
    units = Units(gold_end=torch.from_numpy(np.concatenate(gold_parts)),
                  final=torch.from_numpy(np.concatenate(final_parts)),
                  known=torch.ones(base, dtype=torch.bool), word_first=torch.tensor(firsts),
                  word_last=torch.tensor(lasts), word_bucket=torch.tensor(buckets))
    return units, sentences, len(firsts)


def test_tally_matches_brute_force_and_greedy_is_exact():
    rng = np.random.default_rng(0)
    units, sentences, n_words = _random_corpus(rng, 80)
    ends = rng.random((len(units), 9)) < 0.5
    np.testing.assert_array_equal(tally(torch.from_numpy(ends), units).numpy(), _brute_force(ends, sentences))
    live = rng.random(len(units)) < 0.6
    fixed = rng.random(len(units)) < 0.5
    mixed = np.where(live[:, None], ends, fixed[:, None])
    np.testing.assert_array_equal(tally(torch.from_numpy(ends[live]), units, torch.from_numpy(live),
                                        torch.from_numpy(fixed)).numpy(), _brute_force(mixed, sentences))
    totals = {"gold_words": n_words, "decisions": len(units) - len(sentences),
              "known_decisions": len(units) - len(sentences)}
    gold = units.gold_end.numpy()
    for rule in ("oracle", "any_end"):
        curve = greedy(torch.from_numpy(ends), units, totals, rule, 4)
        chosen: list[int] = []
        for step in curve:  # each step's pick is the best by brute force over every remaining head
            f1 = {}
            for h in set(range(ends.shape[1])) - set(chosen):
                sel = ends[:, chosen + [h]]
                pred = (np.where((sel == gold[:, None]).any(1), gold, ~gold) if rule == "oracle" else sel.any(1))
                f1[h] = float(metrics(torch.from_numpy(_brute_force(pred[:, None], sentences)), totals)["word_f1"][0])
            best = max(f1.values())
            chosen.append(min(h for h, v in f1.items() if v == best))
            assert step["heads"] == chosen and step["word_f1"] == pytest.approx(best, abs=1e-12)
        assert len(curve) >= 2
