"""pos: part-of-speech tags from per-head context vectors (He & Choi 2021, pseudo-clustering).

Units are words; a word's vector is the mean of its subwords' per-head context vectors
(softmax(QKᵀ/√d)·V of the head, before W_O). Per tag and head, a centroid over the fit corpus;
each scored word is predicted as the tag of the nearest centroid by cosine similarity (see
probes.builtin.clustering). Tags: UPOS by default (CoNLL-U column 4), XPOS with ``--tagset xpos``
(column 5; also the preterminal tags of Penn-Treebank trees). Words tagged ``_`` are no units.
"""
from __future__ import annotations

import numpy as np
import torch

from probes.base.devices import to_device
from probes.encoding.batching import Batch
from probes.builtin.clustering import ClusteringProbe
from probes.settings.declared import POS
from probes.corpus.sentence import Sentence
from probes.capture.maps import LayerMaps
from probes.settings.registry import register


@register
class PosProbe(ClusteringProbe, declared=POS):
    unit = "words"

    def skip_reason(self, sentence: Sentence) -> str | None:
        return None if self.config["tagset"] in sentence.ann else f"no_{self.config['tagset']}"

    def spans(self, sentence: Sentence) -> list[tuple[str, int, int]]:
        return [(tag, i, i + 1) for i, tag in enumerate(sentence.ann[self.config["tagset"]]) if tag != "_"]

    def unit_vectors(self, batch: Batch, maps: LayerMaps) -> tuple[list[str], torch.Tensor]:
        """Words are one-word spans: gather their word vectors directly, [N,H,d]."""
        tagset = self.config["tagset"]
        labels, *at = batch.memo(("pos.words", tagset), lambda: _tagged_words(batch, tagset))
        words = maps.word_vectors.transpose(1, 2)  # [B,C,H,d]
        rows, columns = batch.memo(("pos.words", tagset, words.device),
                                   lambda: [to_device(t, words.device) for t in at])
        return labels, words[rows, columns]


def _tagged_words(batch: Batch, tagset: str) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """The tag of every tagged word of a batch (``_`` is no tag), its sentence row and its column, [N] each."""
    tags = [s.ann[tagset] for s in batch.sentences]
    labels = [t for sentence in tags for t in sentence if t != "_"]
    keep = [np.array([t != "_" for t in sentence], dtype=bool) for sentence in tags]
    rows = np.concatenate([np.full(k.sum(), b) for b, k in enumerate(keep)])
    columns = np.concatenate([np.flatnonzero(k) + 1 for k in keep])
    return labels, torch.from_numpy(rows).long(), torch.from_numpy(columns).long()
