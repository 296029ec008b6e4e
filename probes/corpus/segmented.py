"""Gold word segmentation (for the seg probe): SIGHAN-style segmented text, and the character
spans of words in a sentence's text.

SIGHAN format: one sentence a line, words separated by blanks (any Unicode whitespace,
so ASCII spaces, runs of them, and the ideographic space U+3000 all separate words).
"""
from __future__ import annotations

from pathlib import Path

from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import read_text_lines
from probes.base.errors import InputError


def segmentation_from_conllu_words(
    words: list[str], text: str | None = None, *,
    path: str | Path | None = None, line: int | None = None,
) -> tuple[str, list[tuple[int, int]]]:
    """Character spans of `words` in a sentence: returns (text, word_spans).

    Without `text` the words are concatenated (right for CJK, where words are written without
    spaces): text = "".join(words), spans back to back. With `text` (e.g. CoNLL-U's `# text`
    or a raw line) each word is found in turn in `text`, skipping whitespace between words, so
    spans index into `text` as given: text[start:end] == word for every span.

    InputError (naming `path`/`line` when given) if a word is empty or contains whitespace,
    or `text` does not spell out exactly the words (whitespace aside).
    """
    spans: list[tuple[int, int]] = []
    for w in words:
        if not w or any(ch.isspace() for ch in w):
            raise InputError(f"word {w!r} is empty or contains whitespace", path, line)
    if text is None:
        pos = 0
        for w in words:
            spans.append((pos, pos + len(w)))
            pos += len(w)
        return "".join(words), spans
    pos = 0
    for k, w in enumerate(words):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if text.startswith(w, pos):
            spans.append((pos, pos + len(w)))
            pos += len(w)
            continue
        got = text[pos:pos + len(w)]
        raise InputError(f"word {k + 1} {w!r} does not match the text at character {pos} "
                         f"({got!r})", path, line)
    if text[pos:].strip():
        raise InputError(f"text goes on after the last word: {text[pos:].strip()[:20]!r}",
                         path, line)
    return text, spans


def _content_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, line) for each sentence line; InputError for a blank line before the last
    non-blank one. Trailing blank lines are ignored."""
    lines = read_text_lines(path)
    last = max((i for i, t in enumerate(lines) if t.strip()), default=-1)
    out = []
    for i, t in enumerate(lines[: last + 1]):
        if not t.strip():
            raise InputError("empty line: one sentence per line expected", path, i + 1)
        out.append((i + 1, t))
    return out


def read_segmented(path: str | Path) -> Corpus:
    """Read a SIGHAN-style segmented file: one sentence a line, words separated by blanks.

    Each line becomes a Sentence (sent_id = "<file stem>:<line>", line = its line) with
      words              the gold words (the line split on whitespace);
      ann["text"]        the words concatenated without spaces (the unsegmented sentence);
      ann["word_spans"]  list of (char_start, char_end) into ann["text"], end exclusive,
                         one per word, back to back: text[start:end] == words[i].

    InputError (file:line) for an empty (or blank-only) line with a sentence after it; blank
    lines at the end of the file are fine.
    """
    path = Path(path)
    corpus = Corpus(sentences=[], files=[str(path)])
    for n, t in _content_lines(path):
        words = t.split()
        text, spans = segmentation_from_conllu_words(words, path=path, line=n)
        corpus.sentences.append(Sentence(words=words, ann={"text": text, "word_spans": spans},
                                         sent_id=f"{path.stem}:{n}", source=str(path), line=n))
    return corpus

