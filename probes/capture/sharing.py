"""Shared prefix: masks whose first disabled head is in layer l leave layers 0..l-1 as they were, so a pass
of G such masks runs those layers once, on the B sentences, and repeats the batch G times (rows
mask-major, as the head mask is laid out) only where the masks begin to differ.

Forward pre-hooks on the encoder's transformer blocks (``encoder.layer[i]`` in BERT, RoBERTa,
ELECTRA, DeBERTa v1 and v2; found where the family table says, probes.capture.families.Family.block) repeat
the block's input hidden states [B,T,D] -> [G·B,T,D] at block `start`, and the attention mask the
encoder hands every block from there on ([B,...] -> [G·B,...]; a mask of batch 1 broadcasts and
is left as it is). The single-head sweep of an L-layer model then costs about
1 + Σ_l (l/L + H·(L-l)/L) plain evaluations instead of L·H + 1 (45.5 instead of 73 for 6 × 12).
"""
from __future__ import annotations

from functools import partial

import torch

from probes.capture.families import model_family
from probes.capture.hookset import HookSet, Hooked



class SharedPrefix(Hooked):
    """Context manager: with ``set(copies, start)``, the next forward pass repeats its batch `copies` times at
    block `start` (copies = 1: nothing happens). ``usable`` is False where the blocks cannot be found."""

    def __init__(self, model: torch.nn.Module, attention_modules: list[torch.nn.Module]):
        self.blocks = _blocks(model, attention_modules)
        self.copies, self.start = 1, 0

    @property
    def usable(self) -> bool:
        return self.blocks is not None

    def add_hooks(self, hooks: HookSet) -> None:
        for layer, block in enumerate(self.blocks or []):
            hooks.pre(block, partial(self._expand, layer), with_kwargs=True)

    def clear(self) -> None:
        self.copies, self.start = 1, 0

    def set(self, copies: int, start: int) -> None:
        self.copies, self.start = copies, start

    def _expand(self, layer: int, module, args, kwargs):
        if self.copies == 1 or layer < self.start:
            return None
        hidden, rest = args[0], list(args[1:])
        batch = hidden.shape[0] if layer == self.start else hidden.shape[0] // self.copies
        if layer == self.start:
            hidden = hidden.repeat(self.copies, *[1] * (hidden.dim() - 1))  # [G·B,T,D], mask-major
        if rest and torch.is_tensor(rest[0]):
            rest[0] = _repeat_batch(rest[0], batch, self.copies)
        elif torch.is_tensor(kwargs.get("attention_mask")):
            kwargs = {**kwargs, "attention_mask": _repeat_batch(kwargs["attention_mask"], batch, self.copies)}
        return (hidden, *rest), kwargs


def by_first_layer(masks: torch.Tensor) -> list[tuple[int, list[int]]]:
    """(first layer with a disabled head, mask indices) per group, lowest first; the empty mask counts as layer L."""
    layers = masks.shape[1]
    touched = masks.any(dim=2)  # [M,L]
    first = torch.where(touched.any(dim=1), touched.float().argmax(dim=1), torch.tensor(layers)).tolist()
    groups: dict[int, list[int]] = {}
    for i, layer in enumerate(first):
        groups.setdefault(layer, []).append(i)
    return sorted(groups.items())


def mask_passes(groups: list[tuple[int, list[int]]], tokens: int, masks_per_pass: int,
                tokens_per_pass: int) -> list[tuple[int, list[int]]]:
    """(start layer, mask indices) of each pass over a batch of `tokens` padded tokens: the groups of
    ``by_first_layer`` cut into parts of G = masks_per_pass masks, lowered so that G·tokens ≤ tokens_per_pass
    (at least 1)."""
    size = max(1, min(masks_per_pass, tokens_per_pass // tokens))
    return [(start, ids[part:part + size]) for start, ids in groups for part in range(0, len(ids), size)]


def _repeat_batch(mask: torch.Tensor, batch: int, copies: int) -> torch.Tensor:
    """An attention mask of `batch` rows repeated `copies` times (mask-major); one of batch 1 broadcasts as it is."""
    if mask.shape[0] != batch or batch == 1:
        return mask
    return mask.repeat(copies, *[1] * (mask.dim() - 1))


def _blocks(model: torch.nn.Module, attention_modules: list[torch.nn.Module]) -> list[torch.nn.Module] | None:
    """The transformer block holding each self-attention module (its family's ``block``: by default the nearest
    numbered ancestor), or None (a model of no family, a module its family's entry does not place)."""
    family = model_family(model)
    if family is None:
        return None
    names = {id(m): name for name, m in model.named_modules()}
    blocks = []
    for module in attention_modules:
        path = family.block_path(names.get(id(module), ""))
        if path is None:
            return None
        blocks.append(model.get_submodule(path))
    return blocks if len({id(b) for b in blocks}) == len(blocks) else None
