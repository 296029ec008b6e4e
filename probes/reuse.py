"""The model's large outputs (its linear layers' and GELUs') computed into buffers reused within one forward pass.

Under the run's allocator setting (probes.allocator) every tensor of LARGE_BLOCK bytes or more is a fresh mapping
whose pages the system faults in and zeroes when first written: over a batch of sentences, a BERT layer's query,
key, value, output and feed-forward projections and its GELU are each such a tensor, and the faults cost more than
the arithmetic that fills them (a GELU over [32,40,1536] took 2.7 ms into a fresh tensor, 0.45 ms into a reused
one, on a 2-core Xeon). ``reused_output_memory(model)`` makes, for one forward pass, every ``torch.nn.Linear``
with a bias, transformers' ``GELUActivation`` (erf GELU) and ``torch.nn.GELU`` of `model` write a large output
into a buffer of the pass's ``OutputPool``, handed out again once nothing holds its memory (no tensor or view of
it), so that a layer reuses what the layer before it let go. Each is the kernel the module's own code runs, on
the same operands (``addmm`` into the output, as ``torch.nn.functional.linear`` runs it for a contiguous 2-D or
3-D input; ``gelu`` with ``out=``): the values are bit for bit the same (tests compare them). Small outputs, other
inputs (non-contiguous, other ranks), subclasses of these modules, a module whose forward was replaced by other
code, inputs on other devices and passes with gradients on run the module's own code (a model on a GPU is not
given the pool at all: its caching allocator reuses memory already).

The pool holds at most POOL_BYTES (64 MB), in buffers of at most a quarter of that (16 MB: MiniLM's feed-forward
output over 32 sentences of 80 subwords), which bounds what it adds to a run's peak memory; a larger output is a
tensor of its own, as without the pool, so long inputs (a BERT-large layer's output over 16 sentences of 500
subwords is 31 MB) are left as they were.

For the capture pass (probes.model.Encoder.layerwise), where nothing outlives the pass but what the probes copy;
its attention (probes.eager) takes its large products from the same pool (``OutputPool.empty``).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from functools import partial
from typing import Callable, Iterator

import torch
from transformers.activations import GELUActivation

from probes.allocator import LARGE_BLOCK

POOL_BYTES = 64 << 20  # the most a pass's pool holds, in buffers of at most a quarter of that each


class OutputPool:
    """Flat CPU buffers for one pass's large outputs, each handed out again once nothing else holds its memory;
    at most `budget` bytes of them, none over a quarter of it (room for several of a layer's outputs)."""

    def __init__(self, budget: int = POOL_BYTES) -> None:
        self.budget = budget
        self._buffers: list[torch.Tensor] = []  # each [n], flat

    def take(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised CPU tensor of `shape`: a view of the smallest free buffer that holds it, else of a new
        one, kept for the rest of the pass where it is at most a quarter of the budget and the pool stays within
        the budget."""
        size = math.prod(shape)
        fits = [b for b in self._buffers if b.dtype == dtype and b.numel() >= size and _unheld(b)]
        if fits:
            return min(fits, key=torch.Tensor.numel)[:size].view(shape)
        buffer = torch.empty(size, dtype=dtype)
        if buffer.nbytes <= self.budget // 4 and self.bytes + buffer.nbytes <= self.budget:
            self._buffers.append(buffer)
        return buffer.view(shape)

    def empty(self, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """An uninitialised tensor of `shape` in `like`'s dtype and device: from the pool where it is large, on the
        CPU and made with gradients off, else a fresh one."""
        if _poolable(like, shape):
            return self.take(shape, like.dtype)
        return torch.empty(shape, dtype=like.dtype, device=like.device)

    @property
    def bytes(self) -> int:
        """The bytes of the buffers the pool holds."""
        return sum(b.nbytes for b in self._buffers)


def _unheld(buffer: torch.Tensor) -> bool:
    """Whether only the pool holds `buffer`'s memory: its storage's references are then the pool's tensor and the
    storage object made here to count them (every other tensor or view of that memory adds one)."""
    return torch._C._storage_Use_Count(buffer.untyped_storage()._cdata) == 2


def _poolable(x: torch.Tensor, out_shape: tuple[int, ...]) -> bool:
    """Whether an output of `out_shape` in x's dtype, made from x, may go to the pool: large, on the CPU, gradients
    off (an out= product records none)."""
    return (math.prod(out_shape) * x.dtype.itemsize >= LARGE_BLOCK and x.device.type == "cpu"
            and not torch.is_grad_enabled())


def _pooled(x: torch.Tensor, out_shape: tuple[int, ...]) -> bool:
    """Whether a module's output of `out_shape` from input x goes to the pool: poolable, x contiguous."""
    return x.is_contiguous() and _poolable(x, out_shape)


def _linear(module: torch.nn.Linear, pool: OutputPool, x: torch.Tensor) -> torch.Tensor:
    """x [..., in] → [..., out]: F.linear's addmm over the rows of x (2-D or 3-D), into a pooled [rows, out]."""
    rows = math.prod(x.shape[:-1])
    if module.bias is None or x.dim() not in (2, 3) or not _pooled(x, (rows, module.out_features)):
        return torch.nn.functional.linear(x, module.weight, module.bias)
    out = pool.take((rows, module.out_features), x.dtype)  # [rows, out]
    torch.addmm(module.bias, x.view(rows, x.shape[-1]), module.weight.t(), out=out)
    return out.view(*x.shape[:-1], module.out_features)


def _gelu(module: torch.nn.Module, pool: OutputPool, approximate: str, x: torch.Tensor) -> torch.Tensor:
    """GELU of x (any shape), into a pooled tensor of its shape."""
    if not _pooled(x, tuple(x.shape)):
        return type(module).forward(module, x)
    return torch.ops.aten.gelu.out(x, approximate=approximate, out=pool.take(tuple(x.shape), x.dtype))


def _pooled_forward(module: torch.nn.Module, pool: OutputPool) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The pooled forward for `module`, or None where it keeps its own: other classes, subclasses of these (they
    may compute something else), a Python GELU, a forward already replaced on the module by other code."""
    if "forward" in vars(module):
        return None
    kind = type(module)
    if kind is torch.nn.Linear:
        return partial(_linear, module, pool)
    if kind is GELUActivation and module.act is torch.nn.functional.gelu:
        return partial(_gelu, module, pool, "none")
    if kind is torch.nn.GELU:
        return partial(_gelu, module, pool, module.approximate)
    return None


@contextmanager
def reused_output_memory(model: torch.nn.Module) -> Iterator[OutputPool]:
    """Within it, `model`'s linear layers and GELUs write their large outputs into one pass's OutputPool (yielded);
    their own forwards come back, and the pool's buffers are let go, when it ends."""
    pool = OutputPool()
    patched = []
    try:
        for module in model.modules():
            forward = _pooled_forward(module, pool)
            if forward is not None:
                module.forward = forward  # an instance attribute: nn.Module.__call__ finds it before the class's
                patched.append(module)
        yield pool
    finally:
        for module in patched:
            del module.forward
