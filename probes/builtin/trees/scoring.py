"""What a tree is decoded from and how it is scored: the arc scores of each form of a matrix, and attachment.

Word-level attention A [..,M,M] holds the root ([CLS], column 0) and the words (1..n); the end column is
never read (never a target). An arc h → d is scored by the dependent's attention to the head, A[d, h]:
    attention   scores[h, d] = A[d, h]                    (the matrix, transposed to head × dependent)
    symmetric   scores[h, d] = (A[d, h] + A[h, d]) / 2    (its symmetrised form; the root's arcs then
                                                           also use the [CLS] row's attention to the word)
in float64 (A's values converted first); the decoders read them straight from A (decoders.py, ``_arc_score``),
and also take matrices that hold arc scores already (head × dependent: decoders.SCORES).
"""
from __future__ import annotations

import torch

FORMS = ("attention", "symmetric")


def attached(predicted: torch.Tensor, rows: torch.Tensor, dependents: torch.Tensor,
             heads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Whether each gold arc is in predicted trees, directed and undirected.

    predicted [..,B,M]: the predicted head of every node of each sentence (−1 at the root); rows, dependents,
    heads [N]: the gold arcs (sentence, dependent, head; head 0: the root). Directed: the dependent's
    predicted head is the gold head; undirected: that, or the gold head's predicted head is the dependent.
    Returns two [..,N] (only the N looked-up heads are read, no [..,N,M] copy)."""
    directed = predicted[..., rows, dependents] == heads
    reverse = predicted[..., rows, heads] == dependents
    return directed, directed | (reverse & (heads > 0))


def attachment(predicted: torch.Tensor, rows: torch.Tensor, dependents: torch.Tensor,
               heads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The gold arcs found in predicted trees, counted: predicted [D,X,B,H,F,M] the heads of every node (decoder,
    layer, sentence, head, form; X layers, one or all); rows, dependents, heads [N] the gold arcs (``attached``).
    Returns hits [D,F,2,X,H] int64, the arcs attached directed and undirected, and main [N,X,H] bool, each arc's
    directed attachment in the first decoder's trees of the first form (trees' main variant)."""
    n = len(rows)
    found = predicted[:, :, rows, :, :, dependents]  # [N,D,X,H,F]: the two indices apart, their dimension first
    directed = found == heads.view(n, 1, 1, 1, 1)
    reverse = predicted[:, :, rows, :, :, heads] == dependents.view(n, 1, 1, 1, 1)
    undirected = directed | (reverse & (heads > 0).view(n, 1, 1, 1, 1))
    hits = torch.stack([directed.sum(0), undirected.sum(0)])  # [2,D,X,H,F]
    return hits.permute(1, 4, 0, 2, 3), directed[:, 0, :, :, 0]
