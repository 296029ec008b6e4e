"""Norm-based attention (Kobayashi et al. 2020, "Attention is Not Only a Weight"): what token j brings to
token i through head h is ‖α_ij · f_h(x_j)‖, with f_h(x) = (x W_V^h + b_V^h) W_O^h.

Shapes: B batch, T subword positions, H heads, d head size, D hidden size.

W_O^h [d,D] is head h's slice of the attention output projection (rows h·d..(h+1)·d of W_O, the output
dense layer's weight transposed); the output bias is shared by all heads and left out, as in the paper.
Since α_ij ≥ 0 the contribution is α_ij · ‖f_h(x_j)‖: per layer, each token's per-head value vector
v_j^h = x_j W_V^h + b_V^h [B,T,H,d], read by a forward hook on the value projection as the model computes
it, gives norms [B,H,T] = ‖v_j^h W_O^h‖, and the map is α · norms[:, :, None, :] [B,H,T,T].

Convention: every row of the map is renormalised to sum to 1 (divided by Σ_j α_ij ‖f_h(x_j)‖), so it reads
as proportions, like the attention it replaces: the share of row i's norm-weighted input that comes from
token j. Kobayashi et al. compare such proportions (e.g. the share on [CLS]/[SEP]), and the analyses (mass,
entropy, ...) need rows that are distributions. The scale of ‖f_h(x)‖ itself (how much a head adds in all)
is not kept. Padding columns stay 0 (α is 0 there).

‖v W_O^h‖ is computed as ‖v R_hᵀ‖, where W_O^hᵀ = Q_h R_h is the QR factorisation of the [D,d] slice
(Q_h's columns are orthonormal, so the norm is the same): d² instead of d·D multiplications per token and
head, and no [B,H,T,D] tensor. R is factorised in float64 once per output projection and kept in float32 (the norms
are float32 whatever the model's dtype: a half-precision model's value vectors are upcast), in the cache its
caller owns (``FactorCache``: an Encoder's, for as long as the model is loaded), while its weight stays the same
tensor, unmodified (``head_factors``).

Families: the value projection is ``value`` (BERT, RoBERTa, ELECTRA), ``value_proj`` (DeBERTa v2) or the
value third of each head's slice of the fused ``in_proj`` (per head [q | k | v]) plus ``v_bias`` (DeBERTa
v1); the output projection is ``output.dense`` of the self-attention module's parent (all five). Another
layout is refused (InputError), as is a forward pass in which a layer's values were not read exactly once.
"""
from __future__ import annotations

import weakref
from functools import partial
from typing import Callable

import torch

from probes.base.errors import InputError
from probes.capture.families import Family, model_family
from probes.capture.hookset import HookSet, Hooked

# output projection -> (its weight tensor, that tensor's version counter, R [H,d,d]) when factorised
FactorCache = "weakref.WeakKeyDictionary[torch.nn.Linear, tuple[torch.Tensor, int, torch.Tensor]]"


def factor_cache() -> FactorCache:
    """An empty cache of factorised output projections, for ``head_factors`` (its owner decides how long it lives)."""
    return weakref.WeakKeyDictionary()


def value_norms(values: torch.Tensor, factors: torch.Tensor) -> torch.Tensor:
    """‖v_j^h W_O^h‖: values [B,T,H,d] and the heads' factors R [H,d,d] (``head_factors``) → [B,H,T]."""
    return torch.linalg.vector_norm(torch.einsum("bthd,hed->bhte", values, factors), dim=-1)


def norm_attention(attention: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """α_ij ‖f_h(x_j)‖ with rows renormalised to sum to 1: attention [B,H,T,T], norms [B,H,T] → [B,H,T,T]."""
    weighted = attention * norms[:, :, None, :]  # [B,H,T,T]
    return weighted / weighted.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(weighted.dtype).tiny)


def head_factors(output: torch.nn.Linear, heads: int, head_dim: int, cache: FactorCache) -> torch.Tensor:
    """R [H,d,d] with W_O^hᵀ = Q_h R_h, from the output projection (weight [D,H·d], y = x Wᵀ + b), so that
    ‖v W_O^h‖ = ‖v R_hᵀ‖ for any v [d]. Kept in `cache` per projection until its weight is replaced or changed in
    place (the tensor's version counter), since a batched float64 QR costs more than a forward pass on CPU."""
    weight = output.weight  # [D,H*d]
    kept = cache.get(output)
    if kept is not None and kept[0] is weight and kept[1] == weight._version and kept[2].shape[:2] == (heads, head_dim):
        return kept[2]
    slices = weight.detach().double().view(weight.shape[0], heads, head_dim).permute(1, 0, 2)  # [H,D,d] = W_O^hᵀ
    factors = torch.linalg.qr(slices, mode="r").R.float()  # [H,d,d]
    cache[output] = (weight, weight._version, factors)
    return factors


class NormWeights(Hooked):
    """Context manager: while active, a forward hook on each layer's value projection keeps that layer's
    value norms [B,H,T]; ``weigh(layer, attention)`` turns the layer's attention [B,H,T,T] into the
    norm-based map and drops them, so at most the layers not yet weighed are held (one, layer by layer).

        with NormWeights(model, modules, heads, head_dim, name, factor_cache()) as norms:
            model(...)   # inside the self-attention hook of layer l: norms.weigh(l, attention)

    modules: the L self-attention modules in layer order (``probes.capture.model.self_attention_modules``); cache: where the
    output projections' factors are kept between passes (``factor_cache``).
    Refuses (InputError, one line) a model whose value or output projection is not found.
    """

    def __init__(self, model: torch.nn.Module, modules: list[torch.nn.Module], heads: int, head_dim: int, name: str,
                 cache: FactorCache):
        self.name = name
        self.parts = [_layer_parts(model, m, heads, head_dim, name, cache) for m in modules]  # per layer (projection, read, R)
        self.norms: dict[int, torch.Tensor] = {}  # layer -> [B,H,T], read but not yet weighed

    def add_hooks(self, hooks: HookSet) -> None:
        for layer, (projection, _, _) in enumerate(self.parts):
            hooks.forward(projection, partial(self._keep, layer))

    def clear(self) -> None:
        self.norms.clear()

    def _keep(self, layer: int, _module, _inputs, output: torch.Tensor) -> None:
        if layer in self.norms:
            raise InputError(f"model {self.name!r}: layer {layer}'s value projection ran twice in one forward pass; "
                             "norm-based weights cannot be computed")
        _, read, factors = self.parts[layer]
        # in float32 whatever the model's dtype: a half-precision model's value vectors are upcast first
        self.norms[layer] = value_norms(read(output).float(), factors.to(device=output.device, dtype=torch.float32))

    def weigh(self, layer: int, attention: torch.Tensor) -> torch.Tensor:
        """Layer `layer`'s norm-based map [B,H,T,T] (rows sum to 1) from its attention [B,H,T,T]."""
        norms = self.norms.pop(layer, None)  # [B,H,T]
        if norms is None or norms.shape != attention.shape[:3]:
            raise InputError(f"model {self.name!r}: layer {layer}'s value vectors were not read with its attention; "
                             "norm-based weights cannot be computed")
        return norm_attention(attention, norms.to(attention.dtype))


def _layer_parts(model: torch.nn.Module, module: torch.nn.Module, heads: int, head_dim: int, name: str,
                 cache: FactorCache) -> tuple[torch.nn.Module, Callable[[torch.Tensor], torch.Tensor], torch.Tensor]:
    """A self-attention module's value projection, the function turning its output into values [B,T,H,d],
    and the output projection's factors R [H,d,d]."""
    family = model_family(model)
    if family is None:
        raise InputError(f"model {name!r} ({type(module).__name__}): norm-based weights need each layer's value "
                         "projection and attention output projection, which a family's entry names, and its model "
                         "type is in no family of the table (probes.capture.families)")
    refuse = InputError(f"model {name!r} ({type(module).__name__}): norm-based weights need each layer's value "
                        f"projection and attention output projection; the {family.name} family's entry names "
                        f"{' or '.join([*family.values, *(family.fused_values or ())[:1]])} and {family.output}, "
                        "not found in this layer")
    parent = _parent(model, module)
    try:
        output = parent.get_submodule(family.output) if parent is not None else None
    except AttributeError:
        output = None
    if not isinstance(output, torch.nn.Linear) or output.weight.shape[1] != heads * head_dim:
        raise refuse
    found = value_reader(module, heads, head_dim, family)
    if found is None:
        raise refuse
    return (*found, head_factors(output, heads, head_dim, cache))


def value_reader(module: torch.nn.Module, heads: int, head_dim: int, family: Family
                 ) -> tuple[torch.nn.Linear, Callable[[torch.Tensor], torch.Tensor]] | None:
    """A self-attention module's value projection, and the function turning its output into the per-head
    value vectors [B,T,H,d] (x W_V^h + b_V^h), where its family's entry says (probes.capture.families.Family: ``values``,
    e.g. BERT's ``value``, DeBERTa v2's ``value_proj``; or ``fused_values``, DeBERTa v1's fused ``in_proj``, per
    head [q | k | v], plus ``v_bias``); None where the module has neither."""
    for attribute in family.values:
        projection = getattr(module, attribute, None)
        if isinstance(projection, torch.nn.Linear) and projection.out_features == heads * head_dim:
            return projection, lambda out: out.unflatten(-1, (heads, head_dim))
    fused, bias_name = family.fused_values or ("", "")
    projection, bias = getattr(module, fused, None), getattr(module, bias_name, None)
    if isinstance(projection, torch.nn.Linear) and bias is not None and projection.out_features == 3 * heads * head_dim:
        def fused(out: torch.Tensor) -> torch.Tensor:  # [B,T,3·H·d], per head [q | k | v] → [B,T,H,d]
            return out.unflatten(-1, (heads, 3 * head_dim))[..., 2 * head_dim:] + bias.view(heads, head_dim)
        return projection, fused
    return None


def _parent(model: torch.nn.Module, module: torch.nn.Module) -> torch.nn.Module | None:
    """The module holding `module` as a direct child (None for the root or a module not in `model`)."""
    path = next((n for n, m in model.named_modules() if m is module), "")
    return model.get_submodule(path.rpartition(".")[0]) if path else None
