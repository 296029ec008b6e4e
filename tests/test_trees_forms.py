"""decode: the decoders reading each form's arc scores straight from word attention. Checked against arc scores
made independently with torch (attention form: the transpose; symmetric: (A + Aᵀ) / 2, in float64) and decoded
one matrix at a time by chu_liu_edmonds and eisner (tests/test_trees_decoders.py checks those against networkx
and brute force): every form, float32 and float64 attention, garbage padding and end column, ties, a stack
cut across threads and lanes, and a non-projective tree. attachment: the gold arcs trees attach, counted on trees
worked out by hand and against attached."""
from __future__ import annotations

import numba
import numpy as np
import pytest
import torch

from probes.builtin.trees.decoders import DECODERS, LANES, SCORES, chu_liu_edmonds, decode, eisner
from probes.builtin.trees.scoring import FORMS, attached, attachment
from probes.corpus.trees import head_problem
from test_trees_decoders import _score

ALONE = {"cle": chu_liu_edmonds, "eisner": eisner}


def _reference(matrix: torch.Tensor, form: str) -> torch.Tensor:
    """[n+1,n+1] float64 arc scores (head × dependent) of one attention matrix, by the scoring module's formulas."""
    a = matrix.double()
    return {"attention": a.T, "symmetric": (a + a.T) / 2, SCORES: a}[form]


def _stack(rng, sizes, values: str, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A padded stack [N,M,M] (M = longest + 2: room for an end column) with garbage everywhere past each matrix."""
    size = int(max(sizes)) + 2
    stack = torch.from_numpy(rng.random((len(sizes), size, size)) * 100).to(dtype)
    for i, n in enumerate(sizes):
        block = rng.random((n + 1, n + 1)) if values == "random" else rng.integers(0, 3, (n + 1, n + 1)) / 4
        stack[i, : n + 1, : n + 1] = torch.from_numpy(block).to(dtype)
    return stack, torch.from_numpy(np.asarray(sizes))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("values", ["random", "ties"])
def test_decode_is_each_form_decoded_alone(values, dtype):
    """Every (matrix, form) unit of one decode call gets the tree its reference arc scores get alone; a run of
    one length longer than LANES, lengths mixed, on one thread and on all of numba's."""
    rng = np.random.default_rng(4)
    sizes = np.concatenate([np.full(LANES // 2 + 3, 6), rng.integers(1, 12, 30), [1, 2, 2]])
    stack, lengths = _stack(rng, sizes, values, dtype)
    forms = (*FORMS, SCORES)
    want = {(d, f): [ALONE[d](_reference(stack[i, : n + 1, : n + 1], f)[None], lengths[i: i + 1])[0].tolist()
                     for i, n in enumerate(sizes)] for d in DECODERS for f in forms}
    threads = numba.get_num_threads()
    try:
        for count in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(count)
            heads = decode(stack, lengths, forms)  # [D,N,F,M]
            assert heads.shape == (len(DECODERS), len(sizes), len(forms), stack.shape[-1])
            for d, decoder in enumerate(DECODERS):
                for f, form in enumerate(forms):
                    got = [heads[d, i, f, : n + 1].tolist() for i, n in enumerate(sizes)]
                    if (decoder, form) == ("cle", "symmetric") and values == "ties":  # another best tree may win
                        scores = [_reference(stack[i, : n + 1, : n + 1], form) for i, n in enumerate(sizes)]
                        assert all(head_problem(g[1:]) is None for g in got)  # one-root trees
                        assert [_score(m, g[1:]) for m, g in zip(scores, got)] == [_score(m, w[1:]) for m, w in
                                                                                  zip(scores, want[decoder, form])]
                        assert got != want[decoder, form]  # ties that CLE breaks otherwise: the check above has work
                    else:
                        assert got == want[decoder, form], (decoder, form)
            assert (heads[..., 0] == -1).all()
            assert all((heads[:, i, :, n + 1:] == -1).all() for i, n in enumerate(sizes))
    finally:
        numba.set_num_threads(threads)


def test_symmetric_form_ties_and_orientation():
    """The symmetric form's arborescence by hand, with ties. Words 1..4; symmetric scores: root arcs 0–2 and 0–3
    both .5, word pairs 1–2 and 2–3 both .4, 1–4 and 3–4 both .3, every other pair 0. Word 2 takes the root
    (the first best root arc); from 2, words 1 and 3 tie at .4 and the first, 1, joins, which offers 4 the arc
    1–4 (.3); then 3 joins (.4), whose arc 3–4 (.3) is no better, so 4 hangs from 1. Tree [2, 0, 2, 1], score
    .5 + .4 + .4 + .3 = 1.6, the best, as CLE's (another tree of that score) confirms."""
    s = torch.zeros(5, 5, dtype=torch.float64)
    for (u, v), value in {(0, 2): .5, (0, 3): .5, (1, 2): .4, (2, 3): .4, (3, 4): .3, (1, 4): .3}.items():
        s[u, v] = s[v, u] = value
    heads = decode(s[None], torch.tensor([4]), ("symmetric",), ("cle",))[0, 0, 0]
    assert heads[1:].tolist() == [2, 0, 2, 1]
    scores = _reference(s, "symmetric")
    assert _score(scores, heads[1:].tolist()) == pytest.approx(1.6)
    assert _score(scores, heads[1:].tolist()) == _score(
        scores, chu_liu_edmonds(scores[None], torch.tensor([4]))[0, 1:].tolist())


def test_decoders_and_forms_chosen():
    """A subset of decoders and forms, in the order asked: the same trees as in the full call."""
    rng = np.random.default_rng(5)
    stack, lengths = _stack(rng, rng.integers(1, 10, 20), "random", torch.float32)
    full = decode(stack, lengths)  # [D,N,F,M]
    part = decode(stack, lengths, ("symmetric",), ("eisner", "cle"))
    assert torch.equal(part, full[[1, 0]][:, :, [1]])


def test_forms_of_a_hand_built_attention_matrix():
    """Words 1..3. Attention rows (from) → columns (to): word 1 → word 2 (.9), word 2 → root (.9), word 3 → word 2
    (.6) and → word 1 (.4); the root row looks at word 3 (1). Attention form, S[h, d] = A[d, h]: arcs 2→1 .9,
    0→2 .9, 2→3 .6, 1→3 .4, the rest 0: tree [2, 0, 2] (2.4). Symmetric: 0–2 .45, 0–3 .5, 1–2 .45, 2–3 .3,
    1–3 .2: one root arc; 0→3 (.5) then 3→2 (.3) and 2→1 (.45) scores 1.25, 0→2 (.45) with 2→1, 2→3 1.2:
    tree [2, 3, 0]. Projective in both, so Eisner agrees."""
    a = torch.zeros(4, 4, dtype=torch.float32)
    a[1, 2], a[2, 0], a[3, 2], a[3, 1], a[0, 3] = 0.9, 0.9, 0.6, 0.4, 1.0
    heads = decode(a[None], torch.tensor([3]))  # [D,1,F,M]
    for d in range(len(DECODERS)):
        assert heads[d, 0, FORMS.index("attention"), 1:].tolist() == [2, 0, 2]
        assert heads[d, 0, FORMS.index("symmetric"), 1:].tolist() == [2, 3, 0]


def test_non_projective_attention():
    """Attention whose best tree is non-projective (tests/test_trees_decoders.py NON_PROJECTIVE, transposed back
    into attention): CLE finds it, Eisner a projective one."""
    scores = torch.ones(5, 5, dtype=torch.float64)
    for h, d in ((0, 1), (1, 2), (1, 3), (2, 4)):
        scores[h, d] = 10
    heads = decode(scores.T.contiguous()[None], torch.tensor([4]), ("attention",))  # [D,1,1,M]
    assert heads[0, 0, 0, 1:].tolist() == [0, 1, 1, 2]
    assert heads[1, 0, 0, 1:].tolist() != [0, 1, 1, 2]


# two sentences, 3 and 2 words: gold heads [2, 0, 2] and [0, 1] (0: the root), as sentence row, dependent, head
ARCS = (torch.tensor([0, 0, 0, 1, 1]), torch.tensor([1, 2, 3, 1, 2]), torch.tensor([2, 0, 2, 0, 1]))


def test_attachment_of_trees_worked_out_by_hand():
    # each sentence's predicted head of nodes 0..3 (-1: the root and padding), per decoder and form
    trees = {(0, 0): [[-1, 2, 0, 2], [-1, 2, 0, -1]],  # 3 right; undirected also 1 <- 2 read backwards: 4
             (0, 1): [[-1, 0, 1, 2], [-1, 0, 1, -1]],  # 3 right; undirected also 1's gold head 2 hangs from 1: 4
             (1, 0): [[-1, 2, 0, 2], [-1, 0, 1, -1]],  # all 5
             (1, 1): [[-1, 3, 3, 0], [-1, 2, 0, -1]]}  # none; undirected 3 <- 2 and 2 <- 1 read backwards: 2
    predicted = torch.empty(2, 1, 2, 1, 2, 4, dtype=torch.long)  # [D,X,B,H,F,M]
    for (d, f), rows in trees.items():
        predicted[d, 0, :, 0, f] = torch.tensor(rows)
    hits, main = attachment(predicted, *ARCS)
    assert hits.shape == (2, 2, 2, 1, 1)
    assert hits[..., 0, 0].tolist() == [[[3, 4], [3, 4]], [[5, 5], [0, 2]]]
    assert main.shape == (5, 1, 1) and main[:, 0, 0].tolist() == [True, True, True, False, False]


def test_attachment_counts_what_attached_finds():
    rng = torch.Generator().manual_seed(0)
    predicted = torch.randint(-1, 4, (2, 3, 2, 5, 2, 4), generator=rng)  # [D,L,B,H,F,M]
    hits, main = attachment(predicted, *ARCS)
    directed, undirected = attached(predicted.permute(0, 4, 1, 3, 2, 5), *ARCS)  # [D,F,L,H,N]
    assert torch.equal(hits, torch.stack([directed.sum(-1), undirected.sum(-1)], 2))
    assert torch.equal(main, directed[0, 0].permute(2, 0, 1))
    by_layer = [attachment(predicted[:, layer:layer + 1], *ARCS) for layer in range(3)]
    assert torch.equal(torch.cat([h for h, _ in by_layer], 3), hits)
    assert torch.equal(torch.cat([m for _, m in by_layer], 1), main)
