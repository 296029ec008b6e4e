"""Host copies of a batch's word attention, layer by layer: what the tree decoders (host work) read.

Each layer's word attention [B,H,C,C] (or some of its rows) is copied into host memory as the layer comes. On
CUDA the copy goes into pinned memory without waiting (``non_blocking``), so the device goes on with the next
layer; ``landed`` waits for the copies once, at the batch's last layer, and gives the host tensor [L,B,H,C,C].
The copy is float32 (float64 kept as it is): the decoders read float32 or float64 (probes.builtin.trees.decoders).
"""
from __future__ import annotations

import torch


class LayerStash:
    """One batch's word attention of every layer, on the host (``keep`` each layer, then ``landed``)."""

    def __init__(self, layers: int, device: torch.device):
        self.layers, self.device = layers, device
        self.asynchronous = device.type == "cuda"  # a pinned host copy the device makes without the host waiting
        self.held: torch.Tensor | None = None  # [L,B,H,C,C] on the host, allocated at the first layer
        self.rows: torch.Tensor | None = None  # [k] on the device: the rows kept, where not all of them

    def keep(self, layer: int, attention: torch.Tensor, rows: list[int] | None = None) -> None:
        """Copy layer `layer` of word attention [B,H,C,C] (only its rows `rows`, where given) into host memory.
        A copy, not a reference: the batch's word attention is reused by its next layer (probes.capture.maps)."""
        if rows is not None:
            if self.rows is None:
                self.rows = torch.tensor(rows, device=attention.device)
            attention = attention[self.rows]  # [k,H,C,C]
        if self.held is None:
            dtype = attention.dtype if attention.dtype == torch.float64 else torch.float32
            self.held = torch.empty((self.layers, *attention.shape), dtype=dtype, pin_memory=self.asynchronous)
        self.held[layer].copy_(attention, non_blocking=self.asynchronous)

    def landed(self, layer: int | None = None) -> torch.Tensor:
        """The host copy [L,B,H,C,C] (layer `layer`'s [B,H,C,C] where given), once the copies made so far are in:
        on CUDA, the host waits for the device's stream here."""
        if self.asynchronous:
            torch.cuda.current_stream(self.device).synchronize()
        return self.held if layer is None else self.held[layer]
