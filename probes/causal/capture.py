"""A causal model's attention maps, computed from each layer's own queries and keys while the model runs SDPA.

Shapes: B batch, T positions, H query heads, K key/value heads (H = K·g), d head size.

transformers' SDPA returns no probabilities, and eager attention would hold [B,H,T,T] scores several times per
layer. Within ``causal_capture`` the "sdpa" attention function is wrapped: it runs unchanged (the model's
outputs are those of SDPA, bit for bit), and for each attention module of the model it also computes the
layer's probabilities from the queries and keys it was given (after the family's rotary embedding, since the
family applies it before calling the function), softmax(q·kᵀ·scaling + mask), with the mask made here from the
batch's padding, the causal order and the layer's sliding window (probes.families), key heads repeated
for grouped-query attention as repeat_kv does. The maps are handed on, layer by layer, to the same
``on_layer(layer, attention [B,H,T,T], context [B,H,T,d] or None)`` callback as an encoder's capture
(probes.model.LayerCallback); the per-head context is probabilities · values, before W_O.

With `stop` the pass ends once the last layer's maps are handed on (``LastLayerRead``): nothing after it is
computed.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from probes.errors import InputError

# on_layer(layer, attention [B,H,T,T], context [B,H,T,d] or None), as probes.model.LayerCallback
OnLayer = Callable[[int, torch.Tensor, "torch.Tensor | None"], None]


class LastLayerRead(Exception):
    """Raised once the last layer's maps are handed on, to end the pass there (``causal_capture(stop=True)``)."""


def allowed_keys(attention_mask: torch.Tensor, window: int | None) -> torch.Tensor:
    """[B,1,T,T] bool: whether query i may attend to key j: i and j real positions of the row (attention_mask [B,T],
    1 real, 0 padding), j ≤ i, and i - j < window where the layer has a sliding window. A padding row allows
    nothing (its probabilities are 0, ``causal_probabilities``)."""
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)  # [T]
    offset = positions[:, None] - positions[None, :]  # [T,T] i - j
    allowed = offset >= 0
    if window is not None:
        allowed &= offset < window
    real = attention_mask.bool()
    return allowed[None, None] & real[:, None, None, :] & real[:, None, :, None]


def causal_probabilities(query: torch.Tensor, key: torch.Tensor, allowed: torch.Tensor, scaling: float,
                         bias: torch.Tensor | None = None) -> torch.Tensor:
    """[B,H,T,T] float32 softmax(q·kᵀ·scaling) over the allowed keys. query [B,H,T,d], key [B,K,T,d] (query head h
    reads key head h // g), allowed [B,1,T,T] bool. A row with no allowed key (padding) is 0 everywhere.
    bias: for a batch without padding, ``additive_mask(allowed)`` [T,T] (0 allowed, -inf not), the same for every
    row: it is added by the product itself (one pass over the maps fewer, and no empty row to clear)."""
    b, h, t, d = query.shape
    k = key.shape[1]
    queries = query.float().reshape(b * h, t, d)  # [B·H,T,d]
    keys = key.float()[:, :, None].expand(b, k, h // k, t, d).reshape(b * h, t, d).transpose(1, 2)  # [B·H,d,T]
    if bias is not None:
        scores = torch.baddbmm(bias, queries, keys, alpha=scaling).view(b, h, t, t)  # [B,H,T,T] bias + scaling·q·kᵀ
        return torch.ops.aten._softmax.out(scores, -1, False, out=scores)  # in place: one [B,H,T,T] block
    scores = torch.bmm(queries, keys).mul_(scaling).view(b, h, t, t)  # [B,H,T,T]
    scores.masked_fill_(~allowed, float("-inf"))
    torch.ops.aten._softmax.out(scores, -1, False, out=scores)  # NaN on rows without an allowed key
    return scores.masked_fill_(~allowed.any(-1, keepdim=True), 0.0)


def additive_mask(allowed: torch.Tensor) -> torch.Tensor:
    """[T,T] float32: 0 where the first row of allowed [B,1,T,T] allows the key, -inf where not."""
    return torch.zeros(allowed.shape[-2:], device=allowed.device).masked_fill_(~allowed[0, 0], float("-inf"))


def per_head_context(probabilities: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """[B,H,T,d] probabilities [B,H,T,T] · values [B,K,T,d] (query head h reads value head h // g)."""
    b, h, t, _ = probabilities.shape
    k = value.shape[1]
    grouped = probabilities.view(b, k, h // k, t, t) @ value.float()[:, :, None]  # [B,K,g,T,d]
    return grouped.view(b, h, t, -1)


@contextmanager
def causal_capture(modules: list[torch.nn.Module], windows: list[int | None], attention_mask: torch.Tensor,
                   on_layer: OnLayer, *, vectors: bool = False, stop: bool = True, name: str = "") -> Iterator[None]:
    """Within it, the model whose attention modules are `modules` (layers 0..L-1; windows: each layer's sliding
    window or None) hands each layer's maps to `on_layer` as it runs (see the module docstring), for inputs
    whose padding is `attention_mask` [B,T]. The model must run with attn_implementation "sdpa". Raises
    InputError when a layer's maps come out of order or twice (`name`: the model's, for the message)."""
    layer_of = {id(m): layer for layer, m in enumerate(modules)}
    sdpa = ALL_ATTENTION_FUNCTIONS["sdpa"]
    masks: dict[int | None, tuple] = {}  # window -> (allowed [B,1,T,T], its additive [T,T] or None), once per pass
    padded = not bool(attention_mask.all())
    seen: list[int] = []

    def attention(module, query, key, value, mask, dropout: float = 0.0, scaling: float | None = None, **kwargs):
        out = sdpa(module, query, key, value, mask, dropout=dropout, scaling=scaling, **kwargs)
        layer = layer_of.get(id(module))
        if layer is None:
            return out
        if layer != len(seen):
            raise InputError(f"model {name!r}: layer {layer}'s attention was not captured once, in order (layers "
                             f"seen: {seen}); its attention cannot be captured")
        seen.append(layer)
        window = windows[layer]
        if window not in masks:
            allowed = allowed_keys(attention_mask.to(query.device), window)
            masks[window] = allowed, None if padded else additive_mask(allowed)
        probabilities = causal_probabilities(query, key, *masks[window][:1],
                                             query.shape[-1] ** -0.5 if scaling is None else scaling,
                                             bias=masks[window][1])
        on_layer(layer, probabilities, per_head_context(probabilities, value) if vectors else None)
        if stop and layer == len(modules) - 1:
            raise LastLayerRead
        return out

    ALL_ATTENTION_FUNCTIONS["sdpa"] = attention
    try:
        yield
    except LastLayerRead:
        pass
    finally:
        del ALL_ATTENTION_FUNCTIONS["sdpa"]  # the local override goes; the global "sdpa" is transformers' own
    if len(seen) != len(modules):
        raise InputError(f"model {name!r}: captured attention for {len(seen)} of {len(modules)} layers; its "
                         "attention cannot be captured")
