"""coref on a hand-written document, cut into hand-checked windows, with hand-built attention.

One subword per word (StubTokenizer), so a window's columns are 0 [CLS], 1..n its words, n+1 [SEP].

The document, 5 sentences, 22 words (document offsets):
    S0 [0,4)   He saw Mary .
    S1 [4,10)  John and his dog ran .
    S2 [10,14) The dog barked a
    S3 [14,17) mutt slept .
    S4 [17,22) Morning she woke it .
Mentions in document order (start, end, chain; head word):
    m0 (0,1,A) He h0      m1 (2,3,B) Mary h2     m2 (4,5,A) John h4     m3 (6,8,C) his dog h7
    m4 (6,7,A) his h6     m5 (10,12,C) The dog h11   m6 (13,15,C) a mutt h14 (across S2/S3)
    m7 (17,18,E) Morning h17 (a singleton)   m8 (18,19,B) she h18   m9 (20,21,C) it h20
Chain A is a cataphor (its first mention a pronoun); m4 is nested in m3. Non-first mentions: A 2, B 1, C 3 = 6.

--window 14 --stride 4: 12 subwords a window without [CLS] and [SEP]; sentence ends [0,4,10,14,17,22].
    W0 from S0: S0+S1 = 10 ≤ 12, +S2 = 14 > 12 → [0,10). Next start: first sentence ≥ 4 subwords on → S1.
    W1 from S1: S1+S2 = 10 ≤ 12, +S3 = 13 > 12 → [4,14): m6 (13,15) crosses its end. Next: ≥ 4+4 = 8 → S2.
    W2 from S2: S2..S4 = 12 → [10,22), the document's end: the last window.
Anaphors (window, head column, antecedents' head columns, type, nesting, nearest, head_match):
    a1 m2 John  W0 (the first window holding it): col 5, {1 He}, proper, non_nested; nearest m1 Mary col 3,
       head_match none → nearest 3
    a2 m4 his   W0: col 7, {1 He, 5 John}, pronoun, nested (in m3); nearest m2 John col 5 (m3, his dog, holds
       his: it does not end before his starts) → 5
    a3 m5 dog   W1 (W0 ends at 10): col 11-4+1 = 8, {4 dog of m3}, nominal; nearest m4 his col 3;
       head_match: m3's head word is "dog" → col 4
    a4 m6 mutt  W2 (W1 cuts it): col 5, {2 dog of m5} (m3 lies before W2), nominal; nearest m5 col 2 → 2
    m8 she      W2 only; its antecedent Mary (m1) lies before W2 → out_of_window
    a5 m9 it    W2: col 11, {2 dog, 5 mutt}, pronoun; nearest m8 she col 9 → head_match none → 9
    scored 5 + out_of_window 1 + same_head 0 = 6 non-first mentions.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from probes.builtin.anaphors import assign
from probes.builtin.coref import BASELINE_NAME, BASELINES, CoreferenceProbe
from probes.corpus.sentence import Sentence
from probes.base.errors import InputError
from probes.encoding.identity import sentence_key
from probes.capture import maps as layer_maps
from probes.encoding import batching, pooling
from probes.capture.maps import LayerMaps
from probes.tools.show import format_table
from probes.encoding.windows import window_spans
from helpers import E, attention, batch, feed
from state_checks import check_state, info

WORDS = "He saw Mary . John and his dog ran . The dog barked a mutt slept . Morning she woke it .".split()
UPOS = ["PRON", "VERB", "PROPN", "PUNCT", "PROPN", "CCONJ", "PRON", "NOUN", "VERB", "PUNCT", "DET", "NOUN", "VERB",
        "DET", "NOUN", "VERB", "PUNCT", "NOUN", "PRON", "VERB", "PRON", "PUNCT"]
MENTIONS = [(0, 1, "A"), (2, 3, "B"), (4, 5, "A"), (6, 8, "C"), (6, 7, "A"), (10, 12, "C"), (13, 15, "C"),
            (17, 18, "E"), (18, 19, "B"), (20, 21, "C")]
HEADS = [0, 2, 4, 7, 6, 11, 14, 17, 18, 20]


def document() -> Sentence:
    return Sentence(words=list(WORDS), sent_id="hand/0", source="hand.conll", line=1, ann={
        "sentences": [(0, 4), (4, 10), (10, 14), (14, 17), (17, 22)], "sentence_lines": [2, 7, 14, 19, 23],
        "mentions": list(MENTIONS), "mention_heads": list(HEADS), "upos": list(UPOS)})


class StubTokenizer:
    """One subword per word, [CLS] and [SEP] around."""

    def __call__(self, words, **_):
        return {"input_ids": [[7] * len(w) for w in words]}

    def num_special_tokens_to_add(self, pair=False):
        return 2


def windows(**options):
    probe = CoreferenceProbe(1, 2, **options)
    return probe, probe.rows(document(), StubTokenizer(), 512)


def columns(window) -> list[int]:
    return [0, *range(1, len(window.words) + 1), E]


def test_window_spans_by_hand():
    # see the module docstring: [(first sentence, end sentence)]
    assert window_spans(np.array([4, 6, 4, 3, 5]), 12, 4) == [(0, 2), (1, 3), (2, 5)]
    assert window_spans(np.array([4, 6, 4, 3, 5]), 22, 11) == [(0, 5)]  # the whole document: one window
    # stride longer than a window: the next window starts where the last ended (no gap)
    assert window_spans(np.array([4, 6, 4, 3, 5]), 10, 20) == [(0, 2), (2, 4), (4, 5)]


def test_windows_and_anaphors_by_hand():
    _, ws = windows(window=14, stride=4)
    assert [(w.start, w.start + len(w.words)) for w in ws] == [(0, 10), (4, 14), (10, 22)]
    assert [w.line for w in ws] == [2, 7, 14] and [w.sent_id for w in ws] == ["hand/0@0", "hand/0@1", "hand/0@2"]
    a = [w.ann["anaphors"] for w in ws]
    assert [x.heads for x in a] == [[5, 7], [8], [5, 11]]
    assert [x.antecedents for x in a] == [[[1], [1, 5]], [[4]], [[2], [2, 5]]]
    assert [x.types for x in a] == [["proper", "pronoun"], ["nominal"], ["nominal", "pronoun"]]
    assert [x.nested for x in a] == [[False, True], [False], [False, False]]
    assert [x.nearest for x in a] == [[3, 5], [3], [2, 9]]
    assert [x.head_match for x in a] == [[3, 5], [4], [2, 9]]
    assert a[0].counts == {"documents": 1, "mentions": 10, "chains": 4, "singletons": 1, "windows": 1,
                           "non_first": 2, "scored": 2}
    assert a[1].counts == {"windows": 1, "non_first": 1, "scored": 1}
    assert a[2].counts == {"windows": 1, "non_first": 3, "scored": 2, "out_of_window": 1}


def test_every_window_of_a_document_has_its_identity():
    _, ws = windows(window=14, stride=4)
    doc = ws[0].document
    assert {sentence_key(w) for w in ws} == {sentence_key(doc)}
    doc.occurrence = 1  # a second copy of the document is another unit
    assert sentence_key(ws[0]) != sentence_key(Sentence(words=list(WORDS)))


def _batches(ws):
    # Head 0: John → He (col 1) ✓; his → John (5) ✓ | The dog → dog (4) ✓ | mutt → barked (3) ✗; it → mutt (5) ✓
    # Head 1: every word attends to the word before it: John → 4, his → 6, dog → 7, mutt → 4, it → 10, all ✗
    def maps(w, rows0):
        t = len(w.words) + 2
        return [attention(t, rows0), attention(t, {q: {q - 1: 1.0} for q in range(1, t)})]

    first = batch(ws[:2], [columns(w) for w in ws[:2]], [maps(ws[0], {5: {1: 1.0}, 7: {5: 1.0}}),
                                                        maps(ws[1], {8: {4: 1.0}})])
    second = batch(ws[2:], [columns(ws[2])], [maps(ws[2], {5: {3: 1.0}, 11: {5: 1.0}})])
    return [first, second]


def test_scores_by_hand():
    make = lambda: CoreferenceProbe(1, 2, window=14, stride=4, mention_head="spacy")  # noqa: E731
    _, ws = windows(window=14, stride=4)
    result = check_state(make, _batches(ws), info(1, 2, max_length=512))
    # head 0: a1 ✓ a2 ✓ a3 ✓ a4 ✗ a5 ✓; head 1: none
    assert result.overall.count == 5 and result.overall.scores.tolist() == [[0.8, 0.0]]
    expected = {"proper": (1, 1.0), "pronoun": (2, 1.0), "nominal": (2, 0.5), "nested": (1, 1.0),
                "non_nested": (4, 0.75)}
    assert {k: (v.count, float(v.scores[0, 0])) for k, v in result.labels.items()} == expected
    assert all(v.scores[0, 1] == 0 for v in result.labels.values())
    # baselines: nearest a2, a4 → 2/5; head_match a2, a3, a4 → 3/5; offset -3 (a4: 5-3 = 2) 1/5, -2 (a2: 7-2 = 5)
    overall = result.baselines["overall"]
    assert (overall["nearest"], overall["head_match"], overall["offsets"]) == (0.4, 0.6, [0.2, 0.2, 0, 0, 0, 0])
    assert overall["best"] == 0.6 and overall["best_offset"] == "head_match"
    assert result.baselines["labels"]["nested"]["nearest"] == 1.0  # a2: John, not the dog of m3 that holds it
    assert result.baselines["kinds"] == list(BASELINES)
    assert result.baselines["labels"]["nominal"]["head_match"] == 1.0  # a3 and a4
    coref = result.extra["coref"]
    assert {k: coref[k] for k in ("documents", "windows", "mentions", "chains", "singletons", "non_first",
                                  "scored", "out_of_window", "same_head")} == {
        "documents": 1, "windows": 3, "mentions": 10, "chains": 4, "singletons": 1, "non_first": 6, "scored": 5,
        "out_of_window": 1, "same_head": 0}
    assert coref["scored"] + coref["out_of_window"] + coref["same_head"] == coref["non_first"]
    assert (coref["window"], coref["stride"]) == (14, 4) and "first window" in coref["window_rule"]


def test_the_result_names_windows_documents_and_baseline():
    """The run of test_scores_by_hand (1 document in 3 windows): the probe fills unit, documents and
    baseline_name, which the table's header and warning read."""
    _, ws = windows(window=14, stride=4)
    result = check_state(lambda: CoreferenceProbe(1, 2, window=14, stride=4, mention_head="spacy"), _batches(ws),
                         info(1, 2, max_length=512))
    result.info.sentences = len(ws)  # the runner's count of the rows scored
    assert (result.unit, result.documents, result.baseline_name) == ("windows", 1, BASELINE_NAME)
    table = format_table(result).splitlines()
    assert " · 3 windows of 1 document scored, 0 skipped · " in table[0]
    # nominal: head 0 gets a3 and not a4 (0.5), head_match both (1.0); nested (a2 his): head 0 and nearest (John,
    # the last mention that ends before "his"; "his dog" holds it) get it
    assert table[-1] == ("warning: best head not above its best baseline (nearest, head_match or an offset): "
                         "nominal (L0-H0 0.500 ≤ head_match 1.000), nested (L0-H0 1.000 ≤ nearest 1.000)")


def test_view_items_and_marks():
    probe, ws = windows(window=14, stride=4)
    assert probe.view_items(ws[2]) == [{"from": [5], "to": [2], "label": "nominal", "span": [4, 5]},
                                       {"from": [11], "to": [2, 5], "label": "pronoun", "span": [11, 11]}]
    feed(probe, _batches(ws)[1])
    layer, rows, marks = probe.kept_view
    assert rows.tolist() == [0, 0] and marks["right"].tolist() == [[False, False], [True, False]]
    assert marks["head"].tolist() == [[3, 4], [5, 10]]


def test_whole_document_window_and_invariance():
    # --window 24: one window, the document: every anaphor in it, she's antecedent Mary too (out_of_window 0)
    _, (whole,) = windows(window=24)
    a = whole.ann["anaphors"]
    assert whole.words == WORDS and a.heads == [5, 7, 12, 15, 19, 21]
    assert a.antecedents == [[1], [1, 5], [8], [8, 12], [3], [8, 12, 15]]
    assert a.counts["scored"] == 6 and "out_of_window" not in a.counts
    _, (again,) = windows(window=500, stride=7)  # any window holding the document: the same
    assert again.ann["anaphors"] == a
    # shrinking to --window 14: as document words, the anaphors whose antecedents change are those with an
    # antecedent before their window's start: mutt (loses m3's dog), she (out_of_window), it (loses m3's dog)
    _, ws = windows(window=14, stride=4)

    def as_document(w):  # {anaphor head word: antecedents' head words}, document offsets
        x = w.ann["anaphors"]
        return {h + w.start - 1: {c + w.start - 1 for c in cs} for h, cs in zip(x.heads, x.antecedents)}

    small = {k: v for w in ws for k, v in as_document(w).items()}
    large = as_document(whole)
    changed = sorted(h for h in large if small.get(h) != large[h])
    assert changed == [14, 18, 20]
    assert len(large) - len(small) == sum(w.ann["anaphors"].counts.get("out_of_window", 0) for w in ws) == 1


def test_assign_counts_a_mention_longer_than_any_window():
    doc = document()
    # windows that never hold m6 (13,15) whole: [0,14) and [14,22). The first scores John, his, The dog and
    # counts m6 out_of_window (in no window); the second: she (Mary before it) and it (m3, m5 before it, m6 cut)
    out = assign(doc, [(0, 14), (14, 22)])
    assert out[0].counts == {"documents": 1, "mentions": 10, "chains": 4, "singletons": 1, "windows": 1,
                             "non_first": 4, "scored": 3, "out_of_window": 1}
    assert out[1].counts == {"windows": 1, "non_first": 2, "out_of_window": 2}


def test_same_head_is_counted_not_scored():
    doc = document()
    doc.ann["mention_heads"][2] = 0  # John's head word made He's: his only earlier mention shares it
    out = assign(doc, [(0, 22)])
    assert out[0].counts["same_head"] == 1 and out[0].counts["scored"] == 5


@pytest.mark.parametrize("options, problem", [
    ({"window": 6}, "hand.conll:7: sentence 2 of document hand/0 has 6 subwords, more than a window of 6 holds"),
    ({"window": 600}, "window of 600 subwords is longer than the model's limit (512)"),
])
def test_window_errors(options, problem):
    with pytest.raises(InputError) as e:
        windows(**options)
    assert str(e.value).startswith(problem)


def test_attends_to_root_or_itself_is_wrong():
    # an anaphor whose head word attends to [CLS] or to itself gets nothing
    _, ws = windows(window=14, stride=4)
    t = len(ws[1].words) + 2
    hand = batch(ws[1:2], [columns(ws[1])], [[attention(t, {8: {0: 1.0}}), attention(t, {})]])
    probe = CoreferenceProbe(1, 2)
    feed(probe, hand)
    assert torch.equal(probe.hits.total(), torch.zeros(1, 2, dtype=torch.float64))


@pytest.mark.parametrize("in_order", [False, True], ids=["scatter", "tails"])
def test_predictions_at_by_hand(in_order, monkeypatch):
    """The same by segment sums (the CPU's) and in CUDA's fixed order (probes.base.ordered.in_order)."""
    for module in (pooling, layer_maps, batching):
        monkeypatch.setattr(module, "in_order", lambda device: in_order)
    # "Kim ate red apples": tokens [CLS]0 Kim1 ate2 red3 app4 ##les5 [SEP]6, columns 0 1 2 3 4 4 E (mean-sum)
    #   ate: 0.4 Kim + 0.3 app + 0.3 ##les → apples (0.6, the key side summed) over Kim (0.4) → column 4
    #   Kim: 0.7 [SEP] + 0.3 ate → [SEP] is never a prediction → ate, column 2
    #   apples: rows app (0.6 red, 0.4 SEP) and ##les (0.9 ate, 0.1 SEP) averaged: red 0.30, ate 0.45 → column 2
    words = Sentence(words=["Kim", "ate", "red", "apples"])
    hand = batch([words], [[0, 1, 2, 3, 4, 4, E]], [[attention(7, {
        2: {1: 0.4, 4: 0.3, 5: 0.3}, 1: {6: 0.7, 2: 0.3}, 4: {3: 0.6, 6: 0.4}, 5: {2: 0.9, 6: 0.1}})]])
    maps = LayerMaps(hand.batch, 0, hand.attentions[0])
    assert maps.predictions_at(torch.tensor([0, 0, 0]), torch.tensor([2, 1, 4])).tolist() == [[4], [2], [2]]
    assert maps.predictions[0, 0, [2, 1, 4]].tolist() == [4, 2, 2]


def test_a_causal_model_states_the_constraint():
    """a1 (John, column 5) given the antecedent head column 6 instead of He's 1: the only anaphor whose antecedent
    follows it, so 4 of 5 are reachable. Its offset +1 baseline (5 + 1 = 6) hits, but not under the constraint;
    the others' hits (test_scores_by_hand: nearest a2 a4, head_match a2 a3 a4, −3 a4, −2 a2) are all before their
    anaphor."""
    from types import SimpleNamespace

    probe, ws = windows(window=14, stride=4)
    ws[0].ann["anaphors"].antecedents[0] = [6]
    probe.read_model(SimpleNamespace(causal=object()))
    for b in _batches(ws):
        feed(probe, b)
    result = probe.compute(info(1, 2, max_length=512))
    stated = result.extra["causal_constraint"]
    assert result.baselines["overall"]["offsets"] == [0.2, 0.2, 0, 0.2, 0, 0]
    assert stated["overall"]["antecedent_before_share"] == 0.8
    assert stated["overall"]["causal_baseline"] == {"count": 5, "nearest": 0.4, "head_match": 0.6,
                                                    "offsets": [0.2, 0.2, 0, 0, 0, 0], "best": 0.6,
                                                    "best_offset": "head_match"}
    proper = stated["labels"]["proper"]
    assert proper["antecedent_before_share"] == 0.0 and proper["causal_baseline"]["best"] == 0.0
    assert result.baselines["labels"]["proper"]["offsets"][3] == 1.0
    assert stated["labels"]["nested"]["antecedent_before_share"] == 1.0
    encoder, ws = windows(window=14, stride=4)
    for b in _batches(ws):
        feed(encoder, b)
    assert "causal_constraint" not in encoder.compute(info(1, 2, max_length=512)).extra


def test_nearest_is_never_a_mention_holding_or_crossing_the_anaphor():
    """Tom met the wife of his brother . She saw the old man . (one window, column = offset + 1). Mentions (start,
    end, chain; head word): Tom (0,1,A) 0; the wife of his brother (2,7,B) 3; his brother (5,7,C) 6; his (5,6,A) 5;
    She (8,9,B) 8; saw the (9,11,X) 9, crossing the next; the old man (10,13,C) 12.
        his: the two mentions just before it in document order hold it; of those that end before it starts, Tom
             is the last → column 1, its antecedent
        She: his is the last to end before it starts → column 6 (its antecedent is the wife, column 4)
        the old man: saw the starts before it but ends inside it; She is the last to end before → column 9
    No head word's text is an earlier one's: head_match is the nearest."""
    words = "Tom met the wife of his brother . She saw the old man .".split()
    doc = Sentence(words=words, sent_id="hand/1", source="hand.conll", line=1, ann={
        "sentences": [(0, 8), (8, 14)], "sentence_lines": [2, 11],
        "mentions": [(0, 1, "A"), (2, 7, "B"), (5, 7, "C"), (5, 6, "A"), (8, 9, "B"), (9, 11, "X"), (10, 13, "C")],
        "mention_heads": [0, 3, 6, 5, 8, 9, 12],
        "upos": ["PROPN", "VERB", "DET", "NOUN", "ADP", "PRON", "NOUN", "PUNCT", "PRON", "VERB", "DET", "ADJ",
                 "NOUN", "PUNCT"]})
    (a,) = assign(doc, [(0, 14)])
    assert a.heads == [6, 9, 13] and a.antecedents == [[1], [4], [7]] and a.nested == [True, False, False]
    assert a.nearest == a.head_match == [1, 6, 9]
