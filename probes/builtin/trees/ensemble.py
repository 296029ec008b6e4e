"""Head ensembles (after Limisiewicz et al. 2020, "Universal Dependencies according to BERT"): heads chosen
greedily on the selection sample, their attention matrices averaged, the average decoded.

Greedy choice: the first head is the one whose own trees score best (directed UAS on the sample); then,
while the ensemble has fewer than `most` heads, the head whose addition gives the best UAS is added, if it
improves on the ensemble without it (strictly); ties go to the lowest (layer, head). The paper chooses an
ensemble per relation by that relation's accuracy; here one ensemble is chosen for the whole tree by UAS.
Trees are decoded with the probe's main variant: Chu–Liu–Edmonds on the attention form, by the compiled decoder on
the host, or on a device by the batched one (probes.builtin.trees.batched: the same trees), the sample's stacks
sent there once.
"""
from __future__ import annotations

import torch

from probes.base.devices import to_device
from probes.builtin.trees import batched
from probes.builtin.trees.decoders import decode
from probes.builtin.trees.sample import SelectionSample
from probes.builtin.trees.scoring import attached

STACK_CELLS = 2**22  # most matrix cells (sentences × heads × M × M, float64) a chunk of the sample holds


def decode_main(attention: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[..,M] heads of the main variant (Chu–Liu–Edmonds on the attention form) of word attention [..,M,M];
    lengths broadcast over the leading dimensions."""
    lead = attention.shape[:-2]
    flat = attention.reshape(-1, *attention.shape[-2:])  # [N,M,M]
    heads = decode(flat, lengths.expand(lead).reshape(-1), ("attention",), ("cle",))[0, :, 0]  # [N,M]
    return heads.view(*lead, attention.shape[-1])


def decode_main_on(attention: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """decode_main on attention's device (lengths on the host): the batched decoder's trees, the same."""
    lead = attention.shape[:-2]
    flat = attention.reshape(-1, *attention.shape[-2:])  # [N,M,M]
    heads = batched.chu_liu_edmonds(batched.arc_scores(flat, "attention"), lengths.expand(lead).reshape(-1))
    return heads.view(*lead, attention.shape[-1])


def select_heads(sample: SelectionSample, most: int,
                 device: torch.device | None = None) -> list[tuple[int, int, float]]:
    """The greedy ensemble on the sample: (layer, head, sample UAS of the ensemble up to this head) per head; its
    trees decoded on the host, or on `device` (the sample's stacks sent there once)."""
    if not len(sample) or most < 1:
        return []
    chunks = list(_chunks(sample))
    decoder = decode_main
    if device is not None:
        chunks = [(to_device(maps, device), tuple(to_device(t, device) for t in gold), lengths)
                  for maps, gold, lengths in chunks]
        decoder = decode_main_on
    arcs = sum(len(g) for g in sample.gold)
    heads = sample.layers * sample.heads
    # one buffer for every round's candidates, as large as the largest stack (a round's sums made in it, not in fresh
    # memory: a stack is tens of MB, and memory the process has not touched costs a page fault every 4 kB)
    room = torch.empty(max(maps.numel() for maps, _, _ in chunks), dtype=torch.float64, device=device)
    chosen: list[int] = []
    trace: list[tuple[int, int, float]] = []
    while len(chosen) < most:
        hits = torch.zeros(heads, dtype=torch.float64, device=device)
        for maps, gold, lengths in chunks:  # maps [b,LH,M,M]
            candidates = maps  # [b,LH,M,M] each head alone, then with the ensemble so far: (Σ ensemble + head) / (k+1)
            if chosen:
                base = maps[:, chosen].sum(1, keepdim=True)  # [b,1,M,M] the ensemble so far
                candidates = torch.add(base, maps, out=room[:maps.numel()].view(maps.shape)).div_(len(chosen) + 1)
            predicted = decoder(candidates, lengths[:, None])  # [b,LH,M]
            dependents, gold_heads, rows = gold
            directed, _ = attached(predicted.transpose(0, 1), rows, dependents, gold_heads)  # [LH,N]
            hits += directed.sum(1)
        hits[chosen] = -1  # a head joins once
        best = int(hits.argmax())
        uas = float(hits[best]) / arcs
        if trace and uas <= trace[-1][2]:
            break
        chosen.append(best)
        trace.append((best // sample.heads, best % sample.heads, uas))
    return trace


def _chunks(sample: SelectionSample):
    """The sample by length, in stacks that keep about STACK_CELLS cells: maps [b,LH,M,M] float64, the gold
    arcs (dependent, head, stack row, each [N]) and lengths [b]."""
    order = sorted(range(len(sample)), key=lambda i: len(sample.gold[i]))
    heads = sample.layers * sample.heads
    start = 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and (stop - start + 1) * heads * (len(sample.gold[order[stop]]) + 1) ** 2 <= STACK_CELLS:
            stop += 1
        part = order[start:stop]
        size = len(sample.gold[part[-1]]) + 1
        maps = torch.zeros(len(part), heads, size, size, dtype=torch.float64)
        for row, i in enumerate(part):
            n = len(sample.gold[i]) + 1
            maps[row, :, :n, :n] = sample.maps[i].reshape(heads, n, n)
        lengths = torch.tensor([len(sample.gold[i]) for i in part])
        dependents = torch.cat([torch.arange(1, len(sample.gold[i]) + 1) for i in part])
        gold_heads = torch.cat([sample.gold[i] for i in part])
        rows = torch.repeat_interleave(torch.arange(len(part)), lengths)
        yield maps, (dependents, gold_heads, rows), lengths
        start = stop
