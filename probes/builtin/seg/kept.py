"""The seg probe's state that merges by concatenation, not by adding: every head's predicted ends at
every unit (what the greedy ensembles need) and the example sentences kept for `probes show`.

Both follow the additive-state protocol of ``probes.scoring.probe.Probe.add_state`` (merge, state_dict,
load_state_dict); their state_dicts hold tensors, lists and dicts only.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import numpy as np
import torch

from probes.builtin.seg.units import Units


class KeptEnds:
    """Per batch: the ends [N, grid] predicted by `grid` segmenters (the L*H heads) after each of its N units,
    packed one bit per segmenter, with the units' gold facts. Shards merge by concatenation."""

    def __init__(self, grid: int):
        self.grid = grid
        self.parts: list[tuple[np.ndarray, Units]] = []  # per batch: packed ends [N, ceil(grid/8)] uint8, units

    def packed(self, ends: torch.Tensor, units: Units) -> tuple[np.ndarray, Units]:
        """A batch's part: ends [N, grid] bool (on the host) for the N units of `units`, packed (``add`` keeps it)."""
        if tuple(ends.shape) != (len(units), self.grid):
            raise ValueError(f"ends of shape {tuple(ends.shape)}, expected ({len(units)}, {self.grid})")
        return np.packbits(ends.numpy(), axis=1), units

    def add(self, part: tuple[np.ndarray, Units]) -> None:
        """Keep a batch's part (``packed``)."""
        self.parts.append(part)

    def all(self) -> tuple[torch.Tensor, Units]:
        """Every unit kept, in the order added: ends [N, grid] bool and their Units (needs at least one part)."""
        ends = np.concatenate([np.unpackbits(packed, axis=1, count=self.grid) for packed, _ in self.parts])
        return torch.from_numpy(ends).bool(), Units.cat([units for _, units in self.parts])

    def merge(self, other: "KeptEnds") -> None:
        if other.grid != self.grid:
            raise ValueError(f"cannot merge ends of {other.grid} segmenters into ends of {self.grid}")
        self.parts.extend(other.parts)

    def state_dict(self) -> dict[str, Any]:
        return {"packed": [torch.from_numpy(packed.copy()) for packed, _ in self.parts],
                "units": [{f.name: getattr(units, f.name).clone() for f in dataclasses.fields(units)}
                          for _, units in self.parts]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        width = math.ceil(self.grid / 8)
        parts = []
        for packed, units in zip(state["packed"], state["units"], strict=True):
            units = Units(**units)
            if tuple(packed.shape) != (len(units), width) or packed.dtype != torch.uint8:
                raise ValueError(f"packed ends of shape {tuple(packed.shape)} {packed.dtype}, "
                                 f"expected ({len(units)}, {width}) torch.uint8")
            parts.append((packed.numpy().copy(), units))
        self.parts = parts


class Examples:
    """Example sentences with every head's segmentation (plain dicts, see ``SegmentationProbe``); shards
    merge by concatenation."""

    def __init__(self):
        self.items: list[dict] = []

    def merge(self, other: "Examples") -> None:
        self.items.extend(copy.deepcopy(other.items))

    def state_dict(self) -> dict[str, Any]:
        return {"items": copy.deepcopy(self.items)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.items = copy.deepcopy(list(state["items"]))
