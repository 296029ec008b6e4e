"""Capture "outputs": the model returns all L maps at once (transformers' output_attentions=True on eager attention),
handed on after the pass: the reference every other backend is checked against, and the fallback for a model of no
family (probes.capture.families), whose modules may not return their maps. Memory grows with L (every layer's maps held at
once). Per-head context vectors come from a forward hook on each self-attention module (its first output, before
W_O)."""
from __future__ import annotations

import torch

from probes.capture.backend import Captured, LayerCallback
from probes.capture.hookset import HookSet
from probes.capture.layer_hooks import call, heads_of, no_vectors
from probes.base.errors import InputError


class OutputsBackend:
    name = "outputs"
    implementation = "eager"
    all_layers = True

    def refusal(self, model: torch.nn.Module) -> str | None:
        return None

    def run(self, target: Captured, inputs: dict[str, torch.Tensor], on_layer: LayerCallback, *,
            vectors: bool, full: bool) -> None:
        no_vectors(target, vectors, self.name)
        stash: list[torch.Tensor] = []

        def keep(_module, _inputs, output):
            stash.append(output[0])  # [B,T,H*d], before the output projection

        with HookSet() as hooks:
            for m in target.attention_modules if vectors else ():
                hooks.forward(m, keep)
            attentions = tuple(call(target, inputs, output_attentions=True).attentions or ())
        if len(attentions) != target.layers or any(a is None or a.dim() != 4 for a in attentions):
            raise InputError(f"model {target.name!r} returned attention for {len(attentions)} of {target.layers} "
                             "layers; its attention cannot be captured")
        if vectors and len(stash) != target.layers:
            raise InputError(f"model {target.name!r}: captured context vectors for {len(stash)} of {target.layers} "
                             "layers")
        for layer, attention in enumerate(attentions):
            on_layer(layer, attention, heads_of(stash[layer], target.heads, target.head_dim) if vectors else None)
