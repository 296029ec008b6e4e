"""What decoder-only models' weights say through their family's entry (probes.families.Family: ``causal``,
``ov``): the key/value heads of a layer and the OV copying score of every head.

Shapes: H query heads, K key/value heads (H = K·g, grouped-query attention; K = H without it), d head size,
D model width, V vocabulary.
"""
from __future__ import annotations

import torch

from probes.errors import InputError
from probes.families import Family


def kv_heads(config) -> int:
    """K, the key/value heads of a layer (H where the family has no grouped-query attention)."""
    return getattr(config, "num_key_value_heads", None) or config.num_attention_heads


def copying_scores(family: Family, blocks: list[torch.nn.Module], embedding: torch.Tensor,
                   unembedding: torch.Tensor, heads: int, kv: int, excluded: torch.Tensor | None = None) -> torch.Tensor:
    """[L,H] the OV copying score of every head (Olsson et al. 2022): of the circuit W_U·W_O·W_V·W_E [V,V], the
    real part of its eigenvalues' sum over the sum of their moduli, in -1..1 (1: every eigenvalue positive, a
    head that raises the logit of the token it attends to). The nonzero eigenvalues of that product are those of
    W_V·(W_E·W_U)·W_O [d,d] (a cyclic permutation), computed instead. embedding [V,D] (rows: W_Eᵀ), unembedding
    [V,D] (rows: W_U); excluded [K]: the rows of the tokens left out (the special tokens), whose products are
    taken off the whole vocabulary's W_E·W_U rather than copying the other rows; blocks: the L attention modules,
    whose W_V and W_O the family's ``ov`` reads (InputError where its entry gives none). Layer norms are left out
    (as in Olsson et al.'s analysis of the OV circuit). W_E·W_U [D,D] is summed over the vocabulary in the
    weights' float32, as the model's own logits are (faster than float64; the scores move by ~3e-8), the [d,d] circuits and their eigenvalues in float64."""
    if family.ov is None:
        raise InputError(f"the copying score reads each head's value and output weights, which a decoder family's "
                         f"entry says where to find (ov), and the {family.name} family's entry gives none")
    through = embedding.float().T @ unembedding.float()  # [D,D] W_E·W_U over the whole vocabulary
    if excluded is not None and len(excluded):
        through -= embedding[excluded].float().T @ unembedding[excluded].float()  # the left-out tokens' part
    through = through.double()
    weights = [family.ov(attention, heads, kv) for attention in blocks]  # reading the L modules' weights
    value = torch.stack([v for v, _ in weights]).double()  # [L,H,d,D]
    output = torch.stack([o for _, o in weights]).double()  # [L,H,D,d]
    eigen = torch.linalg.eigvals(value @ through @ output)  # [L,H,d] complex, of the [L,H,d,d] circuits
    return eigen.sum(-1).real / eigen.abs().sum(-1).clamp(min=1e-30)  # [L,H]
