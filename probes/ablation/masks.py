"""The sets of heads an ablation disables: sweeps and user-given lists.

A ``Mask`` names a set of (layer, head) pairs, 0-indexed. Sweeps:

    heads    every single head: L×H masks ("L3-H7")
    layers   every whole layer: L masks ("L3")
    halves   the bottom half of the layers (0 .. L//2 - 1) and the top half (L//2 .. L-1); with
             an odd L the top half has the extra layer
    random   k% of all L×H heads (rounded, at least one), drawn without replacement, n repeats per
             k, from a seeded generator ("random 10% #0")
    list     masks the user writes: comma-separated LAYER:HEAD items, LAYER:* for a whole layer
             ("2:3,4:0", "2:*")

The run's baseline is the empty mask ("none"), evaluated in the same passes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from probes.errors import InputError

SWEEPS = ("heads", "layers", "halves", "random")
_ITEM = re.compile(r"^(\d+):(\d+|\*)$")


@dataclass(frozen=True)
class Mask:
    name: str
    sweep: str  # "none", one of SWEEPS, or "list"
    heads: tuple[tuple[int, int], ...]  # (layer, head) pairs, sorted


def baseline() -> Mask:
    return Mask("none", "none", ())


def single_heads(layers: int, heads: int) -> list[Mask]:
    return [Mask(f"L{layer}-H{h}", "heads", ((layer, h),)) for layer in range(layers) for h in range(heads)]


def whole_layers(layers: int, heads: int) -> list[Mask]:
    return [Mask(f"L{layer}", "layers", tuple((layer, h) for h in range(heads))) for layer in range(layers)]


def halves(layers: int, heads: int) -> list[Mask]:
    if layers < 2:
        raise InputError(f"the model has {layers} layer; halves need at least 2")
    cut = layers // 2
    return [Mask("bottom", "halves", tuple((layer, h) for layer in range(cut) for h in range(heads))),
            Mask("top", "halves", tuple((layer, h) for layer in range(cut, layers) for h in range(heads)))]


def random_heads(layers: int, heads: int, percents: list[float], repeats: int, seed: int) -> list[Mask]:
    """`repeats` random draws of round(k% of L×H) heads for each k in `percents`."""
    if repeats < 1:
        raise InputError(f"repeats must be at least 1, not {repeats}")
    generator = np.random.default_rng(seed)
    total = layers * heads
    masks = []
    for percent in percents:
        if not 0 < percent <= 100:
            raise InputError(f"percent of heads must be in (0, 100], not {percent:g}")
        k = max(1, round(total * percent / 100))
        for i in range(repeats):
            picked = np.sort(generator.choice(total, size=k, replace=False))
            masks.append(Mask(f"random {percent:g}% #{i}", "random",
                              tuple((int(p) // heads, int(p) % heads) for p in picked)))
    return masks


def parse_mask(spec: str, layers: int, heads: int) -> Mask:
    """A user's mask: "2:3,4:0" (LAYER:HEAD items) or "2:*" (a whole layer); 0-indexed."""
    picked: set[tuple[int, int]] = set()
    items = [x.strip() for x in spec.split(",")]
    for item in items:
        match = _ITEM.match(item)
        if not match:
            raise InputError(f"bad head {item!r} in mask {spec!r}: expected LAYER:HEAD or LAYER:* (0-indexed)")
        layer = int(match.group(1))
        wanted = range(heads) if match.group(2) == "*" else [int(match.group(2))]
        for head in wanted:
            if layer >= layers or head >= heads:
                raise InputError(f"head {layer}:{head} in mask {spec!r} is out of range: the model has {layers} "
                                 f"layers × {heads} heads (layers 0-{layers - 1}, heads 0-{heads - 1})")
            picked.add((layer, head))
    return Mask(",".join(items), "list", tuple(sorted(picked)))


def build_masks(layers: int, heads: int, sweeps: list[str], specs: list[str], *, percents: list[float],
                repeats: int, seed: int) -> list[Mask]:
    """The baseline first, then the masks of each sweep named, then the user's masks."""
    unknown = [s for s in sweeps if s not in SWEEPS]
    if unknown:
        raise InputError(f"unknown sweep {unknown[0]!r}; choose from {', '.join(SWEEPS)} (or give --mask)")
    if not sweeps and not specs:
        raise InputError(f"nothing to ablate: name a sweep ({', '.join(SWEEPS)}) or give a mask such as 2:3,4:0")
    makers = {"heads": single_heads, "layers": whole_layers, "halves": halves,
              "random": lambda n_layers, n_heads: random_heads(n_layers, n_heads, percents, repeats, seed)}
    masks = [baseline()]
    for sweep in dict.fromkeys(sweeps):
        masks += makers[sweep](layers, heads)
    masks += [parse_mask(s, layers, heads) for s in specs]
    return masks


def mask_tensor(masks: list[Mask], layers: int, heads: int) -> torch.Tensor:
    """[M,L,H] bool: True where mask m disables head (l, h)."""
    out = torch.zeros(len(masks), layers, heads, dtype=torch.bool)
    rows = [m for m, mask in enumerate(masks) for _ in mask.heads]
    if rows:
        lh = torch.tensor([p for mask in masks for p in mask.heads])
        out[torch.tensor(rows), lh[:, 0], lh[:, 1]] = True
    return out
