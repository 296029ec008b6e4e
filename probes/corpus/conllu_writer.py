"""Writing sentences as CoNLL-U (the silver output of `probes annotate`), atomically.

Columns: ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC, from ann["lemma"], ["upos"],
["xpos"], ["feats"], ["head"], ["deprel"] (``_`` where a key is missing); MISC holds
``NER=<IOB2 tag>`` on every word when the sentence has entities annotated (ann["ner"]; O included,
so "no entity" is told apart from "not annotated") and ``SpaceAfter=No`` where ann["space_after"]
says so. Comments: ``# sent_id``, ``# text``, and the `header` lines before the first sentence.
probes.corpus.conllu_reader reads all of it back (entities into ann["ner"]).
"""
from __future__ import annotations

from pathlib import Path

from probes.corpus.entities import iob2_from_spans
from probes.corpus.sentence import Sentence
from probes.base.files import write_atomic


def conllu_text(sentences: list[Sentence], header: list[str] = ()) -> str:
    """The CoNLL-U text of `sentences`; `header` = comment lines (without '# ') before the first."""
    blocks = []
    for k, s in enumerate(sentences):
        lines = [f"# {h}" for h in header] if k == 0 else []
        if s.sent_id is not None:
            lines.append(f"# sent_id = {s.sent_id}")
        if s.ann.get("text"):
            lines.append(f"# text = {s.ann['text']}")
        n = len(s.words)
        column = {key: s.ann.get(key) or ["_"] * n for key in ("lemma", "upos", "xpos", "feats", "deprel")}
        heads = s.ann.get("head") or ["_"] * n
        ner = iob2_from_spans(s.ann["ner"], n) if "ner" in s.ann else None
        space_after = s.ann.get("space_after") or [True] * n
        for i, form in enumerate(s.words):
            misc = ([f"NER={ner[i]}"] if ner else []) + ([] if space_after[i] else ["SpaceAfter=No"])
            lines.append("\t".join([str(i + 1), form, column["lemma"][i], column["upos"][i], column["xpos"][i],
                                    column["feats"][i], str(heads[i]), column["deprel"][i], "_",
                                    "|".join(misc) or "_"]))
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks) + "\n"


def write_conllu(sentences: list[Sentence], path: str | Path, header: list[str] = ()) -> Path:
    """Write `sentences` to `path` as CoNLL-U through a temporary file and a rename."""
    return write_atomic(Path(path), conllu_text(sentences, header).encode("utf-8"))
