"""trees on hand-built attention: every expected number below is worked out in the comments, with the trees
decoded on the host and on the maps' device (--tree-decoding; here the CPU's: probes.builtin.trees.batched)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from probes.builtin.trees.probe import TreesProbe
from probes.base.devices import HostCopy
from probes.capture.maps import LayerMaps
from probes.base.errors import InputError
from helpers import CAT, CAT_COLUMNS, CAT_TO_HEADS, HI, HI_COLUMNS, HI_TO_HEADS, attention, batch, feed
from state_checks import assert_same, check_state, info, two_layers

# Sentence 1: "The playing cat", tokens [CLS] The play ##ing cat [SEP] (positions 0..5); gold heads [3, 3, 0].
# Sentence 2: "Hi", tokens [CLS] Hi [SEP]; gold head [0]. Four gold arcs in all.
S1, S2, C1, C2 = CAT, HI, CAT_COLUMNS, HI_COLUMNS  # see tests/helpers.py

# Head 0 looks from each word at its gold head ([CLS] for cat); word level (rows mean, columns sum):
# A[The, cat] = A[playing, cat] = A[cat, CLS] = 1. Directed arc scores S[h, d] = A[d, h]: 3→1, 3→2, 0→3 score 1,
# every other arc 0: the one tree of score 3 is gold, [3, 3, 0]. Symmetric: the same three pairs score 0.5 each
# way, and only 0→3 of the root arcs scores: again [3, 3, 0]. Every variant: S1 all right.
H0_S1, H0_S2 = CAT_TO_HEADS, HI_TO_HEADS
# Head 1 looks at the previous token: The → CLS, play → The, ##ing → play, cat → ##ing. Word level:
# A[The, CLS] = 1, A[playing, The] = 0.5 (and 0.5 on itself), A[cat, playing] = 1. Directed: 0→1 (1), 1→2 (0.5),
# 2→3 (1) are the only positive arcs: tree [0, 1, 2]. Symmetric: 0→1 0.5, 1–2 0.25, 2–3 0.5; root→1 then the
# chain scores 1.25, root→2 or root→3 at most 0.75: [0, 1, 2] again. Against gold [3, 3, 0]: no directed arc
# right; undirected, the gold arc cat → playing is there reversed (pred[cat] = playing): 1 of 3.
H1_S1 = attention(6, {1: {0: 1.0}, 2: {1: 1.0}, 3: {2: 1.0}, 4: {3: 1.0}})
H1_S2 = attention(3, {1: {0: 1.0}})
# "Hi" alone: every decoder gives [0], right in every variant for both heads.


def _hand(groups):
    return [batch(sentences, columns, maps) for sentences, columns, maps in groups]


ONE_BATCH = [([S1, S2], [C1, C2], [[H0_S1, H1_S1], [H0_S2, H1_S2]])]
TWO_BATCHES = [([S1], [C1], [[H0_S1, H1_S1]]), ([S2], [C2], [[H0_S2, H1_S2]])]


DECODING = pytest.mark.parametrize("decoding", ["host", "device"])


def _run(groups, **options):
    probe = TreesProbe(1, 2, **options)
    hands = _hand(groups)
    for hand in hands:
        feed(probe, hand, "fit_update")  # the selection split: the same sentences
    for hand in hands:
        feed(probe, hand)
    return probe.compute(info(1, 2))


@DECODING
def test_uas_per_head_worked_out_by_hand(decoding):
    r = _run(ONE_BATCH, tree_decoding=decoding)
    assert r.overall.count == 4
    # head 0: 4 of 4 in every variant; head 1: Hi only directed (1/4), Hi and cat–playing undirected (2/4)
    np.testing.assert_array_equal(r.overall.scores, [[1.0, 0.25]])
    for decoder in ("cle", "eisner"):
        for form in ("attention", "symmetric"):
            if (decoder, form) != ("cle", "attention"):
                np.testing.assert_array_equal(r.overall.extra[f"{decoder}_{form}"], [[1.0, 0.25]])
            np.testing.assert_array_equal(r.overall.extra[f"{decoder}_{form}_undirected"], [[1.0, 0.5]])
    assert "cle_attention" not in r.overall.extra and r.extra["main"] == "cle_attention"


@DECODING
def test_per_relation(decoding):
    r = _run(ONE_BATCH, tree_decoding=decoding)
    assert {k: v.count for k, v in r.labels.items()} == {"det": 1, "amod": 1, "root": 2}
    np.testing.assert_array_equal(r.labels["det"].scores, [[1.0, 0.0]])
    np.testing.assert_array_equal(r.labels["amod"].scores, [[1.0, 0.0]])
    np.testing.assert_array_equal(r.labels["root"].scores, [[1.0, 0.5]])  # head 1: Hi right, cat wrong


def test_baselines():
    r = _run(ONE_BATCH)
    # right-branching: S1 [0, 1, 2] (no arc right; cat → playing reversed: 1 undirected), Hi [0] right.
    assert r.baselines["right_branching"] == {"uas": 0.25, "undirected_uas": 0.5, "count": 4}
    # left-branching: S1 [2, 3, 0] (playing → cat and cat → root right; The → playing no, nor reversed), Hi right.
    assert r.baselines["left_branching"] == {"uas": 0.75, "undirected_uas": 0.75, "count": 4}


@DECODING
def test_ensemble(decoding):
    r = _run(ONE_BATCH, tree_decoding=decoding)
    # on the sample (both sentences): head 0 alone scores 4/4; adding head 1 cannot improve on 1.0: one head.
    e = r.extra["ensemble"]
    assert e["heads"] == [[0, 0]] and e["selection_uas"] == [1.0]
    assert e["uas"] == 1.0 and e["undirected_uas"] == 1.0 and e["count"] == 4 and e["sample_sentences"] == 2


@DECODING
def test_ensemble_of_two_heads(decoding):
    # Sentence 1 alone, two heads each right on two of its three arcs:
    # head A: The → cat (1), playing → The (0.6, 0.4 on itself), cat → CLS (1): arcs 3→1 (1), 1→2 (.6), 0→3 (1),
    #   the only positive ones: tree [3, 1, 0], 2 of 3 right.
    # head B: The → playing (0.6, 0.4 on itself), playing → cat (1), cat → CLS (1): arcs 2→1 (.6), 3→2 (1), 0→3 (1):
    #   tree [2, 3, 0], 2 of 3 right. A and B tie at 2/3: the greedy step takes the lower head, A.
    # A and B averaged: 3→1 .5, 3→2 .5, 1→2 .3, 2→1 .3, 0→3 1 (the only root arc): [3, 3, 0] scores 2.0 against
    #   1.8 for [3, 1, 0] or [2, 3, 0]: the gold tree, 3 of 3 > 2/3, so B joins; no third head.
    a = attention(6, {1: {4: 1.0}, 2: {1: 0.6, 2: 0.4}, 3: {1: 0.6, 3: 0.4}, 4: {0: 1.0}})
    b = attention(6, {1: {2: 0.6, 1: 0.4}, 2: {4: 1.0}, 3: {4: 1.0}, 4: {0: 1.0}})
    r = _run([([S1], [C1], [[a, b]])], tree_decoding=decoding)
    e = r.extra["ensemble"]
    assert e["heads"] == [[0, 0], [0, 1]]
    assert e["selection_uas"] == [2 / 3, 1.0] and e["uas"] == 1.0 and e["count"] == 3
    np.testing.assert_array_equal(r.overall.scores, [[2 / 3, 2 / 3]])


def test_batching_changes_nothing():
    """Both sentences in one padded batch, or one per batch, decoded on the host or the device: the same result."""
    assert_same(_run(ONE_BATCH), _run(TWO_BATCHES))
    host, device = _run(ONE_BATCH), _run(TWO_BATCHES, tree_decoding="device")
    assert host.options.pop("tree_decoding") == "host" and device.options.pop("tree_decoding") == "device"
    assert_same(host, device)


def test_no_ensemble_needs_no_selection():
    probe = TreesProbe(1, 2, ensemble_heads=0)
    assert not probe.needs_fit
    for hand in _hand(ONE_BATCH):
        feed(probe, hand)
    r = probe.compute(info(1, 2))
    assert r.extra["ensemble"] is None
    np.testing.assert_array_equal(r.overall.scores, [[1.0, 0.25]])


@pytest.mark.parametrize("options", [{"ensemble_heads": -1}, {"select_sentences": 0}])
def test_bad_options(options):
    with pytest.raises(InputError):
        TreesProbe(1, 2, **options)


def test_selection_sample_is_bounded_and_order_free():
    """select_sentences=1 keeps the one sentence of smallest key, whichever batch it came in."""
    forward, backward = TreesProbe(1, 2, select_sentences=1), TreesProbe(1, 2, select_sentences=1)
    hands = _hand(TWO_BATCHES)
    for hand in hands:
        feed(forward, hand, "fit_update")
    for hand in reversed(hands):
        feed(backward, hand, "fit_update")
    assert len(forward.sample) == 1
    assert_same(forward.sample.state_dict(), backward.sample.state_dict())


@DECODING
def test_state(decoding):
    make = lambda: TreesProbe(2, 2, tree_decoding=decoding)  # noqa: E731
    hands = [two_layers(h) for h in _hand(TWO_BATCHES)]
    r = check_state(make, hands, info(2, 2), fit=tuple(hands))
    np.testing.assert_array_equal(r.overall.scores, [[1.0, 0.25], [0.25, 1.0]])


@DECODING
def test_a_retry_point_leaves_the_last_batch_decoding(decoding):
    """The runner's snapshot before each batch (out-of-memory retry) does not wait for the last batch's trees: that
    batch stays to score (the state still without it). A batch that fails half way is undone back to the point, and
    the last batch is then scored as without the failure: 4 arcs, the hits of test_state's layers."""
    probe = TreesProbe(2, 2, ensemble_heads=0, tree_decoding=decoding)
    hand = two_layers(_hand(ONE_BATCH)[0])
    for layer in (0, 1):
        probe.update(hand.batch, LayerMaps(hand.batch, layer, hand.attentions[layer]))
    point = probe.retry_point()
    assert int(probe.arcs) == 0  # not scored by the snapshot
    probe.update(hand.batch, LayerMaps(hand.batch, 0, hand.attentions[0]))  # the next batch fails after layer 0
    probe.restore(point)
    state = probe.state_dict()  # the last batch scored now
    assert int(state["arcs"]) == 4
    np.testing.assert_array_equal(state["hits"][0, 0, 0], [[4, 1], [1, 4]])


@DECODING
def test_the_state_holds_whole_batches_only(decoding):
    """A batch's trees are decoded beside the model's pass and scored at the next batch's last layer, or when the state
    is read: it never holds part of a batch (one that runs out of memory half way leaves it as it was)."""
    probe = TreesProbe(2, 2, ensemble_heads=0, tree_decoding=decoding)
    hand = two_layers(_hand(ONE_BATCH)[0])
    probe.update(hand.batch, LayerMaps(hand.batch, 0, hand.attentions[0]))
    assert int(probe.state_dict()["arcs"]) == 0
    probe.update(hand.batch, LayerMaps(hand.batch, 1, hand.attentions[1]))
    state = probe.state_dict()
    assert int(state["arcs"]) == 4
    # directed UAS of the main variant: layer 0 as head 0, 1 (4, 1 of 4 arcs); layer 1 the heads swapped
    np.testing.assert_array_equal(state["hits"][0, 0, 0], [[4, 1], [1, 4]])
    probe.update(hand.batch, LayerMaps(hand.batch, 0, hand.attentions[0]))  # a batch that goes no further
    probe.load_state_dict(state)
    assert int(probe.state_dict()["arcs"]) == 4


def test_view_marks_are_the_main_trees_of_their_layer():
    """The marks a layer keeps for the view: each gold arc's dependent's head in the head's tree (CLE on the
    attention form), and whether it is the gold one. Arcs in order: The → cat, playing → cat, cat → root,
    Hi → root. Head 0 finds the gold tree [3, 3, 0] and [0]; head 1 the chain [0, 1, 2] (The from the root,
    playing from The, cat from playing) and [0]: only Hi's arc right. Layer 1 holds the heads swapped (its marks
    come from the batch's trees, decoded at that last layer; layer 0's from its own copy)."""
    probe = TreesProbe(2, 2, ensemble_heads=0)
    hand = two_layers(_hand(ONE_BATCH)[0])
    expected_heads = np.array([[3, 0], [3, 1], [0, 2], [0, 0]])  # [N,H] at layer 0
    expected_right = np.array([[True, False], [True, False], [True, False], [True, True]])
    for layer in (0, 1):
        probe.update(hand.batch, LayerMaps(hand.batch, layer, hand.attentions[layer]))
        kept_layer, rows, marks = probe.kept_view
        assert kept_layer == layer and rows.tolist() == [0, 0, 0, 1]
        swap = slice(None, None, -1 if layer else 1)
        np.testing.assert_array_equal(marks["head"].numpy(), expected_heads[:, swap])
        np.testing.assert_array_equal(marks["right"].numpy(), expected_right[:, swap])
        assert set(marks) == {"right", "head"}


def test_view_marks_of_trees_decoded_on_the_device():
    """On the device a batch's trees are decoded at its last layer, where the examples read every layer's marks
    (probes.results.examples): the same marks as the host's (``test_view_marks_are_the_main_trees_of_their_layer``)."""
    probe = TreesProbe(2, 2, ensemble_heads=0, tree_decoding="device")
    hand = two_layers(_hand(ONE_BATCH)[0])
    kept = []
    for layer in (0, 1):
        probe.update(hand.batch, LayerMaps(hand.batch, layer, hand.attentions[layer]))
        kept.append(probe.kept_view)
    heads = np.array([[3, 0], [3, 1], [0, 2], [0, 0]])  # [N,H] at layer 0; layer 1 the heads swapped
    for layer, (kept_layer, rows, marks) in enumerate(kept):
        assert kept_layer == layer and rows.tolist() == [0, 0, 0, 1]
        np.testing.assert_array_equal(marks["head"].numpy(), heads[:, ::-1] if layer else heads)
        np.testing.assert_array_equal(marks["right"].numpy(), (heads == [[3], [3], [0], [0]])[:, ::-1] if layer
                                      else heads == [[3], [3], [0], [0]])


def test_view_marks_are_made_on_the_device_of_the_trees():
    """Trees decoded on the device are read there, while a batch's gold arcs are made on the host (Batch.memo): the
    marks come out on the trees' device (an accelerator's, here the meta device), never a mix of the two."""
    from probes.builtin.trees.probe import LayerMarks

    main = torch.empty(2 * 2, 4, dtype=torch.int16, device="meta")  # [B·H,C]: 2 sentences, 2 heads
    arcs = (torch.tensor([0, 0, 1]), torch.tensor([1, 2, 1]), torch.tensor([2, 0, 0]))  # rows, dependents, heads
    marks = LayerMarks(lambda: main, 2, arcs)
    assert marks["head"].device.type == marks["right"].device.type == "meta"
    assert marks["head"].shape == marks["right"].shape == (3, 2)


def test_host_copies_are_copies():
    """A layer's host copy is a copy (the batch's word attention is rewritten by the next layer), in the dtype asked
    for (trees' decoders read float32), else the tensor's."""
    attention = torch.arange(2 * 3 * 2 * 2, dtype=torch.float32).view(2, 3, 2, 2)  # [B,H,C,C]
    copy = HostCopy(attention)
    attention += 100  # the next layer, in the same memory
    np.testing.assert_array_equal(copy.landed().numpy(), (attention - 100).numpy())
    assert HostCopy(attention.to(torch.int16)).landed().dtype == torch.int16
    half = HostCopy(attention.to(torch.bfloat16), torch.float32)
    assert half.landed().dtype == torch.float32
    np.testing.assert_array_equal(half.landed().numpy(), attention.numpy())  # small integers: exact


def test_smallest_keys_are_a_samples():
    from probes.builtin.trees.sample import smallest_keys

    assert smallest_keys([5, 3, 9, 3, 1, 7], 3) == {1, 3, 5}  # distinct keys: the repeated 3 counts once
    assert smallest_keys([4, 2], 5) == {2, 4} and smallest_keys([], 2) == set()
