"""Sums of floats made in the same order on every run, where a device's scatter additions come in any order.

On CUDA, scatter_add_ and index_add_ add with atomic operations, in whatever order the threads come: a sum of three
floats or more may differ in its last bit from one run to the next (torch lists both as nondeterministic there).
The CPU's add in index order. Where such a sum is a score's, probes makes it in a fixed order on CUDA: word pooling
scatters each word's first two subwords alone (0 + a + b is b + a) and sums the rest apart by a product
(probes.encoding.pooling.Tail); ``index_sum`` adds rows by index_put_ with accumulate=True, which CUDA makes by
sorting the indices first (not in torch's nondeterministic lists).
"""
from __future__ import annotations

import torch


def in_order(device: torch.device) -> bool:
    """Whether float sums by index on `device` must avoid scatter_add_ and index_add_ to come out the same on every
    run (CUDA)."""
    return device.type == "cuda"


def index_sum(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """target[index[i]] += values[i] along dimension 0 (index may repeat), in place, in the same order on every run:
    index_add_ on the CPU (index order), index_put_ with accumulate=True on CUDA (sorted first). Returns target."""
    if in_order(target.device):
        return target.index_put_((index,), values, accumulate=True)
    return target.index_add_(0, index, values)
