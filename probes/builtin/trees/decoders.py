"""Dependency trees from a stack of matrices: maximum spanning arborescence (Chu–Liu–Edmonds) and the best
projective tree (Eisner), both with exactly one word attached to the root.

Input of the decoders: matrices [N,M,M] and lengths [N]: node 0 is the root, nodes 1..n_i the words of
matrix i, where lengths holds n_i (1 ≤ n_i ≤ M−1). Each matrix is read in one or more forms
(probes.builtin.trees.scoring; ``_arc_score``): word attention (the probe's forms, FORMS) or arc scores given as
they are (SCORES), scores[i, h, d] the score of the arc h → d; any float dtype, read as float64. Rows and
columns past n_i are padding: never read, so they cannot change a tree. Output: heads [D,N,F,M] (int64),
heads[., i, f, d] the head of word d (0 for the root) in matrix i read in form f, and −1 at node 0 and on
padding. A tree's score is the sum of its arcs' scores; the root column's own scores (arcs into node 0) and
the diagonal are never used.

Single root: exactly one word is attached to node 0 (UD trees have one root word). Eisner builds it into
the chart (the root takes one word r whose left and right complete spans cover the sentence); CLE
subtracts a constant from every root arc larger than the spread of all tree scores, so the best tree
with one root arc beats any tree with two or more, and among one-root trees the order is unchanged.

Symmetric form: there the arc u → v scores as v → u between words, so the best one-root arborescence is the
best root arc over the maximum spanning tree of the words, oriented away from the root word; ``cle`` finds it
so (Prim's algorithm, ``_symmetric_arborescence``, O(n²)), not by contracting cycles: the same tree, ties aside.

Ties: CLE takes each node's first best incoming arc (lowest head index); on the symmetric form, the first best
root word, then at each step of Prim's the first best word to join; Eisner the first best split
point. All depend only on the matrix itself, never on the padding or the other matrices of the stack.

Scores must be finite (attention is): CLE's bookkeeping takes −inf for "no arc yet", Prim's NaN for "joined".

Speed: ``decode`` is one compiled call over the whole stack, every form and both decoders (the arc scores
of each form are read straight from the matrices, no copy of the stack per form); the (matrix, form) units
spread over numba's threads (prange), without the GIL (nogil: a thread that decodes leaves Python to the others,
e.g. the model's pass); compiled code is cached on disk (cache=True), so a fresh process only loads it. Per unit of n words, CLE costs O(n²) plus O(n × its length) per contracted cycle (O(n²) in all
on the symmetric form); Eisner O(n³), vectorised over up to LANES units of one length that lie next to each
other (a matrix's forms, then the next matrix's: put a sentence's heads together). How the stack is cut
changes no tree.
"""
from __future__ import annotations

import threading

import numba
import numpy as np
import torch

from probes.builtin.trees.scoring import FORMS

DECODERS = ("cle", "eisner")  # the order of decode's output
LANES = 24  # most units of one length Eisner decodes side by side (vectorised over them)
SCORES = "scores"  # not a form of attention: the matrix is read as it is, rows heads and columns dependents
SYMMETRIC = FORMS.index("symmetric")  # its code (``_form_code``): its arborescence is a spanning tree's
# one compiled call at a time, whichever thread makes it (trees decodes on threads of its own): numba's workqueue
# threading layer, its fallback where neither TBB nor OpenMP is there, takes no concurrent calls
ONE_CALL = threading.Lock()


def chu_liu_edmonds(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[N,M] heads of the maximum spanning arborescence of each matrix of arc scores [N,M,M], one root arc (see
    the module docstring)."""
    return decode(scores, lengths, (SCORES,), ("cle",))[0, :, 0]


def eisner(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[N,M] heads of the best projective tree of each matrix of arc scores [N,M,M], one root arc (see the module
    docstring)."""
    return decode(scores, lengths, (SCORES,), ("eisner",))[0, :, 0]


def decode(matrices: torch.Tensor, lengths: torch.Tensor, forms: tuple[str, ...] = FORMS,
           decoders: tuple[str, ...] = DECODERS) -> torch.Tensor:
    """[len(decoders),N,len(forms),M] heads of every matrix of matrices [N,M,M] (lengths [N]) read in each of
    `forms` (FORMS or SCORES), by each of `decoders` (of DECODERS), in one compiled call."""
    cle, projective = "cle" in decoders, "eisner" in decoders
    array = matrices.detach().cpu().numpy()
    if array.dtype not in (np.float32, np.float64):
        array = array.astype(np.float64)
    sizes = np.ascontiguousarray(lengths.detach().cpu().numpy().astype(np.int64))  # [N]
    codes = np.array([_form_code(f) for f in forms], dtype=np.int64)  # [F]
    units = len(sizes) * len(forms)
    parts = min(units, 8 * numba.get_num_threads())  # a few per thread, for balance
    with ONE_CALL:
        heads = _decode_stack(np.ascontiguousarray(array), sizes, codes, cle, projective, max(parts, 1))  # [2,N·F,M]
    chosen = [DECODERS.index(d) for d in decoders]
    return torch.from_numpy(heads[chosen]).view(len(decoders), len(sizes), len(forms), array.shape[-1])


def _form_code(form: str) -> int:
    """The code ``_arc_score`` takes for a form: its index in FORMS, len(FORMS) for SCORES."""
    return len(FORMS) if form == SCORES else FORMS.index(form)


@numba.njit(cache=True, inline="always")
def _arc_score(matrix: np.ndarray, form: int, h: int, d: int) -> float:
    """The float64 score of the arc h → d of matrix [M,M] read in form `form` (``_form_code``): the formulas of
    probes.builtin.trees.scoring (kept in this file: numba's disk cache sees only the file of what it compiles)."""
    if form == 0:
        return np.float64(matrix[d, h])
    if form == 1:
        return (np.float64(matrix[d, h]) + np.float64(matrix[h, d])) / 2
    return np.float64(matrix[h, d])


@numba.njit(parallel=True, cache=True, nogil=True)
def _decode_stack(matrices: np.ndarray, lengths: np.ndarray, forms: np.ndarray, cle: bool, projective: bool,
                  parts: int) -> np.ndarray:
    """heads [D,N·F,M] of every unit (matrix i of matrices [N,M,M], form f of forms [F]: unit i·F + f): the units
    cut into parts spread over the threads, each part with its own work space, sized for its longest matrix.
    Eisner takes each run of up to LANES neighbouring units of one length together (``_eisner``)."""
    count, m, width = matrices.shape[0] * forms.shape[0], matrices.shape[1], forms.shape[0]
    heads = np.full((2, count, m), -1, dtype=np.int64)
    for part in numba.prange(parts):
        start, stop = part * count // parts, (part + 1) * count // parts
        longest = 1
        for u in range(start, stop):
            longest = max(longest, lengths[u // width])
        if cle:
            cle_space = _cle_space(longest + 1)
            for u in range(start, stop):
                if forms[u % width] == SYMMETRIC:
                    keys = cle_space[5]  # CLE's float row (``replaced``), Prim's keys here
                    _symmetric_arborescence(matrices[u // width], lengths[u // width], heads[0, u], keys)
                else:
                    _cle(matrices[u // width], forms[u % width], lengths[u // width], heads[0, u], cle_space)
        if projective:
            eisner_space = _eisner_space(longest)
            u = start
            while u < stop:
                n = lengths[u // width]
                run = u + 1
                while run < stop and run - u < LANES and lengths[run // width] == n:
                    run += 1
                arcs = eisner_space[0]
                for k in range(run - u):  # the lanes' arc scores, lane innermost
                    matrix, form = matrices[(u + k) // width], forms[(u + k) % width]
                    for h in range(n + 1):
                        for d in range(1, n + 1):
                            arcs[h, d, k] = _arc_score(matrix, form, h, d)
                _eisner(run - u, n, heads[1, u:run], eisner_space)
                u = run
    return heads


@numba.njit(cache=True)
def _eisner_space(words: int):
    """Eisner's work space for LANES matrices of up to `words` words (see ``_eisner``)."""
    return (np.empty((words + 1, words + 1, LANES)), np.empty((words, words, LANES)),
            np.empty((words, words, LANES)), np.empty((words, words, LANES), dtype=np.int64),
            np.empty((words, words, LANES), dtype=np.int64), np.empty(LANES), np.empty(LANES, dtype=np.int64),
            np.empty((4 * words, 3), dtype=np.int64))


@numba.njit(cache=True)
def _eisner(lanes: int, n: int, heads: np.ndarray, space) -> None:
    """Write into heads [K,M] the best projective trees of K = `lanes` ≤ LANES units, each over the root and the
    same n words, one root arc each, from their arc scores in the work space (space[0], arcs [h, d, k], filled
    by the caller), over h = 0..n, d = 1..n.

    The K matrices are decoded side by side: every chart cell holds K lanes, the innermost axis, so that each
    step is one vectorised loop over them. Charts over the words, word k at index k−1 (their [:n, :n, :K]
    corner): complete[a, b] the best complete span headed by a reaching to b (rightwards when a < b),
    inner[a, b] the best incomplete span with the arc a → b; split_complete and split_inner keep each span's
    first best split point (a later one replaces it only when strictly better) for the backtrace.
    """
    arcs, complete, inner, split_complete, split_inner, best, arg, stack = space
    for a in range(n):
        complete[a, a, :lanes] = 0.0
    for w in range(1, n):
        for i in range(n - w):
            j = i + w
            # inner: complete[i, r] + complete[j, r+1], r = i..j−1, plus the arc either way
            for k in range(lanes):
                best[k] = complete[i, i, k] + complete[j, i + 1, k]
                arg[k] = i
            for r in range(i + 1, j):
                _better(complete, i, r, complete, j, r + 1, r, best, arg, lanes)
            for k in range(lanes):
                inner[i, j, k] = best[k] + arcs[i + 1, j + 1, k]
                inner[j, i, k] = best[k] + arcs[j + 1, i + 1, k]
                split_inner[i, j, k] = arg[k]
                split_inner[j, i, k] = arg[k]
            # complete[j, i] (leftwards): complete[r, i] + inner[j, r], r = i..j−1
            for k in range(lanes):
                best[k] = complete[i, i, k] + inner[j, i, k]
                arg[k] = i
            for r in range(i + 1, j):
                _better(complete, r, i, inner, j, r, r, best, arg, lanes)
            for k in range(lanes):
                complete[j, i, k] = best[k]
                split_complete[j, i, k] = arg[k]
            # complete[i, j] (rightwards): inner[i, r] + complete[r, j], r = i+1..j
            for k in range(lanes):
                best[k] = inner[i, i + 1, k] + complete[i + 1, j, k]
                arg[k] = i + 1
            for r in range(i + 2, j + 1):
                _better(inner, i, r, complete, r, j, r, best, arg, lanes)
            for k in range(lanes):
                complete[i, j, k] = best[k]
                split_complete[i, j, k] = arg[k]
    for k in range(lanes):
        # the root takes one word a: complete[a, 0] + complete[a, n−1] + score(0 → a)
        root, top = 0, complete[0, 0, k] + complete[0, n - 1, k] + arcs[0, 1, k]
        for a in range(1, n):
            total = complete[a, 0, k] + complete[a, n - 1, k] + arcs[0, a + 1, k]
            if total > top:
                root, top = a, total
        heads[k, root + 1] = 0
        _backtrace(root, n, split_complete[:, :, k], split_inner[:, :, k], stack, heads[k])


@numba.njit(cache=True, inline="always")  # called for every split point: a call each would cost a third of Eisner
def _better(left: np.ndarray, a: int, b: int, right: np.ndarray, c: int, d: int, split: int, best: np.ndarray,
            arg: np.ndarray, lanes: int) -> None:
    """Lane by lane, split point `split` (total left[a, b] + right[c, d]) replaces best, arg [K] where strictly
    better."""
    for k in range(lanes):
        total = left[a, b, k] + right[c, d, k]
        better = total > best[k]
        best[k] = total if better else best[k]
        arg[k] = split if better else arg[k]


@numba.njit(cache=True)
def _backtrace(root: int, n: int, split_complete: np.ndarray, split_inner: np.ndarray, stack: np.ndarray,
               heads: np.ndarray) -> None:
    """Write the heads of the best tree's arcs, from the root word's two complete spans down (chart indices are
    words − 1, see ``_eisner``), with a stack [4n,3] of spans (kind, a, b): kind 0 complete[a, b], 1 inner[a, b].
    Pushes: the root's 2 spans, then 2 for each of the n − 1 inner and n − 1 wider complete spans."""
    stack[0, 0], stack[0, 1], stack[0, 2] = 0, root, 0
    stack[1, 0], stack[1, 1], stack[1, 2] = 0, root, n - 1
    top = 2
    while top > 0:
        top -= 1
        kind, a, b = stack[top, 0], stack[top, 1], stack[top, 2]
        if a == b:
            continue
        r = split_inner[a, b] if kind == 1 else split_complete[a, b]
        if kind == 1:  # inner[a, b]: the arc a → b, then complete[low, r] and complete[high, r+1]
            heads[b + 1] = a + 1
            stack[top, 0], stack[top, 1], stack[top, 2] = 0, min(a, b), r
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = 0, max(a, b), r + 1
        else:  # complete[a, b]: inner[a, r] and complete[r, b] (either way)
            stack[top, 0], stack[top, 1], stack[top, 2] = 1, a, r
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = 0, r, b
        top += 2


@numba.njit(cache=True)
def _cle_space(m: int):
    """Chu–Liu–Edmonds' work space for up to m nodes and their m − 1 contractions (see ``_cle``)."""
    size = 2 * m
    return (np.empty((size, size)), np.empty((size, size), dtype=np.int64), np.empty((size, size), dtype=np.int64),
            np.empty((9, size), dtype=np.int64), np.empty((2, size), dtype=np.bool_), np.empty(size))


@numba.njit(cache=True)
def _cle(matrix: np.ndarray, form: int, n: int, heads: np.ndarray, space) -> None:
    """Write into heads [M] the maximum spanning arborescence of matrix [M,M] read in form `form` (its arc scores:
    ``_arc_score``) over the root (node 0) and words 1..n with one root arc: every root arc lowered by more than
    the spread of all tree scores.

    Chu–Liu–Edmonds with explicit contraction: each cycle of best incoming arcs (the first one found from the
    lowest node up) becomes a new node (ids n+1, n+2, ...); arcs keep the original (head, dependent) they
    stand for (orig_head, orig_dep), and the contractions are undone newest first. ``alive`` lists the nodes
    not contracted yet, ascending; only their rows and columns of the work space are ever read.

    A node's best incoming arc is looked for again only when it came from a node just contracted: any other
    node's stays best, as the new node's arc into it is a contracted node's, no better, and has a higher id.
    When it did come from one, the new node carries that same score (the best of the cycle's arcs), so it
    is the new best unless another node ties with the old best: ``tied`` marks the nodes where one may.
    """
    score, orig_head, orig_dep, ints, flags, replaced = space
    alive, best_in, state, parent, cycle_in, entering, cycles, cycle_start, contractions = (
        ints[0], ints[1], ints[2], ints[3], ints[4], ints[5], ints[6], ints[7], ints[8])
    tied, on_cycle = flags[0], flags[1]
    size = n + 1  # nodes: the root and the words
    low, high = np.inf, -np.inf
    for h in range(size):
        for d in range(size):
            if d == 0 or h == d:
                score[h, d], orig_head[h, d], orig_dep[h, d] = -np.inf, -1, -1
            else:
                value = _arc_score(matrix, form, h, d)
                low, high = min(low, value), max(high, value)
                score[h, d] = value
                orig_head[h, d], orig_dep[h, d] = h, d
    penalty = (high - low) * n + 1.0  # larger than the spread of all tree scores
    for d in range(1, size):
        score[0, d] -= penalty
    for h in range(size):
        alive[h] = h
        on_cycle[h] = False
        state[h] = 0  # see _find_cycle
        parent[h] = -1  # the contracted node each node went into
    living = size
    made = 0
    cycle_start[0] = 0  # contraction j's cycle: cycles[cycle_start[j]:cycle_start[j + 1]]
    nodes = size
    for v in range(1, size):
        best_in[v] = _best_incoming(score, alive, living, v, tied)
    while True:
        cycle_node = _find_cycle(best_in, alive, living, state)
        if cycle_node < 0:
            break
        new = nodes
        nodes += 1
        # the cycle, ascending, into cycles[first:last]; the nodes left alive, then the new one
        first = cycle_start[made]
        last = first
        v = cycle_node
        while not on_cycle[v]:
            on_cycle[v] = True
            cycles[last] = v
            last += 1
            v = best_in[v]
        for c in range(first + 1, last):  # insertion sort: cycles are short (a slice's sort costs far more)
            v = cycles[c]
            p = c
            while p > first and cycles[p - 1] > v:
                cycles[p] = cycles[p - 1]
                p -= 1
            cycles[p] = v
        kept = 0
        for k in range(living):
            u = alive[k]
            if on_cycle[u]:
                on_cycle[u] = False
                parent[u] = new
                cycle_in[u] = best_in[u]
            else:
                alive[kept] = u
                kept += 1
        living = kept
        on_cycle[new] = False
        for c in range(first, last):
            v = cycles[c]
            replaced[c - first] = score[best_in[v], v]
        for k in range(living):  # each node's arcs into and out of the cycle, its members ascending
            u = alive[k]
            into, out = -np.inf, -np.inf
            into_from, out_from = -1, -1
            for c in range(first, last):
                v = cycles[c]
                gain = score[u, v] - replaced[c - first]  # arcs into the cycle: gain over the arc they replace
                if score[u, v] > -np.inf and gain > into:
                    into, into_from = gain, v
                if score[v, u] > out:  # arcs out of the cycle: the best member's
                    out, out_from = score[v, u], v
            score[u, new], score[new, u] = into, out
            if into_from >= 0:
                orig_head[u, new], orig_dep[u, new] = orig_head[u, into_from], orig_dep[u, into_from]
            if out_from >= 0:
                orig_head[new, u], orig_dep[new, u] = orig_head[out_from, u], orig_dep[out_from, u]
        alive[living] = new
        living += 1
        parent[new] = -1
        state[new] = 0
        for k in range(1, living - 1):
            v = alive[k]
            old = best_in[v]
            if parent[old] != new:
                tied[v] |= score[new, v] == score[old, v]
            elif not tied[v] and score[new, v] == score[old, v]:
                best_in[v] = new
            else:
                best_in[v] = _best_incoming(score, alive, living, v, tied)
        best_in[new] = _best_incoming(score, alive, living, new, tied)
        contractions[made] = new
        made += 1
        cycle_start[made] = last
    for k in range(1, living):
        v = alive[k]
        heads[orig_dep[best_in[v], v]] = orig_head[best_in[v], v]
        entering[v] = orig_dep[best_in[v], v]
    for j in range(made - 1, -1, -1):  # undo the contractions, newest first
        c = contractions[j]
        inside = entering[c]  # the original node the arc into c lands on, then the cycle member holding it
        while parent[inside] != c:
            inside = parent[inside]
        for k in range(cycle_start[j], cycle_start[j + 1]):
            v = cycles[k]
            if v != inside:  # every other member keeps its arc of the cycle
                u = cycle_in[v]
                heads[orig_dep[u, v]] = orig_head[u, v]
                entering[v] = orig_dep[u, v]
        entering[inside] = entering[c]


@numba.njit(cache=True)
def _symmetric_arborescence(matrix: np.ndarray, n: int, heads: np.ndarray, key: np.ndarray) -> None:
    """Write into heads [M] the maximum spanning arborescence with one root arc of matrix [M,M] read in the
    symmetric form, where the arc u → v scores as v → u between words: a tree's score is its root arc's plus
    its word arcs' taken undirected, so the best tree is the best root arc (0 → r, the first best r) over
    the maximum spanning tree of the words (Prim's, from r, each step the first best word), oriented away
    from r: what CLE finds (ties aside), in O(n²) and with nothing added but each arc's own score.
    key [≥ n+1]: work space, the best arc from the tree so far into each word not yet in it (NaN once in)."""
    root, top = 1, _arc_score(matrix, SYMMETRIC, 0, 1)
    for d in range(2, n + 1):
        value = _arc_score(matrix, SYMMETRIC, 0, d)
        if value > top:
            root, top = d, value
    for v in range(1, n + 1):
        key[v] = _arc_score(matrix, SYMMETRIC, root, v)
        heads[v] = root
    heads[root] = 0
    key[root] = np.nan
    for _ in range(n - 1):
        best = -1
        for v in range(1, n + 1):
            if key[v] == key[v] and (best < 0 or key[v] > key[best]):  # key[v] == key[v]: not in the tree yet
                best = v
        key[best] = np.nan
        for u in range(1, n + 1):
            if key[u] == key[u]:
                value = _arc_score(matrix, SYMMETRIC, best, u)
                if value > key[u]:
                    key[u], heads[u] = value, best


@numba.njit(cache=True, inline="always")
def _best_incoming(score: np.ndarray, alive: np.ndarray, living: int, v: int, tied: np.ndarray) -> int:
    """The node u ≠ v of alive[:living] of the highest score[u, v], the lowest id among ties (alive ascending);
    tied[v]: whether there are."""
    best = -1
    tied[v] = False
    for k in range(living):
        u = alive[k]
        if u != v:
            if best < 0 or score[u, v] > score[best, v]:
                best = u
                tied[v] = False
            elif score[u, v] == score[best, v]:
                tied[v] = True
    return best


@numba.njit(cache=True, inline="always")
def _find_cycle(best_in: np.ndarray, alive: np.ndarray, living: int, state: np.ndarray) -> int:
    """A node on a cycle of best incoming arcs among the nodes alive[:living] (ascending; the root first), the
    first one met walking from each node up, or −1 when there is none.

    state: 0 not known, 2 known to reach the root, kept from call to call (1: on the current walk, only
    during it). A node that reaches the root keeps its best incoming arc through every later contraction
    (only arcs that came from a contracted node are looked for again, and its chain up to the root holds
    none), so it still reaches it, and its walk need not be made again."""
    for k in range(1, living):
        start = alive[k]
        if state[start]:
            continue
        v = start
        while v != 0 and state[v] == 0:
            state[v] = 1
            v = best_in[v]
        found = v if v != 0 and state[v] == 1 else -1
        v = start
        while v != 0 and state[v] == 1:
            state[v] = 0 if found >= 0 else 2
            v = best_in[v]
        if found >= 0:
            return found
    return -1
