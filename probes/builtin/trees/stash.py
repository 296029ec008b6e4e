"""Host copies of word attention, for the tree decoders (host work).

A layer's word attention [B,H,C,C] (or some of its rows) is copied into host memory as the layer comes: a copy, not
a reference, as the batch's word attention is reused by its next layer (probes.capture.maps). On CUDA the copy goes
into pinned memory without the host waiting (``non_blocking``), an event marking its end, so the device goes on
with the next layer; ``landed`` waits for it where it is read: in the thread that decodes the layer, never in the one
that runs the model. Floats are copied as float32 (float64 kept as it is): the decoders read float32 or float64
(probes.builtin.trees.decoders); integers (heads decoded on the device) as they are.
"""
from __future__ import annotations

import torch


class HostCopy:
    """A copy in host memory of a tensor of the maps' device, made as the layer comes; ``landed`` gives it."""

    def __init__(self, tensor: torch.Tensor):
        asynchronous = tensor.is_cuda  # a pinned host copy the device makes without the host waiting
        dtype = tensor.dtype if tensor.dtype == torch.float64 or not tensor.is_floating_point() else torch.float32
        self.tensor = torch.empty(tensor.shape, dtype=dtype, pin_memory=asynchronous)
        self.tensor.copy_(tensor, non_blocking=asynchronous)
        self.copied: torch.cuda.Event | None = None  # on CUDA, the end of the copy
        if asynchronous:
            self.copied = torch.cuda.Event()
            self.copied.record(torch.cuda.current_stream(tensor.device))

    def landed(self) -> torch.Tensor:
        """The host copy, once it is in: on CUDA, the calling thread waits for the device here."""
        if self.copied is not None:
            self.copied.synchronize()
        return self.tensor
