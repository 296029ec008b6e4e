"""The decoder-only families probes reads, one adapter each: where a layer's attention is, its window, its OV weights.

Shapes: H query heads, K key/value heads (H = K·g, grouped-query attention; K = H without it), d head size,
D model width, V vocabulary.

Every family here calls transformers' attention function (``ALL_ATTENTION_FUNCTIONS``) with the layer's
queries [B,H,T,d] and keys [B,K,T,d] after its own position encoding (rotary for GPT-NeoX, Llama, Qwen2,
Mistral, applied to the first ``rotary_pct`` of each head's dimensions for GPT-NeoX; learned absolute
positions added to the input for GPT-2), so the capture (probes.causal.capture) reads them there whatever the
family. What differs, and is said here per family:

    blocks   the base model's per-layer attention modules, layers 0..L-1 in order
    window   the layer's sliding window (a query i sees keys j with i - j < window), or None: causal only.
             Mistral: config.sliding_window on every layer; Qwen2: the module's own (only the layers that
             config.layer_types marks "sliding_attention", with use_sliding_window); GPT-2, GPT-NeoX, Llama: none
    ov       the layer's value and output weights per query head, W_V [H,d,D] and W_O [H,D,d] (grouped-query
             families: the K value heads repeated g times, head h reading value head h // g, as repeat_kv does)

Beginning of sequence: Llama and Mistral tokenizers add <s>, Qwen2's, GPT-2's and GPT-NeoX's add nothing; the
encoding (probes.encoding) makes a start token, where there is one, word column 0, and the sink detector
reports the first position and the BOS token apart.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

# (W_V [H,d,D], W_O [H,D,d]) of one attention module, given H and K
OVWeights = Callable[[torch.nn.Module, int, int], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class CausalFamily:
    """How probes reads one decoder-only family (see the module docstring)."""

    model_type: str  # transformers' config.model_type
    blocks: Callable[[torch.nn.Module], list[torch.nn.Module]]  # base model → L attention modules
    window: Callable[[torch.nn.Module, object], int | None]  # (attention module, config) → sliding window or None
    ov: OVWeights


def _gpt2_ov(attention: torch.nn.Module, heads: int, kv_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-2's Conv1D weights act as x @ W: c_attn [D, 3D] (q, k, v side by side), c_proj [H·d, D]."""
    width = attention.c_attn.weight.shape[0]
    value = attention.c_attn.weight[:, 2 * width:].reshape(width, heads, -1).permute(1, 2, 0)  # [H,d,D]
    output = attention.c_proj.weight.reshape(heads, -1, width).transpose(1, 2)  # [H,D,d]
    return value, output


def _neox_ov(attention: torch.nn.Module, heads: int, kv_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-NeoX's fused query_key_value [3D, D] has its outputs grouped per head: [H, (q, k, v), d]."""
    weight = attention.query_key_value.weight  # [3D, D]
    value = weight.view(heads, 3, -1, weight.shape[1])[:, 2]  # [H,d,D]
    output = attention.dense.weight.view(weight.shape[1], heads, -1).transpose(0, 1)  # [H,D,d]
    return value, output


def _separate_ov(attention: torch.nn.Module, heads: int, kv_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama, Qwen2, Mistral: v_proj [K·d, D], o_proj [D, H·d]."""
    width = attention.o_proj.weight.shape[0]
    value = attention.v_proj.weight.view(kv_heads, -1, width).repeat_interleave(heads // kv_heads, 0)  # [H,d,D]
    output = attention.o_proj.weight.view(width, heads, -1).transpose(0, 1)  # [H,D,d]
    return value, output


def _no_window(attention: torch.nn.Module, config) -> None:
    return None


def _layers_self_attn(base: torch.nn.Module) -> list[torch.nn.Module]:
    return [layer.self_attn for layer in base.layers]


FAMILIES: dict[str, CausalFamily] = {f.model_type: f for f in (
    CausalFamily("gpt2", lambda base: [block.attn for block in base.h], _no_window, _gpt2_ov),
    CausalFamily("gpt_neox", lambda base: [layer.attention for layer in base.layers], _no_window, _neox_ov),
    CausalFamily("llama", _layers_self_attn, _no_window, _separate_ov),
    CausalFamily("qwen2", _layers_self_attn, lambda attention, config: attention.sliding_window, _separate_ov),
    CausalFamily("mistral", _layers_self_attn, lambda attention, config: getattr(config, "sliding_window", None),
                 _separate_ov),
)}


def causal_family(config) -> CausalFamily | None:
    """The family adapter of a decoder-only model's config, or None (an encoder, or a family not in the table)."""
    return FAMILIES.get(getattr(config, "model_type", None))


def kv_heads(config) -> int:
    """K, the key/value heads of a layer (H where the family has no grouped-query attention)."""
    return getattr(config, "num_key_value_heads", None) or config.num_attention_heads


def copying_scores(family: CausalFamily, blocks: list[torch.nn.Module], embedding: torch.Tensor,
                   unembedding: torch.Tensor, heads: int, kv: int) -> torch.Tensor:
    """[L,H] the OV copying score of every head (Olsson et al. 2022): of the circuit W_U·W_O·W_V·W_E [V,V], the
    real part of its eigenvalues' sum over the sum of their moduli, in -1..1 (1: every eigenvalue positive, a
    head that raises the logit of the token it attends to). The nonzero eigenvalues of that product are those of
    W_V·(W_E·W_U)·W_O [d,d] (a cyclic permutation), computed instead. embedding [V,D] (rows: W_Eᵀ), unembedding
    [V,D] (rows: W_U), both restricted by the caller to the tokens scored. Layer norms are left out (as in
    Olsson et al.'s analysis of the OV circuit)."""
    through = embedding.double().T @ unembedding.double()  # [D,D] W_E·W_U
    weights = [family.ov(attention, heads, kv) for attention in blocks]  # reading the L modules' weights
    value = torch.stack([v for v, _ in weights]).double()  # [L,H,d,D]
    output = torch.stack([o for _, o in weights]).double()  # [L,H,D,d]
    eigen = torch.linalg.eigvals(value @ through @ output)  # [L,H,d] complex, of the [L,H,d,d] circuits
    return eigen.sum(-1).real / eigen.abs().sum(-1).clamp(min=1e-30)  # [L,H]
