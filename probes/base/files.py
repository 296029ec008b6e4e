"""The project's file output: atomic writes, a set of result files written together (or a recovery copy),
names for files and titles, and JSON numbers.

Every file is written atomically (a temporary file in the same folder, then a rename) with the ordinary
permissions of this process's umask; ``write_result_files`` writes a set of them, or a recovery copy elsewhere
when the folder cannot take them. (probes.base.argtypes checks an output path before any work is done.)
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probes.base.argtypes import os_reason
from probes.base.errors import InputError

UMASK = os.umask(0)  # this process's file-creation mask (read once: os.umask can only be read by setting it)
os.umask(UMASK)


def write_atomic(path: Path, data: bytes) -> Path:
    """Write bytes to `path` through a temporary file in the same folder and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp creates 0600; results are ordinary files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_result_files(directory: str | Path, files: Mapping[str, Any]) -> list[Path]:
    """Write `files` ({file name: content}) into `directory` (made if missing), each atomically; return the paths.

    Content: bytes as they are, a dict as JSON (full precision), a Table or a pandas DataFrame as CSV; everything is
    encoded before the first file is written. If the folder cannot take them (disk full, permissions
    changed during a long run), the files this call wrote there are removed, all of them are written to a
    new recovery folder in the system's temporary directory, and an InputError names both folders: the
    results of a long run are never thrown away.
    """
    encoded = {name: _encode(content) for name, content in files.items()}
    out = Path(directory)
    try:
        return _write_all(out, encoded)
    except OSError as e:
        failure = e
    recovery = Path(tempfile.mkdtemp(prefix="probes-recovery-"))
    try:
        _write_all(recovery, encoded)
    except OSError as e:
        raise InputError(f"cannot write the results ({os_reason(failure)}), nor a recovery copy in {recovery} "
                         f"({os_reason(e)})", out) from None
    raise InputError(f"cannot write the results ({os_reason(failure)}); all {len(encoded)} files were written to "
                     f"{recovery} instead", out)


def _write_all(out: Path, files: dict[str, bytes]) -> list[Path]:
    """Every file or none: what was written before a failure is removed again."""
    written: list[Path] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            written.append(write_atomic(out / name, data))
    except OSError:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return written


def _encode(content: Any) -> bytes:
    if isinstance(content, bytes):
        return content
    if isinstance(content, Mapping):
        return json.dumps(content, indent=1, allow_nan=False, default=_json_default).encode()
    if isinstance(content, Table):
        return content.to_csv().encode()
    return content.to_csv(index=False).encode()  # a pandas DataFrame


@dataclass(frozen=True)
class Table:
    """Rows under named columns, written as CSV the way pandas' ``to_csv(index=False)`` writes them (a float
    as its shortest repr, None and NaN as empty fields) without importing pandas (a heavy import)."""

    columns: list[str]
    rows: list[list[Any]]

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows([["" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in row]
                          for row in self.rows])
        return out.getvalue()


STUDY_JSON = "study.json"  # a study's record in its output folder (probes.tools.studies.outputs; read by probes.tools.report)
GENERIC_FOLDERS = ("model", "models", "model_weights", "weights", "snapshot", "final", "best", "output", "outputs")


def short_model_name(model: str) -> str:
    """A short name for titles: a hub name (org/name) as it is; a local path as its last folder, or the folder
    above it where that is a generic name (``.../sre_embedding_model/model_weights`` → sre_embedding_model)."""
    parts = Path(model).parts
    if len(parts) <= 2 and not Path(model).is_absolute() and not Path(model).exists():
        return model
    named = [p for p in parts if p not in GENERIC_FOLDERS and p != Path(model).anchor]
    return named[-1] if named else model


def safe_name(label: str) -> str:
    """A label as part of a file name: runs of anything but letters, digits, ``.``, ``+`` and ``-`` become
    ``_`` (``offset+1`` and ``len4+`` keep their sign)."""
    return re.sub(r"[^\w.+-]+", "_", label)


def json_number(x: float) -> float | None:
    """A number for a results file: NaN as null, anything else at full precision."""
    return None if np.isnan(x) else float(x)


def json_grid(a: np.ndarray) -> list[list[float | None]]:
    """An [L,H] grid for a results file: rows of ``json_number``."""
    return [[json_number(x) for x in row] for row in np.asarray(a, dtype=float)]


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot write {type(o).__name__} to JSON")
