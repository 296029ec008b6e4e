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
