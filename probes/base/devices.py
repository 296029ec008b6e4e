"""Tensors between the host and the run's device without making the host wait for it (issue 44).

A plain ``tensor.to("cuda")`` from ordinary (pageable) memory waits until the device has run everything queued
before it: copied once per layer, it would stall the host as a read does. ``to_device`` pins the tensor first and
copies without waiting; torch keeps the pinned block until the copy is done. Made once per batch
(``probes.encoding.batching.Batch.memo``), what a probe derives from a batch's sentences (gold arcs, rows, label
ids) goes to the device once, never once per layer.

The other way, ``HostCopy`` copies a device tensor into pinned host memory without waiting, an event marking the copy's
end; ``landed`` waits for that event where the copy is read: later (a batch on, or on another thread), so that the host
can queue the device's next work first. On the CPU it is a plain copy.
"""
from __future__ import annotations

import torch

CPU = torch.device("cpu")


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor` on `device` (itself where it is there already); from the host to CUDA, a copy that does not wait."""
    device = torch.device(device)
    if device.type == "cpu" or tensor.device.type != "cpu":
        return tensor.to(device)
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


class HostCopy:
    """A copy in host memory of a tensor of the run's device (a copy, not a view: the tensor's buffer may be reused),
    made as the tensor comes; ``landed`` gives it. dtype: the copy's (default: the tensor's). given: the tensor is
    the caller's to give away (made for the copy, never written again): on the host it is kept as it is, no copy."""

    def __init__(self, tensor: torch.Tensor, dtype: torch.dtype | None = None, given: bool = False):
        asynchronous = tensor.is_cuda  # a pinned host copy the device makes without the host waiting
        dtype = dtype or tensor.dtype
        if given and tensor.device.type == "cpu" and tensor.dtype == dtype:
            self.tensor, self.copied = tensor, None
            return
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
