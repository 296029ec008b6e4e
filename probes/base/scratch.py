"""Buffers shared by the temporaries of one layer's work (the word pooling's key-side sums, entropy's a·ln a, the
views' quantisation), each a part of a layer-sized tensor (hundreds of MB for long inputs).

A fresh allocation that large is a fresh mapping whose pages the system faults in and zeroes every time.
``scratch_from`` keeps one buffer per (name, dtype, device) in a dict whose owner sets its lifetime: a layer
(``probes.capture.maps.LayerMaps.scratch``), so that none is held while the model computes the next layer. What a caller
writes holds only until the next call with that name, so no caller may keep it.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

# scratch(name, shape, dtype, device) -> an uninitialised tensor of that shape, from scratch_from
Scratch = Callable[[str, tuple, torch.dtype, torch.device], torch.Tensor]


def scratch_from(buffers: dict, name: str, shape: tuple[int, ...], dtype: torch.dtype,
                 device: torch.device) -> torch.Tensor:
    """An uninitialised view of shape `shape` on the buffer kept in `buffers` under (name, dtype, device), made
    (or replaced by a larger one) when it is missing or too small."""
    key = (name, dtype, torch.device(device))
    size = math.prod(shape)
    if key not in buffers or buffers[key].numel() < size:
        buffers.pop(key, None)  # freed before the larger one is made
        buffers[key] = torch.empty(size, dtype=dtype, device=device)
    return buffers[key][:size].view(shape)
