"""The tree decoders: hand-built matrices whose best trees are worked out in the comments, agreement with
networkx's maximum_spanning_arborescence (an independent Chu–Liu–Edmonds) on random matrices, Eisner
against brute force over every projective tree, padding that changes nothing, and the one
decode call (both decoders) equal to each matrix decoded alone (however the stack is cut into lanes and threads)."""
from __future__ import annotations

import itertools

import networkx as nx
import numba
import numpy as np
import pytest
import torch

from probes.builtin.trees.decoders import LANES, SCORES, chu_liu_edmonds, decode, eisner

DECODERS = {"cle": chu_liu_edmonds, "eisner": eisner}


def _matrix(n: int, arcs: dict[tuple[int, int], float], background: float = 0.0) -> torch.Tensor:
    """[n+1,n+1] scores: `background` everywhere, arcs[(h, d)] where given."""
    m = torch.full((n + 1, n + 1), background, dtype=torch.float64)
    for (h, d), s in arcs.items():
        m[h, d] = s
    return m


def _decode(decoder, matrices: list[torch.Tensor]) -> list[list[int]]:
    """Heads of words 1..n of each matrix, decoded together in one padded stack."""
    size = max(m.shape[0] for m in matrices)
    stack = torch.zeros(len(matrices), size, size, dtype=torch.float64)
    for i, m in enumerate(matrices):
        stack[i, : m.shape[0], : m.shape[1]] = m
    lengths = torch.tensor([m.shape[0] - 1 for m in matrices])
    heads = DECODERS[decoder](stack, lengths)
    return [heads[i, 1: n + 1].tolist() for i, n in enumerate(lengths.tolist())]


def _score(m: torch.Tensor, heads: list[int]) -> float:
    return float(sum(m[h, d + 1] for d, h in enumerate(heads)))


def _is_projective(heads: list[int]) -> bool:
    """Every word strictly between a head and its dependent descends from that head (root at position 0)."""
    parent = [-1, *heads]

    def descends(x: int, ancestor: int) -> bool:
        while x > 0:
            x = parent[x]
            if x == ancestor:
                return True
        return False

    for d, h in enumerate(heads, start=1):
        low, high = sorted((h, d))
        if any(not descends(x, h) for x in range(low + 1, high)):
            return False
    return True


def _trees(n: int) -> np.ndarray:
    """Every single-root dependency tree over n words, [T,n] heads (brute force)."""
    out = []
    for heads in itertools.product(range(n + 1), repeat=n):
        if sum(h == 0 for h in heads) != 1 or any(h == d for d, h in enumerate(heads, start=1)):
            continue
        ok = True
        for d in range(1, n + 1):  # every word reaches the root
            seen, x = set(), d
            while x != 0 and x not in seen:
                seen.add(x)
                x = heads[x - 1]
            ok &= x == 0
        if ok:
            out.append(heads)
    return np.array(out)


# Non-projective: words 1..4, heavy arcs 0→1, 1→2, 1→3, 2→4 (10 each), every other arc 1.
# The best tree is exactly those four arcs (40); 1→3 (covering 2) and 2→4 (covering 3) cross, and 3 does not
# descend from 2, so it is not projective. The best projective tree keeps three heavy arcs and one
# light one: 31 (e.g. 0→1, 1→2, 1→3, 3→4).
NON_PROJECTIVE = _matrix(4, {(0, 1): 10, (1, 2): 10, (1, 3): 10, (2, 4): 10}, background=1.0)
# Cycle: 1 and 2 are each other's best head (10 each), 2→3 = 5, root arcs 0→1 = 2, 0→2 = 1, 0→3 = 1, rest 0.
# Breaking the cycle at 1: 0→1, 1→2, 2→3 = 2 + 10 + 5 = 17; at 2: 0→2, 2→1, 2→3 = 16. Best: heads [0, 1, 2].
CYCLE = _matrix(3, {(2, 1): 10, (1, 2): 10, (2, 3): 5, (0, 1): 2, (0, 2): 1, (0, 3): 1})
# Single root: both words prefer the root (0→1 = 10, 0→2 = 9, 1→2 = 2, 2→1 = 1). Two root arcs (19) are not
# allowed; 0→1, 1→2 = 12 beats 0→2, 2→1 = 10: heads [0, 1].
TWO_ROOTS = _matrix(2, {(0, 1): 10, (0, 2): 9, (1, 2): 2, (2, 1): 1})


def test_cle_finds_the_non_projective_tree():
    assert _decode("cle", [NON_PROJECTIVE]) == [[0, 1, 1, 2]]
    assert not _is_projective([0, 1, 1, 2])


def test_eisner_finds_a_best_projective_tree_instead():
    (heads,) = _decode("eisner", [NON_PROJECTIVE])
    assert _is_projective(heads) and heads != [0, 1, 1, 2]
    assert _score(NON_PROJECTIVE, heads) == 31.0


@pytest.mark.parametrize("decoder", ["cle", "eisner"])
def test_cycle_and_single_root(decoder):
    assert _decode(decoder, [CYCLE, TWO_ROOTS]) == [[0, 1, 2], [0, 1]]


@pytest.mark.parametrize("decoder", ["cle", "eisner"])
def test_one_word(decoder):
    assert _decode(decoder, [_matrix(1, {(0, 1): 0.5})]) == [[0]]


def _networkx_best(m: torch.Tensor) -> tuple[float, list[int]]:
    """The best single-root tree by networkx: a maximum arborescence for each choice of the root's one arc."""
    n = m.shape[0] - 1
    best = (-np.inf, [])
    for r in range(1, n + 1):
        g = nx.DiGraph()
        g.add_edge(0, r, weight=float(m[0, r]))
        g.add_weighted_edges_from((h, d, float(m[h, d])) for h in range(1, n + 1) for d in range(1, n + 1) if h != d)
        tree = nx.maximum_spanning_arborescence(g)
        heads = [next(iter(tree.predecessors(d))) for d in range(1, n + 1)]
        score = _score(m, heads)
        if score > best[0]:
            best = (score, heads)
    return best


def test_cle_agrees_with_networkx_on_every_arc():
    rng = np.random.default_rng(0)
    matrices = [torch.from_numpy(rng.random((n + 1, n + 1))) for n in rng.integers(1, 13, size=150)]
    for m, heads in zip(matrices, _decode("cle", matrices)):
        assert heads == _networkx_best(m)[1]


def test_cle_equals_networkx_score_with_ties():
    """Scores from {0, 1, 2}: many best trees tie; the totals must agree."""
    rng = np.random.default_rng(1)
    matrices = [torch.from_numpy(rng.integers(0, 3, (n + 1, n + 1)).astype(float)) for n in rng.integers(2, 10, 100)]
    for m, heads in zip(matrices, _decode("cle", matrices)):
        assert _score(m, heads) == _networkx_best(m)[0]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_eisner_is_the_best_projective_tree(n):
    trees = _trees(n)
    projective = trees[[_is_projective(list(t)) for t in trees]]
    rng = np.random.default_rng(n)
    matrices = [torch.from_numpy(rng.random((n + 1, n + 1))) for _ in range(30)]
    for m, heads in zip(matrices, _decode("eisner", matrices)):
        totals = m.numpy()[projective, np.arange(1, n + 1)].sum(1)  # [T] score of every projective tree
        assert heads == projective[int(np.argmax(totals))].tolist()


@pytest.mark.parametrize("decoder", ["cle", "eisner"])
def test_padding_and_stack_change_nothing(decoder):
    """Each matrix alone, and in one stack padded with large garbage scores: the same trees."""
    rng = np.random.default_rng(2)
    sizes = rng.integers(1, 15, size=40)
    matrices = [torch.from_numpy(rng.random((n + 1, n + 1))) for n in sizes]
    alone = [_decode(decoder, [m])[0] for m in matrices]
    stack = torch.from_numpy(rng.random((len(sizes), 16, 16)) * 100)  # padding outside each matrix: garbage
    for i, m in enumerate(matrices):
        stack[i, : m.shape[0], : m.shape[1]] = m
    heads = DECODERS[decoder](stack, torch.from_numpy(sizes))
    assert [heads[i, 1: n + 1].tolist() for i, n in enumerate(sizes)] == alone
    assert (heads[:, 0] == -1).all()
    assert all((heads[i, n + 1:] == -1).all() for i, n in enumerate(sizes))


@pytest.mark.parametrize("values", ["random", "ties"])
def test_decode_is_each_matrix_decoded_alone(values):
    """decode (both decoders, one call) gives each matrix the trees it gets alone: a run of one length
    longer than LANES (Eisner's side-by-side decoding), lengths mixed and repeated, garbage padding, and
    scores from {0, 1, 2} with many tied trees; on one thread and on all of numba's."""
    rng = np.random.default_rng(3)
    sizes = np.concatenate([np.full(LANES + 5, 7), rng.integers(1, 12, 40), np.full(3, 11), [1, 1, 2]])
    size = 13
    if values == "random":
        matrices = [torch.from_numpy(rng.random((n + 1, n + 1))) for n in sizes]
    else:
        matrices = [torch.from_numpy(rng.integers(0, 3, (n + 1, n + 1)).astype(float)) for n in sizes]
    alone = {decoder: [_decode(decoder, [m])[0] for m in matrices] for decoder in DECODERS}
    stack = torch.from_numpy(rng.random((len(sizes), size, size)) * 100)  # padding: garbage
    for i, m in enumerate(matrices):
        stack[i, : m.shape[0], : m.shape[1]] = m
    threads = numba.get_num_threads()
    try:
        for count in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(count)
            heads = decode(stack, torch.from_numpy(sizes), (SCORES,))[:, :, 0]  # [D,N,M]
            assert heads.shape == (2, len(sizes), size)
            for d, decoder in enumerate(DECODERS):
                assert [heads[d, i, 1: n + 1].tolist() for i, n in enumerate(sizes)] == alone[decoder]
                assert (heads[d, :, 0] == -1).all()
                assert all((heads[d, i, n + 1:] == -1).all() for i, n in enumerate(sizes))
    finally:
        numba.set_num_threads(threads)
