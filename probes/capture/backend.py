"""The one interface every capture backend has: one forward pass, each layer's maps handed on in layer order.

Shapes: B batch, T subword positions, L layers, H heads, d head size.

A backend is chosen by name (``RunSettings.capture``, ``load_encoder(capture=...)``; ``CAPTURES``):

    hooks    forward hooks on the self-attention modules of a model loaded with eager attention read each layer's
             probabilities as the layer runs (probes.capture.layer_hooks); one layer's maps held at a time.
    outputs  transformers' own all-layers capture: the model returns its L maps (output_attentions=True), handed on
             after the pass (probes.capture.outputs); the reference the others are checked against.
    sdpa-qk  the model runs SDPA; each layer's maps are computed from the queries and keys SDPA is given
             (probes.capture.sdpa_qk); one layer's maps held at a time. Models whose attention does not run through
             transformers' attention functions (DeBERTa v1/v2) cannot use it.

A backend holds no state of its own: what one pass needs lives in objects made for that pass, and whatever it adds to
the model (hooks) is removed when the pass ends and fires only in the pass's thread (probes.capture.hookset), so two
threads may run passes at once. Nothing process-wide is changed: not transformers' attention registry, not the
forward of any module.
"""
from __future__ import annotations

from typing import Callable, Protocol

import torch

from probes.base.choices import CAPTURES
from probes.base.errors import InputError

__all__ = ["CAPTURES", "CaptureBackend", "Captured", "LayerCallback", "LastLayerRead"]

# on_layer(layer, attention [B,H,T,T] (or a causal model's AttentionEntries, full=False), context [B,H,T,d] or None):
# called for layers 0..L-1 in order
LayerCallback = Callable[[int, "torch.Tensor", "torch.Tensor | None"], None]


class Captured(Protocol):
    """What a backend reads of a loaded model (probes.capture.model.Encoder has it all)."""

    name: str
    model: torch.nn.Module
    layers: int
    heads: int
    head_dim: int
    attention_modules: list[torch.nn.Module]  # the L self-attention modules (a decoder's attention blocks), in order
    windows: list[int | None]  # a causal model's sliding window per layer ([] for an encoder)
    causal: bool
    asks_for_attention: bool  # its attention modules return their maps only when asked (DeBERTa)


class CaptureBackend(Protocol):
    """One way of reading the maps of a forward pass."""

    name: str
    implementation: str  # the attention implementation the model is loaded with ("eager", "sdpa")
    all_layers: bool  # whether a pass holds every layer's maps at once (the token budget counts them)

    def refusal(self, model: torch.nn.Module) -> str | None:
        """Why this backend cannot read `model`'s maps (a loaded model of this implementation), or None."""

    def run(self, target: Captured, inputs: dict[str, torch.Tensor], on_layer: LayerCallback, *,
            vectors: bool, full: bool) -> None:
        """One forward pass of `target`'s model on `inputs` (input_ids, attention_mask [B,T], maybe token_type_ids;
        on the model's device), calling ``on_layer(layer, attention, context)`` for layers 0..L-1 in order; context
        [B,H,T,d] (softmax(QKᵀ/√d)·V per head, before W_O) only where `vectors`. full=False: a causal model may hand
        on AttentionEntries instead of a layer's map (sdpa-qk). Raises InputError where a layer's maps do not come
        exactly once, in order."""


class LastLayerRead(Exception):
    """Raised once the last layer's maps are handed on, to end the pass there (nothing after it feeds a map)."""


def layer_order(name: str, layer: int, seen: list[int]) -> None:
    """Record that `layer`'s maps came, refusing (InputError) any that comes out of order or twice."""
    if layer != len(seen):
        raise InputError(f"model {name!r}: layer {layer}'s attention was not captured once, in order (layers seen: "
                         f"{seen}); its attention cannot be captured")
    seen.append(layer)


def all_seen(name: str, seen: list[int], layers: int) -> None:
    """Refuse (InputError) a pass that did not hand on every layer."""
    if len(seen) != layers:
        raise InputError(f"model {name!r}: captured attention for {len(seen)} of {layers} layers; its attention "
                         "cannot be captured")
