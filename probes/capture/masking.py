"""Disabling attention heads on transformers 5.x, where ``head_mask`` is gone (and silently ignored).

Shapes: B batch rows, T subword positions, L layers, H heads, d head size.

A head mask is a bool tensor [B,L,H]: batch row b runs with head (l, h) disabled where
``mask[b, l, h]``, so one forward pass evaluates several masks (repeat the sentences once per
mask along the batch); an [L,H] mask applies to every row of whatever batch comes. Forward
hooks on the L self-attention modules (the modules whose first output is the per-head context
[B,T,H*d], the same ones ``probes.capture.model`` reads; this reaches BERT, RoBERTa, ELECTRA, DeBERTa v1
and v2 alike, eager or SDPA, although DeBERTa does not go through ``AttentionInterface``)
rewrite that output before the output projection W_O:

    zero     a disabled head's slice of the context is 0, as the old ``head_mask`` did (Michel
             et al. 2019): the head adds nothing through W_O (W_O's bias is shared by all heads
             and stays). Its reported attention map is left as computed.
    uniform  a disabled head attends 1/n to each of the row's n real tokens (the tokenizer's
             attention mask: special tokens count, padding does not), the way Kovaleva et al.
             (2019) disabled heads; its context is then the mean of its value vectors over those
             tokens, for every query position. Its reported attention map is that uniform map.
             The real tokens come from the ``attention_mask`` the model is called with (read by a
             pre-hook on the model; none given: every position is real).

Rows and heads that are not disabled are copied bit for bit (masked_fill / where), so an empty
mask changes nothing. Uniform mode reads the value vectors with a hook on the value projection
(``value`` for BERT-likes, ``value_proj`` for DeBERTa-v2, ``in_proj`` + ``v_bias`` for DeBERTa).
Hooks are prepended, so transformers' own attention recorders and the context-vector capture of
``Encoder.forward`` see the rewritten output.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import torch

from probes.base.choices import MODES
from probes.base.errors import InputError
from probes.capture.families import Family, model_family
from probes.capture.hookset import HookSet, Hooked
from probes.capture.norms import value_reader



class HeadMasker(Hooked):
    """Context manager: while active, forward passes of `model` run with the heads of ``set()`` disabled.

        with HeadMasker(model, modules, heads, head_dim, "zero") as masker:
            masker.set(mask)   # [B,L,H] bool (one mask per batch row) or [L,H] (every row)
            model(input_ids=..., attention_mask=...)

    model: the module called (its attention_mask argument marks the real tokens);
    modules: its L self-attention modules in layer order (``probes.capture.model.self_attention_modules``).
    """

    def __init__(self, model: torch.nn.Module, modules: list[torch.nn.Module], heads: int, head_dim: int,
                 mode: str = "zero"):
        if mode not in MODES:
            raise InputError(f"unknown masking mode {mode!r}; choose one of {', '.join(MODES)}")
        self.model, self.modules, self.heads, self.head_dim, self.mode = model, list(modules), heads, head_dim, mode
        family = model_family(model)
        if family is not None and family.causal:
            raise InputError(f"head ablation rewrites each head's context before the attention output projection, "
                             f"which the {family.name} family's attention modules (decoder-only) do not return; it "
                             "reads encoders")
        self.readers = [_value_reader(m, heads, head_dim, family) for m in self.modules] if mode == "uniform" else []
        self.mask: torch.Tensor | None = None  # [B,L,H] or [L,H] bool
        self.active: list[bool] = []  # per layer: does any row disable a head there
        self.weights: torch.Tensor | None = None  # [B,T] 1/n on each row's n real tokens, 0 on padding
        self._means: dict[int, torch.Tensor] = {}  # layer -> [B,H,d] mean value vector over real tokens

    def add_hooks(self, hooks: HookSet) -> None:
        if self.mode == "uniform":
            hooks.pre(self.model, self._read_padding, with_kwargs=True)
        for layer, module in enumerate(self.modules):
            hooks.forward(module, partial(self._rewrite, layer), prepend=True)
        for layer, (projection, read) in enumerate(self.readers):
            hooks.forward(projection, partial(self._keep_mean, layer, read))

    def clear(self) -> None:
        self.mask, self.weights, self.active = None, None, []
        self._means.clear()

    def set(self, mask: torch.Tensor | None) -> None:
        """The heads to disable from now on: [B,L,H] bool per batch row, [L,H] for every row, None for none."""
        self._means.clear()
        if mask is None:
            self.mask, self.active = None, []
            return
        layers = len(self.modules)
        if mask.dim() not in (2, 3) or tuple(mask.shape[-2:]) != (layers, self.heads):
            raise ValueError(f"head mask of shape {tuple(mask.shape)} does not fit a model with "
                             f"{layers} layers × {self.heads} heads")
        self.mask = mask.bool()
        self.active = self.mask.reshape(-1, layers, self.heads).any(dim=2).any(dim=0).tolist()  # [L]

    def _read_padding(self, module, args, kwargs) -> None:
        """Before each forward pass: real-token weights [B,T] from the model's attention_mask argument."""
        ids = kwargs.get("input_ids", args[0] if args else None)
        real = kwargs.get("attention_mask", args[1] if len(args) > 1 else None)
        if real is None:
            shape = ids.shape if ids is not None else kwargs["inputs_embeds"].shape[:2]
            real = torch.ones(shape)
        real = real.float()
        self.weights = real / real.sum(dim=1, keepdim=True)

    def _weights(self, rows: int) -> torch.Tensor:
        """[rows,T] real-token weights; the model's batch repeated (mask-major) where a shared prefix widened it."""
        return self.weights if self.weights.shape[0] == rows else self.weights.repeat(rows // self.weights.shape[0], 1)

    def _keep_mean(self, layer: int, read: Callable, module, inputs, output) -> None:
        if self.mask is None or not self.active[layer]:
            return
        values = read(module, output)  # [B,T,H,d]
        weights = self._weights(values.shape[0]).to(device=values.device, dtype=values.dtype)
        self._means[layer] = torch.einsum("bt,bthd->bhd", weights, values)  # [B,H,d]

    def _rewrite(self, layer: int, module, inputs, output):
        if self.mask is None or not self.active[layer]:
            return None
        context, probs = output[0], output[1]  # [B,T,H*d], [B,H,T,T] or None
        b, t = context.shape[:2]
        if self.mask.dim() == 3 and b != self.mask.shape[0]:
            raise ValueError(f"head mask has {self.mask.shape[0]} rows but layer {layer} ran on a batch of {b}")
        disabled = self.mask[..., layer, :].to(context.device)  # [B,H] or [H]
        disabled = disabled.expand(b, -1) if disabled.dim() == 1 else disabled
        heads = context.reshape(b, t, self.heads, self.head_dim)  # [B,T,H,d]
        if self.mode == "zero":
            heads = heads.masked_fill(disabled[:, None, :, None], 0.0)
        else:
            mean = self._means.pop(layer).to(heads.dtype)  # [B,H,d]
            heads = torch.where(disabled[:, None, :, None], mean[:, None, :, :], heads)
            if probs is not None:
                uniform = self._weights(b).to(device=probs.device, dtype=probs.dtype)[:, None, None, :]  # [B,1,1,T]
                probs = torch.where(disabled[:, :, None, None], uniform, probs)
        return (heads.reshape(context.shape), probs, *output[2:])


def _value_reader(module: torch.nn.Module, heads: int, head_dim: int,
                  family: Family | None) -> tuple[torch.nn.Module, Callable]:
    """The submodule whose output holds the value vectors, and a function (module, output) → values [B,T,H,d]."""
    found = None if family is None else value_reader(module, heads, head_dim, family)
    if found is None:
        known = "its model type is in no family of the table (probes.capture.families)" if family is None else (
            f"the {family.name} family's entry names {' or '.join([*family.values, *(family.fused_values or ())[:1]])}")
        raise InputError(f"uniform masking needs the value projection, and {type(module).__name__} has none this "
                         f"tool knows ({known}); use mode zero")
    projection, read = found
    return projection, lambda _module, out: read(out)
