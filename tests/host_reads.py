"""Counting the reads that make a device wait for the host (issue 44): a TorchFunctionMode that counts, by the
probes source line that made it, every call that on CUDA copies a tensor's values to the host or needs them to
know a shape. It runs on the CPU, where no read costs anything, so that CI sees the same calls a GPU run makes.

Counted: ``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``, ``np.asarray(tensor)`` (``__array__``),
``bool``/``int``/``float``/``index`` of a tensor (an ``if`` on one, ``range(t)``), ``.to("cpu")`` given the
string, and the operations whose output shape depends on the values: ``nonzero``, ``argwhere``, ``unique``,
``unique_consecutive``, ``masked_select``, ``bincount``, one-argument ``where``, ``repeat_interleave`` without
``output_size``, indexing with a boolean tensor, and a number put at tensor indices (``t[rows, cols] = 0``: on CUDA
the number is copied from pageable memory, and the host waits for that copy). Not counted: ``.to(device)`` with a torch.device (on the
CPU it cannot be told from a host-to-device copy)."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

PACKAGE = str(Path(__file__).resolve().parents[1] / "probes")
READS = {"item", "tolist", "cpu", "numpy", "__array__", "__bool__", "__int__", "__float__", "__index__", "nonzero",
         "argwhere", "unique", "unique_consecutive", "masked_select", "bincount"}


def _bool_index(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def _tensor_index(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) for i in items)


def is_read(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether a call of torch function `name` with these arguments reads values to the host."""
    if name in READS:
        return True
    if name == "to":
        return "cpu" in (*args[1:2], kwargs.get("device"))
    if name == "where":
        return len(args) + len(kwargs) == 1
    if name == "repeat_interleave":
        return "output_size" not in kwargs and not (len(args) > 1 and isinstance(args[1], int))
    if name == "__getitem__":
        return len(args) > 1 and _bool_index(args[1])
    if name == "__setitem__":  # a number put at tensor indices: on CUDA, a copy from pageable memory the host waits for
        return len(args) > 2 and _tensor_index(args[1]) and isinstance(args[2], (int, float, bool))
    return False


class HostReads(TorchFunctionMode):
    """``with HostReads() as reads: ...``; then ``reads.total`` and ``reads.sites`` ({"probes/x.py:12 item": n},
    the innermost probes frame of each read)."""

    def __init__(self):
        super().__init__()
        self.sites: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.sites.values())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if is_read(name, args, kwargs):
            self.sites[f"{_site()} {name}"] += 1
        return func(*args, **kwargs)


def _site() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if path.startswith(PACKAGE):
            return f"probes{path[len(PACKAGE):]}:{frame.f_lineno}"
        frame = frame.f_back
    return "outside probes"
