"""Reading corpus files as text, with errors that name the file and line."""
from __future__ import annotations

from pathlib import Path

from probes.errors import InputError


def read_text_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file (newlines stripped).

    Raises InputError for a missing file, a directory, an empty file, binary data (NUL bytes)
    or bytes that are not UTF-8, naming the first offending line.
    """
    p = Path(path)
    if not p.exists():
        raise InputError("file not found", p)
    if p.is_dir():
        raise InputError("is a directory, expected a corpus file", p)
    data = p.read_bytes()
    if not data.strip():
        raise InputError("file is empty", p)
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError("binary data (NUL byte), not a text corpus file", p, data.count(b"\n", 0, nul) + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[e.start]:02x})", p, line) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").split("\n")
