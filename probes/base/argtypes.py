"""Settings given as text, read and checked: heads (``L3-H5``), shards (``I/N``) and output paths. Light to
import (the standard library and probes.base.errors only): the command line's parser uses them before any model,
torch or numpy is loaded, and the library uses them for the same settings given from Python."""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from probes.base.errors import InputError

_HEAD = re.compile(r"^L?(\d+)[-,:]H?(\d+)$", re.IGNORECASE)


def parse_head(text: str) -> tuple[int, int]:
    """"L3-H5", "3-5" or "3,5" → (3, 5)."""
    m = _HEAD.match(text.strip())
    if not m:
        raise InputError(f"head {text!r} is not LAYER-HEAD (e.g. L3-H5 or 3-5)")
    return int(m.group(1)), int(m.group(2))


def parse_heads(text: str) -> list[tuple[int, int]]:
    """"2:8,4:9" (or "L2-H8,L4-H9") → [(2, 8), (4, 9)]."""
    return [parse_head(part) for part in text.split(",") if part.strip()]


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (0 ≤ index < count)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


WHOLE = Shard(0, 1)


def parse_shard(text: str) -> Shard:
    """``"I/N"`` as a Shard; InputError (one line) unless I and N are whole numbers with 0 ≤ I < N."""
    index, slash, count = str(text).partition("/")
    if not slash or not index.strip().isdigit() or not count.strip().isdigit():
        raise InputError(f"shard must be I/N with whole numbers 0 ≤ I < N (e.g. 0/4), not {text!r}")
    return as_shard((int(index), int(count)))


def as_shard(value: Shard | tuple[int, int] | str | None) -> Shard:
    """A Shard from ``(i, n)``, ``"i/n"`` or a Shard; None is the whole run (shard 0 of 1)."""
    if value is None:
        return WHOLE
    if isinstance(value, str):
        return parse_shard(value)
    index, count = (value.index, value.count) if isinstance(value, Shard) else tuple(value)
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (index, count)) or not 0 <= index < count:
        raise InputError(f"shard must be I/N with whole numbers 0 ≤ I < N (e.g. 0/4), not {index}/{count}")
    return Shard(index, count)


def check_output_folder(path: str | Path) -> Path:
    """`path`, once a folder can be made there and written: a probe file is created and removed, and any
    folders made for the test are removed again. Otherwise an InputError naming the obstacle. Run it before
    any work, so that a bad ``--out`` fails at once, not after the last forward pass."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a folder; give a folder for the output files", out)
    missing = []  # folders to make, deepest first
    folder = out
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"is a file, so the output folder {out} cannot be made under it", folder)
    try:
        for made in reversed(missing):
            made.mkdir()
        _probe_write(out)
    except OSError as e:
        raise InputError(f"cannot write the output here ({os_reason(e)})", out) from None
    finally:
        for made in missing:
            if made.is_dir():
                made.rmdir()
    return out


def check_output_file(path: str | Path) -> Path:
    """`path`, once a file can be written there (its folder must exist; a probe file is created and removed
    beside it); otherwise an InputError. Run it before any work."""
    p = Path(path)
    if p.is_dir():
        raise InputError("is a folder; give a file name for the output", p)
    if not p.parent.is_dir():
        raise InputError("no such folder for the output", p.parent)
    try:
        _probe_write(p.parent)
    except OSError as e:
        raise InputError(f"cannot write the output here ({os_reason(e)})", p.parent) from None
    return p


def _probe_write(folder: Path) -> None:
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".probes-write-test-")
    os.close(fd)
    os.unlink(probe)


def os_reason(e: OSError) -> str:
    """Why an OS call failed, in words (its strerror)."""
    return e.strerror or str(e)


def input_path(text: str) -> Path:
    """An input file or folder argument, refused on one line when nothing is there."""
    path = Path(text)
    if not path.exists():
        raise InputError("file not found", path)
    return path
