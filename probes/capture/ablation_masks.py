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
    keep     keep-masks: only the heads named stay on in the layers given (``in_layers``, e.g. "0-5"
             or "1,3-4"; default every layer); every other head of those layers is disabled
             ("keep 2:3,3:1 in 0-5")

The run's baseline is the empty mask ("none"), evaluated in the same passes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from probes.base.choices import SWEEPS
from probes.base.errors import InputError

_ITEM = re.compile(r"^(\d+):(\d+|\*)$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


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


def parse_layers(spec: str, layers: int) -> list[int]:
    """Layers written as "0-5", "2", "1,3-4" (0-indexed, ranges inclusive), sorted without repeats."""
    picked: set[int] = set()
    for item in (x.strip() for x in spec.split(",")):
        match = _RANGE.match(item)
        if not match:
            raise InputError(f"bad layers {item!r} in {spec!r}: expected LAYER or FIRST-LAST (0-indexed)")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if first > last or last >= layers:
            raise InputError(f"layers {item!r} in {spec!r} are out of range or reversed: the model has {layers} "
                             f"layers (0-{layers - 1})")
        picked.update(range(first, last + 1))
    return sorted(picked)


def keep_mask(spec: str, in_layers: str | None, layers: int, heads: int) -> Mask:
    """Disable every head of `in_layers` (default: every layer) except those `spec` names ("2:3,3:1")."""
    kept = parse_mask(spec, layers, heads)
    scope = parse_layers(in_layers, layers) if in_layers else list(range(layers))
    outside = [f"{layer}:{h}" for layer, h in kept.heads if layer not in scope]
    if outside:
        raise InputError(f"head {outside[0]} of keep-mask {spec!r} is not in the layers it applies to "
                         f"({in_layers}); it would be on anyway")
    disabled = tuple((layer, h) for layer in scope for h in range(heads) if (layer, h) not in kept.heads)
    contiguous = scope == list(range(scope[0], scope[-1] + 1))
    where = ",".join(map(str, scope)) if not contiguous or len(scope) == 1 else f"{scope[0]}-{scope[-1]}"
    return Mask(f"keep {kept.name} in {where}", "keep", disabled)


def build_masks(layers: int, heads: int, sweeps: list[str], specs: list[str], *, percents: list[float],
                repeats: int, seed: int, keeps: list[str] = (), in_layers: str | None = None) -> list[Mask]:
    """The baseline first, then the masks of each sweep named, then the user's masks, then the keep-masks
    (`keeps`, each over the layers `in_layers`)."""
    unknown = [s for s in sweeps if s not in SWEEPS]
    if unknown:
        raise InputError(f"unknown sweep {unknown[0]!r}; choose from {', '.join(SWEEPS)} (or give --mask)")
    if in_layers is not None and not keeps:
        raise InputError("in-layers applies to keep-masks: give --keep too")
    if not sweeps and not specs and not keeps:
        raise InputError(f"nothing to ablate: name a sweep ({', '.join(SWEEPS)}) or give a mask such as 2:3,4:0")
    makers = {"heads": single_heads, "layers": whole_layers, "halves": halves,
              "random": lambda n_layers, n_heads: random_heads(n_layers, n_heads, percents, repeats, seed)}
    masks = [baseline()]
    for sweep in dict.fromkeys(sweeps):
        masks += makers[sweep](layers, heads)
    masks += [parse_mask(s, layers, heads) for s in specs]
    masks += [keep_mask(s, in_layers, layers, heads) for s in keeps]
    return masks


def mask_tensor(masks: list[Mask], layers: int, heads: int) -> torch.Tensor:
    """[M,L,H] bool: True where mask m disables head (l, h)."""
    out = torch.zeros(len(masks), layers, heads, dtype=torch.bool)
    rows = [m for m, mask in enumerate(masks) for _ in mask.heads]
    if rows:
        lh = torch.tensor([p for mask in masks for p in mask.heads])
        out[torch.tensor(rows), lh[:, 0], lh[:, 1]] = True
    return out
