"""con: constituent labels from per-head context vectors (He & Choi 2021, pseudo-clustering).

Units are phrases of Penn-Treebank trees (function tags, indices and -NONE- traces stripped by the
reader, with the phrases they leave empty); a phrase's vector is the mean of its words' per-head
context vectors. By default only the lowest phrases, whose children are all preterminals (NLTK's
height-3 subtrees, as in He & Choi 2021; e.g. (NP (DT the) (NN cat))); ``--phrases all`` takes
every phrase (a unary chain such as (NP (NP ...)) then gives two units with the same span).
Per label and head, a centroid over the fit corpus; each scored phrase is predicted as the label
of the nearest centroid by cosine similarity (see probes.builtin.clustering).
"""
from __future__ import annotations

from probes.builtin.clustering import ClusteringProbe
from probes.settings.declared import CON
from probes.corpus.sentence import Sentence
from probes.settings.registry import register

LOWEST = 2  # ptb reader's height of a phrase whose children are all preterminals (preterminal = 1)


@register
class ConstituentProbe(ClusteringProbe, declared=CON):
    needs = ("constituents",)
    unit = "phrases"
    corpus_format = "ptb"

    def spans(self, sentence: Sentence) -> list[tuple[str, int, int]]:
        every = self.config["phrases"] == "all"
        return [(label, start, end) for label, start, end, height in sentence.ann["constituents"]
                if every or height == LOWEST]
