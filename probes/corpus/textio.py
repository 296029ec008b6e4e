"""Reading corpus files, with errors that name the file and line."""
from __future__ import annotations

from pathlib import Path

from probes.errors import InputError


def read_file_bytes(path: str | Path) -> bytes:
    """The bytes of a corpus file. InputError naming the path, on one line, for a missing file, a
    broken symbolic link, a directory, or a file the operating system will not read (no permission,
    a name too long, an I/O error)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            return f.read()
    except FileNotFoundError:
        problem = "broken symbolic link (its target does not exist)" if p.is_symlink() else "file not found"
    except IsADirectoryError:
        problem = "is a directory, expected a corpus file"
    except OSError as e:
        problem = f"cannot read file ({e.strerror or type(e).__name__})"
    raise InputError(problem, p)


def read_text_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file (newlines stripped).

    Raises InputError for everything :func:`read_file_bytes` refuses, an empty file, binary data
    (NUL bytes) or bytes that are not UTF-8, naming the first offending line.
    """
    p = Path(path)
    data = read_file_bytes(p)
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


def comment_pair(line: str) -> tuple[str, str] | None:
    """(key, value) of a ``# key = value`` comment line (CoNLL-U, UNER), both stripped; None for
    another line or an empty value."""
    key, eq, value = line[1:].partition("=")
    if not (eq and line.startswith("#")) or not value.strip():
        return None
    return key.strip(), value.strip()
