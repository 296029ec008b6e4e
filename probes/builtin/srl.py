"""srl: predicate–argument structure from attention (Universal PropBank, CoNLL-2012).

For a head, pred[i] = argmax_j A[i, j] over the root column ([CLS], column 0) and the words
(as in dep). For an argument of predicate p with word set S, the head is right when

    pred_to_arg:  pred[p] ∈ S                      (the predicate looks into the argument), or
    arg_to_pred:  pred[t] == p for some t ∈ S      (some argument word looks at the predicate);

``scores`` is "either", each direction alone is in ``extra``. Accuracy per role (ARG0, ARG1,
ARGM-TMP, R-ARG0, C-ARG1, ...) and overall; V and C-V are parts of the predicate, not
arguments, and are counted apart. S is the argument's word set from the reader
(``arg_words``): the dependency subtree of the labelled token in UP (see
probes.corpus.propbank), the gold span in CoNLL-2012; ``--arg-span head`` uses the labelled
token alone (UP only; CoNLL-2012 sentences, which have no argument heads, are then skipped and
counted). The predicate's own word is never part of S, so a head that attends to itself
cannot score by it.

Baselines, as in dep: the "head" that always attends to position i + k, k in −3..+3 (k ≠ 0),
scored the same three ways per role, so a positional head (arguments often start right after
the verb) can be told from one that tracks arguments.

A decoder-only model's words attend only to themselves and earlier words: pred_to_arg can be right only for an
argument with a word before its predicate, arg_to_pred only for one with a word after it. Its results state the
share of arguments each direction can reach, per role and overall, and the offset baselines under the same
constraint (k < 0), in ``extra["causal_constraint"]`` (probes.builtin.directional.causal_constraint).
"""
from __future__ import annotations

import torch

from probes.base.devices import to_device
from probes.encoding.batching import Batch
from probes.results.bootstrap import attach_intervals
from probes.settings.declared import SRL
from probes.builtin.directional import OFFSET_BASELINE, OFFSETS, accuracy, causal_constraint, offset_baseline
from probes.corpus.sentence import Sentence
from probes.capture.maps import LayerMaps
from probes.scoring.probe import LabelSums, Probe
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo

WAYS = ("either", "pred_to_arg", "arg_to_pred")
DIRECTIONS = ("argument_before_predicate", "argument_after_predicate")  # what pred_to_arg, arg_to_pred need
NOT_ARGUMENTS = ("V", "C-V")


@register
class SemanticRoleProbe(Probe, declared=SRL):
    state_on_device = True
    needs = ("srl",)
    corpus_format = "propbank"
    view = "roles"

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        # replicated: the "either" way, [roles, R, L, H] and [roles, R, offsets]
        self.add_state("hits", LabelSums((len(WAYS), layers, heads), main=0), replicated=True)  # [roles, 3, L, H] arguments right, per way
        # the rest is gold alone, counted on the host
        self.add_state("baseline_hits", LabelSums((len(WAYS), len(OFFSETS)), main=0), replicated=True,
                       host=True)  # [roles, 3, offsets]
        self.add_state("arguments", LabelSums(()), replicated=True, host=True)  # [roles] argument counts
        self.add_state("reachable", LabelSums((len(DIRECTIONS),)), host=True)  # [roles, 2] arguments with a word before / after p
        self.add_state("not_arguments", LabelSums(()), host=True)  # [V / C-V] predicate words left out
        self.add_state("predicates", torch.zeros((), dtype=torch.int64), host=True)  # predicates seen

    def skip_reason(self, sentence: Sentence) -> str | None:
        if "srl" not in sentence.ann:
            return "propbank_no_up" if sentence.ann.get("propbank") == "no-up" else "no_srl"
        if self.config["arg_span"] == "head" and any("arg_heads" not in p for p in sentence.ann["srl"]):
            return "no_argument_heads"
        return None

    def view_items(self, sentence: Sentence) -> list[dict]:
        args, pairs, labels, _ = _argument_lists([sentence], self.config["arg_span"] == "head")
        words: list[list[int]] = [[] for _ in labels]
        for k, column in pairs:
            words[k].append(column)
        return [{"from": [args[k][1]], "to": words[k], "label": label} for k, label in enumerate(labels)]

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        heads_only = self.config["arg_span"] == "head"
        args, pairs, labels, others = batch.memo(("srl.arguments", heads_only),
                                                 lambda: _arguments(batch.sentences, heads_only))
        if maps.layer == 0:  # what does not depend on the layer is counted once
            self.predicates += sum(len(s.ann["srl"]) for s in batch.sentences)
            if others:
                self.not_arguments.add(self.not_arguments.ids(others), torch.ones(len(others)))
        if not labels:
            return
        device = maps.device
        rows, predicates, member, column = batch.memo(("srl.arguments", heads_only, device), lambda: (
            *to_device(args, device).unbind(1),  # [N] sentence row and predicate column of each argument
            *to_device(pairs, device).unbind(1)))  # [M] argument index and word column of each (argument, word)
        pred = maps.predictions.transpose(1, 2)  # [B,C,H]
        from_predicate = pred[rows, predicates]  # [N,H] where each argument's predicate looks
        into_argument = from_predicate[member] == column[:, None]  # [M,H]
        to_predicate = pred[rows[member], column] == predicates[member, None]  # [M,H]
        n = len(labels)
        pred_to_arg, arg_to_pred = _any(member, into_argument, n), _any(member, to_predicate, n)  # [N,H]
        self.keep_view(maps.layer, rows, right=pred_to_arg | arg_to_pred)
        hits = self.batch_buffer(batch, "srl.right", (n, len(WAYS), self.layers, self.heads), torch.bool)  # [N,3,L,H]
        hits[:, 0, maps.layer], hits[:, 1, maps.layer], hits[:, 2, maps.layer] = \
            pred_to_arg | arg_to_pred, pred_to_arg, arg_to_pred
        if maps.layer == self.layers - 1:  # the batch's hits added at once, every layer's (one product, not L)
            self.hits.add(self.hits.ids(labels), hits, sentences=rows, batch=batch)
        if maps.layer:
            return
        rows, predicates = args.unbind(1)  # the gold alone, on the host
        member, column = pairs.unbind(1)
        offsets = torch.tensor(OFFSETS)
        base_into = _any(member, column[:, None] == predicates[member, None] + offsets, n)  # [N,K] p + k ∈ S
        base_to = _any(member, column[:, None] + offsets == predicates[member, None], n)  # [N,K] t + k == p, t ∈ S
        base_hits = torch.stack([base_into | base_to, base_into, base_to], dim=1)  # [N,3,K]
        self.baseline_hits.add(self.baseline_hits.ids(labels), base_hits, sentences=rows, batch=batch)
        self.arguments.add(self.arguments.ids(labels), torch.ones(n), sentences=rows, batch=batch)
        sides = torch.stack([column < predicates[member], column > predicates[member]], dim=1)  # [M,2]
        self.reachable.add(self.reachable.ids(labels), _any(member, sides, n))

    def compute(self, info: RunInfo) -> ProbeResult:
        labels = {name: accuracy(self.arguments[name], self.hits[name], WAYS) for name in self.arguments.names}
        overall = accuracy(self.arguments.total(), self.hits.total(), WAYS)
        baselines = {"offsets": list(OFFSETS),
                     "labels": {name: offset_baseline(self.arguments[name], self.baseline_hits[name], WAYS)
                                for name in self.arguments.names}}
        if self.arguments.names:
            baselines["overall"] = offset_baseline(self.arguments.total(), self.baseline_hits.total(), WAYS)
        extra = {"predicates": int(self.predicates),
                 "not_arguments": {name: int(self.not_arguments[name]) for name in self.not_arguments.names}}
        if self.causal and self.arguments.names:
            extra["causal_constraint"] = causal_constraint(
                "decoder-only model: a word attends only to itself and earlier words; pred_to_arg can be right only "
                "for arguments with a word before the predicate, arg_to_pred only for those with a word after it",
                self.arguments, self.reachable, DIRECTIONS, self.baseline_hits, WAYS)
        return attach_intervals(ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels,
                                            overall=overall, baselines=baselines, extra=extra,
                                            baseline_name=OFFSET_BASELINE),
                                self.hits, self.arguments, self.baseline_hits)


def _arguments(sentences: list[Sentence], heads_only: bool):
    """Flattened arguments of a batch.

    Returns args [N,2] (sentence row, predicate column), pairs [M,2] (argument index, word
    column: one row per word of each argument, the predicate's column left out), the role of
    each argument, and the V/C-V labels set aside. Columns are word index + 1.
    """
    args, pairs, labels, others = _argument_lists(sentences, heads_only)
    return _pairs(args), _pairs(pairs), labels, others


def _argument_lists(sentences: list[Sentence], heads_only: bool):
    """``_arguments`` as lists: args and pairs lists of (int, int)."""
    args, pairs, labels, others = [], [], [], []
    for row, sentence in enumerate(sentences):
        for predicate in sentence.ann["srl"]:
            p = predicate["predicate"]
            spans = [(h,) for h in predicate["arg_heads"]] if heads_only else predicate["arg_words"]
            for (role, _, _), words in zip(predicate["args"], spans):
                if role in NOT_ARGUMENTS:
                    others.append(role)
                    continue
                pairs.extend((len(labels), w + 1) for w in words if w != p)
                args.append((row, p + 1))
                labels.append(role)
    return args, pairs, labels, others


def _any(member: torch.Tensor, hits: torch.Tensor, n: int) -> torch.Tensor:
    """[M,...] hits of (argument, word) pairs → [N,...] whether any word of each argument hit."""
    return torch.zeros((n, *hits.shape[1:]), device=hits.device).index_add_(0, member, hits.float()) > 0


def _pairs(rows: list[tuple[int, int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long).reshape(-1, 2)
