"""Host tensors to the run's device without making the host wait for it (issue 44).

A plain ``tensor.to("cuda")`` from ordinary (pageable) memory waits until the device has run everything queued
before it: copied once per layer, it would stall the host as a read does. ``to_device`` pins the tensor first and
copies without waiting; torch keeps the pinned block until the copy is done. Made once per batch
(``probes.encoding.batching.Batch.memo``), what a probe derives from a batch's sentences (gold arcs, rows, label
ids) goes to the device once, never once per layer.
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
