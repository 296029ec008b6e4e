"""pos, ner, con and the streaming centroids on hand-built context vectors (1 layer, 2 heads, d = 2; the
state checks add a second layer). Every expected number is worked out in the comments. Special-token
and padding positions hold junk (±100) that must never reach a score."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from probes.encoding.batching import Batch
from probes.builtin.con import ConstituentProbe
from probes.builtin.ner import NerProbe
from probes.builtin.pos import PosProbe
from probes.scoring.centroids import Centroids
from probes.base.errors import InputError
from probes.capture.maps import LayerMaps
from probes.results.probe_result import RunInfo
from helpers import E, HandBatch, feed, sentence
from state_checks import assert_same, check_state, info, two_layers

JUNK = 100.0
INFO = RunInfo(model="hand", corpus=["hand"], layers=1, heads=2, sentences=0, skipped={},
               settings={"fit": {"on": "fit", "corpus": ["fit.conllu"]}}, provenance={})


def vector_batch(sentences, columns, vectors) -> HandBatch:
    """A one-layer batch; vectors[b] = {position: (head-0 vector, head-1 vector)} for sentence b's subwords.
    Positions not given (the specials) and padding hold JUNK. The attention maps are not used (zeros)."""
    b = Batch(sentences, [np.array(c) for c in columns])
    t = b.columns.shape[1]
    context = torch.full((len(sentences), 2, t, 2), JUNK)  # [B,H,T,d]
    for row, given in enumerate(vectors):
        for position, per_head in given.items():
            context[row, :, position] = torch.tensor(per_head, dtype=torch.float32)
    return HandBatch(b, (torch.zeros(len(sentences), 2, t, t),), (context,))


def layer_0(hand: HandBatch) -> LayerMaps:
    return LayerMaps(hand.batch, 0, hand.attentions[0], hand.context[0])


# ---- pos -------------------------------------------------------------------------------------------
# Fit: "a b c" tagged N V N, tokens [CLS] a b c [SEP]; one more sentence "d" tagged V.
#   head 0: a (1,0)  b (0,1)  c (3,0)  d (0,3)  → centroid N = (2,0) → direction (1,0); V = (0,2) → (0,1)
#   head 1: a (0,1)  b (1,0)  c (1,0)  d (3,0)  → centroid N = (.5,.5) → (1,1)/√2;    V = (2,0) → (1,0)
FIT_1 = sentence(["a", "b", "c"], upos=["N", "V", "N"])
FIT_2 = sentence(["d"], upos=["V"])
FIT_1_BATCH = ([FIT_1], [[0, 1, 2, 3, E]], [{1: [(1, 0), (0, 1)], 2: [(0, 1), (1, 0)], 3: [(3, 0), (1, 0)]}])
FIT_2_BATCH = ([FIT_2], [[0, 1, E]], [{1: [(0, 3), (3, 0)]}])
# Scored: "x y z" tagged N N V, x split in two subwords: tokens [CLS] x1 x2 y z [SEP]; and "w" tagged V.
#   head 0: x = mean((1,1),(1,-1)) = (1,0) → N ✓; y (.9,.5): cos N .87 > V .49 → N ✓; z (1,2): V .89 > N .45 → V ✓;
#           w (0,5) → V ✓.                                                          head 0: N 2/2, V 2/2, all 4/4
#   head 1: x = mean((0,2),(2,0)) = (1,1): N 1.0 > V .71 → N ✓; y (1,.2): N .83 < V .98 → V ✗;
#           z (0,1): N .71 > V 0 → N ✗; w (3,0): V 1 > N .71 → V ✓.                 head 1: N 1/2, V 1/2, all 2/4
SCORE_1 = sentence(["x", "y", "z"], upos=["N", "N", "V"])
SCORE_2 = sentence(["w"], upos=["V"])
SCORE_1_VECTORS = {1: [(1, 1), (0, 2)], 2: [(1, -1), (2, 0)], 3: [(0.9, 0.5), (1, 0.2)], 4: [(1, 2), (0, 1)]}
SCORE_2_VECTORS = {1: [(0, 5), (3, 0)]}
COLUMNS_1, COLUMNS_2 = [0, 1, 1, 2, 3, E], [0, 1, E]


def fitted_pos(**options):
    probe = PosProbe(1, 2, **options)
    feed(probe, vector_batch(*FIT_1_BATCH), "fit_update")
    feed(probe, vector_batch(*FIT_2_BATCH), "fit_update")
    return probe


def test_pos_centroids_and_scores_worked_out_by_hand():
    probe = fitted_pos()
    assert probe.centroids.names == ["N", "V"]
    torch.testing.assert_close(probe.centroids.means()[:, 0], torch.tensor(
        [[[2.0, 0.0], [0.5, 0.5]], [[0.0, 2.0], [2.0, 0.0]]], dtype=torch.float64))  # [label, head, d]
    feed(probe, vector_batch([SCORE_1, SCORE_2], [COLUMNS_1, COLUMNS_2], [SCORE_1_VECTORS, SCORE_2_VECTORS]))
    r = probe.compute(INFO)
    assert r.labels["N"].count == 2 and r.labels["V"].count == 2 and r.overall.count == 4
    np.testing.assert_array_equal(r.labels["N"].scores, [[1.0, 0.5]])
    np.testing.assert_array_equal(r.labels["V"].scores, [[1.0, 0.5]])
    np.testing.assert_array_equal(r.overall.scores, [[1.0, 0.5]])
    assert r.extra["fit"] == {"on": "fit", "corpus": ["fit.conllu"], "units": {"N": 2, "V": 2}}
    assert r.extra["labels_without_centroid"] == []
    assert r.best("N").head == 0
    assert r.baselines == {"majority": {"label": "N", "overall": 0.5}}  # N and V tie at 2 fit words: N seen first


def test_pos_fitted_beside_its_scoring_pass_scores_what_it_kept_as_a_fit_phase_then_a_pass_would():
    """fit_beside: the scoring pass over the fit batches themselves fits the centroids (N = (2,0),(.5,.5); V =
    (0,2),(2,0), as above) and keeps the unit vectors; score_kept then scores them. Head 0: a (1,0) N ✓, b (0,1) V ✓,
    c (3,0) N ✓, d (0,3) V ✓: 4/4. Head 1 (directions N (1,1)/√2, V (1,0)): a (0,1) N ✓, b (1,0) V ✓, c (1,0) V ✗,
    d (3,0) V ✓: N 1/2, V 2/2, 3/4. The same state as a fit phase over the batches followed by a scoring pass,
    and each (batch, layer) scored handed on once, in the pass's order."""
    beside = PosProbe(1, 2)
    beside.fit_beside()
    batches = [vector_batch(*FIT_1_BATCH), vector_batch(*FIT_2_BATCH)]
    for hand in batches:
        feed(beside, hand)
    assert beside.hits.total().sum() == 0  # nothing scored during the pass
    viewed = []
    beside.score_kept(lambda batch, layer: viewed.append((batch.sentences, layer, beside.kept_view[0])))
    assert viewed == [([FIT_1], 0, 0), ([FIT_2], 0, 0)]
    r = beside.compute(INFO)
    np.testing.assert_array_equal(r.labels["N"].scores, [[1.0, 0.5]])
    np.testing.assert_array_equal(r.labels["V"].scores, [[1.0, 1.0]])
    np.testing.assert_array_equal(r.overall.scores, [[1.0, 0.75]])
    phases = fitted_pos()
    for hand in batches:
        feed(phases, hand)
    assert_same(beside.state_dict(), phases.state_dict())
    beside.score_kept(lambda batch, layer: viewed.append(layer))  # nothing kept any more
    assert len(viewed) == 2


def test_pos_scores_do_not_depend_on_batching_or_padding():
    together = fitted_pos()
    feed(together, vector_batch([SCORE_1, SCORE_2], [COLUMNS_1, COLUMNS_2], [SCORE_1_VECTORS, SCORE_2_VECTORS]))
    apart = fitted_pos()
    feed(apart, vector_batch([SCORE_2], [COLUMNS_2], [SCORE_2_VECTORS]))
    feed(apart, vector_batch([SCORE_1], [COLUMNS_1], [SCORE_1_VECTORS]))
    for label in ("N", "V", "overall"):
        np.testing.assert_array_equal(together.compute(INFO).scores[label], apart.compute(INFO).scores[label])


def test_pos_fit_shards_and_score_shards_merge_by_adding():
    a, b = PosProbe(1, 2), PosProbe(1, 2)
    feed(a, vector_batch(*FIT_1_BATCH), "fit_update")
    feed(b, vector_batch(*FIT_2_BATCH), "fit_update")
    a.merge_fit(b)
    b.centroids = Centroids(1, 2)
    b.merge_fit(a)  # both shards now hold the merged fit
    whole = fitted_pos()
    assert a.centroids.same_as(whole.centroids) and b.centroids.same_as(whole.centroids)
    feed(a, vector_batch([SCORE_1], [COLUMNS_1], [SCORE_1_VECTORS]))
    feed(b, vector_batch([SCORE_2], [COLUMNS_2], [SCORE_2_VECTORS]))
    a.merge(b)
    np.testing.assert_array_equal(a.compute(INFO).overall.scores, [[1.0, 0.5]])
    unfitted = fitted_pos()
    unfitted.centroids = Centroids(1, 2)
    unfitted.centroids.add(["N"], torch.ones(1, 2, 2), 0)
    with pytest.raises(ValueError, match="different centroids"):
        a.merge(unfitted)


def test_pos_xpos_and_untagged_words():
    # xpos tags of the fit sentences differ from upos; "_" words are no units (x here)
    fit = sentence(["a", "b", "c"], upos=["N", "V", "N"], xpos=["NN", "VB", "NNS"])
    probe = PosProbe(1, 2, tagset="xpos")
    feed(probe, vector_batch([fit], [[0, 1, 2, 3, E]], FIT_1_BATCH[2]), "fit_update")
    assert probe.centroids.names == ["NN", "VB", "NNS"]
    scored = sentence(["x", "y", "z"], upos=["N", "N", "V"], xpos=["_", "NN", "VB"])
    assert probe.skip_reason(scored) is None and probe.skip_reason(sentence(["q"], upos=["N"])) == "no_xpos"
    feed(probe, vector_batch([scored], [COLUMNS_1], [SCORE_1_VECTORS]))
    r = probe.compute(INFO)
    assert r.overall.count == 2 and set(r.labels) == {"NN", "VB"}
    # head 0: y (.9,.5) vs directions NN (1,0), VB (0,1), NNS (1,0): NN .87 (first of the tie with NNS) ✓;
    #         z (1,2): VB .89 ✓
    np.testing.assert_array_equal(r.overall.scores[0, 0], 1.0)


def _pos_batches():
    fit = (two_layers(vector_batch(*FIT_1_BATCH)), two_layers(vector_batch(*FIT_2_BATCH)))
    scored = [two_layers(vector_batch([SCORE_1], [COLUMNS_1], [SCORE_1_VECTORS])),
              two_layers(vector_batch([SCORE_2], [COLUMNS_2], [SCORE_2_VECTORS]))]
    return fit, scored


def test_pos_state_merges_saves_and_resets():
    fit, scored = _pos_batches()
    r = check_state(lambda: PosProbe(2, 2), scored, info(2, 2, fit={"on": "fit"}), fit=fit)
    np.testing.assert_array_equal(r.overall.scores, [[1.0, 0.5], [0.5, 1.0]])  # layer 1: the heads reversed
    # units and fit words counted once, not once per layer
    assert r.overall.count == 4 and r.extra["fit"]["units"] == {"N": 2, "V": 2}


def test_ner_and_con_state_merges_saves_and_resets():
    ner_fit = two_layers(vector_batch([NER_FIT], [[0, 1, 2, 3, 4, E]], [NER_FIT_VECTORS]))
    ner_scored = two_layers(vector_batch([NER_SCORED], [[0, 1, 2, 3, 4, E]], [NER_SCORED_VECTORS]))
    r = check_state(lambda: NerProbe(2, 2), [ner_scored, ner_scored], info(2, 2), fit=(ner_fit, ner_fit))
    np.testing.assert_allclose(r.overall.scores, [[2 / 3, 0.0], [0.0, 2 / 3]])
    assert r.overall.count == 6 and r.extra["fit"]["units"] == {"PER": 2, "LOC": 2}
    # con: the phrases of TREE fitted, then scored, on the same vectors (see test_con_phrase_vectors; head 1
    # has each vector's coordinates swapped, a mirror image: the same cosines). Centroids S (.8,1.2),
    # NP mean((.5,.5), (0,4)) = (.25,2.25), VP (1,5/3), PP (1,2): every phrase is nearest its own label's
    # centroid but NP(the cat) (.5,.5): cos S .98 > VP .97 > PP .95 > NP .78. 4 of 5 right per tree.
    words = {1 + i: [v, v[::-1]] for i, v in enumerate([(1, 0), (0, 1), (1, 1), (2, 0), (0, 4)])}
    tree = two_layers(vector_batch([TREE], [[0, 1, 2, 3, 4, 5, E]], [words]))
    r = check_state(lambda: ConstituentProbe(2, 2, phrases="all"), [tree, tree], info(2, 2), fit=(tree, tree))
    assert r.overall.count == 10 and r.extra["fit"]["units"] == {"S": 2, "NP": 4, "VP": 2, "PP": 2}
    np.testing.assert_allclose(r.overall.scores, np.full((2, 2), 0.8))
    np.testing.assert_array_equal(r.labels["NP"].scores, np.full((2, 2), 0.5))
    assert all((r.labels[name].scores == 1).all() for name in ("S", "VP", "PP"))


def test_update_before_any_fit_is_an_input_error():
    with pytest.raises(InputError, match="no labelled words"):
        feed(PosProbe(1, 2), vector_batch([SCORE_2], [COLUMNS_2], [SCORE_2_VECTORS]))


# ---- ner: entity vector = mean of its words' vectors -------------------------------------------------
# Fit "J S in P": PER = J S (0,2), LOC = P (3,4); tokens [CLS] J S in P [SEP].
#   head 0: J (2,0) S (0,0) → PER mean (1,0); P (0,1) → LOC (0,1)
#   head 1: J (0,2) S (0,0) → PER (0,1);      P (1,0) → LOC (1,0)
# Scored "N Y C Q": LOC = N Y (0,2), PER = C (2,3), ORG = Q (3,4) (no centroid: never right).
#   head 0: N (1,0), Y (-.5,2) → mean (.25,1): LOC ✓ (alone, N would be PER); C (3,1) → PER ✓; Q → ✗
#   head 1: same vectors: (.25,1) → PER ✗; C (3,1) → LOC ✗; Q ✗
NER_FIT = sentence(["J", "S", "in", "P"], ner=[("PER", 0, 2), ("LOC", 3, 4)])
NER_FIT_VECTORS = {1: [(2, 0), (0, 2)], 2: [(0, 0), (0, 0)], 3: [(7, 7), (7, 7)], 4: [(0, 1), (1, 0)]}
NER_SCORED = sentence(["N", "Y", "C", "Q"], ner=[("LOC", 0, 2), ("PER", 2, 3), ("ORG", 3, 4)])
NER_SCORED_VECTORS = {1: [(1, 0), (1, 0)], 2: [(-0.5, 2), (-0.5, 2)], 3: [(3, 1), (3, 1)], 4: [(1, 1), (1, 1)]}


def test_ner_entity_vectors_are_means_of_their_words():
    probe = NerProbe(1, 2)
    feed(probe, vector_batch([NER_FIT], [[0, 1, 2, 3, 4, E]], [NER_FIT_VECTORS]), "fit_update")
    torch.testing.assert_close(probe.centroids.means()[:, 0], torch.tensor(
        [[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]], dtype=torch.float64))
    scored = vector_batch([NER_SCORED], [[0, 1, 2, 3, 4, E]], [NER_SCORED_VECTORS])
    labels, vectors = probe.unit_vectors(scored.batch, layer_0(scored))  # [N,H,d]
    assert labels == ["LOC", "PER", "ORG"]
    torch.testing.assert_close(vectors[0, 0], torch.tensor([0.25, 1.0]))
    feed(probe, vector_batch([NER_SCORED], [[0, 1, 2, 3, 4, E]], [NER_SCORED_VECTORS]))
    r = probe.compute(INFO)
    np.testing.assert_array_equal(r.labels["LOC"].scores, [[1.0, 0.0]])
    np.testing.assert_array_equal(r.labels["PER"].scores, [[1.0, 0.0]])
    np.testing.assert_array_equal(r.labels["ORG"].scores, [[0.0, 0.0]])
    np.testing.assert_allclose(r.overall.scores, [[2 / 3, 0.0]])
    assert r.extra["labels_without_centroid"] == ["ORG"]
    assert r.baselines["majority"] == {"label": "PER", "overall": round(1 / 3, 6)}  # PER: 1 of 3 scored entities
    assert NerProbe(1, 2).skip_reason(sentence(["a"])) == "no_ner"


def test_sentences_without_units_add_nothing():
    probe = NerProbe(1, 2)
    feed(probe, vector_batch([NER_FIT], [[0, 1, 2, 3, 4, E]], [NER_FIT_VECTORS]), "fit_update")
    feed(probe, vector_batch([sentence(["a"], ner=[])], [[0, 1, E]], [{1: [(1, 0), (1, 0)]}]))
    assert probe.compute(INFO).overall.count == 0


# ---- con: which phrases are units -------------------------------------------------------------------
# (S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (PRP it)))))
#   heights (ptb reader: preterminal 1): NP(the cat) 2, NP(it) 2, PP 3, VP 4, S 5
TREE = sentence(["the", "cat", "sat", "on", "it"], constituents=[
    ("S", 0, 5, 5), ("NP", 0, 2, 2), ("VP", 2, 5, 4), ("PP", 3, 5, 3), ("NP", 4, 5, 2)])


def test_con_takes_the_lowest_phrases_by_default_and_every_phrase_as_an_option():
    assert ConstituentProbe(1, 2).spans(TREE) == [("NP", 0, 2), ("NP", 4, 5)]
    assert ConstituentProbe(1, 2, phrases="all").spans(TREE) == [
        ("S", 0, 5), ("NP", 0, 2), ("VP", 2, 5), ("PP", 3, 5), ("NP", 4, 5)]


def test_con_phrase_vectors():
    # head 0 word vectors the (1,0) cat (0,1) sat (1,1) on (2,0) it (0,4): S = mean of 5 = (.8,1.2),
    # VP = mean(sat, on, it) = (1, 5/3), PP = (1,2), NP(the cat) = (.5,.5), NP(it) = (0,4)
    words = {1 + i: [v, v] for i, v in enumerate([(1, 0), (0, 1), (1, 1), (2, 0), (0, 4)])}
    tree = vector_batch([TREE], [[0, 1, 2, 3, 4, 5, E]], [words])
    labels, vectors = ConstituentProbe(1, 2, phrases="all").unit_vectors(tree.batch, layer_0(tree))  # [N,H,d]
    assert labels == ["S", "NP", "VP", "PP", "NP"]
    torch.testing.assert_close(vectors[:, 0], torch.tensor([[0.8, 1.2], [0.5, 0.5], [1, 5 / 3], [1, 2], [0, 4]]))


# ---- centroids ---------------------------------------------------------------------------------------
def add_layers(c: Centroids, labels: list[str], vectors: torch.Tensor) -> None:
    """Add vectors [N,L,H,d] layer by layer, as the probes do."""
    for layer in range(vectors.shape[1]):
        c.add(labels, vectors[:, layer], layer)


def test_cosine_not_euclidean_and_ties_go_to_the_first_label():
    c = Centroids(1, 1)
    c.add(["A", "A", "B"], torch.tensor([[[10.0, 0.0]], [[10.0, 0.0]], [[0.0, 1.0]]]), 0)
    # x = (2,1): Euclidean nearest is B (distance 2 vs 8.06), cosine nearest is A (.89 vs .45)
    assert c.classify(torch.tensor([[[2.0, 1.0]]]), 0).item() == 0
    # x = (1,1): cos A = cos B = .707 → the first label, A
    assert c.classify(torch.tensor([[[1.0, 1.0]]]), 0).item() == 0
    assert c.index(["B", "C", "A"]).tolist() == [1, -1, 0]


def test_classify_matches_a_loop_over_heads():
    torch.manual_seed(0)
    c = Centroids(2, 3)
    v = torch.randn(5, 2, 3, 4)
    add_layers(c, list("ABCAB"), v)
    # units are counted once (at layer 0), not once per layer: the means are the plain means
    assert c.counts.sums.tolist() == [2, 2, 1]
    torch.testing.assert_close(c.means(), torch.stack([v[[0, 3]].mean(0), v[[1, 4]].mean(0), v[2]]).double())
    x = torch.randn(7, 2, 3, 4)
    means = c.means().float()
    for layer in range(2):
        got = c.classify(x[:, layer], layer)  # [N,H]
        for n in range(7):
            for head in range(3):
                cos = torch.nn.functional.cosine_similarity(x[n, layer, head][None], means[:, layer, head], dim=-1)
                assert got[n, head] == cos.argmax()


def test_centroid_shards_merge_by_label_name_and_save():
    torch.manual_seed(1)
    v = torch.randn(4, 1, 2, 3)
    whole, a, b = Centroids(1, 2), Centroids(1, 2), Centroids(1, 2)
    add_layers(whole, ["X", "Y", "X", "Z"], v)
    add_layers(a, ["X", "Y"], v[:2])
    add_layers(b, ["Z", "X"], v[[3, 2]])  # labels first seen in another order
    a.merge(b)
    assert a.names == ["X", "Y", "Z"]
    torch.testing.assert_close(a.means(), whole.means())
    with pytest.raises(ValueError, match="expected 1 × 2"):
        a.add(["X"], torch.randn(1, 3, 3), 0)
    loaded, empty = Centroids(1, 2), Centroids(1, 2)
    loaded.load_state_dict(a.state_dict())
    assert loaded.same_as(a) and loaded.names == ["X", "Y", "Z"]
    x = torch.randn(5, 2, 3)
    assert torch.equal(loaded.classify(x, 0), a.classify(x, 0))
    loaded.load_state_dict(Centroids(1, 2).state_dict())
    assert loaded.same_as(empty) and len(loaded) == 0
