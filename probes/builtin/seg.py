"""seg: word segmentation from attention (heads that mark word ends).

Units are the model's tokens (characters for Chinese under a BERT tokenizer, subwords for any
language; see seg_units for what is and is not a unit). For a head, pred[i] = argmax_j A[i, j]
over all positions of the sentence (specials included). Unit i is "inside a word" when
pred[i] == i + 1 (it looks at the next token) and "word end" otherwise (end_rule "next", the
default); with end_rule "sep" it is a word end only when pred[i] is the end special ([SEP],
</s>). Scores per head (seg_scoring): boundary accuracy, boundary P/R/F1, word P/R/F1 (the main
score), boundary accuracy and F1 over gaps between two known (non-[UNK]) tokens, and word recall
per gold word length (labels len1..len4+). Baselines: every unit a word (all_ends) and every
sentence one word (no_ends). The union of all heads and greedy best-k ensembles are given under
two combination rules (oracle, any_end; see seg_scoring).

State: additive counts [STATS, L*H+4] (heads, then all_ends, no_ends, union oracle, union
any_end). The greedy ensembles need every head's prediction at every unit, which counts cannot
give exactly; they are kept packed, one bit per unit per head (ensemble_size 0 keeps none), and
shards merge by concatenation. The segmentations of every head for the first `examples`
sentences are kept for `probes show`.

Gold segmentation: CoNLL-U FORMs or a SIGHAN file (--format segmented). For Chinese use
``--tokenize text`` so the model reads the raw characters and never sees the gold boundaries.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from probes.batching import Batch
from probes.builtin.seg_scoring import COMBINE_RULES, STATS, greedy, metrics, tally, union_ends
from probes.builtin.seg_show import format_seg
from probes.builtin.seg_units import LENGTH_LABELS, BatchUnits, Units, batch_units, unit_surfaces
from probes.errors import InputError
from probes.probe import Option, Probe
from probes.registry import register
from probes.results import LabelScores, ProbeResult, RunInfo

END_RULES = ("next", "sep")
EXTRA_COLUMNS = ("all_ends", "no_ends", "union_oracle", "union_any_end")


@register
class SegmentationProbe(Probe):
    name = "seg"
    description = "word segmentation: heads that look at the next token inside a word and away (at [SEP]) at its end"
    corpus_format = "segmented"
    options = (
        Option("end_rule", "next", "a unit ends a word when the head's argmax is not the next token (next), or only "
               "when it is the end special token [SEP] (sep)", str, END_RULES),
        Option("ensemble_size", 10, "largest greedy best-k head ensemble; 0 for none (otherwise every head's "
               "prediction is kept in memory, 1 bit per token per head)", int),
        Option("examples", 10, "keep every head's segmentation of the first N sentences for `probes show`", int),
    )
    details = staticmethod(format_seg)  # under `probes show`'s table: baselines, ensembles, segmented examples

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        for name in ("ensemble_size", "examples"):
            if self.config[name] < 0:
                raise InputError(f"seg: {name.replace('_', '-')} must be 0 or more, not {self.config[name]}")
        self.stats = torch.zeros(len(STATS), layers * heads + len(EXTRA_COLUMNS), dtype=torch.int64)
        self.totals: dict[str, int] = {}
        self.bucket_words = np.zeros(len(LENGTH_LABELS), dtype=np.int64)
        self.kept: list[tuple[np.ndarray, Units]] = []  # per batch: packed ends [N, ceil(L*H/8)] uint8, units
        self.examples: list[dict] = []

    def update(self, batch: Batch) -> None:
        found = batch_units(batch)
        ends = self._predicted_ends(batch, found)  # [N, L*H]
        gold = found.units.gold_end
        extra = torch.stack([torch.ones_like(gold), torch.zeros_like(gold), union_ends(ends, gold, "oracle"),
                             union_ends(ends, gold, "any_end")], dim=1)  # [N,4] in EXTRA_COLUMNS order
        self.stats += tally(torch.cat([ends, extra], dim=1), found.units)
        for key, value in found.counts.items():
            self.totals[key] = self.totals.get(key, 0) + value
        self.bucket_words += found.bucket_words
        if self.config["ensemble_size"]:
            self.kept.append((np.packbits(ends.numpy(), axis=1), found.units))
        self._keep_examples(batch, found, ends)

    def _predicted_ends(self, batch: Batch, found: BatchUnits) -> torch.Tensor:
        """[N, L*H] bool: does each head end a word after each unit?"""
        device = batch.attentions[0].device
        rows, positions = found.rows.to(device), found.positions.to(device)
        looks = torch.stack(batch.attentions, dim=1).argmax(-1)[rows, :, :, positions]  # [N,L,H] argmax position
        if self.config["end_rule"] == "sep":
            end_special = (batch.columns == batch.end_column).long().argmax(1).to(device)  # [B] first end special
            ends = looks == end_special[rows][:, None, None]
        else:
            ends = looks != (positions + 1)[:, None, None]
        return ends.reshape(len(rows), -1).cpu()

    def _keep_examples(self, batch: Batch, found: BatchUnits, ends: torch.Tensor) -> None:
        for b, index in enumerate(batch.indices):
            if index >= self.config["examples"]:
                continue
            start, stop = found.starts[b], found.starts[b + 1]
            surfaces = unit_surfaces(batch, b, found.positions[start:stop].numpy())
            if surfaces is None:
                continue
            sentence = batch.sentences[b]
            self.examples.append({"index": index, "sent_id": sentence.sent_id, "line": sentence.line,
                                  "gold": list(sentence.words), "units": surfaces,
                                  "gold_ends": _bits(found.units.gold_end[start:stop][:, None])[0],
                                  "ends": _bits(ends[start:stop])})

    def merge(self, other: "SegmentationProbe") -> None:
        self.stats += other.stats
        for key, value in other.totals.items():
            self.totals[key] = self.totals.get(key, 0) + value
        self.bucket_words += other.bucket_words
        self.kept.extend(other.kept)
        self.examples.extend(other.examples)

    def compute(self, info: RunInfo) -> ProbeResult:
        grid = self.layers * self.heads
        totals = {**dict.fromkeys(("decisions", "known_decisions", "gold_words"), 0), **self.totals}
        scores = metrics(self.stats, totals)  # name -> [L*H + 4]
        heads = {name: v[:grid].reshape(self.layers, self.heads).numpy() for name, v in scores.items()}
        overall = LabelScores(count=totals["gold_words"], scores=heads.pop("word_f1"), extra=heads)
        labels = {}
        for i, label in enumerate(LENGTH_LABELS):
            right = self.stats[STATS.index(f"right_{label}"), :grid].double().reshape(self.layers, self.heads)
            n = int(self.bucket_words[i])
            labels[label] = LabelScores(count=n, scores=(right / n).numpy() if n else np.full(right.shape, np.nan))
        column = {name: grid + i for i, name in enumerate(EXTRA_COLUMNS)}
        baselines = {name: _scalars(scores, column[name]) for name in ("all_ends", "no_ends")}
        union = {rule: _scalars(scores, column[f"union_{rule}"]) for rule in COMBINE_RULES}
        extra = {"units": totals, "union": union, "ensembles": self._ensembles(totals),
                 "examples": sorted(self.examples, key=lambda e: e["index"])}
        return ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels, overall=overall,
                           baselines=baselines, extra=extra)

    def _ensembles(self, totals: dict[str, int]) -> dict[str, list[dict]]:
        if not self.config["ensemble_size"] or not self.kept:
            return {}
        grid = self.layers * self.heads
        ends = torch.from_numpy(np.concatenate([np.unpackbits(p, axis=1, count=grid) for p, _ in self.kept])).bool()
        units = Units.cat([u for _, u in self.kept])
        out = {}
        for rule in COMBINE_RULES:
            curve = greedy(ends, units, totals, rule, self.config["ensemble_size"])
            for step in curve:
                step["heads"] = [[h // self.heads, h % self.heads] for h in step["heads"]]
                step.update({k: _number(v) for k, v in step.items() if k != "heads"})
            out[rule] = curve
        return out


def _bits(ends: torch.Tensor) -> list[str]:
    """One "0"/"1" string per column of a [n,K] bool tensor."""
    rows = (ends.T.numpy().astype(np.uint8) + ord("0"))
    return [r.tobytes().decode("ascii") for r in rows]


def _scalars(scores: dict[str, torch.Tensor], column: int) -> dict[str, float | None]:
    return {name: _number(float(v[column])) for name, v in scores.items()}


def _number(x: float) -> float | None:
    return None if math.isnan(x) else x
