"""ner: named-entity types from per-head context vectors (He & Choi 2021, pseudo-clustering).

Units are entity spans (IOB2 files such as Universal NER, CoNLL-2012 NER brackets, or silver
entities in a CoNLL-U MISC column); an entity's vector is the mean of its words' per-head context
vectors. Per entity type and head, a centroid over the fit corpus; each scored entity is predicted
as the type of the nearest centroid by cosine similarity (see probes.builtin.clustering).
An IOB2 ``I-`` tag after ``O`` (or after another type) is an error unless ``--repair-i-after-o``
reads it as ``B-``.
"""
from __future__ import annotations

from probes.builtin.clustering import ClusteringProbe
from probes.settings.declared import NER
from probes.corpus.sentence import Sentence
from probes.settings.registry import register


@register
class NerProbe(ClusteringProbe, declared=NER):
    needs = ("ner",)
    unit = "entities"

    def reader_options(self):
        return {"repair_i_after_o": self.config["repair_i_after_o"]}

    def spans(self, sentence: Sentence) -> list[tuple[str, int, int]]:
        return list(sentence.ann["ner"])
