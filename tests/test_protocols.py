"""Named protocols (probes.base.protocols) on hand-built attention: every expected number is worked out in the comments.

Sentence 1: "The playing cat", tokens [CLS]0 The1 play2 ##ing3 cat4 [SEP]5; word columns CLS0 The1 playing2 cat3 SEP4.
  arcs: The -det-> cat (1→3), playing -amod-> cat (2→3), cat -root-> [CLS] (3→0).
Sentence 2: "Hi", tokens [CLS]0 Hi1 [SEP]2; arc Hi -root-> [CLS] (1→0).
"""
from __future__ import annotations

import numpy as np
import pytest

from probes.builtin.dep import DependencyProbe
from probes.builtin.frames import FrameElementProbe
from probes.cli import main
from probes.base.errors import InputError
from probes.base.protocols import PROTOCOLS, apply_protocol
from helpers import E, attention, batch, feed, sentence
from state_checks import check_state, info, two_layers

S1 = sentence(["The", "playing", "cat"], head=[3, 3, 0], deprel=["det", "amod", "root"])
S2 = sentence(["Hi"], head=[0], deprel=["root"])
C1 = [0, 1, 2, 2, 3, E]
C2 = [0, 1, E]

# Head 0: play and ##ing have the same row, so first-sum and mean-sum pool it alike. Word-level A (rows from):
#             CLS   The  playing  cat   SEP
#   CLS     [ 1     0     0       0     0  ]
#   The     [ 0     0.5   0       0.3   0.2]   argmax is its own column
#   playing [ 0.4   0     0       0.6   0  ]
#   cat     [ 0.5   0.3   0.2     0     0  ]   argmax is [CLS]
H0 = attention(6, {1: {1: 0.5, 4: 0.3, 5: 0.2}, 2: {4: 0.6, 0: 0.4}, 3: {4: 0.6, 0: 0.4}, 4: {0: 0.5, 1: 0.3, 2: 0.2}})
# Head 1: playing's subwords differ: play → 0.8 The + 0.2 SEP, ##ing → 1.0 cat.
#   mean-sum A:  The [0, 0, 0.3, 0, 0.7]; playing [0, 0.4, 0, 0.5, 0.1] (mean); cat [0, 0, 0.6, 0, 0.4]
#   first-sum:   playing's row is play's: [0, 0.8, 0, 0, 0.2]
H1 = attention(6, {1: {2: 0.3, 5: 0.7}, 2: {1: 0.8, 5: 0.2}, 3: {4: 1.0}, 4: {2: 0.3, 3: 0.3, 5: 0.4}})
# Sentence 2, both heads: Hi → 0.6 CLS + 0.4 SEP; [CLS] → itself.
#   default: pred[Hi] = CLS → root right (dependent→head). words_only: the only word left is Hi itself:
#   pred[Hi] = Hi (with zero_self its zeroed column still wins the all-zero tie: the first word) → wrong.
H_HI = attention(3, {1: {0: 0.6, 2: 0.4}})


def _result(pool="mean-sum", sentences=(S1,), **options):
    probe = DependencyProbe(1, 2, **options)
    columns = {id(S1): C1, id(S2): C2}
    maps = {id(S1): [H0, H1], id(S2): [H_HI, H_HI]}
    feed(probe, batch(list(sentences), [columns[id(s)] for s in sentences], [maps[id(s)] for s in sentences],
                      pool=pool))
    return probe.compute(info(1, 2))


def _grids(r, way="scores"):
    return {label: (s.scores if way == "scores" else s.extra[way]).tolist() for label, s in r.labels.items()}


def test_default_reading():
    # pred (columns CLS..cat, SEP never): head 0: The→The, playing→cat, cat→CLS, CLS→CLS
    #                                     head 1: The→playing, playing→cat, cat→playing, CLS→CLS
    # head 0: det ✗ (pred[The] = The, pred[cat] = CLS); amod ✓ dep→head; root ✓ dep→head
    # head 1: det ✗; amod ✓ both ways (pred[playing] = cat, pred[cat] = playing); root ✗
    r = _result()
    assert _grids(r) == {"det": [[0, 0]], "amod": [[1, 1]], "root": [[1, 0]]}
    assert _grids(r, "head_to_dep") == {"det": [[0, 0]], "amod": [[0, 1]], "root": [[0, 0]]}


def test_hechoi2021_is_the_default():
    pool, options = apply_protocol("hechoi2021", [DependencyProbe], None, {})
    assert pool == "mean-sum"
    a, b = _result(pool, **options), _result()
    for label in ("det", "amod", "root"):
        np.testing.assert_array_equal(a.labels[label].scores, b.labels[label].scores)
    assert a.baselines == b.baselines


def test_own_column_zeroed():
    # zero_self alone, head 0: The's row without its own 0.5 is [CLS 0, playing 0, cat 0.3] → cat: det ✓ dep→head
    r = _result(zero_self=True)
    assert _grids(r, "dep_to_head") == {"det": [[1, 0]], "amod": [[1, 1]], "root": [[1, 0]]}


def test_specials_dropped():
    # words_only alone, head 0: cat's row over the words is [The 0.3, playing 0.2, cat 0] → The, not [CLS]: root ✗
    # (and the [CLS] row predicts nothing, so no root arc is ever right), but det ✓ head→dep (pred[cat] = The),
    # while The still points at itself (0.5): det ✗ dep→head
    r = _result(words_only=True)
    assert _grids(r) == {"det": [[1, 0]], "amod": [[1, 1]], "root": [[0, 0]]}
    assert _grids(r, "dep_to_head") == {"det": [[0, 0]], "amod": [[1, 1]], "root": [[0, 0]]}
    # Hi's only word column is itself: wrong under words_only; right (→ CLS, 0.6) by default
    assert _result(sentences=(S2,)).labels["root"].scores.tolist() == [[1, 1]]
    assert _result(sentences=(S2,), words_only=True).labels["root"].scores.tolist() == [[0, 0]]
    assert _result(sentences=(S2,), words_only=True, zero_self=True).labels["root"].scores.tolist() == [[0, 0]]


def test_column_argmax():
    # head_to_dep = column alone: for the dependent d, the row attending most to it (rows CLS..cat).
    # head 0: column playing = [0, 0, 0, 0.2] → cat = amod's head ✓ (the row reading: pred[cat] = CLS ✗);
    #         column The = [0, 0.5, 0, 0.3] → The ✗; column cat = [0, 0.3, 0.6, 0] → playing, not CLS ✗
    # head 1: column playing = [0, 0.3, 0, 0.6] → cat ✓; column The = [0, 0, 0.4, 0] → playing ✗;
    #         column cat = [0, 0, 0.5, 0] → playing ✗
    r = _result(head_to_dep="column")
    assert _grids(r, "head_to_dep") == {"det": [[0, 0]], "amod": [[1, 1]], "root": [[0, 0]]}


def test_clark2019_worked_out():
    # pooling first-sum, own column zeroed, [CLS]/[SEP] dropped, head_to_dep a column argmax, over The, playing, cat.
    # head 0 rows:    The [z, 0, 0.3] → cat; playing [0, z, 0.6] → cat; cat [0.3, 0.2, z] → The
    #        columns: The [z, 0, 0.3] → cat; playing [0, z, 0.2] → cat; cat [0.3, 0.6, z] → playing
    #   det ✓ both ways, amod ✓ both ways, root ✗ (nothing ever points at the root)
    # head 1 rows (playing's row is play's): The [z, 0.3, 0] → playing; playing [0.8, z, 0] → The; cat [0, 0.6, z]
    #        → playing.   columns: The [z, 0.8, 0] → playing; playing [0.3, z, 0.6] → cat; cat [0, 0, z] → The (tie)
    #   det ✗; amod ✗ dep→head (pred[playing] = The), ✓ head→dep (cat attends most to playing); root ✗
    pool, options = apply_protocol("clark2019", [DependencyProbe], None, {})
    assert pool == "first-sum"
    r = _result(pool, **options)
    assert _grids(r) == {"det": [[1, 0]], "amod": [[1, 1]], "root": [[0, 0]]}
    assert _grids(r, "dep_to_head") == {"det": [[1, 0]], "amod": [[1, 0]], "root": [[0, 0]]}
    assert _grids(r, "head_to_dep") == {"det": [[1, 0]], "amod": [[1, 1]], "root": [[0, 0]]}
    assert r.overall.count == 3 and r.overall.scores.tolist() == [[2 / 3, 1 / 3]]  # root arcs counted, never right
    assert r.options["zero_self"] and r.options["head_to_dep"] == "column"


def test_first_versus_mean_pooling_under_clark2019():
    # The same choices with mean-sum rows: head 1's playing row is [The 0.4, playing z, cat 0.5] → cat: amod ✓
    # dep→head, where first-sum (play's row: The 0.8) gets it wrong.
    _, options = apply_protocol("clark2019", [DependencyProbe], None, {})
    assert _result("mean-sum", **options).labels["amod"].extra["dep_to_head"].tolist() == [[1, 1]]
    assert _result("first-sum", **options).labels["amod"].extra["dep_to_head"].tolist() == [[1, 0]]


def test_clamped_offsets_at_the_sentence_edges():
    # Offsets −3..+2; word i's offset "head" is clamp(i + k, 0, n) (0 = the root column).
    # S1 (n = 3): det d=1: 1+k for k = −3..2 → 0,0,0,1,2,3: h=3 at k=+2.   head→dep from h=3: 3+k → 0,1,2,3,3,3: d=1 at k=−2
    #   amod d=2: 2+k → 0,0,1,2,3,3 (4 clamped to 3): h=3 at k=+1 and k=+2.  head→dep: d=2 at k=−1
    #   root d=3: 3+k → 0,1,2,3,3,3: h=0 at k=−3.   head→dep: the root column has no offset head
    # S2 (n = 1): root d=1: 1+k → 0,0,0,1,1,1: h=0 at k=−3, −2, −1 (−2, −1 clamped to 0)
    r = _result(sentences=(S1, S2), offsets="clamped")
    b = r.baselines["labels"]
    assert r.baselines["offsets"] == [-3, -2, -1, 0, 1, 2]
    assert b["det"]["dep_to_head"] == [0, 0, 0, 0, 0, 1] and b["det"]["head_to_dep"] == [0, 1, 0, 0, 0, 0]
    assert b["amod"]["dep_to_head"] == [0, 0, 0, 0, 1, 1] and b["amod"]["either"] == [0, 0, 1, 0, 1, 1]
    assert b["root"]["dep_to_head"] == [1, 0.5, 0.5, 0, 0, 0] and b["root"]["head_to_dep"] == [0] * 6
    assert b["root"]["best_offset"] == -3 and b["root"]["best"] == 1.0
    # unclamped (default, −3..+3 but 0): amod only at +1; root at −3 (S1) and −1 (S2), head→dep at +3 and +1
    free = _result(sentences=(S1, S2)).baselines["labels"]
    assert free["amod"]["dep_to_head"] == [0, 0, 0, 1, 0, 0]
    assert free["root"]["dep_to_head"] == [0.5, 0, 0.5, 0, 0, 0] and free["root"]["head_to_dep"] == [0, 0, 0, 0.5, 0, 0.5]


def test_clark2019_state_merges_saves_and_resets():
    _, options = apply_protocol("clark2019", [DependencyProbe], None, {})
    batches = [two_layers(batch([S1], [C1], [[H0, H1]], pool="first-sum")),
               two_layers(batch([S2], [C2], [[H_HI, H_HI]], pool="first-sum"))]
    r = check_state(lambda: DependencyProbe(2, 2, **options), batches, info(2, 2))
    # layer 0 as in test_clark2019_worked_out (S2's root arc adds a wrong arc); layer 1 the heads reversed
    assert r.overall.count == 4 and r.overall.scores.tolist() == [[0.5, 0.25], [0.25, 0.5]]


def test_kovaleva2019_sets_the_frames_defaults():
    pool, options = apply_protocol("kovaleva2019", [FrameElementProbe], None, {})
    assert pool == "mean-sum"
    assert FrameElementProbe(1, 1, **options).config == FrameElementProbe(1, 1).config


@pytest.mark.parametrize("args, problem", [
    (("clark2019", [DependencyProbe], "mean-sum", {}), "--pool mean-sum contradicts protocol clark2019, which pools "
                                                       "first-sum"),
    (("clark2019", [DependencyProbe], None, {"head_to_dep": "row"}), "--head-to-dep row contradicts protocol "
                                                                     "clark2019, which sets head_to_dep = column"),
    (("hechoi2021", [DependencyProbe], None, {"zero_self": "true"}), "--zero-self true contradicts protocol hechoi2021"),
    (("kovaleva2019", [FrameElementProbe], None, {"max_sentence_words": 0}), "--max-sentence-words 0 contradicts"),
    (("clark2019", [DependencyProbe, FrameElementProbe], None, {}), "protocol clark2019 sets the choices of dep only, "
                                                                    "not of frames"),
    (("clark2020", [DependencyProbe], None, {}), "unknown protocol 'clark2020'"),
])
def test_conflicts_are_refused(args, problem):
    with pytest.raises(InputError, match=problem.replace("(", r"\(").replace("+", r"\+")):
        apply_protocol(*args)


def test_agreeing_options_are_accepted():
    pool, options = apply_protocol("clark2019", [DependencyProbe], "first-sum", {"zero_self": True, "subtypes": True})
    assert pool == "first-sum" and options["subtypes"] and options["offsets"] == "clamped"
    assert set(PROTOCOLS) == {"hechoi2021", "clark2019", "kovaleva2019"}


def test_cli_refuses_a_conflict_on_one_line(capsys):
    assert main(["run", "dep", "--protocol", "clark2019", "--pool", "mean-sum"]) == 2
    err = capsys.readouterr().err
    assert err == "probes: error: --pool mean-sum contradicts protocol clark2019, which pools first-sum\n"


@pytest.mark.slow
def test_minilm_hechoi2021_is_bit_identical_and_recorded(minilm, shared_corpora):
    import probes

    ewt = shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu"
    plain = probes.run("dep", encoder=minilm, corpus=ewt, limit=40, progress=False)["dep"]
    named = probes.run("dep", encoder=minilm, corpus=ewt, limit=40, progress=False, protocol="hechoi2021")["dep"]
    clark = probes.run("dep", encoder=minilm, corpus=ewt, limit=40, progress=False, protocol="clark2019")["dep"]
    assert named.info.settings["protocol"] == "hechoi2021" and "protocol" not in plain.info.settings
    assert set(plain.labels) == set(named.labels)
    for label in plain.labels:
        np.testing.assert_array_equal(plain.labels[label].scores, named.labels[label].scores)
    assert plain.baselines == named.baselines
    assert clark.info.settings["pool"] == "first-sum" and clark.options["words_only"]
    assert not clark.labels["root"].scores.any()  # no word ever points at the root
    assert not np.array_equal(clark.labels["nsubj"].scores, plain.labels["nsubj"].scores)
