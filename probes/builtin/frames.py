"""frames: FrameNet frame-element relations from attention (Kovaleva et al. 2019, "Revealing
the Dark Secrets of BERT", section 4.2).

An instance is one (frame-evoking target, frame element) pair of a FrameNet full-text
annotation set, with the target's words T and the FE's words F. For a head with word-level
attention A (rows: from, columns: to):

    score     = max over t ∈ T, f ∈ F of max(A[t, f], A[f, t])     (Kovaleva et al.'s measure)
    accuracy  : pred[t] ∈ F for some t ∈ T, or pred[f] ∈ T for some f ∈ F,
                pred[i] = argmax_j A[i, j] over the root column and the words (as in dep).

``scores`` is the mean score over instances; ``extra`` holds each direction's weight alone
(weight_target_to_fe: max A[t, f]; weight_fe_to_target: max A[f, t]) and the argmax accuracy,
either way and each way. Reported per head, overall and per FE name; FE names with fewer instances
than the run's ``--min-count`` (probes.run's ``min_count``) stay in the results, marked, and the
``instances`` extras count them (``labels_below_min_count``, ``instances_below_min_count``). Bootstrap
intervals (probes.results.bootstrap) are given for the overall score only: FE names are too many to keep replicates of
each.

The score uses raw word-level weights, so the subword pooling rule matters: with the default
``--pool mean-sum`` a word's row is the mean of its subwords' rows and its column the sum of
their columns, so attention *to* a word split into several subwords adds up (up to 1), while
attention *from* it is averaged. Compare models only under the same rule.

``--protocol kovaleva2019`` (probes.base.protocols) sets exactly these defaults, max_sentence_words 12,
max_fe_words 3, adjacent_fes and all_fes off, with mean-sum pooling, and refuses any contrary option.

Instance filters, the paper's choices by default, applied in this order; the JSON's
``instances`` records how many instances each one removed (with ``annotated`` and ``scored``):

    no_words            the FE's character span covers no word (whitespace only)
    not_core            FE not Core / Core-Unexpressed in frame/<frame>.xml   (--all-fes keeps them)
    sentence_too_long   sentence longer than --max-sentence-words words (12; 0 = no limit)
    fe_too_long         FE longer than --max-fe-words words (3; 0 = no limit)
    overlaps_target     FE shares a word with the target (always: a word's attention to itself
                        is not a relation)
    adjacent_to_target  an FE word right next to a target word   (--adjacent-fes keeps them)

A decoder-only model's words attend only to themselves and earlier words: the target→FE weight and argmax can be
nonzero or right only for an instance with an FE word before a target word, FE→target only for one with a target
word before an FE word. Its results state the share of instances each direction can reach, per FE name and
overall, in ``extra["causal_constraint"]`` (probes.builtin.directional.causal_constraint).

Words are the FrameNet reader's PTB-style words. Sentences with no instance left are skipped
before the forward pass (reason ``longer_than_N_words``, ``no_frame_elements`` or
``no_frame_instance_left``), so the model only reads sentences that count. ``--documents``
picks the FrameNet documents: a file with one document name per line, or ``standard-test`` /
``standard-dev`` (the Das et al. 2014 split; documents missing from the copy at hand are
counted, not an error).
"""
from __future__ import annotations

from pathlib import Path

import torch

from probes.base.devices import to_device
from probes.encoding.batching import Batch
from probes.results.bootstrap import replicate_ratio
from probes.settings.declared import FRAMES
from probes.builtin.directional import causal_constraint
from probes.corpus.framenet import STANDARD_DEV_DOCUMENTS, STANDARD_TEST_DOCUMENTS, read_document_list
from probes.corpus.sentence import Sentence
from probes.base.errors import InputError
from probes.results.intervals import SCORE_RANGES, attach_interval, interval_method, record_range
from probes.capture.maps import LayerMaps
from probes.scoring.probe import LabelSums, Probe, ratio
from probes.settings.registry import register
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

FILTERS = ("no_words", "not_core", "sentence_too_long", "fe_too_long", "overlaps_target", "adjacent_to_target")
DIRECTIONS = ("fe_before_target", "target_before_fe")  # what target→FE, FE→target need on a causal model
GRIDS = ("score", "weight_target_to_fe", "weight_fe_to_target", "accuracy", "accuracy_target_to_fe",
         "accuracy_fe_to_target")
DOCUMENT_LISTS = {"standard-test": STANDARD_TEST_DOCUMENTS, "standard-dev": STANDARD_DEV_DOCUMENTS}


@register
class FrameElementProbe(Probe, declared=FRAMES):
    state_on_device = True
    needs = ("frames",)
    corpus_format = "framenet"
    view = "frames"

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        for name in ("max_sentence_words", "max_fe_words"):
            if self.config[name] < 0:
                raise InputError(f"--{name.replace('_', '-')} must be 0 or more, not {self.config[name]}")
        self.add_state("sums", LabelSums((len(GRIDS), layers, heads)))  # [FE names, 6, L, H] per-instance values
        # gold alone, counted on the host: instances, their sides, the filters' tallies
        self.add_state("counts", LabelSums(()), host=True)  # [FE names] instances scored
        self.add_state("reachable", LabelSums((len(DIRECTIONS),)), host=True)  # [FE names, 2] an FE word before / after a target word
        # the bootstrap's replicates of the overall score only (FE names are many: per name they would not fit)
        self.add_state("replicate_sums", torch.zeros(layers, heads, dtype=torch.float64), replicated=True)  # [R,L,H]
        self.add_state("replicate_counts", torch.zeros((), dtype=torch.float64), replicated=True, host=True)  # [R]
        self.add_state("annotated", torch.zeros((), dtype=torch.int64), host=True)  # instances seen by skip_reason (all filters)
        self.add_state("removed", torch.zeros(len(FILTERS), dtype=torch.int64), host=True)  # [FILTERS] instances each removed

    def reader_options(self):
        documents = self.config["documents"]
        if documents is None:
            return {}
        if documents in DOCUMENT_LISTS:
            return {"documents": DOCUMENT_LISTS[documents], "allow_missing": True}
        return {"documents": read_document_list(Path(documents))}

    def skip_reason(self, sentence: Sentence) -> str | None:
        """Also counts, per filter, the instances the filters remove (they never reach update)."""
        reason = super().skip_reason(sentence)
        if reason:
            return reason
        kept, removed = _instances(sentence, self.config)
        self.annotated += len(kept) + sum(removed.values())
        self.removed += torch.tensor([removed.get(name, 0) for name in FILTERS])
        if kept:
            return None
        limit = self.config["max_sentence_words"]
        if limit and len(sentence.words) > limit:
            return f"longer_than_{limit}_words"
        return "no_frame_instance_left" if removed else "no_frame_elements"

    def view_items(self, sentence: Sentence) -> list[dict]:
        return [{"from": [t + 1 for t in target], "to": [f + 1 for f in fe], "label": label}
                for label, target, fe in _instances(sentence, self.config)[0]]

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        key = ("frames.pairs", tuple(sorted(self.config.items())))  # the instances depend on the filter options
        labels, pairs, sentence = batch.memo(key, lambda: _pairs(batch, self.config))  # on the host
        if not labels:
            return
        attention = maps.word_attention  # [B,H,C,C]
        instance, rows, t, f, on_device = batch.memo((*key, attention.device), lambda: (
            *to_device(pairs, attention.device).unbind(1), to_device(sentence, attention.device)))  # [P] each, [N]
        t_to_f = attention[rows, :, t, f]  # [P,H] A[t, f]
        f_to_t = attention[rows, :, f, t]  # [P,H] A[f, t]
        pred = maps.predictions.transpose(1, 2)  # [B,C,H]
        t_hits = (pred[rows, t] == f[:, None]).float()  # [P,H] pred[t] == f
        f_hits = (pred[rows, f] == t[:, None]).float()  # [P,H] pred[f] == t
        per_pair = torch.stack([torch.maximum(t_to_f, f_to_t), t_to_f, f_to_t, torch.maximum(t_hits, f_hits), t_hits,
                                f_hits], dim=1)  # [P,6,H]
        shape = (len(labels), len(GRIDS), self.heads)
        index = instance[:, None, None].expand_as(per_pair)
        per_instance = torch.zeros(shape, dtype=per_pair.dtype, device=per_pair.device).scatter_reduce_(
            0, index, per_pair, "amax")  # [N,6,H] max over each instance's (t, f) pairs (all values ≥ 0)
        self.sums.add(self.sums.ids(labels), per_instance, at=(slice(None), maps.layer))
        self.keep_view(maps.layer, on_device, right=per_instance[:, 3] > 0, weight=per_instance[:, 0])
        self.add_replicated(self.replicate_sums, on_device, per_instance[:, 0], batch, at=(maps.layer,))
        if maps.layer == 0:  # instances are counted once, on the host
            instance, _, t, f = pairs.unbind(1)
            self.counts.add(self.counts.ids(labels), torch.ones(len(labels)))
            sides = torch.stack([f < t, t < f], dim=1).double()  # [P,2]
            reached = torch.zeros(len(labels), len(DIRECTIONS), dtype=sides.dtype)
            self.reachable.add(self.reachable.ids(labels), reached.index_add_(0, instance, sides) > 0)  # [N,2]
            self.add_replicated(self.replicate_counts, sentence, torch.ones(len(labels)), batch)

    def compute(self, info: RunInfo) -> ProbeResult:
        labels = {name: _scores(self.counts[name], self.sums[name]) for name in self.counts.names}
        overall = _scores(self.counts.total(), self.sums.total())
        scored, annotated = overall.count, int(self.annotated)
        removed = {name: int(n) for name, n in zip(FILTERS, self.removed) if n or _applies(name, self.config)}
        rare = [n for n, e in labels.items() if e.count < int(info.settings.get("min_count") or 0)]
        instances = {"annotated": annotated, "removed": removed, "scored": scored,
                     "in_sentences_skipped_otherwise": annotated - sum(removed.values()) - scored,
                     "labels_below_min_count": len(rare),
                     "instances_below_min_count": int(sum(int(self.counts[n]) for n in rare))}
        result = ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels, overall=overall,
                             extra={"instances": instances})
        if self.causal and self.counts.names:
            result.extra["causal_constraint"] = causal_constraint(
                "decoder-only model: a word attends only to itself and earlier words; the target→FE weight and "
                "argmax can be nonzero or right only for instances with an FE word before a target word, FE→target "
                "only for those with a target word before an FE word", self.counts, self.reachable, DIRECTIONS)
        if self.bootstrap.replicates and overall.count:
            replicates = replicate_ratio(self.replicate_sums, self.replicate_counts)  # [R,L,H]
            result.replicates["overall"] = attach_interval(overall, replicates, "bounded")  # means of weights in [0, 1]
            result.extra["interval_method"] = interval_method("bounded")
            record_range(result, SCORE_RANGES["bounded"])
        return result


def _applies(name: str, config: dict) -> bool:
    """Whether a filter is switched on (listed in the JSON even when it removed nothing)."""
    return {"not_core": not config["all_fes"], "sentence_too_long": config["max_sentence_words"] > 0,
            "fe_too_long": config["max_fe_words"] > 0, "adjacent_to_target": not config["adjacent_fes"]}.get(name, True)


def _instances(sentence: Sentence, config: dict) -> tuple[list[tuple[str, list[int], list[int]]], dict[str, int]]:
    """The (FE name, target words, FE words) instances of a sentence that pass the filters, and
    how many each filter removed (the first filter an instance fails removes it)."""
    kept, removed = [], {}
    too_long = 0 < config["max_sentence_words"] < len(sentence.words)
    max_fe = config["max_fe_words"]
    for frame in sentence.ann["frames"]:
        target = set(frame["target"])
        for fe in frame["fes"]:
            words = fe["words"]
            if not words:
                reason = "no_words"
            elif not (fe["core"] or config["all_fes"]):
                reason = "not_core"
            elif too_long:
                reason = "sentence_too_long"
            elif 0 < max_fe < len(words):
                reason = "fe_too_long"
            elif target.intersection(words):
                reason = "overlaps_target"
            elif not config["adjacent_fes"] and any(w - 1 in target or w + 1 in target for w in words):
                reason = "adjacent_to_target"
            else:
                kept.append((fe["name"], frame["target"], words))
                continue
            removed[reason] = removed.get(reason, 0) + 1
    return kept, removed


def _pairs(batch: Batch, config: dict) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """The FE name of each instance of a batch, pairs [P,4]: (instance, sentence row, target column, FE column),
    one per (target word, FE word) of each instance, and the sentence row of each instance [N]."""
    labels, pairs, rows = [], [], []
    for row, sentence in enumerate(batch.sentences):
        for label, target, fe in _instances(sentence, config)[0]:
            pairs.extend((len(labels), row, t + 1, f + 1) for t in target for f in fe)
            labels.append(label)
            rows.append(row)
    return labels, torch.tensor(pairs, dtype=torch.long).reshape(-1, 4), torch.tensor(rows, dtype=torch.long)


def _scores(count: torch.Tensor, sums: torch.Tensor) -> LabelScores:
    mean = ratio(sums, count)
    return LabelScores(count=int(count), scores=mean[0], extra={name: mean[i] for i, name in enumerate(GRIDS) if i})
