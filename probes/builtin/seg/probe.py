"""seg: word segmentation from attention (heads that mark word ends).

Units are the model's tokens (characters for Chinese under a BERT tokenizer, subwords for any
language; see probes.builtin.seg.units for what is and is not a unit). For a head,
pred[i] = argmax_j A[i, j] over all positions of the sentence (specials included). Unit i is
"inside a word" when pred[i] == i + 1 (it looks at the next token) and "word end" otherwise
(end_rule "next", the default); with end_rule "sep" it is a word end only when pred[i] is the end
special ([SEP], </s>). Scores per head (probes.builtin.seg.scoring): boundary accuracy, boundary
P/R/F1, word P/R/F1 (the main score), boundary accuracy and F1 over gaps between two known
(non-[UNK]) tokens, and word recall per gold word length (labels len1..len4+). Baselines: every
unit a word (all_ends) and every sentence one word (no_ends). The union of all heads and greedy
best-k ensembles are given under two combination rules (oracle, any_end; see
probes.builtin.seg.scoring).

State: additive counts [STATS, L*H+4] (heads, then all_ends, no_ends, union oracle, union
any_end), counted once the batch's last layer is in (a union is over the heads of every layer): until
then each layer's predicted ends (at every position) stay on the maps' device; at the last layer they leave for the
host in one copy the model's thread does not wait for, and the probe's own thread finds the units and scores them
while the device runs the next batch; the batch's part is added to the state at the next batch's last layer (or
before the state is read). The
greedy ensembles need every head's prediction at every unit, which counts cannot give exactly; they
are kept packed, one bit per unit per head (ensemble_size 0 keeps none), and shards merge by concatenation
(probes.builtin.seg.kept). The segmentations of every head for the first `seg_examples` sentences
are kept for `probes show` (the result's "examples").

A decoder-only model's units attend only to themselves and earlier units: pred[i] is never i + 1 nor an end special
after the sentence, so every head predicts a word end at every unit, under either end rule, and its scores are the
all_ends baseline's: seg says nothing of segmentation on such a model, and its results say so
(``extra["causal_constraint"]``).

Gold segmentation: CoNLL-U FORMs or a SIGHAN file (--format segmented). For Chinese use
``--tokenize text`` so the model reads the raw characters and never sees the gold boundaries.
"""
from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from probes.encoding.batching import Batch
from probes.results.bootstrap import add_replicates, replicate_ratio, weighted_sums
from probes.settings.declared import SEG
from probes.builtin.seg.kept import Examples, KeptEnds
from probes.builtin.seg.scoring import COMBINE_RULES, STATS, greedy, metrics, tally, union_ends
from probes.builtin.seg.show import SegPresentation
from probes.builtin.seg.units import COUNTS, LENGTH_LABELS, BatchUnits, batch_units, unit_surfaces
from probes.base.devices import HostCopy, to_device
from probes.base.errors import InputError
from probes.results.intervals import SCORE_RANGES, attach_interval, interval_method, record_range
from probes.capture.maps import LayerMaps
from probes.scoring.probe import Probe, ratio
from probes.settings.registry import register
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

EXTRA_COLUMNS = ("all_ends", "no_ends", "union_oracle", "union_any_end")
REPLICATED = ("replicate_right", "replicate_predicted", "replicate_gold", "replicate_bucket_right",
              "replicate_bucket_words")  # the replicated state (probes.results.bootstrap), added batch by batch
CAUSAL_NOTE = ("decoder-only model: a unit attends only to itself and earlier units, never to the next unit nor to an "
               "end special after the sentence, so every head predicts a word end at every unit: its scores are the "
               "all_ends baseline's, and say nothing of segmentation")


@register
class SegmentationProbe(SegPresentation, Probe, declared=SEG):
    corpus_format = "segmented"

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        for name in ("ensemble_size", "seg_examples"):
            if self.config[name] < 0:
                raise InputError(f"seg: {name.replace('_', '-')} must be 0 or more, not {self.config[name]}")
        grid = layers * heads
        self.add_state("stats", torch.zeros(len(STATS), grid + len(EXTRA_COLUMNS), dtype=torch.int64))  # [STATS,L*H+4]
        self.add_state("totals", torch.zeros(len(COUNTS), dtype=torch.int64))  # [COUNTS] units, decisions, ...
        self.add_state("bucket_words", torch.zeros(len(LENGTH_LABELS), dtype=torch.int64))  # reachable gold words
        self.add_state("kept", KeptEnds(grid))  # every head's ends at every unit, for the ensembles
        self.add_state("examples", Examples())  # every head's segmentation of the first sentences
        # word F1's parts per bootstrap replicate (probes.results.bootstrap): [R,L,H], [R]
        self.add_state("replicate_right", torch.zeros(layers, heads, dtype=torch.float64), replicated=True)  # right words
        self.add_state("replicate_predicted", torch.zeros(layers, heads, dtype=torch.float64), replicated=True)  # predicted words
        self.add_state("replicate_gold", torch.zeros((), dtype=torch.float64), replicated=True)  # gold words
        buckets = len(LENGTH_LABELS)  # the labels: right reachable words / reachable words, by length
        self.add_state("replicate_bucket_right", torch.zeros(buckets, layers, heads, dtype=torch.float64), replicated=True)
        self.add_state("replicate_bucket_words", torch.zeros(buckets, dtype=torch.float64), replicated=True)
        self._ends: torch.Tensor | None = None  # [L,B,H,T] the current batch's ends at every position, layer by layer
        self._unsettled: tuple[Future, bool] | None = None  # the last batch's part, scored on the probe's thread
        self._worker: ThreadPoolExecutor | None = None  # that thread: the probe's, for its life

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        layer = maps.layer
        if layer == 0:  # every layer's ends stay on the maps' device until the last layer: one copy per batch
            b, h, t = maps.attention.shape[:3]
            self._ends = torch.empty(self.layers, b, h, t, dtype=torch.bool, device=maps.device)
        self._ends[layer] = self._predicted_ends(batch, maps)
        if layer < self.layers - 1:
            return
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seg-score")
        part = self._worker.submit(self._part, batch, HostCopy(self._ends, given=True))  # [L,B,H,T] to the host
        self._ends = None
        self.settle()  # the previous batch, scored meanwhile
        self._unsettled = (part, torch.is_inference_mode_enabled())

    def _predicted_ends(self, batch: Batch, maps: LayerMaps) -> torch.Tensor:
        """[B,H,T] bool on the maps' device: does each head of the layer end a word after the token at each position?
        (Read at the units' positions alone, ``_part``.)"""
        looks = maps.attention.argmax(-1)  # [B,H,T] the argmax position of each row
        if self.config["end_rule"] == "sep":
            end_special = batch.memo(("seg.end_special", maps.device), lambda: to_device(
                (batch.columns == batch.end_column).long().argmax(1), maps.device))  # [B] the first end special
            return looks == end_special[:, None, None]
        return looks != torch.arange(1, looks.shape[-1] + 1, device=looks.device)

    def _part(self, batch: Batch, copy: HostCopy) -> dict:
        """What a batch adds to the state, on the probe's thread once its ends are on the host (the units found, their
        ends [N,L,H] read from [L,B,H,T]); added by ``settle``."""
        found = batch_units(batch)
        ends = copy.landed()[:, found.rows, :, found.positions]  # [N,L,H]: the indexed dimensions first
        part = {"totals": torch.tensor([found.counts[key] for key in COUNTS]),
                "bucket_words": torch.from_numpy(found.bucket_words), "kept": None, "examples": []}
        part.update(self._replicate_parts(batch, found, ends))
        flat = ends.reshape(len(found.units), -1)  # [N, L*H]
        gold = found.units.gold_end
        extra = torch.stack([torch.ones_like(gold), torch.zeros_like(gold), union_ends(flat, gold, "oracle"),
                             union_ends(flat, gold, "any_end")], dim=1)  # [N,4] in EXTRA_COLUMNS order
        part["stats"] = tally(torch.cat([flat, extra], dim=1), found.units)  # every column of the state at once
        if self.config["ensemble_size"]:
            part["kept"] = self.kept.packed(flat, found.units)
        part["examples"] = self._examples(batch, found, flat)
        return part

    def _replicate_parts(self, batch: Batch, found: BatchUnits, ends: torch.Tensor) -> dict[str, torch.Tensor]:
        """Word F1's parts per sentence, weighted into the replicates (none without them): the words each head
        predicts and gets right in each sentence (as ``tally`` counts them: a word ends after a unit where the head
        says so and at the sentence end), and the sentence's gold words. ends [N,L,H]: every head of every layer."""
        weights = self.bootstrap.weights(batch)  # [R,B] or None
        if weights is None:
            return {}
        parts = {name: torch.zeros_like(getattr(self, name)) for name in REPLICATED}
        units = found.units
        full = ends | units.final[:, None, None]  # [N,L,H] a word ends after the unit
        add_replicates(parts["replicate_predicted"], found.rows, full.double(), weights)
        wrong = torch.cat([torch.zeros(1, *ends.shape[1:], dtype=torch.long),
                           (full ^ units.gold_end[:, None, None]).long().cumsum(0)])  # [N+1,L,H] wrong gaps so far
        start, stop = units.word_gaps()  # [W] each, as tally counts them
        right = wrong[stop] == wrong[start]  # [W,L,H] the reachable gold word predicted exactly
        sentence = found.rows[units.word_first]  # [W] each word's batch row
        add_replicates(parts["replicate_right"], sentence, right.double(), weights)
        buckets = len(LENGTH_LABELS)
        parts["replicate_bucket_right"] += weighted_sums(units.word_bucket, buckets, sentence,
                                                         right.flatten(1).double(), weights).view(
            parts["replicate_bucket_right"].shape)  # [R,buckets,L,H]
        gold = torch.tensor([len(s.words) for s in batch.sentences], dtype=torch.float64)  # [B] gold words
        add_replicates(parts["replicate_gold"], None, gold, weights)
        parts["replicate_bucket_words"] += weighted_sums(units.word_bucket, buckets, sentence,
                                                         torch.ones(len(sentence), 1), weights)[..., 0]  # [R,buckets]
        return parts

    def _examples(self, batch: Batch, found: BatchUnits, ends: torch.Tensor) -> list[dict]:
        """Every head's segmentation (ends [N, L*H]) of the batch's sentences among the first ``seg_examples``."""
        items = []
        for b, index in enumerate(batch.indices):
            if index >= self.config["seg_examples"]:
                continue
            start, stop = found.starts[b], found.starts[b + 1]
            surfaces = unit_surfaces(batch, b, found.positions[start:stop].numpy())
            if surfaces is None:
                continue
            sentence = batch.sentences[b]
            items.append({"index": index, "sent_id": sentence.sent_id, "line": sentence.line,
                          "gold": list(sentence.words), "units": surfaces,
                          "gold_ends": _bits(found.units.gold_end[start:stop][:, None])[0],
                          "ends": _bits(ends[start:stop])})
        return items

    def settle(self) -> None:
        """Add the part of the batch that was being scored, if any (waiting for it here): at the next batch's last
        layer, and before the state is read, merged, computed or replaced."""
        if self._unsettled is None:
            return
        part, inference = self._unsettled
        self._unsettled = None
        part = part.result()
        with torch.inference_mode(inference):  # as the batch's update was (the runner's is): its state's tensors
            for name in ("stats", "totals", "bucket_words", *(n for n in REPLICATED if n in part)):
                getattr(self, name).add_(part[name])
        if part["kept"] is not None:
            self.kept.add(part["kept"])
        self.examples.items.extend(part["examples"])

    def merge(self, other: "SegmentationProbe") -> None:
        self.settle()
        other.settle()
        super().merge(other)

    def reset(self) -> None:
        super().reset()
        self._ends = self._unsettled = None

    def state_dict(self) -> dict:
        self.settle()
        return super().state_dict()

    def retry_point(self, method: str = "update") -> tuple:
        """The state as it is (Probe.retry_point), without adding the last batch's part first (it may still be
        scoring: waiting for it here would stop the model), and that part still to add."""
        return super().retry_point(method), self._unsettled

    def restore(self, point: tuple) -> None:
        state, unsettled = point
        super().restore(state)
        self._unsettled = unsettled

    def load_state_dict(self, state) -> None:
        """Replace the state; a batch not added yet, or not finished (one that ran out of memory), is dropped."""
        super().load_state_dict(state)
        self._unsettled = None

    def drop_unfinished(self) -> None:
        """The ends of a batch not finished."""
        self._ends = None

    def compute(self, info: RunInfo) -> ProbeResult:
        self.settle()
        grid = self.layers * self.heads
        totals = {key: int(n) for key, n in zip(COUNTS, self.totals)}
        scores = metrics(self.stats, totals)  # name -> [L*H + 4]
        heads = {name: v[:grid].reshape(self.layers, self.heads).numpy() for name, v in scores.items()}
        overall = LabelScores(count=totals["gold_words"], scores=heads.pop("word_f1"), extra=heads)
        labels = {}
        for i, label in enumerate(LENGTH_LABELS):
            right = self.stats[STATS.index(f"right_{label}"), :grid].double().reshape(self.layers, self.heads)
            labels[label] = LabelScores(count=int(self.bucket_words[i]), scores=ratio(right, self.bucket_words[i]))
        column = {name: grid + i for i, name in enumerate(EXTRA_COLUMNS)}
        baselines = {name: _scalars(scores, column[name]) for name in ("all_ends", "no_ends")}
        union = {rule: _scalars(scores, column[f"union_{rule}"]) for rule in COMBINE_RULES}
        extra = {"units": totals, "union": union, "ensembles": self._ensembles(totals),
                 "examples": sorted(self.examples.items, key=lambda e: e["index"])}
        if self.causal:
            extra["causal_constraint"] = {"note": CAUSAL_NOTE}
        result = ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels, overall=overall,
                             baselines=baselines, extra=extra)
        if self.bootstrap.replicates and overall.count:  # word F1 = 2 right / (predicted + gold), per replicate
            gold = self.replicate_gold[:, None, None]
            denominator = self.replicate_predicted + gold
            f1 = (2 * self.replicate_right / denominator.where(denominator > 0, torch.nan)).numpy()  # [R,L,H]
            result.replicates["overall"] = attach_interval(overall, f1, "bounded")  # F1 in [0, 1], n = gold words
            result.extra["interval_method"] = interval_method({"overall": "bounded", "labels": "binomial"})
            record_range(result, SCORE_RANGES["bounded"])  # F1 and the length labels' shares alike
            for i, label in enumerate(LENGTH_LABELS):
                if labels[label].count:
                    scores = replicate_ratio(self.replicate_bucket_right[:, i], self.replicate_bucket_words[:, i])
                    result.replicates[label] = attach_interval(labels[label], scores)  # [R,L,H] → [R]
        return result

    def _ensembles(self, totals: dict[str, int]) -> dict[str, list[dict]]:
        if not self.config["ensemble_size"] or not self.kept.parts:
            return {}
        ends, units = self.kept.all()
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
