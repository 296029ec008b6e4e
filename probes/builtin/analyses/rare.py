"""rare: heads that point to the least frequent word of the sentence (Voita et al. 2019's "rare words" heads).

Word level (a frequency belongs to a word): pred[i] = argmax over the [CLS] column and the words
of the pooled word-level map (the run's --pool rule), as for dep. A sentence's rarest words are
those of lowest corpus frequency (ties: all of them); a query word that is not itself one of the
rarest is a hit when its argmax is one of them. Score = hits / query words. A sentence whose
words all share one frequency has no rarest word and is not counted ("sentences_without_rarest"
in the JSON). Baseline "chance": the share an argmax drawn uniformly over [CLS] and the words
would get (mean over query words of rarest words / (n + 1)).

Frequencies: by default counted over every sentence the run reads (after --limit; a streamed pass over
the text, no model, holding only the counts); or from --frequencies FILE, one "word<TAB>count" (or "word count") a line, words
missing from it counting 0. Words are lowercased unless --case-sensitive. Sharded runs should
share a frequency file, so that every shard ranks words the same way.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable

import torch

from probes.encoding.batching import Batch
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.settings.declared import RARE
from probes.corpus.sentence import Sentence
from probes.corpus.textio import read_text_lines
from probes.base.errors import InputError
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo


@register
class RareWordAnalysis(MeanAnalysis, declared=RARE):
    measures = ("rarest",)
    scalars = ("chance",)
    tallies = ("sentences_without_rarest",)

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        self.frequency: Counter[str] = Counter()

    def _key(self, word: str) -> str:
        return word if self.config["case_sensitive"] else word.lower()

    def prepare(self, sentences: Iterable[Sentence]) -> None:
        path = self.config["frequencies"]
        if path:
            self.frequency = read_frequencies(path, self._key)
        else:
            self.frequency = Counter(self._key(w) for s in sentences for w in s.words)

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        pred = maps.predictions  # [B,H,C]
        rarest, rows = batch.memo(("rare.rarest", id(self)), lambda: self._rarest(batch))  # [B,C] bool each
        rarest, rows = rarest.to(pred.device), rows.to(pred.device)
        hit = rarest[:, None, :].expand_as(pred).gather(-1, pred) & rows[:, None, :]  # [B,H,C]
        n_rows = rows.sum()
        split = (hit.sum(2), rows.sum(1)) if self.bootstrap.replicates else None  # [B,H], [B] for the replicates
        self.add(maps, "rarest", hit.sum((0, 2)), n_rows, split)
        if maps.layer == 0:  # the baseline and the sentences left out do not depend on the layer
            chance = rarest.sum(1) / (batch.n_words.to(pred.device) + 1).double()  # [B] argmax uniform over [CLS], words
            self.add_scalar("chance", (chance * rows.sum(1)).sum(), n_rows)
            self.tally("sentences_without_rarest", (rarest.sum(1) == 0).sum())

    def _rarest(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """[B,C] the rarest word columns of each sentence, and the query word columns (the other words)."""
        rarest = torch.zeros(len(batch.sentences), batch.width, dtype=torch.bool)
        for b, sentence in enumerate(batch.sentences):
            freq = [self.frequency[self._key(w)] for w in sentence.words]
            if min(freq) != max(freq):  # Python numbers: a tensor's bool would be a read per sentence
                rarest[b, 1:len(freq) + 1] = torch.tensor(freq) == min(freq)
        has_rarest = rarest.any(1, keepdim=True)
        return rarest, batch.word_columns & ~rarest & has_rarest

    def compute(self, info: RunInfo) -> ProbeResult:
        return self.result(info, self.mean("rarest"), {}, overall_measure="rarest", baselines={"chance": self.scalar("chance")},
                           extra={"sentences_without_rarest": self.tallied("sentences_without_rarest"),
                                  "frequencies": self.config["frequencies"] or "corpus"})


def read_frequencies(path: str | Path, key=str.lower) -> Counter[str]:
    """A word frequency file: 'word<TAB>count' or 'word count' a line; InputError (file:line) otherwise."""
    counts: Counter[str] = Counter()
    for number, line in enumerate(read_text_lines(path), 1):
        if not line.strip():
            continue
        parts = line.rsplit("\t", 1) if "\t" in line else line.rsplit(None, 1)
        if len(parts) != 2 or not parts[1].strip().isdigit() or not parts[0].strip():
            raise InputError("expected 'word<TAB>count' (count a whole number)", path, number)
        counts[key(parts[0].strip())] += int(parts[1])
    return counts
