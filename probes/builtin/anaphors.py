"""The anaphors of a coreference document, each given to the one window that scores it (probes.builtin.coref).

Mentions are in document order, (start, -end): a mention precedes those nested in it. An anaphor is a mention
with an earlier mention of its chain (every mention of a chain but its first; a singleton has none). Its
antecedents are the earlier mentions of its chain whose head word is not its own (a head that attends to the
anaphor's own head word resolves nothing).

The window rule (WINDOW_RULE): each anaphor is scored exactly once, in the window where it has the most
preceding context, the first window (the earliest start) that holds the whole anaphor; antecedents outside that
window are not candidates. An anaphor none of whose antecedents lies wholly in that window, or that lies whole in
no window (a mention across more sentences than a window holds), is counted out_of_window and not scored; one
whose earlier mentions all share its head word is counted same_head. So, per document,
scored + out_of_window + same_head = the non-first mentions of its chains.

Baselines, on the same anaphors and windows, choose among the mentions (any chain) that end before the anaphor
starts (never one that contains or overlaps it: "[his fellow-men]" does not precede "his"), lie wholly in the
window and whose head word is not the anaphor's own: "nearest", the head word of the last of them in document
order; "head_match", the last of them whose head word's text is the anaphor's head word's, both case folded, else
the nearest. Right when that word is an antecedent's head word, as a head is (an antecedent is any earlier
mention of the chain, an enclosing one included).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from probes.corpus.mention_heads import anaphor_type
from probes.corpus.sentence import Sentence

WINDOW_RULE = ("each anaphor is scored once, in the first window (the earliest start, the most preceding context) "
               "holding the whole anaphor; its antecedents are the earlier mentions of its chain in that window "
               "whose head word is not its own; an anaphor with none there is counted out_of_window (same_head "
               "where every earlier mention of its chain shares its head word), never scored")
COUNTS = ("documents", "windows", "mentions", "chains", "singletons", "non_first", "scored", "out_of_window",
          "same_head")
NO_COLUMN = -1  # a baseline with no preceding mention in the window points nowhere


@dataclass
class WindowAnaphors:
    """What one window scores, in window columns (word index + 1): per anaphor its head word's column, its
    antecedents' head columns, type, whether it is nested in another mention, its words' columns (first, last),
    and the baselines' columns (NO_COLUMN: none); counts: what the window adds to COUNTS."""

    heads: list[int] = field(default_factory=list)
    antecedents: list[list[int]] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    nested: list[bool] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    nearest: list[int] = field(default_factory=list)
    head_match: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n


def assign(document: Sentence, spans: list[tuple[int, int]]) -> list[WindowAnaphors]:
    """The anaphors each window of `document` scores; spans: each window's words, [(start, end exclusive)] document
    offsets, in order of start (probes.encoding.windows)."""
    mentions = document.ann["mentions"]  # [(start, end, chain)] in document order
    heads = document.ann["mention_heads"]
    words, upos = document.words, document.ann["upos"]
    out = [WindowAnaphors() for _ in spans]
    chains: dict[str, list[int]] = {}
    for k, (_, _, chain) in enumerate(mentions):
        chains.setdefault(chain, []).append(k)
    first = out[0]
    first.count("documents")
    first.count("mentions", len(mentions))
    first.count("chains", len(chains))
    first.count("singletons", sum(len(ks) == 1 for ks in chains.values()))
    for w in out:
        w.count("windows")
    for chain_mentions in chains.values():
        for j, k in enumerate(chain_mentions[1:], start=1):
            start, end, _ = mentions[k]
            holding = [w for w, (a, b) in enumerate(spans) if a <= start and end <= b]
            earlier = [i for i in chain_mentions[:j] if heads[i] != heads[k]]
            target = out[holding[0]] if holding else first
            target.count("non_first")
            if not earlier:
                target.count("same_head")
                continue
            if not holding:
                target.count("out_of_window")
                continue
            a, b = spans[holding[0]]
            inside = [i for i in earlier if a <= mentions[i][0] and mentions[i][1] <= b]
            if not inside:
                target.count("out_of_window")
                continue
            target.count("scored")
            # the baselines' candidates: from the window's start, ended before the anaphor starts (so earlier in order)
            preceding = [i for i in range(k) if a <= mentions[i][0] and mentions[i][1] <= start
                         and heads[i] != heads[k]]
            nearest = heads[preceding[-1]] - a + 1 if preceding else NO_COLUMN
            same = [i for i in preceding if words[heads[i]].casefold() == words[heads[k]].casefold()]
            target.heads.append(heads[k] - a + 1)
            target.antecedents.append(sorted({heads[i] - a + 1 for i in inside}))
            target.types.append(anaphor_type(upos[heads[k]]))
            target.nested.append(any(s <= start and end <= e and (s, e) != (start, end)
                                     for s, e, _ in mentions))
            target.spans.append((start - a + 1, end - a))
            target.nearest.append(nearest)
            target.head_match.append(heads[same[-1]] - a + 1 if same else nearest)
    for w in out:  # each window's anaphors in column order (the view's order)
        order = sorted(range(len(w.heads)), key=lambda i: (w.spans[i][0], -w.spans[i][1]))
        for name in ("heads", "antecedents", "types", "nested", "spans", "nearest", "head_match"):
            setattr(w, name, [getattr(w, name)[i] for i in order])
    return out
