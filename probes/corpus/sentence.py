"""The unit every reader produces and every probe consumes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Sentence:
    """One sentence of a corpus.

    words: the units given to the tokenizer (syntactic words for CoNLL-U), in order.
    ann:   annotations keyed by name; per-word lists are aligned with `words`
           (e.g. ann["head"][i] is the 1-based head of word i+1, 0 = root).
    source, line: file and 1-based line where the sentence starts, for error messages.
    occurrence: how many earlier sentences of the corpus have the same words (0 for the first);
           numbered where a run reads its corpus (probes.encoding.identity.Occurrences), part of its identity.
    """

    words: list[str]
    ann: dict[str, Any] = field(default_factory=dict)
    sent_id: str | None = None
    source: str = ""
    line: int = 0
    occurrence: int = 0
    # the identity key (probes.encoding.identity.sentence_key) as last computed, with the words and occurrence it was made of
    identity: tuple[int, list[str], int] | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.words)

    def unit(self) -> "Sentence":
        """What the sentence's identity (probes.encoding.identity) names: the sentence itself; a window of a document
        (probes.encoding.windows.Window) names its document, so that every window of it is one unit to shards and
        to the bootstrap."""
        return self


@dataclass
class Corpus:
    """Sentences read from one or more files, plus the counts of what a reader set aside.

    skipped_ids: for each skip reason, the sent_ids of the skipped sentences that have one (a
    reader records them where it knows the id), in the order they were skipped.
    silver: the files whose labels a tool made (spaCy, directly or through `probes annotate`), each with what made
    them ("spaCy 3.8.0, en_core_web_sm 3.8.0"); the other files' labels are gold.
    """

    sentences: list[Sentence]
    files: list[str]
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> sentences set aside
    notes: dict[str, int] = field(default_factory=dict)  # what -> count of annotations set aside (not sentences)
    skipped_ids: dict[str, list[str]] = field(default_factory=dict)  # reason -> sent_ids of skipped sentences
    silver: dict[str, str] = field(default_factory=dict)  # file -> the tool that annotated it

    def skip(self, reason: str, n: int = 1, sent_id: str | None = None) -> None:
        """Count `n` sentences set aside for `reason`; record `sent_id` (of a single sentence) when known."""
        self.skipped[reason] = self.skipped.get(reason, 0) + n
        if sent_id is not None:
            self.skipped_ids.setdefault(reason, []).append(sent_id)

    def note(self, what: str, n: int = 1) -> None:
        self.notes[what] = self.notes.get(what, 0) + n

    def add_counts(self, other: "Corpus") -> None:
        """Add `other`'s skip counts, skipped ids, notes and silver files to this corpus's (its sentences are not
        added)."""
        for reason, n in other.skipped.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
        for reason, ids in other.skipped_ids.items():
            self.skipped_ids.setdefault(reason, []).extend(ids)
        for what, n in other.notes.items():
            self.note(what, n)
        self.silver.update(other.silver)
