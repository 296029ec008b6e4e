"""Joining two corpora of the same sentences on `# sent_id` (the annotation layers of probes.corpus.layers)."""
from __future__ import annotations

from probes.corpus.sentence import Corpus, Sentence
from probes.base.errors import InputError


def join_on_sent_id(base: Corpus, other: Corpus, keys: list[str]) -> Corpus:
    """Copy the annotations `keys` of `other` into the sentences of `base` with the same sent_id.

    Returns a new Corpus (base and other are not modified) holding, in base's order, a copy of
    each base sentence whose sent_id occurs in `other` with exactly the same words, its `ann`
    updated with other's `ann[k]` for k in keys (other's value wins if base already has k).
    Sentences that cannot be joined are dropped, counted in the result's `skipped` (added to
    base's own counts, skipped ids and notes) and, where they have a sent_id, listed in its
    `skipped_ids`:
      "tokens_differ"    the sent_id occurs in other, but the word lists differ (tokenization
                         changed between releases);
      "sent_id_missing"  base sentence's sent_id does not occur in other;
      the reason other skipped it  when other's reader set that sent_id aside (e.g.
                         "invalid_tree_cycle": other's tree for it is not a tree);
      "no_sent_id"       base sentence has no sent_id at all.
    files = base.files + other.files.

    InputError if a sent_id occurs twice in `other`, or a joined sentence of `other` lacks one
    of `keys` (naming that sentence's file and line).
    """
    by_id: dict[str, Sentence] = {}
    for s in other.sentences:
        if s.sent_id is None:
            continue
        if s.sent_id in by_id:
            first = by_id[s.sent_id]
            raise InputError(f"sent_id {s.sent_id!r} occurs twice (also at {first.source}:"
                             f"{first.line}); cannot join on it", s.source or None, s.line or None)
        by_id[s.sent_id] = s
    set_aside = {sent_id: reason for reason, ids in other.skipped_ids.items() for sent_id in ids}
    out = Corpus(sentences=[], files=list(base.files) + list(other.files))
    out.add_counts(base)
    for s in base.sentences:
        if s.sent_id is None:
            out.skip("no_sent_id")
            continue
        o = by_id.get(s.sent_id)
        if o is None:
            out.skip(set_aside.get(s.sent_id, "sent_id_missing"), sent_id=s.sent_id)
            continue
        if o.words != s.words:
            out.skip("tokens_differ", sent_id=s.sent_id)
            continue
        ann = dict(s.ann)
        for k in keys:
            if k not in o.ann:
                raise InputError(f"sentence {o.sent_id!r} has no {k!r} annotation to join",
                                 o.source or None, o.line or None)
            ann[k] = o.ann[k]
        out.sentences.append(Sentence(words=list(s.words), ann=ann, sent_id=s.sent_id,
                                      source=s.source, line=s.line))
    return out
