"""Reading corpus files, with errors that name the file and line: whole (``read_text_lines``) or one line at a
time (``iter_text_lines``, for the streaming readers; see probes.corpus.iter_corpus)."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

from probes.base.errors import InputError


@contextmanager
def open_corpus_file(path: str | Path) -> Iterator[BinaryIO]:
    """The corpus file opened for binary reading. InputError naming the path, on one line, for a missing
    file, a broken symbolic link, a directory, or a file the operating system will not read (no permission,
    a name too long, an I/O error, also one met while reading)."""
    p = Path(path)
    try:
        f = open(p, "rb")
    except FileNotFoundError:
        problem = "broken symbolic link (its target does not exist)" if p.is_symlink() else "file not found"
    except IsADirectoryError:
        problem = "is a directory, expected a corpus file"
    except OSError as e:
        problem = f"cannot read file ({e.strerror or type(e).__name__})"
    else:
        with f:
            try:
                yield f
            except IsADirectoryError:  # some systems open a directory and refuse the first read
                problem = "is a directory, expected a corpus file"
            except OSError as e:
                problem = f"cannot read file ({e.strerror or type(e).__name__})"
            else:
                return
    raise InputError(problem, p)


def read_file_bytes(path: str | Path) -> bytes:
    """The bytes of a corpus file; InputError as :func:`open_corpus_file` says."""
    with open_corpus_file(path) as f:
        return f.read()


def read_text_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file (newlines stripped): the lines :func:`iter_text_lines` yields."""
    return list(iter_text_lines(path))


def iter_text_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 text file (newlines stripped; CR LF read as LF, a byte-order mark dropped), one
    at a time: ``text.split("\\n")`` of the decoded file, a final "" where the file ends with a newline.

    Raises InputError for everything :func:`open_corpus_file` refuses, an empty file, binary data (NUL
    bytes) or bytes that are not UTF-8, naming the first offending line, before the first line is
    yielded: a first pass over the file's bytes (one line held at a time) checks them, so the error is
    the one a whole read gives whatever lines a reader would have refused first.
    """
    p = Path(path)
    _check_text(p)
    with open_corpus_file(p) as f:
        ended = True  # whether the last line read ended with a newline
        for number, raw in enumerate(f, 1):
            ended = raw.endswith(b"\n")
            text = raw.decode("utf-8")
            if number == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield text[:-2] if text.endswith("\r\n") else text[:-1] if ended else text
        if ended:
            yield ""


def _check_text(path: Path) -> None:
    """InputError for an empty file (blanks only), then for a NUL byte, then for bytes that are not UTF-8."""
    blank = True
    nul = bad = None  # (line, problem) of the first NUL byte and of the first bytes that are not UTF-8
    with open_corpus_file(path) as f:
        for number, raw in enumerate(f, 1):
            blank = blank and not raw.strip()
            if nul is None and b"\x00" in raw:
                nul = (number, "binary data (NUL byte), not a text corpus file")
            if bad is None:
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    bad = (number, f"not UTF-8 text (byte 0x{raw[e.start]:02x})")
    if blank:
        raise InputError("file is empty", path)
    for found in (nul, bad):
        if found is not None:
            raise InputError(found[1], path, found[0])


def comment_pair(line: str) -> tuple[str, str] | None:
    """(key, value) of a ``# key = value`` comment line (CoNLL-U, UNER), both stripped; None for
    another line or an empty value."""
    key, eq, value = line[1:].partition("=")
    if not (eq and line.startswith("#")) or not value.strip():
        return None
    return key.strip(), value.strip()
