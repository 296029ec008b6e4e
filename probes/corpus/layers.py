"""Annotation layers in files of different formats over the same sentences, joined on `# sent_id`.

    --corpus en_ewt-ud-test.conllu --corpus en_ewt-ud-test.iob2

reads the UD sentences (the base: the first file's format) and adds the UNER entities of the
sentence with the same sent_id, so pos, dep and ner share one forward pass. A base sentence whose
sent_id is missing from a layer, or whose words differ from the layer's (tokenisation changed
between releases), is skipped and counted (sent_id_missing, tokens_differ, no_sent_id; see
probes.corpus.join), its sent_id in the corpus's skipped_ids; one whose layer sentence that layer's
reader set aside keeps the layer's reason (e.g. invalid_tree_cycle). A sent_id used twice in a
layer is an InputError.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from probes.corpus.join import join_on_sent_id
from probes.corpus.sentence import Corpus


def read_layers(paths: list[str | Path], base_format: str, guess: Callable[[str | Path], str | None],
                read: Callable[[str, list[str | Path]], Corpus]) -> Corpus:
    """Group files by format (unguessable ones go with the base), read each group with `read`, join on sent_id."""
    first = guess(paths[0])
    groups: dict[str, list[str | Path]] = {}
    for p in paths:
        found = guess(p)
        groups.setdefault(base_format if found in (None, first) else found, []).append(p)
    corpus = read(base_format, groups.pop(base_format))
    for name, files in groups.items():
        layer = read(name, files)
        keys = sorted(set.intersection(*(set(s.ann) for s in layer.sentences))) if layer.sentences else []
        corpus = join_on_sent_id(corpus, layer, keys)
    return corpus
