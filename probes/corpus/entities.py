"""IOB2 entity tags ↔ spans, for readers and writers that keep entities as one tag per word."""
from __future__ import annotations

from pathlib import Path

from probes.base.errors import InputError


def spans_from_iob2(tags: list[str], *, path: str | Path | None = None, lines: list[int] | None = None,
                    repair_i_after_o: bool = False, repaired: list[int] | None = None) -> list[tuple[str, int, int]]:
    """IOB2 tags (O, B-TYPE, I-TYPE; one per word) → [(TYPE, start, end)], 0-based, end exclusive.

    A tag that is not O, B-TYPE or I-TYPE is an InputError naming `path` and the word's line (lines[i]);
    so is an I-TYPE after O, after another type or at the start, unless repair_i_after_o reads it as
    B-TYPE (the word's index is then appended to `repaired`, where given).
    """
    spans: list[tuple[str, int, int]] = []
    open_span: tuple[str, int] | None = None  # (type, start) of the span being extended
    for i, tag in enumerate(tags):
        prefix, kind = _parse_tag(tag, path, lines[i] if lines else None)
        if prefix == "I" and (open_span is None or open_span[0] != kind):
            if not repair_i_after_o:
                after = "the start of the sentence" if i == 0 else tags[i - 1]
                raise InputError(f"{tag} follows {after}; pass --repair-i-after-o (repair_i_after_o=True) to read "
                                 f"it as B-{kind}", path, lines[i] if lines else None)
            if repaired is not None:
                repaired.append(i)
            prefix = "B"
        if prefix != "I" and open_span is not None:
            spans.append((open_span[0], open_span[1], i))
            open_span = None
        if prefix == "B":
            open_span = (kind, i)
    if open_span is not None:
        spans.append((open_span[0], open_span[1], len(tags)))
    return spans


def _parse_tag(tag: str, path: str | Path | None, line: int | None) -> tuple[str, str]:
    """('O', '') | ('B', TYPE) | ('I', TYPE); InputError for anything else."""
    if tag == "O":
        return "O", ""
    if len(tag) > 2 and tag[0] in "BI" and tag[1] == "-" and tag[2:].strip() == tag[2:]:
        return tag[0], tag[2:]
    raise InputError(f"entity tag {tag!r} is not IOB2 (expected O, B-TYPE or I-TYPE)", path, line)


def iob2_from_spans(spans: list[tuple[str, int, int]], n_words: int) -> list[str]:
    """[(TYPE, start, end)] (non-overlapping) → one IOB2 tag per word."""
    tags = ["O"] * n_words
    for kind, start, end in spans:
        tags[start] = f"B-{kind}"
        for i in range(start + 1, end):
            tags[i] = f"I-{kind}"
    return tags
