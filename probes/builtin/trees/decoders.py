"""Dependency trees from a stack of arc-score matrices: maximum spanning arborescence (Chu–Liu–Edmonds)
and the best projective tree (Eisner), both with exactly one word attached to the root.

Input of both decoders: scores [N,M,M] (float64), scores[i, h, d] the score of the arc h → d in matrix i;
node 0 is the root, nodes 1..n_i the words, where lengths [N] holds n_i (1 ≤ n_i ≤ M−1). Rows and columns
past n_i are padding: never read, so they cannot change a tree. Output: heads [N,M] (int64), heads[i, d]
the head of word d (0 for the root), and −1 at node 0 and on padding. A tree's score is the sum of its
arcs' scores; the root column's own scores (arcs into node 0) and the diagonal are never used.

Single root: exactly one word is attached to node 0 (UD trees have one root word). Eisner builds it into
the chart (the root takes one word r whose left and right complete spans cover the sentence); CLE
subtracts a constant from every root arc larger than the spread of all tree scores, so the best tree
with one root arc beats any tree with two or more, and among one-root trees the order is unchanged.

Ties: CLE takes each node's first best incoming arc (lowest head index); Eisner the first best split
point. Both depend only on the matrix itself, never on the padding or the other matrices of the stack.
"""
from __future__ import annotations

import numba
import numpy as np
import torch

CHART_CELLS = 2**22  # most chart cells (matrices × M × M) Eisner keeps at once; bigger stacks go in chunks


def chu_liu_edmonds(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[N,M] heads of the maximum spanning arborescence of each matrix, one root arc (see the module docstring).
    One compiled call over the whole stack."""
    matrices = np.ascontiguousarray(scores.detach().to(torch.float64).cpu().numpy())
    return torch.from_numpy(_cle_stack(matrices, lengths.cpu().numpy().astype(np.int64)))


def eisner(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[N,M] heads of the best projective tree of each matrix, one root arc (see the module docstring).
    Vectorised over the stack: Python loops run over span widths only."""
    scores = scores.detach().to(torch.float64).cpu()
    n, m = scores.shape[0], scores.shape[1]
    chunk = max(1, CHART_CELLS // (m * m))
    heads = [_eisner_chunk(scores[i:i + chunk], lengths[i:i + chunk].cpu()) for i in range(0, n, chunk)]
    return torch.cat(heads) if heads else torch.full((0, m), -1, dtype=torch.long)


def _eisner_chunk(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Eisner's chart over the words of every matrix at once, then the single root arc, then the backtrace.

    The charts hold word k at index k−1 and put the stack last, [W,W,N] (W = M−1 words), so that every
    span of one width is a diagonal and its split points a strided view (``_stripe``): complete[a, b] is
    the complete span headed by a reaching to b (rightwards when a < b), inner[a, b] the incomplete span
    with the arc a → b; split[...] keeps the best split point of each for the backtrace. A span of a
    shorter sentence that runs into its padding is computed but never used: the root step reads spans
    inside words 1..n only.
    """
    n = scores.shape[0]
    arcs = scores[:, 1:, 1:].permute(1, 2, 0).contiguous()  # [W,W,N] arcs between words
    w_all = arcs.shape[0]
    complete = torch.full_like(arcs, float("-inf"))
    complete.diagonal(0).fill_(0)
    inner = torch.full_like(arcs, float("-inf"))
    split_complete = torch.zeros(arcs.shape, dtype=torch.long)
    split_inner = torch.zeros(arcs.shape, dtype=torch.long)
    for w in range(1, w_all):
        count = w_all - w  # spans (i, j = i + w), i = 0..count−1
        starts = torch.arange(count)[None, :]  # [1,count]
        # inner: complete[i, r] + complete[j, r+1], r = i..j−1, plus the arc either way
        best, arg = (_stripe(complete, count, w) + _stripe(complete, count, w, (w, 1))).max(1)  # [count,N]
        inner.diagonal(w).copy_(best.T + arcs.diagonal(w))
        inner.diagonal(-w).copy_(best.T + arcs.diagonal(-w))
        split_inner.diagonal(w).copy_(arg.T + starts)
        split_inner.diagonal(-w).copy_(arg.T + starts)
        # complete[j, i] (leftwards): complete[r, i] + inner[j, r], r = i..j−1
        best, arg = (_stripe(complete, count, w, (0, 0), vertical=True) + _stripe(inner, count, w, (w, 0))).max(1)
        complete.diagonal(-w).copy_(best.T)
        split_complete.diagonal(-w).copy_(arg.T + starts)
        # complete[i, j] (rightwards): inner[i, r] + complete[r, j], r = i+1..j
        best, arg = (_stripe(inner, count, w, (0, 1)) + _stripe(complete, count, w, (1, w), vertical=True)).max(1)
        complete.diagonal(w).copy_(best.T)
        split_complete.diagonal(w).copy_(arg.T + starts + 1)
    # the root takes one word a: complete[a, 0] + complete[a, n−1] + score(0 → a)
    rows = torch.arange(n)
    words = torch.arange(w_all)  # [W]
    by_matrix = complete.permute(2, 0, 1)  # [N,W,W]
    total = by_matrix[:, :, 0] + by_matrix[rows, :, lengths - 1] + scores[:, 0, 1:]  # [N,W]
    total = total.masked_fill(words[None, :] >= lengths[:, None], float("-inf"))
    return _backtrace(total.argmax(1), lengths, split_complete, split_inner)


def _stripe(chart: torch.Tensor, count: int, width: int, offset: tuple[int, int] = (0, 0),
            vertical: bool = False) -> torch.Tensor:
    """A [count,width,N] view of chart [W,W,N]: element [p, q] is chart[o0 + p, o1 + p + q], or with
    vertical chart[o0 + p + q, o1 + p] (no copy)."""
    size, cell = chart.shape[1], chart.stride(1)
    stride = ((size + 1) * cell, (size if vertical else 1) * cell, *chart.stride()[2:])
    return chart.as_strided((count, width, *chart.shape[2:]), stride, (offset[0] * size + offset[1]) * cell)


def _backtrace(root_child: torch.Tensor, lengths: torch.Tensor, split_complete: torch.Tensor,
               split_inner: torch.Tensor) -> torch.Tensor:
    """Heads [N,M] from the chart's split points: the spans of the best tree are marked from the widest down.

    A complete span may open an incomplete span of its own width (r = j or r = i), so at each width the
    complete spans are expanded before the incomplete ones; every other span they open is narrower.
    Chart indices are words − 1 (see ``_eisner_chunk``).
    """
    w_all, n = split_complete.shape[0], split_complete.shape[2]
    rows = torch.arange(n)
    heads = torch.full((n, w_all + 1), -1, dtype=torch.long)
    heads[rows, root_child + 1] = 0
    use_complete = torch.zeros(split_complete.shape, dtype=torch.bool)  # [W,W,N]
    use_inner = torch.zeros(split_complete.shape, dtype=torch.bool)
    use_complete[root_child, 0, rows] = True
    use_complete[root_child, lengths - 1, rows] = True
    for w in range(w_all - 1, 0, -1):
        m, i = use_complete.diagonal(w).nonzero(as_tuple=True)  # rightwards complete[i, i+w] of matrix m
        r = split_complete[i, i + w, m]
        use_inner[i, r, m] = True
        use_complete[r, i + w, m] = True
        m, i = use_complete.diagonal(-w).nonzero(as_tuple=True)  # leftwards complete[i+w, i]
        r = split_complete[i + w, i, m]
        use_complete[r, i, m] = True
        use_inner[i + w, r, m] = True
        for head_first in (True, False):  # inner[i, i+w] (arc i → i+w), then inner[i+w, i]
            m, i = use_inner.diagonal(w if head_first else -w).nonzero(as_tuple=True)
            head, dependent = (i, i + w) if head_first else (i + w, i)
            heads[m, dependent + 1] = head + 1
            r = split_inner[head, dependent, m]
            use_complete[i, r, m] = True
            use_complete[i + w, r + 1, m] = True
    return heads


@numba.njit(cache=True)
def _cle_stack(scores: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """heads [N,M] of every matrix of scores [N,M,M] (the loop over matrices runs compiled)."""
    n, m = scores.shape[0], scores.shape[1]
    heads = np.full((n, m), -1, dtype=np.int64)
    for i in range(n):
        size = lengths[i] + 1
        block = scores[i, :size, :size].copy()
        low, high = np.inf, -np.inf
        for h in range(size):
            for d in range(1, size):
                if h != d:
                    low = min(low, block[h, d])
                    high = max(high, block[h, d])
        penalty = (high - low) * lengths[i] + 1.0  # larger than the spread of all tree scores
        for d in range(1, size):
            block[0, d] -= penalty
        heads[i, :size] = _cle(block)
    return heads


@numba.njit(cache=True)
def _cle(weights: np.ndarray) -> np.ndarray:
    """Heads [n] of the maximum spanning arborescence rooted at node 0 of weights [n,n] (weights[h, d]: the
    arc h → d); heads[0] = −1. Chu–Liu–Edmonds with explicit contraction: each cycle of best incoming arcs
    becomes a new node (ids n, n+1, ...); arcs keep the original (head, dependent) they stand for, and
    the contractions are undone newest first."""
    n = weights.shape[0]
    size = 2 * n  # at most n − 1 contractions
    score = np.full((size, size), -np.inf)
    orig_head = np.full((size, size), -1, dtype=np.int64)
    orig_dep = np.full((size, size), -1, dtype=np.int64)
    for h in range(n):
        for d in range(1, n):
            if h != d:
                score[h, d] = weights[h, d]
                orig_head[h, d] = h
                orig_dep[h, d] = d
    active = np.zeros(size, dtype=np.bool_)
    active[:n] = True
    parent = np.full(size, -1, dtype=np.int64)  # the contracted node each node went into
    cycle_in = np.full(size, -1, dtype=np.int64)  # a cycle member's best incoming node when contracted
    best_in = np.full(size, -1, dtype=np.int64)
    contractions = np.zeros(n, dtype=np.int64)  # ids of the contracted nodes, in order
    made = 0
    nodes = n
    while True:
        for v in range(1, nodes):
            if active[v]:
                best = -1
                for u in range(nodes):
                    if active[u] and u != v and (best < 0 or score[u, v] > score[best, v]):
                        best = u
                best_in[v] = best
        cycle_node = _find_cycle(best_in, active, nodes)
        if cycle_node < 0:
            break
        new = nodes
        nodes += 1
        member = np.zeros(size, dtype=np.bool_)
        v = cycle_node
        while not member[v]:
            member[v] = True
            v = best_in[v]
        for v in range(new):
            if member[v]:
                active[v] = False
                parent[v] = new
                cycle_in[v] = best_in[v]
        for u in range(new):
            if not active[u]:
                continue
            for v in range(new):  # arcs into the cycle: gain over the arc they replace
                if member[v] and score[u, v] > -np.inf:
                    gain = score[u, v] - score[best_in[v], v]
                    if orig_head[u, new] < 0 or gain > score[u, new]:
                        score[u, new] = gain
                        orig_head[u, new], orig_dep[u, new] = orig_head[u, v], orig_dep[u, v]
            for v in range(new):  # arcs out of the cycle: the best member's
                if member[v] and score[v, u] > -np.inf and (orig_head[new, u] < 0 or score[v, u] > score[new, u]):
                    score[new, u] = score[v, u]
                    orig_head[new, u], orig_dep[new, u] = orig_head[v, u], orig_dep[v, u]
        active[new] = True
        contractions[made] = new
        made += 1
    heads = np.full(n, -1, dtype=np.int64)
    entering = np.full(size, -1, dtype=np.int64)  # the original node an arc into each node lands on
    for v in range(1, nodes):
        if active[v]:
            heads[orig_dep[best_in[v], v]] = orig_head[best_in[v], v]
            entering[v] = orig_dep[best_in[v], v]
    for j in range(made - 1, -1, -1):  # undo the contractions, newest first
        c = contractions[j]
        inside = entering[c]
        while parent[inside] != c:  # the cycle member that holds the node the entering arc lands on
            inside = parent[inside]
        for v in range(c):
            if parent[v] == c and v != inside:  # every other member keeps its arc of the cycle
                u = cycle_in[v]
                heads[orig_dep[u, v]] = orig_head[u, v]
                entering[v] = orig_dep[u, v]
        entering[inside] = entering[c]
    return heads


@numba.njit(cache=True)
def _find_cycle(best_in: np.ndarray, active: np.ndarray, nodes: int) -> int:
    """A node on a cycle of best incoming arcs among the active nodes, or −1 when there is none."""
    state = np.zeros(nodes, dtype=np.int64)  # 0 unseen, 1 on the current walk, 2 done
    for start in range(1, nodes):
        if not active[start] or state[start]:
            continue
        v = start
        while v != 0 and state[v] == 0:
            state[v] = 1
            v = best_in[v]
        found = v if v != 0 and state[v] == 1 else -1
        v = start
        while v != 0 and state[v] == 1:
            state[v] = 2
            v = best_in[v]
        if found >= 0:
            return found
    return -1
