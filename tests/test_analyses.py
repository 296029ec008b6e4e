"""The head analyses on hand-built attention: every expected number is worked out in the comments.

Token positions are 0-indexed; E marks end special tokens ([SEP]). Maps are one layer, H heads, unless a
test says otherwise; batches are fed layer by layer as the runner does (helpers.feed).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers import E, HandBatch, attention, batch, feed, sentence
from result_numbers import assert_same_numbers

from probes.builtin.analyses.entropy import EntropyAnalysis
from probes.builtin.analyses.head_distance import HeadDistance
from probes.builtin.analyses.head_layout import classical_mds
from probes.builtin.analyses.mass import MassAnalysis
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.patterns import PatternAnalysis
from probes.builtin.analyses.positional import PositionalAnalysis
from probes.builtin.analyses.rare import RareWordAnalysis, read_frequencies
from probes.builtin.analyses.term_matching import TermMatchingAnalysis
from probes.builtin.analyses.word_order import WordOrderAnalysis, unshuffle
from probes.base.errors import InputError
from probes.capture.maps import LayerMaps
from probes.settings.registry import available
from probes.results.probe_result import RunInfo
from probes.encoding.shuffle import word_permutation


def info(heads: int, sentences: int = 1) -> RunInfo:
    return RunInfo("hand", ["hand"], 1, heads, sentences, {}, {}, {})


def run(cls, groups, heads: int, **options):
    """Feed hand-made batches (sentences, columns, maps per sentence) to a fresh analysis; its result."""
    probe = cls(1, heads, **options)
    for sentences, columns, maps in groups:
        feed(probe, batch(sentences, columns, maps))
    return probe.compute(info(heads))


def layers_of(*hands: HandBatch) -> HandBatch:
    """One batch whose layer l holds the maps of the one-layer hands[l] (all built on the same sentences)."""
    return HandBatch(hands[0].batch, tuple(h.attentions[0] for h in hands))


# ---------------------------------------------------------------------------------------------- mass, entropy
# S1 "Dogs bark ." → [CLS] Dogs bark . [SEP], positions 0..4; S2 "Hi" → [CLS] Hi [SEP], positions 0..2.
S1, C1 = sentence(["Dogs", "bark", "."]), [0, 1, 2, 3, E]
S2, C2 = sentence(["Hi"]), [0, 1, E]
# Head 0 of S1, row by row:   [CLS]  Dogs  bark   .    [SEP]
#   row 0 [CLS]               0.6                      0.4
#   row 1 Dogs                0.2    0.3   0.5
#   row 2 bark                       0.6          0.4
#   row 3 .                                0.1    0.1  0.8
#   row 4 [SEP]                                        1.0
H0_S1 = attention(5, {0: {0: 0.6, 4: 0.4}, 1: {0: 0.2, 1: 0.3, 2: 0.5}, 2: {1: 0.6, 3: 0.4},
                      3: {2: 0.1, 3: 0.1, 4: 0.8}, 4: {4: 1.0}})
SELF_S1 = attention(5, {})  # head 1: every token attends to itself
# Head 0 of S2: row 0 → [SEP] 1.0; row 1 (Hi) → [CLS] 0.5, [SEP] 0.5; row 2 ([SEP]) → Hi 1.0
H0_S2 = attention(3, {0: {2: 1.0}, 1: {0: 0.5, 2: 0.5}, 2: {1: 1.0}})
SELF_S2 = attention(3, {})
ONE = [([S1], [C1], [[H0_S1, SELF_S1]])]
BOTH = [([S1, S2], [C1, C2], [[H0_S1, SELF_S1], [H0_S2, SELF_S2]])]
APART = [([S2], [C2], [[H0_S2, SELF_S2]]), ([S1], [C1], [[H0_S1, SELF_S1]])]


def test_mass_one_sentence():
    r = run(MassAnalysis, ONE, 2)
    # head 0 over 5 rows: cls (0.6 + 0.2) / 5 = 0.16; sep (0.4 + 0.8 + 1.0) / 5 = 0.44; punct (bark→. 0.4 + .→. 0.1) / 5
    # = 0.1; self (0.6 + 0.3 + 0 + 0.1 + 1.0) / 5 = 0.4; prev over rows 1-4 (0.2 + 0.6 + 0.1 + 0) / 4 = 0.225;
    # next over rows 0-3 (0 + 0.5 + 0.4 + 0.8) / 4 = 0.425; overall = cls + sep = 0.6.
    # head 1 (self): cls 1/5 (the [CLS] row), sep 1/5, punct 1/5 (the "." row), self 1, prev 0, next 0.
    expected = {"cls": [0.16, 0.2], "sep": [0.44, 0.2], "punct": [0.1, 0.2], "self": [0.4, 1.0],
                "prev": [0.225, 0.0], "next": [0.425, 0.0]}
    for label, values in expected.items():
        np.testing.assert_allclose(r.labels[label].scores, [values], atol=1e-6, err_msg=label)
    np.testing.assert_allclose(r.overall.scores, [[0.6, 0.4]], atol=1e-6)
    assert r.overall.count == 5 and r.labels["prev"].count == 4 and r.labels["next"].count == 4
    assert "causal_constraint" not in r.extra  # an encoder's analyses state no causal constraint


def test_mass_two_sentences_and_padding():
    r = run(MassAnalysis, BOTH, 2)
    # S2 adds 3 rows (2 with a previous / next token). head 0: cls 0.8 + 0.5 → 1.3 / 8; sep 2.2 + 1.0 + 0.5 → 3.7 / 8;
    # self 2.0 + 0 → 2.0 / 8; prev (0.9 + Hi→[CLS] 0.5 + [SEP]→Hi 1.0) / 6 = 0.4; next (1.7 + 0 + Hi→[SEP] 0.5) / 6.
    np.testing.assert_allclose(r.labels["cls"].scores[0, 0], 1.3 / 8, atol=1e-6)
    np.testing.assert_allclose(r.labels["sep"].scores[0, 0], 3.7 / 8, atol=1e-6)
    np.testing.assert_allclose(r.labels["self"].scores[0], [2.0 / 8, 1.0], atol=1e-6)
    np.testing.assert_allclose(r.labels["prev"].scores[0], [2.4 / 6, 0.0], atol=1e-6)
    np.testing.assert_allclose(r.labels["next"].scores[0], [2.2 / 6, 0.0], atol=1e-6)
    assert r.overall.count == 8 and r.labels["prev"].count == 6
    apart = run(MassAnalysis, APART, 2)  # batch of one each: no padding; must give the same numbers
    for label in r.labels:
        np.testing.assert_allclose(apart.labels[label].scores, r.labels[label].scores, atol=1e-7)


def test_entropy_and_confidence():
    r = run(EntropyAnalysis, ONE, 2)
    # head 0 row entropies (nats): row 0 −(.6 ln .6 + .4 ln .4) = 0.673012; row 1 −(.2 ln .2 + .3 ln .3 + .5 ln .5)
    # = 1.029653; row 2 = 0.673012; row 3 −(2 · .1 ln .1 + .8 ln .8) = 0.639032; row 4 = 0 → mean 3.014709 / 5.
    entropy0 = (0.673012 + 1.029653 + 0.673012 + 0.639032) / 5
    np.testing.assert_allclose(r.overall.scores, [[entropy0, 0.0]], atol=1e-6)
    # gap to uniform over 5 tokens: ln 5 − entropy; the self head is ln 5 = 1.609438 from uniform
    np.testing.assert_allclose(r.labels["gap"].scores, [[math.log(5) - entropy0, math.log(5)]], atol=1e-6)
    # confidence = mean max weight: (0.6 + 0.5 + 0.6 + 0.8 + 1.0) / 5 = 0.7; self head 1.0
    np.testing.assert_allclose(r.labels["confidence"].scores, [[0.7, 1.0]], atol=1e-6)
    assert r.baselines["uniform_entropy"] == pytest.approx(math.log(5), abs=1e-6)
    assert r.baselines["uniform_confidence"] == pytest.approx(0.2)
    both = run(EntropyAnalysis, BOTH, 2)
    # S2 adds rows of entropy 0, ln 2, 0 (head 0) and uniform ln 3 for 3 rows
    np.testing.assert_allclose(both.overall.scores[0, 0], (entropy0 * 5 + math.log(2)) / 8, atol=1e-6)
    assert both.baselines["uniform_entropy"] == pytest.approx((5 * math.log(5) + 3 * math.log(3)) / 8, abs=1e-6)
    assert both.baselines["uniform_confidence"] == pytest.approx(2 / 8)  # Σ over rows of 1/n = one per sentence


def test_layers_fill_their_own_slice_and_count_once():
    # layer 0 holds heads (H0_S1, SELF_S1), layer 1 the same maps in the other order: each layer's scores are the
    # one-layer scores of its maps, and counts and baselines are those of one pass over the rows, not one a layer.
    hand = layers_of(batch([S1], [C1], [[H0_S1, SELF_S1]]), batch([S1], [C1], [[SELF_S1, H0_S1]]))
    for cls in (MassAnalysis, EntropyAnalysis):
        one = run(cls, ONE, 2)
        probe = cls(2, 2)
        feed(probe, hand)
        r = probe.compute(info(2))
        for label in (None, *one.labels):
            got, single = (r.overall, one.overall) if label is None else (r.labels[label], one.labels[label])
            np.testing.assert_allclose(got.scores, [single.scores[0], single.scores[0][::-1]], atol=1e-12)
            assert got.count == single.count == (4 if label in ("prev", "next") else 5)
        assert r.baselines == one.baselines
    assert probe.state_dict()["scalar_counts"].tolist() == [5, 5]  # entropy's baselines: 5 rows, once
    rare = RareWordAnalysis(2, 2)
    rare.prepare([RA, RB, RC])
    three = batch([RA, RB, RC], [[0, 1, 2, 3, 4, E], [0, 1, 2, 3, E], [0, 1, E]],
                  [[RA_TO_ZEBRA, attention(6, {})], [RB_MAP, attention(5, {})], [attention(3, {})] * 2])
    feed(rare, layers_of(three, three))
    r = rare.compute(info(2, 3))
    np.testing.assert_allclose(r.overall.scores, [[0.8, 0.0], [0.8, 0.0]])  # as test_rare_word_heads, each layer
    assert r.overall.count == 5 and r.extra["sentences_without_rarest"] == 1


class _Twice(MeanAnalysis):
    """Adds measure "a" twice a layer (values v and 2v) and "b" once (v), v[b, h] = 10·layer + 2b + h + 1."""

    name = "twice-test"
    measures = ("a", "b")

    def update(self, batch, maps):
        n = len(batch.sentences)
        v = torch.arange(n * self.heads, dtype=torch.float64).view(n, self.heads) + 10 * maps.layer + 1  # [B,H]
        ones = torch.ones(n)
        self.add(maps, "a", v.sum(0), n, per_sentence=(v, ones))
        self.add(maps, "b", v.sum(0), n, per_sentence=(v, ones))
        self.add(maps, "a", 2 * v.sum(0), n, per_sentence=(2 * v, ones))  # again, after another measure

    def compute(self, info):
        return self.result(info, self.mean("a"), {"b": self.mean("b")})


def test_replicate_sums_added_at_the_last_layer_count_every_call_once():
    # The per-sentence sums are held for the batch and added at its last layer, every layer's in one product:
    # each layer's and each call's once, whatever the order of the calls (here "a" twice in a layer, at the last too).
    hand = layers_of(*[batch([S1, S2], [C1, C2], [[H0_S1, SELF_S1], [H0_S2, SELF_S2]])] * 3)  # 3 layers, B = 2
    probe = _Twice(3, 2, replicates=5)
    feed(probe, hand)
    weights = probe.bootstrap.weights(hand.batch).double().numpy()  # [R,B] small integers
    v = np.arange(4, dtype=float).reshape(2, 2)[None] + 10 * np.arange(3)[:, None, None] + 1  # [L,B,H]
    per_layer = np.einsum("rb,lbh->rlh", weights, v)  # [R,L,H] Σ_b w[r,b] · v[b,h]
    np.testing.assert_array_equal(probe.replicate_sums[:, 0].numpy(), 3 * per_layer)  # a: v + 2v
    np.testing.assert_array_equal(probe.replicate_sums[:, 1].numpy(), per_layer)  # b: v
    np.testing.assert_array_equal(probe.sums.numpy(), np.stack([3 * v.sum(1), v.sum(1)]))  # [measures,L,H]
    np.testing.assert_array_equal(probe.replicate_counts.numpy(), weights.sum(1)[:, None] * [[2, 1]])  # at layer 0
    feed(probe, hand)  # a second batch of the same sentences: nothing of the first is held over
    np.testing.assert_array_equal(probe.replicate_sums[:, 0].numpy(), 6 * per_layer)


# ---------------------------------------------------------------------------------------------- positional
# [CLS] a b c [SEP]. Head 0 attends to the previous token (the [CLS] row to itself): offset −1 on every row
# that has a previous token. Head 1: argmax per row 0→4, 1→2, 2→3, 3→3, 4→0.
S5, C5 = sentence(["a", "b", "c"]), [0, 1, 2, 3, E]
PREV = attention(5, {0: {0: 1.0}, 1: {0: 1.0}, 2: {1: 1.0}, 3: {2: 1.0}, 4: {3: 1.0}})
MIXED = attention(5, {0: {4: 0.9, 0: 0.1}, 1: {2: 0.7, 1: 0.3}, 2: {3: 0.6, 0: 0.4}, 3: {3: 0.5, 1: 0.25, 4: 0.25},
                      4: {0: 0.8, 4: 0.2}})


def test_positional_heads():
    r = run(PositionalAnalysis, [([S5], [C5], [[PREV, MIXED]])], 2)
    # offset −1: rows 1-4 have a previous token (4 rows); head 0 hits all 4 → 1.0; head 1 none → 0
    np.testing.assert_allclose(r.labels["offset-1"].scores, [[1.0, 0.0]])
    assert r.labels["offset-1"].count == 4 and r.labels["offset+0"].count == 5 and r.labels["offset-3"].count == 2
    # offset 0: head 0's [CLS] row (1 of 5); head 1's row 3 (1 of 5)
    np.testing.assert_allclose(r.labels["offset+0"].scores, [[0.2, 0.2]])
    # offset +1: rows 0-3 (4 rows); head 1 hits rows 1 and 2 → 0.5 (rows 0 → +4 and 4 → −4 are beyond ±3)
    np.testing.assert_allclose(r.labels["offset+1"].scores, [[0.0, 0.5]])
    np.testing.assert_allclose(r.overall.scores, [[1.0, 0.5]])
    np.testing.assert_array_equal(r.overall.extra["offset"], [[-1, 1]])
    assert r.extra["positional_heads"] == [{"layer": 0, "head": 0, "offset": -1, "share": 1.0}]
    strict = run(PositionalAnalysis, [([S5], [C5], [[PREV, MIXED]])], 2, positional_threshold=1.01)
    assert strict.extra["positional_heads"] == []


# ---------------------------------------------------------------------------------------------- rare
# Corpus: "the cat the zebra", "the cat sat", "unique" → the 4, cat 2, zebra 1, sat 1, unique 1.
RA = sentence(["the", "cat", "the", "zebra"])  # rarest: zebra (column 4); query words: the, cat, the
RB = sentence(["the", "cat", "sat"])  # rarest: sat (column 3); query words: the, cat
RC = sentence(["unique"])  # one word: no word is rarer than another → not counted
# Head 0: every word row looks at the word in column 4 (RA) / rows the→sat, cat→the (RB); head 1: self.
RA_TO_ZEBRA = attention(6, {1: {4: 1.0}, 2: {4: 1.0}, 3: {4: 0.9, 0: 0.1}, 4: {0: 1.0}})
RB_MAP = attention(5, {1: {3: 1.0}, 2: {1: 1.0}})


def _rare(**options):
    probe = RareWordAnalysis(1, 2, **options)
    probe.prepare([RA, RB, RC])
    feed(probe, batch([RA, RB, RC], [[0, 1, 2, 3, 4, E], [0, 1, 2, 3, E], [0, 1, E]],
                      [[RA_TO_ZEBRA, attention(6, {})], [RB_MAP, attention(5, {})], [attention(3, {})] * 2]))
    return probe.compute(info(2, 3))


def test_rare_word_heads():
    r = _rare()
    # head 0: RA 3 of 3 query words point at zebra; RB the→sat ✓, cat→the ✗ → 4 / 5 = 0.8; head 1 (self) 0
    np.testing.assert_allclose(r.overall.scores, [[0.8, 0.0]])
    assert r.overall.count == 5 and r.extra["sentences_without_rarest"] == 1
    # chance: an argmax uniform over [CLS] + words: RA 1/5 for 3 rows, RB 1/4 for 2 rows → (0.6 + 0.5) / 5
    assert r.baselines["chance"] == pytest.approx(0.22)


def test_rare_frequencies_from_a_file(tmp_path):
    f = tmp_path / "freq.tsv"
    f.write_text("the\t5\ncat 3\nzebra\t100\nsat\t9\n")
    # now cat (3) is RA's rarest: query words the, the, zebra: head 0 points at zebra ✗ ✗; zebra → [CLS] ✗ → 0/3;
    # RB: cat (3) rarest; the→sat ✗, sat→(self row: head 0 row 3 is unset → self) ✗ → 0 / 5 overall
    r = _rare(frequencies=str(f))
    np.testing.assert_allclose(r.overall.scores, [[0.0, 0.0]])
    assert r.overall.count == 5 and r.extra["frequencies"] == str(f)
    bad = tmp_path / "bad.tsv"
    bad.write_text("the\t5\ncat\tmany\n")
    with pytest.raises(InputError, match=r"bad.tsv:2: expected 'word<TAB>count'"):
        read_frequencies(bad)


# ---------------------------------------------------------------------------------------------- patterns
# [CLS] a b c d [SEP] (6 tokens). Features per map: v = mass on special tokens, d = mass on neighbouring word
# subwords, both means over the 6 rows.
S6, C6 = sentence(["a", "b", "c", "d"]), [0, 1, 2, 3, 4, E]
VERTICAL = attention(6, {i: {0: 0.5, 5: 0.5} for i in range(6)})  # v = 1, d = 0
DIAGONAL = attention(6, {0: {1: 1.0}, 1: {2: 1.0}, 2: {1: 1.0}, 3: {2: 1.0}, 4: {3: 1.0}, 5: {4: 1.0}})  # v 0, d 1
BOTH_VD = attention(6, {0: {5: .5, 1: .5}, 1: {5: .5, 2: .5}, 2: {5: .5, 1: .5}, 3: {5: .5, 2: .5},
                        4: {5: .5, 3: .5}, 5: {5: .5, 4: .5}})  # v = 0.5, d = 0.5
# uniform 1/6: v = 2/6; d per row: [CLS] 1/6 (next a), a 1/6 (prev is [CLS]), b 2/6, c 2/6, d 1/6, [SEP] 1/6
# → d = 8/36 = 0.222: v, d >= 0.2 but v + d = 0.556 < 0.6, neither alone >= 0.6 → heterogeneous
UNIFORM = attention(6, {i: {j: 1 / 6 for j in range(6)} for i in range(6)})


def test_pattern_classes_single_sentence():
    r = run(PatternAnalysis, [([S6], [C6], [[VERTICAL, DIAGONAL, BOTH_VD, UNIFORM]])], 4)
    expected = {"vertical": [1, 0, 0, 0], "diagonal": [0, 1, 0, 0], "vertical+diagonal": [0, 0, 1, 0],
                "block": [0, 0, 0, 0], "heterogeneous": [0, 0, 0, 1]}
    for label, values in expected.items():
        np.testing.assert_array_equal(r.labels[label].scores, [values], err_msg=label)
    np.testing.assert_array_equal(r.overall.scores, [[1, 1, 1, 0]])
    np.testing.assert_allclose(r.overall.extra["vertical_mass"], [[1.0, 0.0, 0.5, 2 / 6]], atol=1e-6)
    np.testing.assert_allclose(r.overall.extra["diagonal_mass"], [[0.0, 1.0, 0.5, 8 / 36]], atol=1e-6)
    # the previous-token head on [CLS] a b c [SEP]: [CLS] → itself and a → [CLS] are special mass (v = 2/5), the
    # other three rows look at the previous word (d = 3/5 = major) → diagonal
    prev = run(PatternAnalysis, [([S5], [C5], [[PREV]])], 1)
    assert prev.labels["diagonal"].scores[0, 0] == 1
    np.testing.assert_allclose(prev.overall.extra["vertical_mass"], [[0.4]], atol=1e-6)
    # thresholds are options: with major 0.5 the uniform map (v + d = 0.556) is vertical+diagonal
    loose = run(PatternAnalysis, [([S6], [C6], [[UNIFORM]])], 1, pattern_major=0.5)
    assert loose.labels["vertical+diagonal"].scores[0, 0] == 1


# Pair [CLS] a b c d [SEP] e f g h [SEP] (11 tokens, 4 words a segment). Word rows spread evenly over their own
# sentence's 4 words; [CLS] over sentence 1, the middle [SEP] over all 8 words, the last [SEP] over sentence 2.
# v = 0; d: inner words 0.5, edge words 0.25 → 3.0 over the word rows, + 0.25 from each special row → 3.75 / 11 = 0.34;
# w (own-sentence mass of word rows) = 1 → block. The same map on one 8-word sentence is heterogeneous.
PAIR = sentence(["a", "b", "c", "d", "e", "f", "g", "h"], pair=4)
PAIR_COLUMNS = [0, 1, 2, 3, 4, E, 5, 6, 7, 8, E]
FIRST, SECOND = {j: 0.25 for j in (1, 2, 3, 4)}, {j: 0.25 for j in (6, 7, 8, 9)}
BLOCK = attention(11, {0: FIRST, **{i: FIRST for i in (1, 2, 3, 4)}, 5: {j: 0.125 for j in (1, 2, 3, 4, 6, 7, 8, 9)},
                       **{i: SECOND for i in (6, 7, 8, 9)}, 10: SECOND})


def test_block_pattern_needs_a_pair():
    r = run(PatternAnalysis, [([PAIR], [PAIR_COLUMNS], [[BLOCK]])], 1)
    assert r.labels["block"].scores[0, 0] == 1 and r.labels["heterogeneous"].scores[0, 0] == 0
    np.testing.assert_allclose(r.overall.extra["diagonal_mass"], [[3.75 / 11]], atol=1e-6)
    single = sentence(PAIR.words)  # the same words and map, read as one sentence: no segments, no block
    r = run(PatternAnalysis, [([single], [PAIR_COLUMNS], [[BLOCK]])], 1)
    assert r.labels["block"].scores[0, 0] == 0 and r.labels["heterogeneous"].scores[0, 0] == 1


def test_pattern_shares_over_maps():
    # two sentences: head 0 vertical on S6 and on a 3-token map; the shares are per map (sentence)
    short = attention(3, {i: {0: 0.5, 2: 0.5} for i in range(3)})
    r = run(PatternAnalysis, [([S6, S2], [C6, C2], [[VERTICAL, UNIFORM], [short, attention(3, {})]])], 2)
    # S2's self map on head 1: v = 2/3 ([CLS] and [SEP] rows on themselves), d = 0 → vertical
    np.testing.assert_array_equal(r.labels["vertical"].scores, [[1.0, 0.5]])
    np.testing.assert_array_equal(r.labels["heterogeneous"].scores, [[0.0, 0.5]])
    assert r.overall.count == 2


# ---------------------------------------------------------------------------------------------- head distance
# Maps over the 3 tokens of [CLS] Hi [SEP]: SELF3 row i → token i; NEXT3 row i → token (i + 1) mod 3 (disjoint from
# SELF3); HALF3 every row half on its own token, half on the next.
SELF3 = attention(3, {0: {0: 1.0}, 1: {1: 1.0}, 2: {2: 1.0}})
NEXT3 = attention(3, {0: {1: 1.0}, 1: {2: 1.0}, 2: {0: 1.0}})
HALF3 = attention(3, {0: {0: .5, 1: .5}, 1: {1: .5, 2: .5}, 2: {2: .5, 0: .5}})
JSD_HALF = 0.811278 - 0.5  # SELF3 or NEXT3 against HALF3: M = (.75, .25), H(M) = .811278 bits; H(P) = 0, H(Q) = 1


def test_head_distance_worked_example():
    # heads SELF3, NEXT3, SELF3, HALF3: JSD(head 0, head 1) = 1 bit on every row → D = 1. JSD(head 0, head 2) = 0.
    # JSD(head 0, head 3) = JSD_HALF on every row → D = sqrt(JSD_HALF)
    probe = HeadDistance(1, 4, distance_rows=0, clusters=2)
    feed(probe, batch([S2], [C2], [[SELF3, NEXT3, SELF3, HALF3]]))
    r = probe.compute(info(4))
    d = np.array(r.extra["distance"])
    assert d[0, 1] == pytest.approx(1.0, abs=1e-6) and d[0, 2] == pytest.approx(0.0, abs=1e-6)
    assert d[0, 3] == pytest.approx(math.sqrt(JSD_HALF), abs=1e-5) == pytest.approx(d[1, 3], abs=1e-6)
    assert np.allclose(d, d.T) and np.all(np.diag(d) == 0)
    assert r.labels["nearest"].scores[0, 0] == pytest.approx(0.0, abs=1e-6)  # head 0's twin, head 2
    clusters = np.array(r.extra["clusters"])[0]
    assert clusters[0] == clusters[2] and len(set(clusters)) == 2
    layout = np.array(r.extra["layout"])  # MDS: heads 0 and 2 coincide, head 1 lies 1 away from them
    assert np.linalg.norm(layout[0] - layout[2]) == pytest.approx(0, abs=1e-6)
    assert r.extra["head_names"] == ["L0-H0", "L0-H1", "L0-H2", "L0-H3"] and r.overall.count == 3


def test_head_distance_compares_heads_of_different_layers():
    # layer 0: heads SELF3, NEXT3; layer 1: heads HALF3, SELF3. L1-H1 is L0-H0 again (distance 0); L0-H1 against
    # L1-H0 is NEXT3 against HALF3 (sqrt(JSD_HALF)), as is L0-H0 against L1-H0; NEXT3 against SELF3 is 1 bit.
    hand = layers_of(batch([S2], [C2], [[SELF3, NEXT3]]), batch([S2], [C2], [[HALF3, SELF3]]))
    probe = HeadDistance(2, 2, distance_rows=0, clusters=2)
    feed(probe, hand)
    half = math.sqrt(JSD_HALF)
    expected = np.array([[0, 1, half, 0], [1, 0, half, 1], [half, half, 0, half], [0, 1, half, 0]])
    np.testing.assert_allclose(probe.distances(), expected, atol=1e-6)
    r = probe.compute(info(2))
    assert r.extra["head_names"] == ["L0-H0", "L0-H1", "L1-H0", "L1-H1"] and r.overall.count == 3
    np.testing.assert_allclose(r.labels["nearest"].scores, [[0, half], [half, 0]], atol=1e-6)
    # the rows kept for the batch went with its last layer: a second batch adds up like the first
    feed(probe, hand)
    np.testing.assert_allclose(probe.distances(), expected, atol=1e-6)
    assert float(probe.weight) == 6
    with pytest.raises(RuntimeError, match="in order"):  # the pair sums need every layer of a batch, in order
        HeadDistance(2, 2).update(hand.batch, LayerMaps(hand.batch, 1, hand.attentions[1]))


def test_head_distance_matches_scipy_and_batching():
    from scipy.spatial.distance import jensenshannon

    gen = torch.Generator().manual_seed(0)
    sentences = [sentence(["w"] * n) for n in (2, 5, 3)]
    columns = [[0, *range(1, n + 1), E] for n in (2, 5, 3)]
    maps = [[torch.softmax(3 * torch.randn(n + 2, n + 2, generator=gen), -1) for _ in range(3)] for n in (2, 5, 3)]
    # expected: sqrt of the mean over all 4 + 7 + 5 rows of JSD (bits) = mean of scipy's distance squared
    expected = np.zeros((3, 3))
    for p in range(3):
        for q in range(3):
            rows = [jensenshannon(m[p][i].double().numpy(), m[q][i].double().numpy(), base=2) ** 2
                    for m in maps for i in range(m[0].shape[0])]
            expected[p, q] = math.sqrt(np.mean(rows))
    together = HeadDistance(1, 3, distance_rows=0)
    feed(together, batch(sentences, columns, maps))
    np.testing.assert_allclose(together.distances(), expected, atol=1e-9)  # float64 sums: scipy's numbers
    shards = [HeadDistance(1, 3, distance_rows=0) for _ in sentences]
    for probe, s, c, m in zip(shards, sentences, columns, maps):
        feed(probe, batch([s], [c], [m]))
    shards[0].merge(shards[1])
    shards[0].merge(shards[2])
    np.testing.assert_allclose(shards[0].distances(), together.distances(), atol=1e-6)


def test_head_distance_row_draw_is_weighted_and_seeded():
    # every row of a sentence identical → a draw of 1 row per sentence, weighted by the sentence length,
    # gives exactly the all-rows answer; the drawn rows depend only on seed and words.
    rows_a = torch.tensor([[0.7, 0.1, 0.1, 0.1, 0.0]]).repeat(5, 1)
    rows_b = torch.tensor([[0.1, 0.1, 0.1, 0.1, 0.6]]).repeat(5, 1)
    short_a, short_b = torch.tensor([[1.0, 0, 0]]).repeat(3, 1), torch.tensor([[0, 0, 1.0]]).repeat(3, 1)
    groups = ([S5, S2], [C5, C2], [[rows_a, rows_b], [short_a, short_b]])
    exact, drawn = HeadDistance(1, 2, distance_rows=0), HeadDistance(1, 2, distance_rows=1)
    feed(exact, batch(*groups))
    feed(drawn, batch(*groups))
    np.testing.assert_allclose(drawn.distances(), exact.distances(), atol=1e-12)
    assert float(drawn.weight) == float(exact.weight) == 8
    sentence_, position, weight = drawn.query_rows(batch(*groups).batch)
    again = HeadDistance(1, 2, distance_rows=1).query_rows(batch([S2, S5], [C2, C5], [[short_a, short_b],
                                                                                    [rows_a, rows_b]]).batch)
    assert sorted(position.tolist()) == sorted(again[1].tolist())  # same rows whatever the batch order
    assert weight.tolist() == [5.0, 3.0]


def test_layout_sign_does_not_follow_rounding():
    # Classical MDS fixes each axis only up to its sign. Distances that differ by rounding (1e-12) must give the same
    # layout, not its mirror image: the coordinates sum to 0, so the sign of their sum is rounding noise.
    rng = np.random.default_rng(0)
    points = rng.normal(size=(12, 4))
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    layout = classical_mds(d)
    assert np.abs(layout).max() > 0.5
    for _ in range(20):
        noise = np.triu(rng.normal(scale=1e-12, size=d.shape), 1)
        np.testing.assert_allclose(classical_mds(d + noise + noise.T), layout, atol=1e-9)


# ---------------------------------------------------------------------------------------------- word order
def test_permutation_is_seeded_within_segments_and_never_identity():
    two = sentence(["a", "b"])
    assert word_permutation(two, 0).tolist() == [2, 1]  # the only other order of two words
    long = sentence([f"w{i}" for i in range(8)])
    assert word_permutation(long, 3).tolist() == word_permutation(long, 3).tolist()
    assert word_permutation(long, 3).tolist() != word_permutation(long, 4).tolist()
    pair = sentence(["a", "b", "c", "d", "e"], pair=2)
    order = word_permutation(pair, 0).tolist()
    assert sorted(order[:2]) == [1, 2] and sorted(order[2:]) == [3, 4, 5]
    assert word_permutation(sentence(["x"]), 0).tolist() == [1]


def test_twin_moves_whole_words():
    # "ab cd" tokenised as [CLS] a ##b c ##d [SEP]: the twin is [CLS] c ##d a ##b [SEP]
    s = sentence(["ab", "cd"])
    b = batch([s], [[0, 1, 1, 2, 2, E]], [[attention(6, {})]], input_ids=torch.tensor([[101, 11, 12, 21, 22, 102]]),
              shuffle_seed=0).batch
    twin = b.twin
    assert twin.input_ids.tolist() == [[101, 21, 22, 11, 12, 102]]
    assert twin.columns.tolist() == [[0, 2, 2, 1, 1, 3]]  # still the original words' columns
    assert twin.position_of.tolist() == [[0, 3, 4, 1, 2, 5]] and twin.shuffled.tolist() == [True]


def test_word_order_worked_example():
    # "a b" → [CLS] a b [SEP]; the twin is [CLS] b a [SEP], so position_of = [0, 2, 1, 3].
    s = sentence(["a", "b"])
    content = attention(4, {1: {1: 1.0}, 2: {1: 1.0}})  # head 0: both words look at "a"
    positional = attention(4, {0: {0: 1.0}, 1: {0: 1.0}, 2: {1: 1.0}, 3: {2: 1.0}})  # head 1: previous position
    twin_content = attention(4, {1: {2: 1.0}, 2: {2: 1.0}})  # in the twin "a" sits at position 2
    hand = batch([s], [[0, 1, 2, E]], [[content, positional]], shuffle_seed=0)
    twin = HandBatch(hand.batch.twin, (torch.stack([twin_content, positional])[None],))
    assert twin.batch.position_of.tolist() == [[0, 2, 1, 3]]
    # unshuffled, head 0 is the original map again (TV 0). Head 1 back in the original order: a (row 1) → twin row 2
    # → twin position 1 = b; b → [CLS]; [SEP] → twin position 2 = a: rows 1, 2, 3 each move all their mass (TV 1),
    # the [CLS] row none → 3 / 4; the argmax changes on the same 3 rows.
    np.testing.assert_allclose(unshuffle(twin.attentions[0], twin.batch.position_of)[0, 0], content, atol=0)
    probe = WordOrderAnalysis(1, 2)
    feed(probe, hand, twin=twin)
    r = probe.compute(info(2))
    np.testing.assert_allclose(r.overall.scores, [[0.0, 0.75]])
    np.testing.assert_allclose(r.labels["argmax_changed"].scores, [[0.0, 0.75]])
    assert r.overall.count == 4 and r.extra["unshuffled_sentences"] == 0


def test_word_order_leaves_out_one_word_sentences():
    one = batch([S2], [C2], [[attention(3, {})]], shuffle_seed=0)
    hand = layers_of(one, one)  # two layers: the sentence left out is counted once
    probe = WordOrderAnalysis(2, 1)
    feed(probe, hand, twin=HandBatch(hand.batch.twin, hand.attentions))
    r = probe.compute(info(1))
    assert r.overall.count == 0 and np.isnan(r.overall.scores).all() and r.extra["unshuffled_sentences"] == 1


# ---------------------------------------------------------------------------------------------- term matching
def test_term_matching_worked_example():
    # "the cat" / "the dog": [CLS] the cat [SEP] the dog [SEP]; "the" (1) and "the" (4) match across sentences.
    pair = sentence(["the", "cat", "the", "dog"], pair=2)
    head0 = attention(7, {1: {4: 0.7, 0: 0.3}, 4: {1: 0.4, 5: 0.6}})  # the→the 0.7 (argmax ✓), the→the 0.4 (argmax ✗)
    hand = batch([pair], [[0, 1, 2, E, 3, 4, E]], [[head0, attention(7, {})]])
    hand.batch.input_ids = torch.tensor([[101, 1996, 4937, 102, 1996, 3899, 102]])  # the [SEP]s match: never counted
    probe = TermMatchingAnalysis(1, 2)
    feed(probe, hand)
    r = probe.compute(info(2))
    np.testing.assert_allclose(r.overall.scores, [[0.55, 0.0]], atol=1e-6)  # (0.7 + 0.4) / 2; self head 0
    np.testing.assert_allclose(r.labels["argmax"].scores, [[0.5, 0.0]])
    assert r.overall.count == 2 and r.baselines["uniform"] == pytest.approx(1 / 7)  # one match among 7 tokens


# ---------------------------------------------------------------------------------------------- additive state
def analyses() -> list[type]:
    """Every registered analysis (the probes of probes.builtin.analyses): a new one is covered without a list."""
    return [cls for cls in available().values() if cls.__module__.startswith("probes.builtin.analyses.")]


# Two halves of a corpus, each a 2-layer, 2-head batch of seeded random maps with its word-shuffled twin. Half 0: the
# pair "the cat" / "the dog" ([CLS] the cat [SEP] the dog [SEP]: "the" matches across) and "Dogs bark ."; half 1:
# "a b c d" and "Hi". Every analysis counts something here (rare: cat and dog are the pair's rarest words).
PAIR_TC = sentence(["the", "cat", "the", "dog"], pair=2)
HALVES = (([PAIR_TC, S1], [[0, 1, 2, E, 3, 4, E], C1], [[101, 1996, 4937, 102, 1996, 3899, 102],
                                                       [101, 3899, 9563, 1012, 102]]),
          ([S6, S2], [C6, C2], [[101, 1037, 1038, 1039, 1040, 102], [101, 7632, 102]]))


def random_half(sentences, columns, ids, seed: int) -> tuple[HandBatch, HandBatch]:
    """The half as a 2-layer batch of random maps, and its twin (random maps too)."""
    gen = torch.Generator().manual_seed(seed)

    def one_layer() -> torch.Tensor:  # [B,H,T,T]
        return batch(sentences, columns, [[torch.softmax(2 * torch.randn(len(c), len(c), generator=gen), -1)
                                           for _ in range(2)] for c in columns]).attentions[0]

    width = max(len(c) for c in columns)
    b = batch(sentences, columns, [[attention(len(c), {})] for c in columns],
              input_ids=torch.tensor([i + [0] * (width - len(i)) for i in ids]), shuffle_seed=0).batch
    return HandBatch(b, (one_layer(), one_layer())), HandBatch(b.twin, (one_layer(), one_layer()))


def fresh(cls):
    probe = cls(2, 2)
    probe.prepare([s for sentences, _, _ in HALVES for s in sentences])
    return probe


@pytest.mark.parametrize("cls", analyses(), ids=lambda cls: cls.name)
def test_state_saves_merges_and_resets(cls):
    halves = [random_half(*half, seed) for seed, half in enumerate(HALVES)]
    whole = fresh(cls)
    for hand, twin in halves:
        feed(whole, hand, twin=twin)
    expected = whole.compute(info(2))
    assert expected.overall.count > 0
    # two shards, merged: the same numbers, to the bit (float64 sums and int64 counts add in the same order)
    first, second = fresh(cls), fresh(cls)
    feed(first, halves[0][0], twin=halves[0][1])
    feed(second, halves[1][0], twin=halves[1][1])
    first.merge(second)
    assert_same_numbers(first.compute(info(2)), expected, atol=0, context="merged: ")
    # saved and loaded into a fresh probe
    state = whole.state_dict()
    loaded = fresh(cls)
    loaded.load_state_dict(state)
    assert_same_numbers(loaded.compute(info(2)), expected, atol=0, context="loaded: ")
    assert all(t.dtype in (torch.float64, torch.int64) for t in state.values())
    # reset: back to a fresh probe's (empty) result, and fed again, the same numbers
    whole.reset()
    assert_same_numbers(whole.compute(info(2)), fresh(cls).compute(info(2)), atol=0, context="reset: ")
    for hand, twin in halves:
        feed(whole, hand, twin=twin)
    assert_same_numbers(whole.compute(info(2)), expected, atol=0, context="fed again: ")
