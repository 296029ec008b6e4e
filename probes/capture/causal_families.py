"""What decoder-only models' weights say through their family's entry (probes.capture.families.Family: ``causal``,
``ov``): the key/value heads of a layer and the OV copying score of every head.

Shapes: H query heads, K key/value heads (H = K·g, grouped-query attention; K = H without it), d head size,
D model width, V vocabulary.
"""
from __future__ import annotations

import torch

from probes.base.errors import InputError
from probes.capture.families import Family


def kv_heads(config) -> int:
    """K, the key/value heads of a layer (H where the family has no grouped-query attention)."""
    return getattr(config, "num_key_value_heads", None) or config.num_attention_heads


def copying_scores(family: Family, blocks: list[torch.nn.Module], embedding: torch.Tensor,
                   unembedding: torch.Tensor, heads: int, kv: int, excluded: torch.Tensor | None = None,
                   norms: tuple[list[torch.nn.Module], torch.nn.Module] | None = None) -> torch.Tensor:
    """[L,H] the OV copying score of every head (Olsson et al. 2022): of the circuit W_U·W_O·W_V·W_E [V,V], the
    real part of its eigenvalues' sum over the sum of their moduli, in -1..1 (1: every eigenvalue positive, a
    head that raises the logit of the token it attends to). The nonzero eigenvalues of that product are those of
    W_V·(W_E·W_U)·W_O [d,d] (a cyclic permutation), computed instead. embedding [V,D] (rows: W_Eᵀ), unembedding
    [V,D] (rows: W_U); excluded [K]: the rows of the tokens left out (the special tokens), whose products are
    taken off the whole vocabulary's W_E·W_U rather than copying the other rows; blocks: the L attention modules,
    whose W_V and W_O the family's ``ov`` reads (InputError where its entry gives none). norms: None, the layer
    norms left out (as in Olsson et al.'s analysis of the OV circuit); or (the L norms the attention modules' inputs
    go through, the final norm), folded in as TransformerLens' fold_ln does (``fold_norms``): each layer's input norm
    into its W_V, the final norm into W_U (the circuit W_U·N_f·W_O·W_V·N_l·W_E, N a norm's linear part).
    W_E·W_U [D,D] is summed over the vocabulary in the weights' float32, as the model's own logits are (faster than
    float64; the scores move by ~3e-8), the [d,d] circuits and their eigenvalues in float64."""
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
    if norms is not None:
        inputs, final = norms
        scale, centres = norm_parts(inputs, value.shape[-1])  # [L,D], [L]
        value = fold_norms(value, scale[:, None, None], centres[:, None, None, None])  # [L,H,d,D]
        scale, centres = norm_parts([final], value.shape[-1])  # [1,D], [1]
        through = fold_norms(through, scale[0], centres[0])  # [D,D] W_E·N_f·W_U: N_f acts on W_U's input side
    eigen = torch.linalg.eigvals(value @ through @ output)  # [L,H,d] complex, of the [L,H,d,d] circuits
    return eigen.sum(-1).real / eigen.abs().sum(-1).clamp(min=1e-30)  # [L,H]


def norm_parts(norms: list[torch.nn.Module], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Of N norm modules: their scales [N,D] float64 (``weight``; ones where a norm has none) and whether each
    subtracts its input's mean first ([N] bool: a torch.nn.LayerNorm; an RMS norm does not)."""
    scale = torch.stack([torch.ones(width, dtype=torch.float64) if getattr(n, "weight", None) is None
                         else n.weight.detach().double().cpu() for n in norms])  # [N,D]
    centres = torch.tensor([isinstance(n, torch.nn.LayerNorm) for n in norms])  # [N]
    return scale, centres


def fold_norms(weights: torch.Tensor, scale: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """weights [...,D] that read a norm's output (on their last dimension), with the norm's linear part folded in,
    as TransformerLens' fold_ln does: each column times the norm's scale [...,D], then, where `centres` (a
    LayerNorm: it subtracts its input's mean), each row less its mean over D. Left out, as fold_ln leaves them: a
    norm's division by its input's root mean square (a positive number that depends on the input, not a weight)
    and its bias (the same whatever the token)."""
    scaled = weights * scale.to(weights)  # [...,D]
    return torch.where(centres.to(weights.device), scaled - scaled.mean(-1, keepdim=True), scaled)
