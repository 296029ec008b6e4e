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


BLOCK = 1 << 16  # bytes read at a time: a file's lines are split and decoded a block's whole lines at once


def iter_text_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 text file (newlines stripped; CR LF read as LF, a byte-order mark dropped), one
    at a time: ``text.split("\\n")`` of the decoded file, a final "" where the file ends with a newline.

    Raises InputError for everything :func:`open_corpus_file` refuses, an empty file, binary data (NUL
    bytes) or bytes that are not UTF-8, naming the first offending line, before the first line is
    yielded: a first pass over the file's bytes (a block held at a time) checks them, so the error is
    the one a whole read gives whatever lines a reader would have refused first.
    """
    p = Path(path)
    _check_text(p)
    first = True  # whether no line has been decoded yet (a byte-order mark may start the text)
    with open_corpus_file(p) as f:
        for piece in _whole_lines(f):
            text = piece.decode("utf-8")
            if first and text.startswith("\ufeff"):
                text = text[1:]
            first = False
            lines = text.replace("\r\n", "\n").split("\n")
            yield from lines[:-1] if text.endswith("\n") else lines


def _whole_lines(f: BinaryIO) -> Iterator[bytes]:
    """The file's bytes a block at a time, each cut after its last newline (the rest goes to the next), then what
    follows the file's last newline: joined, they are the file. A newline never stands inside a UTF-8 character,
    so each piece decodes on its own; every piece but the last ends with a newline, the last has none."""
    carry = b""
    while block := f.read(BLOCK):
        block = carry + block
        cut = block.rfind(b"\n")
        if cut < 0:
            carry = block
            continue
        carry = block[cut + 1:]
        yield block[:cut + 1]
    yield carry


def _check_text(path: Path) -> None:
    """InputError for an empty file (blanks only), then for a NUL byte, then for bytes that are not UTF-8."""
    blank = True
    nul = bad = None  # (line, problem) of the first NUL byte and of the first bytes that are not UTF-8
    before = 0  # newlines in the pieces before this one
    with open_corpus_file(path) as f:
        for piece in _whole_lines(f):
            blank = blank and not piece.strip()
            if nul is None and (at := piece.find(b"\x00")) >= 0:
                nul = (before + piece.count(b"\n", 0, at) + 1, "binary data (NUL byte), not a text corpus file")
            if bad is None:
                try:
                    piece.decode("utf-8")
                except UnicodeDecodeError as e:
                    bad = (before + piece.count(b"\n", 0, e.start) + 1,
                           f"not UTF-8 text (byte 0x{piece[e.start]:02x})")
            before += piece.count(b"\n")
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
