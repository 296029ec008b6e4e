"""probes.builtin.gold_arcs: a batch's gold arcs flattened (sentence row, dependent, head, relation), as dep and trees
read them, on a hand-built batch and against a sentence-by-sentence construction; made once a batch."""
from __future__ import annotations

import numpy as np
import torch
from helpers import CAT, HI, sentence
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.builtin.gold_arcs import gold_arcs
from probes.encoding.batching import Batch


def _batch(sentences) -> Batch:
    return Batch(sentences, [np.arange(len(s.words) + 2) for s in sentences])


def test_the_arcs_of_a_hand_built_batch():
    batch = _batch([CAT, HI, CAT])
    rows, dependents, heads, labels = gold_arcs(batch)
    assert rows.tolist() == [0, 0, 0, 1, 2, 2, 2]
    assert dependents.tolist() == [1, 2, 3, 1, 1, 2, 3]
    assert heads.tolist() == [3, 3, 0, 0, 3, 3, 0]
    assert labels == ["det", "amod", "root", "root", "det", "amod", "root"]
    assert gold_arcs(batch)[0] is rows  # once a batch


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_the_arcs_are_each_sentence_s_in_turn(sizes, rng):
    sentences = [sentence([f"w{i}" for i in range(n)], head=[rng.randint(0, n) for _ in range(n)],
                          deprel=[rng.choice(["a", "b", "c"]) for _ in range(n)]) for n in sizes]
    rows, dependents, heads, labels = gold_arcs(_batch(sentences))
    expected = [(b, d + 1, h, r) for b, s in enumerate(sentences)
                for d, (h, r) in enumerate(zip(s.ann["head"], s.ann["deprel"]))]
    assert list(zip(rows.tolist(), dependents.tolist(), heads.tolist(), labels)) == expected
    assert {rows.dtype, dependents.dtype, heads.dtype} == {torch.int64}
