"""Host copies of a batch's word attention, layer by layer: what the tree decoders (host work) read.

Each layer's word attention [B,H,C,C] (or some of its rows) is copied into host memory as the layer comes. On
CUDA the copy goes into pinned memory without the host waiting (``non_blocking``), an event marking its end, so
the device goes on with the next layer; ``landed`` waits for a layer's copy (for all of them) where it is read: in
the thread that decodes the layer, never in the one that runs the model. The copy is float32 (float64 kept as it
is): the decoders read float32 or float64 (probes.builtin.trees.decoders).
"""
from __future__ import annotations

import torch


class LayerStash:
    """One batch's word attention of every layer, on the host (``keep`` each layer, then ``landed``)."""

    def __init__(self, layers: int, device: torch.device):
        self.layers, self.device = layers, device
        self.asynchronous = device.type == "cuda"  # a pinned host copy the device makes without the host waiting
        self.held: torch.Tensor | None = None  # [L,B,H,C,C] on the host, allocated at the first layer
        self.copied: list = [None] * layers  # per layer, the CUDA event that marks the end of its copy
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
        if self.asynchronous:
            self.copied[layer] = torch.cuda.Event()
            self.copied[layer].record(torch.cuda.current_stream(self.device))

    def landed(self, layer: int | None = None) -> torch.Tensor:
        """The host copy [L,B,H,C,C] (layer `layer`'s [B,H,C,C] where given), once its copy is in (every copy
        made so far, where no layer is given): on CUDA, the calling thread waits for the device here."""
        if self.asynchronous:
            events = self.copied if layer is None else [self.copied[layer]]
            for event in events:
                if event is not None:
                    event.synchronize()
        return self.held if layer is None else self.held[layer]
