"""Tree decoders as batched tensor code, on the matrices' own device (``--tree-decoding device``): the maximum
spanning arborescence (Chu–Liu–Edmonds; on the symmetric form, Prim's) and Eisner's best projective tree, each
with one root arc, the same trees as probes.builtin.trees.decoders gives.

Input: matrices [N,M,M] of word attention (node 0 the root, nodes 1..n_i the words of matrix i, lengths [N]
holding n_i, 1 ≤ n_i ≤ M−1; rows and columns past n_i never read), read in a form of
probes.builtin.trees.scoring (arc scores in float64, by the same formulas as ``decoders._arc_score``).
Output: heads [N,M] (int64), the head of each word (0 for the root), −1 at node 0 and on padding.

Every unit is decoded by the same arithmetic as the compiled decoders, in the same order of operations and
in float64, and ties go the same way (each maximum's first index: torch.max), so the trees are equal, ties
included. The work is one loop over span widths (Eisner), over the words joined (Prim's) or over contractions
(Chu–Liu–Edmonds), each step one set of tensor operations over every unit at once: the host never reads the
device (the lengths are host tensors).
Units are taken in chunks of at most CHART_CELLS chart cells, so the charts' memory is bounded.
"""
from __future__ import annotations

import torch

from probes.base.devices import to_device
from probes.builtin.trees.decoders import DECODERS
from probes.builtin.trees.scoring import FORMS

CHART_CELLS = 2**25  # most cells (units × words × words) of one chunk: about 40 bytes a cell in all


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


def _chunked(decoder, scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """decoder over chunks of the units of scores [N,M,M] (lengths [N], host) of at most CHART_CELLS cells (units ×
    words²), each chunk cut to its longest unit: heads [N,M] on the scores' device."""
    count, m = scores.shape[0], scores.shape[-1]
    heads = torch.full((count, m), -1, dtype=torch.int64, device=scores.device)
    sizes = lengths.tolist()  # host tensor: no device read
    start = 0
    while start < count:
        longest, stop = sizes[start], start + 1
        while stop < count and (stop - start + 1) * max(longest, sizes[stop]) ** 2 <= CHART_CELLS:
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
    arcs = arcs.contiguous()
    complete = torch.zeros((units, words, words), dtype=torch.float64, device=device)
    inner = torch.zeros_like(complete)
    split_complete = torch.zeros((units, words, words), dtype=torch.int32, device=device)
    split_inner = torch.zeros_like(split_complete)
    spans = []  # per width: (i, j) [S] each, the spans (i, i+w)
    for w in range(1, words):
        count, i = words - w, torch.arange(words - w, device=device)  # S spans of width w, their starts
        spans.append((i, i + w))
        # inner: complete[i, r] + complete[j, r+1], r = i..j−1, plus the arc either way
        best, arg = (_bands(complete, count, w, 0, 0) + _bands(complete, count, w, w, 1)).max(-1)  # [U,S]
        _bands(inner, count, 1, 0, w)[..., 0].copy_(best + _bands(arcs, count, 1, 1, w + 1)[..., 0])
        _bands(inner, count, 1, w, 0)[..., 0].copy_(best + _bands(arcs, count, 1, w + 1, 1)[..., 0])
        _bands(split_inner, count, 1, 0, w)[..., 0].copy_(arg + i)
        _bands(split_inner, count, 1, w, 0)[..., 0].copy_(arg + i)
        # complete[j, i] (leftwards): complete[r, i] + inner[j, r], r = i..j−1
        best, arg = (_bands(complete, count, w, 0, 0, down=True) + _bands(inner, count, w, w, 0)).max(-1)
        _bands(complete, count, 1, w, 0)[..., 0].copy_(best)
        _bands(split_complete, count, 1, w, 0)[..., 0].copy_(arg + i)
        # complete[i, j] (rightwards): inner[i, r] + complete[r, j], r = i+1..j
        best, arg = (_bands(inner, count, w, 0, 1) + _bands(complete, count, w, 1, w, down=True)).max(-1)
        _bands(complete, count, 1, 0, w)[..., 0].copy_(best)
        _bands(split_complete, count, 1, 0, w)[..., 0].copy_(arg + i + 1)
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
    for i, j in reversed(spans):
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


def _bands(chart: torch.Tensor, count: int, length: int, row: int, column: int, down: bool = False) -> torch.Tensor:
    """[U,count,length] view (no copy) of the cells of chart [U,N,N] (contiguous) along `count` diagonals: element
    (i, t) is chart[:, row + i, column + i + t], or chart[:, row + i + t, column + i] where `down`."""
    units, side = chart.shape[0], chart.shape[-1]
    return chart.as_strided((units, count, length), (side * side, side + 1, side if down else 1),
                            chart.storage_offset() + row * side + column)


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
    heads.scatter_(1, root[:, None], 0)  # the root word's head: a kernel's argument (an indexed 0 is a host copy)
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
    on the host) with one root arc, in chunks of CHART_CELLS."""
    return _chunked(_cle, scores, lengths)


def _cle(arcs: torch.Tensor, n: torch.Tensor, longest: int) -> torch.Tensor:
    """[U,W+1] heads (W = `longest`) of the maximum spanning arborescences, one root arc, of arcs [U,W+1,W+1]
    (lengths n [U], device): decoders._cle, every unit's k-th contraction in round k, all units at once.

    Nodes: the root, the words, then each contraction's new node (ids n+1, n+2, ..., as the compiled decoder numbers
    them). The nodes alive sit in slots in ascending id order (the new node after the others), so the first best
    slot is the lowest id, the compiled decoder's tie rule; the arcs between them are a [U,S,S] matrix, S = W+1−k in
    round k, with `origin` the original arc each stands for (head · (W+1) + dependent). Each round, every node's best
    incoming arc, the cycle reached from the lowest node that does not reach the root (decoders._find_cycle's),
    and its contraction: arcs into the new node scored by their gain over the arc they replace (the first best
    member), arcs out of it by the best member's; then the slots are packed again, one fewer. A unit with no
    cycle left is done: its arcs are read then, and its slots emptied. A unit contracts once a round while it is
    not done, so round k holds at most W+1−k nodes of any unit. The contractions are undone newest first: the
    member of each that holds the dependent of the arc entering it (``_holder``) keeps that arc, the others their
    arc of the cycle."""
    units, words, device = arcs.shape[0], longest, arcs.device
    side, ids_space = words + 1, 2 * words  # slots at first; node ids (the root, the words, W − 1 new nodes at most)
    rows, slot = torch.arange(units, device=device), torch.arange(side, device=device)
    valid = ((slot[:, None] <= n[:, None, None]) & (slot <= n[:, None, None]) & (slot >= 1)
             & (slot[:, None] != slot))  # [U,W+1,W+1] the arcs h → d of each unit
    score = arcs.masked_fill(~valid, -torch.inf)
    low = arcs.masked_fill(~valid, torch.inf).amin((1, 2))
    high = arcs.masked_fill(~valid, -torch.inf).amax((1, 2))
    score[:, 0] -= ((high - low) * n + 1.0)[:, None]  # more than the spread of all tree scores
    origin = (slot[:, None] * side + slot).int().repeat(units, 1, 1)
    ids = torch.where(slot <= n[:, None], slot, -1)  # [U,S] the node in each slot (−1: empty)
    # per node id (column 2W: a sink): the contraction it went into, its arc of that cycle (origin)
    parent = torch.full((units, ids_space + 1), -1, dtype=torch.int64, device=device)
    cycle_arc = torch.zeros_like(parent)
    entering = torch.zeros((units, ids_space + 1), dtype=torch.int64, device=device)  # its arc's original dependent
    heads = torch.full((units, side + 1), -1, dtype=torch.int64, device=device)  # column W+1: a sink
    made = torch.zeros_like(n)  # [U] contractions so far
    for k in range(words):
        size = side - k
        slot = slot[:size]
        alive = ids >= 0  # [U,S]
        best_in = score.argmax(1)  # [U,S] the first best head of each slot (empty slots' arcs are −inf)
        up = torch.where(alive & (slot > 0), best_in, 0)  # walks up the best arcs (the root and the empty stay put)
        low_slot = torch.minimum(slot.expand_as(up), up)  # the lowest slot on each walk so far
        for _ in range(max(1, (size - 1).bit_length())):  # walks of ≥ S arcs reach every cycle
            low_slot = torch.minimum(low_slot, low_slot.gather(1, up))
            up = up.gather(1, up)
        reaching = (up != 0) & alive  # [U,S] slots whose walk ends on a cycle
        cycling = reaching.any(1)  # [U]
        arc = origin.gather(1, best_in[:, None]).squeeze(1).long()  # [U,S] origin[best_in[v], v]
        done = alive & (slot > 0) & ~cycling[:, None]  # the nodes of units with no cycle left: their arcs are read
        heads.scatter_(1, torch.where(done, arc % side, side), torch.where(done, arc // side, -1))
        entering.scatter_(1, torch.where(done, ids, ids_space), arc % side)
        if k == words - 1:
            break
        start = reaching.int().argmax(1)  # [U] the lowest slot reaching a cycle
        on_cycle = torch.zeros_like(alive).scatter_(1, up, True) & (slot > 0)
        first = low_slot.gather(1, up.gather(1, start[:, None]))  # [U,1] the cycle's lowest slot
        members = on_cycle & (low_slot == first) & cycling[:, None]  # [U,S]
        replaced = torch.where(members, score.gather(1, best_in[:, None]).squeeze(1), torch.inf)  # score[best_in[v], v]
        into, into_from = (score - replaced[:, None]).max(2)  # [U,S] each node's best arc into the cycle (its gain)
        out, out_from = score.masked_fill(~members[:, :, None], -torch.inf).max(1)  # [U,S] out of it: the best member's
        new = (n + 1 + made)[:, None]  # [U,1] the new node's id
        parent.scatter_(1, torch.where(members, ids, ids_space), new.expand_as(ids))
        cycle_arc.scatter_(1, torch.where(members, ids, ids_space), arc)
        # the new node in the cycle's lowest slot: its arcs in and out, then the slots packed (kept ones in order)
        from_into = origin.gather(2, into_from[..., None]).squeeze(2)  # origin[u, into_from[u]]
        from_out = origin.gather(1, out_from[:, None]).squeeze(1)  # origin[out_from[u], u]
        column = first[:, :, None].expand(units, size, 1)
        row = first[:, :, None].expand(units, 1, size)
        score.scatter_(2, column, into[..., None]).scatter_(1, row, out[:, None])
        origin.scatter_(2, column, from_into[..., None]).scatter_(1, row, from_out[:, None])
        kept = alive & ~members & cycling[:, None]  # [U,S]
        place = torch.where(kept, kept.cumsum(1) - 1, size - 1)  # each kept slot's new place (the last: a sink)
        source = torch.full((units, size), -1, dtype=torch.int64, device=device)
        source.scatter_(1, place, slot.expand_as(place))
        count = kept.sum(1, keepdim=True)  # [U,1] where the new node goes
        source = torch.where((slot == count) & cycling[:, None], first, source)[:, :size - 1]  # [U,S−1]
        filled = source >= 0
        pick = source.clamp(min=0)
        score = score.gather(1, pick[:, :, None].expand(units, size - 1, size)).gather(
            2, pick[:, None, :].expand(units, size - 1, size - 1))
        score = score.masked_fill(~filled[:, :, None] | ~filled[:, None, :], -torch.inf)
        score.diagonal(dim1=1, dim2=2).fill_(-torch.inf)  # the new node's arc to itself
        origin = origin.gather(1, pick[:, :, None].expand(units, size - 1, size)).gather(
            2, pick[:, None, :].expand(units, size - 1, size - 1))
        ids = torch.where(filled, torch.where(slot[:size - 1] == count, new, ids.gather(1, pick)), -1)
        made = made + cycling.long()
    parent, cycle_arc = parent[:, :ids_space], cycle_arc[:, :ids_space]
    ladder = _ladder(parent, max(1, (ids_space - 1).bit_length()))
    node = torch.arange(ids_space, device=device)
    for c in range(ids_space - 1, 1, -1):  # a unit of n words numbers its new nodes from n + 1
        undo = (c > n) & (c <= n + made)  # [U] the units that made node c
        inside = _holder(ladder, entering[:, c], c)  # [U] the member of c holding its entering arc's dependent
        others = (parent == c) & (node != inside[:, None]) & undo[:, None]  # [U,ids]
        heads.scatter_(1, torch.where(others, cycle_arc % side, side), torch.where(others, cycle_arc // side, -1))
        entering[:, :ids_space] = torch.where(others, cycle_arc % side, entering[:, :ids_space])
        entering[rows, inside] = torch.where(undo, entering[:, c], entering[rows, inside])
    heads[:, 0] = -1
    return heads[:, :side]


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
