"""Capture "sdpa-qk": the model runs SDPA, and each layer's maps are computed from the queries and keys SDPA is given.

Shapes: B batch, T positions, H query heads, K key/value heads (H = K·g), d head size.

transformers' SDPA returns no probabilities, and eager attention would hold [B,H,T,T] scores several times per
layer. During the pass each attention module's call of torch's SDPA is read (``_SdpaMaps``: a torch function mode,
which is this thread's own, told by a pre-hook on the module which layer runs): SDPA runs unchanged (the model's
outputs are those of SDPA, bit for bit), and the layer's probabilities are also computed from the queries and keys
it was given (after the family's rotary embedding, since a decoder family applies it before calling attention),
in one [B,H,T,T] block:

    encoder  softmax(q·kᵀ·scaling + mask) with the mask SDPA was given (none, boolean or additive), the same steps
             as transformers' eager_attention_forward (``encoder_probabilities``; COPIED pins that function);
    decoder  softmax(q·kᵀ·scaling) over the keys allowed by a mask made here from the batch's padding, the causal
             order and the layer's sliding window (probes.capture.families), key heads repeated for grouped-query attention
             as repeat_kv does (transformers repeats them itself where the batch has padding); a padding row is 0.

The maps are handed on, layer by layer, to the ``on_layer(layer, attention [B,H,T,T], context [B,H,T,d] or None)``
callback (probes.capture.backend.LayerCallback); the per-head context is probabilities · values, before W_O. The
pass ends once the last layer's maps are handed on (``LastLayerRead``): nothing after it is computed. Maps are float32
whatever the model's dtype.

Where SDPA would run its math kernel on float32 queries (on a GPU: a decoder's float32 grouped-query attention, which
the fused kernels do not take), that kernel is called directly with the same arguments (``math_attention``; a
boolean mask made additive as SDPA makes it): it returns the model's very outputs and the softmax probabilities it
computed for them, and those are the layer's maps, not computed a second time. They equal the steps above within
float32 rounding (the kernel scales q and k by √scaling each before their product); a padding row is set to 0.

Entries instead of maps (``full=False``, for runs whose probes read a few entries of each map: the causal detectors
read A[i, i-1], column 0, and the induction and duplicate-token targets). SDPA's own call is then made through
``_FlashWithLogsumexp``: where SDPA would run its CPU flash kernel, the kernel is called directly, with the same
arguments (a boolean mask made additive as SDPA makes it), so the model's outputs are the very same, and it also
returns each row's logsumexp lse_i = log Σ_j exp(scale·q_i·k_j + mask_ij). Any entry is then
exp(scale·q_i·k_j − lse_i) (``AttentionEntries``), O(d) each: the layer's [B,H,T,T] map is never made. Where SDPA
would run another kernel (another device, a mask it cannot take) the layer's full maps are computed as above.

Nothing outside the pass changes: transformers' attention functions are left as they are, the hooks are removed when
the pass ends and fire in its thread only (probes.capture.hookset).
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Iterator

import torch
from torch.nn.attention import SDPBackend
from torch.overrides import TorchFunctionMode

from probes.capture.backend import Captured, LastLayerRead, LayerCallback, all_seen, layer_order
from probes.capture.hookset import HookSet
from probes.base.errors import InputError

# What this backend re-implements of transformers, pinned (tests/test_capture_backends.py): the qualified name of each
# function and the SHA-256 of its source. The maps copy eager_attention_forward's steps; the reading of SDPA's
# arguments relies on how sdpa_attention_forward calls it (repeat_kv, pack_gqa, the mask it passes).
COPIED = {
    "transformers.models.bert.modeling_bert.eager_attention_forward":
        "69e7d5ef5f83f9cfb0be0470262213b3c018e7e4b99beebf7b695ffdeb02a5d2",
    "transformers.integrations.sdpa_attention.sdpa_attention_forward":
        "9be3d6b1f79abc00ee3a03325c51d1d09127d3155af6cb7bbdf59a49a8aaa412",
    "transformers.integrations.sdpa_attention.repeat_kv":
        "e9b1ad4a8df3194d5b12f94567c3a2dfed2c0d9833af1b8f775e5875575ff9c4",
    "transformers.integrations.sdpa_attention.pack_gqa":
        "95273b46b16321e2a9a8316968b3ca673299dff1aa75082c9d30c5f27232e862",
}


class AttentionEntries:
    """One layer's causal attention probabilities without its [B,H,T,T] map, entry by entry (see the module
    docstring): A[b,h,i,j] = exp(scale·q_i·k_j − lse_i) where key j is allowed to query i (``allowed_keys``), else 0.

    query [B,H,T,d] and key [B,K,T,d] as SDPA was given them (query head h reads key head h // g), logsumexp
    [B,H,T] from SDPA's flash kernel, real [B,T] bool the real positions (attention_mask), window the layer's
    sliding window or None."""

    def __init__(self, query: torch.Tensor, key: torch.Tensor, logsumexp: torch.Tensor, scale: float,
                 real: torch.Tensor, window: int | None):
        b, h, t, d = query.shape
        self.shape = (b, h, t, t)  # the map's these entries are of
        self.device = query.device
        # position-major copies, [B·T, H·d] and [B·T, K·d] (O(T·H·d), no [T,T] anywhere): an entry's query and key
        # are one contiguous row each
        self._query = query.float().transpose(1, 2).reshape(b * t, h * d)
        self._key = key.float().transpose(1, 2).reshape(b * t, -1)
        self._logsumexp = logsumexp.transpose(1, 2).reshape(b * t, h)  # [B·T,H]
        self._heads = h, key.shape[1], d  # H, K, d
        self._scale, self._real, self._window = scale, real, window

    def at(self, b: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        """[N,H] float32 A[b[n], h, i[n], j[n]] for every head; b, i, j [N] int64 on the entries' device. O(N·H·d):
        a query row's logsumexp stands for the rest of its row."""
        (h, k, d), t, n = self._heads, self.shape[2], len(b)
        rows, columns = b * t + i, b * t + j  # [N] positions in the flattened batch
        queries = self._query.index_select(0, rows).view(n * k, h // k, d)  # [N·K,g,d] query head h = (h // g, h % g)
        keys = self._key.index_select(0, columns).view(n * k, d, 1)  # [N·K,d,1]
        scores = torch.bmm(queries, keys).view(n, h).mul_(self._scale)  # [N,H]
        allowed = (j <= i) & self._real[b, i] & self._real[b, j]  # [N]
        if self._window is not None:
            allowed &= i - j < self._window
        # a padding row's logsumexp may be -inf or NaN: its entries are 0 by the mask, not by the product
        return torch.where(allowed[:, None], torch.exp(scores - self._logsumexp.index_select(0, rows)), 0.0)


# whether this torch has the private entry points read here (SDPA's kernel choice and its CPU flash kernel); without
# them every layer's maps are full
FLASH_READABLE = hasattr(torch, "_fused_sdp_choice") and hasattr(torch.ops.aten,
                                                                 "_scaled_dot_product_flash_attention_for_cpu")


# whether this torch has SDPA's math kernel as an operator of its own (it returns the output and the probabilities)
MATH_READABLE = hasattr(torch, "_fused_sdp_choice") and hasattr(torch.ops.aten, "_scaled_dot_product_attention_math")


def additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """SDPA's mask as SDPA hands it to its kernels: a boolean one made additive (0 where allowed, -inf where not)."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def math_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None,
                    dropout_p: float, is_causal: bool, scale: float | None,
                    enable_gqa: bool) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(output, probabilities [B,H,T,T] float32) of SDPA's math kernel, called as SDPA would call it, where SDPA
    would pick that kernel for these float32 arguments without dropout; else None (SDPA is then called as it is)."""
    if not MATH_READABLE or query.dtype != torch.float32 or dropout_p != 0.0:
        return None
    mask = additive(attn_mask, query.dtype)
    if torch._fused_sdp_choice(query, key, value, mask, dropout_p, is_causal, scale=scale,
                               enable_gqa=enable_gqa) != SDPBackend.MATH.value:
        return None
    return torch.ops.aten._scaled_dot_product_attention_math(query, key, value, mask, dropout_p, is_causal, None,
                                                             scale=scale, enable_gqa=enable_gqa)


class _FlashWithLogsumexp(TorchFunctionMode):
    """Within it, torch.nn.functional.scaled_dot_product_attention runs SDPA's CPU flash kernel itself where SDPA
    would pick it (``torch._fused_sdp_choice``; no dropout), keeping (query, key, logsumexp [B,H,T]) in ``kept``;
    elsewhere it runs unchanged and ``kept`` stays None. SDPA makes a boolean mask additive (0 where allowed, -inf
    where not) before it chooses and calls a kernel: so does this."""

    def __init__(self):
        super().__init__()
        self.kept: tuple[torch.Tensor, torch.Tensor, torch.Tensor, float] | None = None  # query, key, lse, scale

    def entries(self, shape: torch.Size, attention_mask: torch.Tensor, window: int | None) -> AttentionEntries | None:
        """The layer's AttentionEntries, for the layer's queries of `shape` [B,H,T,d], padding `attention_mask`
        [B,T] and `window`; None where the flash kernel did not run, or ran on other shapes than the layer's
        (transformers packs one query's grouped heads into its positions)."""
        if self.kept is None:
            return None
        query, key, logsumexp, scale = self.kept
        if query.shape != shape or key.shape[2] != shape[2]:
            return None
        return AttentionEntries(query, key, logsumexp, scale, attention_mask.to(query.device).bool(), window)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not torch.nn.functional.scaled_dot_product_attention:
            return func(*args, **kwargs)
        return self._attention(*args, **kwargs)

    def _attention(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0, is_causal: bool = False,
                   scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor:
        mask = additive(attn_mask, query.dtype)
        flash = query.device.type == "cpu" and dropout_p == 0.0 and FLASH_READABLE and torch._fused_sdp_choice(
            query, key, value, mask, dropout_p, is_causal, scale=scale,
            enable_gqa=enable_gqa) == SDPBackend.FLASH_ATTENTION.value
        if not flash:
            return torch.nn.functional.scaled_dot_product_attention(
                query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                enable_gqa=enable_gqa)
        out, logsumexp = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, dropout_p, is_causal, attn_mask=mask, scale=scale)
        self.kept = query, key, logsumexp, query.shape[-1] ** -0.5 if scale is None else scale
        return out


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


def encoder_probabilities(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None,
                          scaling: float) -> torch.Tensor:
    """[B,H,T,T] float32 softmax(q·kᵀ·scaling + mask), eager_attention_forward's steps in one block. query and key
    [B,H,T,d]; mask as SDPA takes it (broadcastable to [B,H,T,T]: boolean, True where allowed, or added), or None."""
    scores = torch.matmul(query.float(), key.float().transpose(2, 3)).mul_(scaling)  # [B,H,T,T]
    if mask is not None and mask.dtype == torch.bool:
        scores.masked_fill_(~mask, float("-inf"))  # exp() of it is 0, as of eager's added minimum
    elif mask is not None:
        scores.add_(mask)
    return torch.ops.aten._softmax.out(scores, -1, False, out=scores)  # nn.functional.softmax's kernel, in place


class _SdpaMaps(TorchFunctionMode):
    """Within it (this thread only: torch function modes are per thread), the SDPA call of the layer whose attention
    module is running (``layer``, set by a pre-hook on the module) runs unchanged, and the layer's maps are computed
    from the queries and keys it was given and handed to `on_layer`. SDPA calls outside the model's attention modules,
    and every other function, run untouched."""

    def __init__(self, target: Captured, attention_mask: torch.Tensor, on_layer: LayerCallback, *, vectors: bool,
                 full: bool, stop: bool):
        super().__init__()
        self.target, self.attention_mask, self.on_layer = target, attention_mask, on_layer
        self.vectors, self.full, self.stop = vectors, full, stop
        self.layer: int | None = None  # the layer whose attention module is running, until its SDPA call
        self.seen: list[int] = []
        self.masks: dict[int | None, tuple] = {}  # window -> (allowed [B,1,T,T], its additive [T,T] or None), once
        self.padded = not bool(attention_mask.all())

    def enter(self, layer: int) -> None:
        layer_order(self.target.name, layer, self.seen)
        self.layer = layer

    def leave(self, layer: int) -> None:
        if self.layer is not None:
            raise InputError(f"model {self.target.name!r}: layer {layer}'s attention module ran without SDPA (its "
                             "attention implementation is not \"sdpa\"); its attention cannot be captured")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not torch.nn.functional.scaled_dot_product_attention or self.layer is None:
            return func(*args, **kwargs)
        layer, self.layer = self.layer, None
        return self._attention(layer, *args, **kwargs)

    def _attention(self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0, is_causal: bool = False,
                   scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor:
        causal = self.target.causal
        flash = None if self.full or self.vectors or not causal else _FlashWithLogsumexp()
        kept = math_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
        if kept is not None:
            out, kept = kept  # [B,H,T,d], [B,H,T,T] the math kernel's probabilities
        else:
            with flash or nullcontext():
                out = torch.nn.functional.scaled_dot_product_attention(
                    query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                    enable_gqa=enable_gqa)
        b, t = self.attention_mask.shape
        if query.shape[2] != t:  # one position: transformers packed the grouped heads into it ([B,K,g,d])
            query = query.reshape(b, -1, t, query.shape[-1])  # [B,H,T,d]
        scaling = query.shape[-1] ** -0.5 if scale is None else scale
        window = self.target.windows[layer] if causal else None
        entries = None if flash is None else flash.entries(query.shape, self.attention_mask, window)
        if entries is not None:
            self.on_layer(layer, entries, None)
        else:
            if causal and window not in self.masks:
                allowed = allowed_keys(self.attention_mask.to(query.device), window)
                self.masks[window] = allowed, None if self.padded else additive_mask(allowed)
            if kept is not None and kept.shape == (b, query.shape[1], t, t):
                # the model's own mask made every other entry 0; a causal padding row is 0 here as below
                probabilities = kept.masked_fill_(~self.masks[window][0], 0.0) if causal and self.padded else kept
            elif not causal:
                probabilities = encoder_probabilities(query, key, attn_mask, scaling)
            else:
                probabilities = causal_probabilities(query, key, self.masks[window][0], scaling,
                                                     bias=self.masks[window][1])
            self.on_layer(layer, probabilities, per_head_context(probabilities, value) if self.vectors else None)
        if self.stop and layer == self.target.layers - 1:
            raise LastLayerRead
        return out


class SdpaQkBackend:
    name = "sdpa-qk"
    implementation = "sdpa"
    all_layers = False

    def refusal(self, model: torch.nn.Module) -> str | None:
        if not getattr(model, "_supports_sdpa", False) or model.config._attn_implementation != "sdpa":
            return (f"{type(model).__name__} does not run its attention through SDPA (capture \"sdpa-qk\" reads the "
                    "maps beside it); use capture \"hooks\" or \"outputs\"")
        return None

    def run(self, target: Captured, inputs: dict[str, torch.Tensor], on_layer: LayerCallback, *,
            vectors: bool, full: bool) -> None:
        model = target.model.base_model if target.causal else target.model
        with capturing(target, inputs["attention_mask"], on_layer, vectors=vectors, full=full):
            model(**inputs)


@contextmanager
def capturing(target: Captured, attention_mask: torch.Tensor, on_layer: LayerCallback, *, vectors: bool = False,
              full: bool = True, stop: bool = True) -> Iterator[None]:
    """Within it, `target`'s model (run with SDPA, on inputs whose padding is `attention_mask` [B,T]) hands each layer's
    maps to `on_layer` as it runs (see the module docstring). stop: the pass ends once the last layer's are handed on
    (else it runs to its end, its outputs those of SDPA). Raises InputError where a layer's maps come out of order,
    twice, or not at all."""
    maps = _SdpaMaps(target, attention_mask, on_layer, vectors=vectors, full=full, stop=stop)
    with HookSet() as hooks:
        for layer, module in enumerate(target.attention_modules):
            hooks.pre(module, lambda _m, _args, layer=layer: maps.enter(layer))
            hooks.forward(module, lambda _m, _args, _out, layer=layer: maps.leave(layer))
        try:
            with maps:
                yield
        except LastLayerRead:
            pass
    all_seen(target.name, maps.seen, target.layers)
