"""Tree decoders as batched tensor code, on the matrices' own device: Eisner's best projective tree and the
symmetric form's best one-root arborescence (Prim's), the same trees as probes.builtin.trees.decoders gives.

Input: matrices [N,M,M] of word attention (node 0 the root, nodes 1..n_i the words of matrix i, lengths [N]
holding n_i, 1 ≤ n_i ≤ M−1; rows and columns past n_i never read), read in a form of
probes.builtin.trees.scoring (arc scores in float64, by the same formulas as ``decoders._arc_score``).
Output: heads [N,M] (int64), the head of each word (0 for the root), −1 at node 0 and on padding.

Every unit is decoded by the same arithmetic as the compiled decoders, in the same order of operations and
in float64, and ties go the same way (each maximum's first index: torch.max), so the trees are equal, ties
included. The work is one loop over span widths (Eisner) or over the words joined (Prim's), each step one set
of tensor operations over every unit at once: the host never reads the device (the lengths are host tensors).
Units are taken in chunks of at most CHART_CELLS chart cells, so the charts' memory is bounded.
"""
from __future__ import annotations

import torch

from probes.base.devices import to_device
from probes.builtin.trees.decoders import DECODERS
from probes.builtin.trees.scoring import FORMS

CHART_CELLS = 2**25  # most cells (units × words × words; CLE: × 4) of one chunk: 32 to 40 bytes a cell in all


def decode(matrices: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[D,N,F,M] heads of every matrix of word attention [N,M,M] (lengths [N], on the host) read in each form of
    FORMS, by each decoder of DECODERS: decoders.decode's trees, on the matrices' device. The units are decoded
    shortest first (chunks cut to their longest unit waste little), the heads put back in their order."""
    order = torch.argsort(lengths, stable=True)  # host
    sizes, sent = lengths[order], to_device(order, matrices.device)
    sorted_matrices = matrices[sent]
    attention, symmetric = (arc_scores(sorted_matrices, form) for form in FORMS)
    trees = {"cle": (chu_liu_edmonds(attention, sizes), symmetric_arborescence(symmetric, sizes)),
             "eisner": (eisner(attention, sizes), eisner(symmetric, sizes))}  # per decoder, [N,M] per form
    heads = torch.stack([torch.stack(trees[name], 1) for name in DECODERS])  # [D,N,F,M], shortest first
    restored = torch.empty_like(heads)
    restored[:, sent] = heads
    return restored


def arc_scores(matrices: torch.Tensor, form: str) -> torch.Tensor:
    """[N,M,M] float64 arc scores, scores[i, h, d] of the arc h → d, of word attention [N,M,M] read in `form` (of
    FORMS): the attention form A[d, h], the symmetric form (A[d, h] + A[h, d]) / 2."""
    attention = matrices.double()
    if form == FORMS[0]:
        return attention.transpose(-1, -2)
    return (attention.transpose(-1, -2) + attention) / 2


def eisner(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[N,M] heads of the best projective tree of each matrix of arc scores [N,M,M] (float64; lengths [N], on the
    host), exactly one word attached to the root, in chunks of CHART_CELLS."""
    return _chunked(_eisner, scores, lengths)


def symmetric_arborescence(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[N,M] heads of the best one-root arborescence of each matrix of symmetric arc scores [N,M,M] (float64,
    scores[h, d] = scores[d, h] between words; lengths [N], on the host): the best root arc 0 → r (the first best
    r), then the maximum spanning tree of the words grown from r by Prim's algorithm (each step the first best
    word to join, joined by the first best arc), oriented away from r."""
    return _chunked(_prim, scores, lengths)


def _chunked(decoder, scores: torch.Tensor, lengths: torch.Tensor, nodes: int = 1) -> torch.Tensor:
    """decoder over chunks of the units of scores [N,M,M] (lengths [N], host) of at most CHART_CELLS cells (units ×
    (`nodes` × words)²), each chunk cut to its longest unit: heads [N,M] on the scores' device."""
    count, m = scores.shape[0], scores.shape[-1]
    heads = torch.full((count, m), -1, dtype=torch.int64, device=scores.device)
    sizes = lengths.tolist()  # host tensor: no device read
    start = 0
    while start < count:
        longest, stop = sizes[start], start + 1
        while stop < count and (stop - start + 1) * (nodes * max(longest, sizes[stop])) ** 2 <= CHART_CELLS:
            longest = max(longest, sizes[stop])
            stop += 1
        n = to_device(lengths[start:stop], scores.device)
        heads[start:stop, :longest + 1] = decoder(scores[start:stop, :longest + 1, :longest + 1], n, longest)
        start = stop
    return heads


def _eisner(arcs: torch.Tensor, n: torch.Tensor, longest: int) -> torch.Tensor:
    """[U,W+1] heads (W = `longest`) of the best projective trees of arcs [U,W+1,W+1] (lengths n [U], device).

    Charts over the words, word k at index k−1 ([U,W,W]): complete[a, b] the best complete span headed by a
    reaching to b, inner[a, b] the best incomplete span with the arc a → b, and each one's first best split point
    (decoders._eisner's recurrences, one span width at a time, every span of that width of every unit at once).
    The backtrace goes the other way, widest spans first: a span in the tree marks its two parts (a complete
    span before the inner spans of its width, which it may hold), and the inner spans marked are the arcs."""
    units, words, device = arcs.shape[0], longest, arcs.device
    complete = torch.zeros((units, words, words), dtype=torch.float64, device=device)
    inner = torch.zeros_like(complete)
    split_complete = torch.zeros((units, words, words), dtype=torch.int32, device=device)
    split_inner = torch.zeros_like(split_complete)
    spans = []  # per width: (i, j, r) [S], [S], [S,w]: the spans (i, i+w) and their split points i..j−1
    for w in range(1, words):
        i = torch.arange(words - w, device=device)  # [S]
        j, r = i + w, i[:, None] + torch.arange(w, device=device)  # [S], [S,w]
        spans.append((i, j, r))
        # inner: complete[i, r] + complete[j, r+1], r = i..j−1, plus the arc either way
        best, arg = (complete[:, i[:, None], r] + complete[:, j[:, None], r + 1]).max(-1)  # [U,S]
        inner[:, i, j] = best + arcs[:, i + 1, j + 1]
        inner[:, j, i] = best + arcs[:, j + 1, i + 1]
        split_inner[:, i, j] = split_inner[:, j, i] = (arg + i).int()
        # complete[j, i] (leftwards): complete[r, i] + inner[j, r], r = i..j−1
        best, arg = (complete[:, r, i[:, None]] + inner[:, j[:, None], r]).max(-1)
        complete[:, j, i], split_complete[:, j, i] = best, (arg + i).int()
        # complete[i, j] (rightwards): inner[i, r] + complete[r, j], r = i+1..j
        best, arg = (inner[:, i[:, None], r + 1] + complete[:, r + 1, j[:, None]]).max(-1)
        complete[:, i, j], split_complete[:, i, j] = best, (arg + i + 1).int()
    rows, word = torch.arange(units, device=device), torch.arange(words, device=device)
    last = (n - 1)[:, None]  # [U,1]
    # the root takes one word a: complete[a, 0] + complete[a, n−1] + score(0 → a)
    total = complete[:, :, 0] + complete[rows[:, None], word, last] + arcs[:, 0, 1:]  # [U,W]
    root = total.masked_fill(word >= n[:, None], -torch.inf).argmax(-1)  # [U]
    used_complete = torch.zeros((units, words * words), dtype=torch.int32, device=device)  # flat [a·W + b]
    used_inner = torch.zeros_like(used_complete)
    used_complete.index_put_((rows, root * words), torch.ones_like(root, dtype=torch.int32), accumulate=True)
    used_complete.index_put_((rows, root * words + n - 1), torch.ones_like(root, dtype=torch.int32), accumulate=True)
    flat_complete, flat_inner = split_complete.view(units, -1), split_inner.view(units, -1)
    for i, j, _ in reversed(spans):
        for a, b in ((i, j), (j, i)):  # complete[a, b]: inner[a, r] and complete[r, b]
            cell = a * words + b  # [S]
            used = (used_complete[:, cell] > 0).int()  # [U,S]
            r = flat_complete[:, cell].long()
            used_inner.scatter_add_(1, a * words + r, used)
            used_complete.scatter_add_(1, r * words + b, used)
        for a, b in ((i, j), (j, i)):  # inner[a, b]: complete[i, r] and complete[j, r+1]
            cell = a * words + b
            used = (used_inner[:, cell] > 0).int()
            r = flat_inner[:, cell].long()
            used_complete.scatter_add_(1, i * words + r, used)
            used_complete.scatter_add_(1, j * words + r + 1, used)
    arcs_in = used_inner.view(units, words, words) > 0  # [U,W,W] the tree's arcs a → b
    head = torch.where(arcs_in.any(1), arcs_in.int().argmax(1) + 1, 0)  # [U,W] each word's head (node ids)
    heads = torch.full((units, words + 1), -1, dtype=torch.int64, device=device)
    heads[:, 1:] = torch.where(word < n[:, None], head, -1)
    return heads


def _prim(scores: torch.Tensor, n: torch.Tensor, longest: int) -> torch.Tensor:
    """[U,W+1] heads (W = `longest`) of the symmetric form's best one-root arborescences of scores [U,W+1,W+1]
    (lengths n [U], device): decoders._symmetric_arborescence, every unit's step k at once (a unit of n words
    takes n − 1 steps; the others wait)."""
    units, device = scores.shape[0], scores.device
    rows, node = torch.arange(units, device=device), torch.arange(longest + 1, device=device)
    word = (node >= 1) & (node <= n[:, None])  # [U,W+1]
    root = scores[:, 0].masked_fill(~word, -torch.inf).argmax(-1)  # [U] the first best root word
    key = scores[rows, root]  # [U,W+1] the best arc from the tree into each word
    heads = torch.where(word, root[:, None], -1)
    heads[rows, root] = 0
    joined = ~word | (node == root[:, None])  # [U,W+1] in the tree, or not a word
    for step in range(longest - 1):
        active = step < n - 1  # [U]
        best = key.masked_fill(joined, -torch.inf).argmax(-1)  # [U] the first best word to join
        joined = joined | ((node == best[:, None]) & active[:, None])
        value = scores[rows, best]  # [U,W+1] its arcs to the words not joined
        better = (value > key) & ~joined & active[:, None]
        key = torch.where(better, value, key)
        heads = torch.where(better, best[:, None], heads)
    return heads


def chu_liu_edmonds(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[N,M] heads of the maximum spanning arborescence of each matrix of arc scores [N,M,M] (float64; lengths [N],
    on the host) with one root arc, in chunks of CHART_CELLS / 4 units × words²."""
    return _chunked(_cle, scores, lengths, nodes=2)


def _cle(arcs: torch.Tensor, n: torch.Tensor, longest: int) -> torch.Tensor:
    """[U,W+1] heads (W = `longest`) of the maximum spanning arborescences, one root arc, of arcs [U,W+1,W+1]
    (lengths n [U], device): decoders._cle, every unit's k-th contraction at once, W − 1 rounds (a unit of n words
    contracts at most n − 1 times; one with no cycle left waits).

    Nodes: the root, the words, then each contraction's new node (ids W+1 ..): S = 2W in all. Each round, every
    node's best incoming arc among the nodes alive (the first best: lowest id), the cycle reached from the lowest
    node that does not reach the root (decoders._find_cycle's), and its contraction: arcs into the new node scored
    by their gain over the arc they replace (the first best member), arcs out of it by the best member's. Arcs keep
    the original arc they stand for (`origin`, head · (W+1) + dependent). Then the contractions are undone newest
    first: the member of each that holds the dependent of the arc entering it (``_holder``) keeps that arc, the
    others their arc of the cycle."""
    units, words, device = arcs.shape[0], longest, arcs.device
    size, side = 2 * words, words + 1
    rows, node = torch.arange(units, device=device), torch.arange(2 * words, device=device)
    real = node[:side]
    valid = ((real[:, None] <= n[:, None, None]) & (real <= n[:, None, None]) & (real >= 1)
             & (real[:, None] != real))  # [U,W+1,W+1] the arcs h → d of each unit
    score = torch.full((units, size, size), -torch.inf, dtype=torch.float64, device=device)
    score[:, :side, :side] = arcs.masked_fill(~valid, -torch.inf)
    low = arcs.masked_fill(~valid, torch.inf).amin((1, 2))
    high = arcs.masked_fill(~valid, -torch.inf).amax((1, 2))
    score[:, 0] -= ((high - low) * n + 1.0)[:, None]  # more than the spread of all tree scores
    origin = torch.full((units, size, size), -1, dtype=torch.int32, device=device)
    origin[:, :side, :side] = (real[:, None] * side + real).int()
    alive = (node <= n[:, None])  # [U,S]
    parent = torch.full((units, size), -1, dtype=torch.int64, device=device)
    cycle_in = torch.zeros_like(parent)
    nodes = n + 1  # [U] the next new node's id
    best_in = _best_incoming(score, alive)
    steps = max(1, (size - 1).bit_length())  # walks of 2^steps ≥ S nodes reach every cycle
    for _ in range(words - 1):
        # the cycle of each unit: walk 2^steps arcs up from every node (the root and the dead stay put)
        up = torch.where(alive & (node > 0), best_in, 0)
        low_id = torch.minimum(node.expand_as(up), up)  # the lowest id on each walk so far
        for _ in range(steps):
            low_id = torch.minimum(low_id, low_id.gather(1, up))
            up = up.gather(1, up)
        reaching = (up != 0) & alive  # [U,S] nodes whose walk ends on a cycle
        cycling = reaching.any(1)  # [U] units with a cycle left
        start = reaching.int().argmax(1)  # the lowest such node
        on_cycle = torch.zeros_like(alive).scatter_(1, up, True) & (node > 0)
        label = low_id.gather(1, up.gather(1, start[:, None]))  # [U,1] the cycle's lowest id
        members = on_cycle & (low_id == label) & cycling[:, None]  # [U,S]
        new = torch.where(cycling, nodes, size - 1)[:, None]  # [U,1] (a unit without a cycle writes nothing)
        replaced = score.gather(1, best_in[:, None]).squeeze(1)  # [U,S] score[best_in[v], v]
        outside = alive & ~members  # [U,S]
        gains = (score - replaced[:, None]).masked_fill(~members[:, None] | (score == -torch.inf), -torch.inf)
        into, into_from = gains.max(2)  # [U,S] each node's best arc into the cycle, its first best member
        out, out_from = score.masked_fill(~members[:, :, None], -torch.inf).max(1)  # [U,S] from the best member
        write = cycling[:, None] & outside  # [U,S]
        column = score.gather(2, new[:, :, None].expand(units, size, 1)).squeeze(2)
        score.scatter_(2, new[:, :, None].expand(units, size, 1), torch.where(write, into, column)[..., None])
        row = score.gather(1, new[:, :, None].expand(units, 1, size)).squeeze(1)
        score.scatter_(1, new[:, :, None].expand(units, 1, size), torch.where(write, out, row)[:, None])
        column = origin.gather(2, new[:, :, None].expand(units, size, 1)).squeeze(2)
        from_into = origin.gather(2, into_from[..., None]).squeeze(2)  # origin[u, into_from[u]]
        origin.scatter_(2, new[:, :, None].expand(units, size, 1), torch.where(write, from_into, column)[..., None])
        row = origin.gather(1, new[:, :, None].expand(units, 1, size)).squeeze(1)
        from_out = origin.gather(1, out_from[:, None]).squeeze(1)  # origin[out_from[u], u]
        origin.scatter_(1, new[:, :, None].expand(units, 1, size), torch.where(write, from_out, row)[:, None])
        parent = torch.where(members, new, parent)
        cycle_in = torch.where(members, best_in, cycle_in)
        alive = (alive & ~members) | ((node == new) & cycling[:, None])
        nodes = nodes + cycling.long()
        best_in = _best_incoming(score, alive)
    # the arcs into the nodes left alive, then the contractions undone newest first
    heads = torch.full((units, side + 1), -1, dtype=torch.int64, device=device)  # column W+1: a sink
    entering = torch.zeros((units, size), dtype=torch.int64, device=device)  # the original dependent of its arc
    arc = origin.gather(1, best_in[:, None]).squeeze(1).long()  # [U,S] origin[best_in[v], v]
    kept = alive & (node > 0)
    heads.scatter_(1, torch.where(kept, arc % side, side), torch.where(kept, arc // side, -1))
    entering = torch.where(kept, arc % side, entering)
    ladder = _ladder(parent, steps)
    arc = origin.gather(1, cycle_in[:, None]).squeeze(1).long()  # [U,S] origin[cycle_in[v], v]
    for c in range(size - 1, 1, -1):  # a unit of n words numbers its new nodes from n + 1
        made = (c < nodes) & (c > n)  # [U] the units that made node c
        inside = _holder(ladder, entering[:, c], c)  # [U] the member of c holding its entering arc's dependent
        others = (parent == c) & (node != inside[:, None]) & made[:, None]  # [U,S]
        heads.scatter_(1, torch.where(others, arc % side, side), torch.where(others, arc // side, -1))
        entering = torch.where(others, arc % side, entering)
        entering[rows, inside] = torch.where(made, entering[:, c], entering[rows, inside])
    heads[:, 0] = -1
    return heads[:, :side]


def _best_incoming(score: torch.Tensor, alive: torch.Tensor) -> torch.Tensor:
    """[U,S] each node's best head among the nodes alive (the first best: lowest id) in score [U,S,S]."""
    return score.masked_fill(~alive[:, :, None], -torch.inf).argmax(1)


def _ladder(parent: torch.Tensor, steps: int) -> list[torch.Tensor]:
    """Binary lifting over the contractions: ladder[k] [U,S+1] each node's 2^k-th container (a node's container
    has a higher id; S, a sink of its own, above the nodes no contraction took)."""
    size = parent.shape[1]
    first = torch.cat([torch.where(parent < 0, size, parent),
                       torch.full_like(parent[:, :1], size)], 1)  # [U,S+1]
    ladder = [first]
    for _ in range(steps):
        ladder.append(ladder[-1].gather(1, ladder[-1]))
    return ladder


def _holder(ladder: list[torch.Tensor], start: torch.Tensor, contraction: int) -> torch.Tensor:
    """[U] the highest container below `contraction` of node start [U]: the member of that contraction holding
    it, where it is one (ids rise from a node to its containers)."""
    holder = start[:, None]
    for step in reversed(ladder):
        higher = step.gather(1, holder)
        holder = torch.where(higher < contraction, higher, holder)
    return holder.squeeze(1)
