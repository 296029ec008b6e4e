"""Capture "hooks": a forward hook on each self-attention module of a model loaded with eager attention reads that
layer's probabilities [B,H,T,T] (and per-head context [B,H,T,d]) as the layer runs, and hands them on.

The model runs with output_attentions=False and never holds more than the layer being computed. BERT-like eager
attention (and a decoder's) returns its probabilities anyway; DeBERTa's DisentangledSelfAttention only when its own
``output_attentions`` argument is true, which a pre-hook sets for it alone (the family's ``asks_for_attention``).
The pass ends at the last layer's hook: that layer's W_O and feed-forward block, whose output no map depends on, are
never computed (1/L of the pass's feed-forward work saved). The maps are transformers' own eager ones, bit for bit.
"""
from __future__ import annotations

import inspect

import torch

from probes.capture.backend import Captured, LastLayerRead, LayerCallback, all_seen, layer_order
from probes.capture.hookset import HookSet
from probes.base.errors import InputError


class HooksBackend:
    name = "hooks"
    implementation = "eager"
    all_layers = False

    def refusal(self, model: torch.nn.Module) -> str | None:
        return None

    def run(self, target: Captured, inputs: dict[str, torch.Tensor], on_layer: LayerCallback, *,
            vectors: bool, full: bool) -> None:
        no_vectors(target, vectors, self.name)
        seen: list[int] = []

        def read(layer: int):
            def hook(module, args, kwargs, output):
                attention = output[1] if isinstance(output, tuple) and len(output) > 1 else None
                if attention is None or attention.dim() != 4:
                    raise InputError(f"model {target.name!r}: layer {layer}'s attention module returned no maps; its "
                                     "attention cannot be captured")
                layer_order(target.name, layer, seen)
                on_layer(layer, attention, heads_of(output[0], target.heads, target.head_dim) if vectors else None)
                if layer == target.layers - 1:
                    raise LastLayerRead
            return hook

        with HookSet() as hooks:
            for layer, m in enumerate(target.attention_modules):
                hooks.forward(m, read(layer), with_kwargs=True)
                if target.asks_for_attention:
                    hooks.pre(m, ask_for_attention, with_kwargs=True)
            try:
                call(target, inputs, output_attentions=False)
            except LastLayerRead:
                pass
        all_seen(target.name, seen, target.layers)


def no_vectors(target: Captured, vectors: bool, capture: str) -> None:
    """Refuse per-head context vectors of a causal model where its attention module's output is past W_O (every
    decoder family's: they are read beside SDPA, capture "sdpa-qk")."""
    if vectors and target.causal:
        raise InputError(f"model {target.name!r} is a decoder: its per-head context vectors are read with capture "
                         f"\"sdpa-qk\", not {capture!r}")


def call(target: Captured, inputs: dict[str, torch.Tensor], *, output_attentions: bool):
    """The model's forward pass (a causal model's body alone: no unembedding) on `inputs`."""
    model = target.model.base_model if target.causal else target.model
    return model(**inputs, output_attentions=output_attentions)


def heads_of(context: torch.Tensor, heads: int, head_dim: int) -> torch.Tensor:
    """[B,T,H*d] context of a self-attention module → [B,H,T,d]."""
    b, t, _ = context.shape
    return context.view(b, t, heads, head_dim).transpose(1, 2)


def ask_for_attention(module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Forward pre-hook: this module alone returns its attention probabilities (output_attentions=True), given
    positionally by its caller or by keyword."""
    names = list(inspect.signature(module.forward).parameters)
    position = names.index("output_attentions") if "output_attentions" in names else len(args)
    if position < len(args):
        args = (*args[:position], True, *args[position + 1:])
    else:
        kwargs = {**kwargs, "output_attentions": True}
    return args, kwargs
