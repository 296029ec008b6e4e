"""The batched tree decoders (probes.builtin.trees.batched, ``--tree-decoding device``): trees worked out by hand,
then equal to the compiled decoders' (probes.builtin.trees.decoders) unit for unit, ties included, on random
attention, attention with many ties and causal (lower-triangular) attention, whatever the chunking."""
from __future__ import annotations

import pytest
import torch

from probes.builtin.trees import batched
from probes.builtin.trees.decoders import decode


def _scores(n: int, arcs: dict[tuple[int, int], float]) -> torch.Tensor:
    """[1,n+1,n+1] float64 arc scores: 0 everywhere, arcs[(h, d)] (h → d) where given."""
    m = torch.zeros(1, n + 1, n + 1, dtype=torch.float64)
    for (h, d), s in arcs.items():
        m[0, h, d] = s
    return m


# Four words, the arcs 0→2, 2→4, 4→1 and 1→3 scoring 1, all others 0. The best arborescence is those four arcs
# (score 4; every word's one positive arc into it), and it is not projective: 4→1 spans words 2 and 3, and 2 does
# not descend from 4. No projective tree holds three of them: with 4→1, word 2 (between) must descend from 4, so
# 0→2 and 2→4 go; with 1→3, word 2 must descend from 1, so 0→2 goes, and then 2→4 with 4→1 makes a cycle.
# Eisner's best scores 2 (0→2 and 2→4, the other two arcs 0); of those trees, the first best split points give
# [2, 0, 4, 2] (word 3 from 4: the compiled decoder's, test_equal_to_the_compiled_decoders).
CROSSING = _scores(4, {(0, 2): 1.0, (2, 4): 1.0, (4, 1): 1.0, (1, 3): 1.0})


def test_the_crossing_tree_by_hand():
    lengths = torch.tensor([4])
    assert batched.chu_liu_edmonds(CROSSING, lengths)[0].tolist() == [-1, 4, 0, 1, 2]
    assert batched.eisner(CROSSING, lengths)[0].tolist() == [-1, 2, 0, 4, 2]


def test_the_symmetric_tree_by_hand():
    """Three words; symmetric scores 0→2 = 1 (the best root arc), 2–1 = 0.5, 1–3 = 0.4, 2–3 = 0.3: Prim's joins
    1 from 2 (0.5), then 3 from 1 (0.4 > 0.3): [2, 0, 1]."""
    m = _scores(3, {(0, 2): 1.0, (0, 1): 0.2, (0, 3): 0.1})
    for (u, v), s in {(2, 1): 0.5, (1, 3): 0.4, (2, 3): 0.3}.items():
        m[0, u, v] = m[0, v, u] = s
    assert batched.symmetric_arborescence(m, torch.tensor([3]))[0].tolist() == [-1, 2, 0, 1]


def test_one_word_and_padding():
    """A one-word unit hangs from the root; the padding of a shorter unit is −1 and changes nothing."""
    stack = torch.zeros(2, 5, 5, dtype=torch.float64)
    stack[0] = CROSSING[0]
    stack[1, :2, :2] = 7.0
    stack[1, 2:] = stack[1, :, 2:] = float("nan")  # padding is never read
    lengths = torch.tensor([4, 1])
    for decoder in (batched.chu_liu_edmonds, batched.eisner, batched.symmetric_arborescence):
        assert decoder(stack, lengths)[1].tolist() == [-1, 0, -1, -1, -1]


def _attention(seed: int, count: int, size: int, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """count word-attention matrices [count,size,size] (float32) and lengths [count] (1 ≤ n ≤ size − 2)."""
    generator = torch.Generator().manual_seed(seed)
    attention = torch.softmax(3 * torch.randn(count, size, size, generator=generator), -1)
    if kind == "ties":
        attention = (attention * 4).round() / 4  # a few values only: ties everywhere
    if kind == "causal":
        attention = torch.tril(attention)  # a decoder's: zeros above the diagonal
    return attention, torch.randint(1, size - 1, (count,), generator=generator)


@pytest.mark.parametrize("kind", ["plain", "ties", "causal"])
@pytest.mark.parametrize("seed", [0, 1])
def test_equal_to_the_compiled_decoders(kind, seed):
    attention, lengths = _attention(seed, 150, 14, kind)
    assert torch.equal(batched.decode(attention, lengths), decode(attention, lengths))


def test_chunking_changes_no_tree(monkeypatch):
    attention, lengths = _attention(2, 60, 12, "ties")
    whole = batched.decode(attention, lengths)
    monkeypatch.setattr(batched, "CHART_CELLS", 200)  # a few units a chunk
    assert torch.equal(batched.decode(attention, lengths), whole)


def test_half_precision_maps_are_read_in_float64():
    """bf16 word attention: the scores are its values in float64, as the compiled decoders read them."""
    attention, lengths = _attention(3, 40, 10, "plain")
    half = attention.to(torch.bfloat16)
    assert torch.equal(batched.decode(half, lengths), decode(half.double(), lengths))
