"""BERT's eager attention computed in memory reused from layer to layer, for one forward pass at a time.

transformers' eager attention (``eager_attention_forward`` of modeling_bert, copied unchanged into RoBERTa,
XLM-R, ELECTRA and others) allocates each layer's [B,H,T,T] scores anew three times (the product QKᵀ, its
scaled copy, the masked copy) and its probabilities once more. Blocks that large are fresh mappings
(probes.allocator) whose pages the system faults in and zeroes at every layer, which costs more than the
arithmetic on them. ``reused_attention_memory()`` makes every family whose eager function is that same code
(compared byte for byte) compute, within it, the same operations in the same order into one [B,H,T,T]
buffer per forward pass: QKᵀ into it, scaled and masked in place, softmax in place; the probabilities it
returns are that buffer, overwritten by the next layer. Given the pass's OutputPool (``probes.reuse``), its
other large tensors go to the pool's buffers: the products are taken in matmul's own steps (each operand as
[B*H,.,.], a copy where it has no such view, as BERT's q, k and v, views of [B,T,H,d], have none; then bmm),
the copies, the context and its [B,T,H,d] copy all in pool buffers. The results are bit for bit those of the
eager code (tests compare them); a module of another family, or one in training mode (dropout), runs its
own family's eager function unchanged.

For capture "hooks" only (probes.model.Encoder.layerwise), where each layer's maps are handed on and dropped
before the next layer runs: a caller that keeps every layer's maps (capture "outputs") must not use it.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert import modeling_bert

from probes.reuse import OutputPool
from probes.scratch import scratch_from

_buffers: dict = {}  # the pass's buffer (probes.scratch), while one runs
_pools: list[OutputPool] = []  # the pass's OutputPool, while one runs with one


def _rows(x: torch.Tensor, pool: OutputPool) -> torch.Tensor:
    """x [B,H,m,n] as [B*H,m,n], as matmul's reshape makes it: a view where one exists, else a contiguous copy (here
    in the pool)."""
    shape = (x.shape[0] * x.shape[1], *x.shape[2:])
    try:
        return x.view(shape)
    except RuntimeError:
        return pool.empty(tuple(x.shape), x).copy_(x).view(shape)


def _family_eager(module: torch.nn.Module):
    """The eager attention function of `module`'s modeling file (what transformers calls for "eager")."""
    return getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)


def _same_as_bert(function) -> bool:
    bert = modeling_bert.eager_attention_forward.__code__
    code = getattr(function, "__code__", None)
    return code is not None and (code.co_code, code.co_consts, code.co_names) == (bert.co_code, bert.co_consts,
                                                                                    bert.co_names)


def reused_eager_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                           attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                           **kwargs):
    """modeling_bert.eager_attention_forward, step for step, in the pass's buffer.
    query, key, value [B,H,T,d]; attention_mask broadcastable to [B,H,T,T] (added) or None.
    Returns the context [B,T,H,d] and the probabilities [B,H,T,T] (the buffer)."""
    family = _family_eager(module)
    if module.training or not _same_as_bert(family):
        return family(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    b, h, t, _ = query.shape
    s = key.shape[-2]
    weights = scratch_from(_buffers, "attention", (b, h, t, s), query.dtype, query.device)  # [B,H,T,S]
    # the pass's pool, where key and value have the query's [B,H] (no broadcasting for matmul to do)
    pool = _pools[-1] if _pools and key.shape[:2] == value.shape[:2] == (b, h) else None
    if pool is None:
        torch.matmul(query, key.transpose(2, 3), out=weights)
    else:  # matmul's own steps: its operands as [B*H,.,.] (a copy where no view is), then bmm
        torch.bmm(_rows(query, pool), _rows(key.transpose(2, 3), pool), out=weights.view(b * h, t, s))
    weights.mul_(scaling)
    if attention_mask is not None:
        weights.add_(attention_mask)
    torch.ops.aten._softmax.out(weights, -1, False, out=weights)  # nn.functional.softmax's kernel, in place
    # dropout: none outside training (see above)
    if pool is None:
        return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights
    context = pool.empty((b, h, t, value.shape[-1]), value)  # [B,H,T,d]
    torch.bmm(weights.view(b * h, t, s), _rows(value, pool), out=context.view(b * h, t, -1))
    return pool.empty((b, t, h, context.shape[-1]), context).copy_(context.transpose(1, 2)), weights


@contextmanager
def reused_attention_memory(pool: OutputPool | None = None) -> Iterator[None]:
    """Within it, transformers' "eager" attention is ``reused_eager_attention`` (for modules of every model);
    the buffer is released when it ends. pool: the pass's OutputPool (probes.reuse), where its large products go
    too (None: fresh tensors)."""
    ALL_ATTENTION_FUNCTIONS["eager"] = reused_eager_attention
    if pool is not None:
        _pools.append(pool)
    try:
        yield
    finally:
        del ALL_ATTENTION_FUNCTIONS["eager"]
        _buffers.clear()
        _pools.clear()
