"""coref: coreference from attention (Clark et al. 2019, §4.3), documents cut into windows.

For a head, pred[i] = argmax_j A[i, j] over the root column ([CLS], column 0) and the window's words (as in
dep; computed for the anaphors' head words only, ``LayerMaps.predictions_at``, not pooled for the whole window). An anaphor (a mention with an earlier mention of its chain in its window) is right when pred[h] is the
head word of any of its antecedents, h its own head word (probes.corpus.mention_heads: spaCy's syntactic head
by default, ``--mention-head first|last``). Accuracy overall and per anaphor type (pronoun, proper, nominal:
the head word's POS in spaCy's parse) under ``labels``, and nested / non_nested (the anaphor inside another
mention or not) under the same ``labels``: the types, and apart the nesting, each add up to overall.

Documents longer than the model are cut into overlapping windows of whole sentences (probes.encoding.windows,
``--window``, ``--stride``), each one row of a batch; which anaphors a window scores is WINDOW_RULE
(probes.builtin.anaphors), recorded in the results with the counts (``extra["coref"]``): documents, windows,
mentions, chains, singletons, non_first, scored, out_of_window, same_head. Every window of a document has
the document's identity (``Sentence.unit``): documents are the bootstrap's resampled unit and shards keep
them whole.

Baselines on the same anaphors (``baselines``, "kinds" in order): the nearest preceding mention's head word,
the most recent preceding mention with the anaphor's head word (else the nearest), and the fixed offsets
k in −3..+3 (k ≠ 0): the word at h + k. The best of them is the label's "best" baseline, "best_offset" its kind;
the result names it (``ProbeResult.baseline_name``: BASELINE_NAME), and says it scored windows of documents
(``unit``, ``documents``).
"""
from __future__ import annotations

import torch

from probes.base.devices import to_device
from probes.encoding.batching import Batch
from probes.results.bootstrap import attach_intervals
from probes.builtin.anaphors import COUNTS, WINDOW_RULE, assign
from probes.settings.declared import COREF
from probes.builtin.directional import OFFSETS
from probes.corpus.sentence import Sentence
from probes.corpus.spacy_text import describe
from probes.capture.maps import LayerMaps
from probes.scoring.probe import LabelSums, Probe, ratio
from probes.settings.registry import register
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo
from probes.encoding.windows import cut, window_sizes

BASELINES = ("nearest", "head_match", *OFFSETS)
CAUSAL_NOTE = ("decoder-only model: a word attends only to itself and earlier words; an anaphor can be right only "
               "where an antecedent's head word precedes its own (a nested anaphor's antecedent may not), and the "
               "baselines reach only such antecedents (offsets k > 0 none)")
NESTING = ("nested", "non_nested")
BASELINE_NAME = f"best baseline ({', '.join(BASELINES[:2])} or an offset)"  # what each label's head is compared with


@register
class CoreferenceProbe(Probe, declared=COREF):
    state_on_device = True
    needs = ("mentions",)
    corpus_format = "coref"
    view = "mentions"

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        for prefix in ("", "nest_"):  # anaphor types, then nested / non_nested: each partitions the anaphors
            self.add_state(f"{prefix}hits", LabelSums((layers, heads)), replicated=True)  # [labels, L, H] anaphors right
            # the rest is gold alone, counted on the host
            self.add_state(f"{prefix}baseline_hits", LabelSums((len(BASELINES),)), replicated=True, host=True)  # [labels, K]
            self.add_state(f"{prefix}anaphors", LabelSums(()), replicated=True, host=True)  # [labels] anaphors scored
            self.add_state(f"{prefix}reachable", LabelSums(()), host=True)  # [labels] anaphors with an antecedent head before h
            self.add_state(f"{prefix}causal_baseline_hits", LabelSums((len(BASELINES),)), host=True)  # [labels, K] at such a head
        self.add_state("counts", torch.zeros(len(COUNTS), dtype=torch.int64), host=True)  # [COUNTS]

    def skip_reason(self, sentence: Sentence) -> str | None:
        """None for a coreference document, or one of its windows (``rows``); else no_mentions."""
        return None if "mentions" in sentence.ann or "anaphors" in sentence.ann else "no_mentions"

    def reader_options(self):
        return {"mention_head": self.config["mention_head"]}

    def rows(self, sentence: Sentence, tokenizer, max_length: int) -> list[Sentence]:
        """The document's windows (probes.encoding.windows), each with the anaphors it scores in ann["anaphors"]."""
        window, stride = window_sizes(self.config["window"], self.config["stride"], max_length)
        windows = cut(sentence, tokenizer, window, stride)
        for w, anaphors in zip(windows, assign(sentence, [(w.start, w.start + len(w.words)) for w in windows])):
            w.ann["anaphors"] = anaphors
        return windows

    def view_items(self, sentence: Sentence) -> list[dict]:
        a = sentence.ann["anaphors"]
        return [{"from": [head], "to": antecedents, "label": kind, "span": list(span)}
                for head, antecedents, kind, span in zip(a.heads, a.antecedents, a.types, a.spans)]

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        rows, heads, member, columns, baselines, types, nesting = batch.memo("coref.anaphors", lambda: _anaphors(batch))
        if maps.layer == 0:  # what does not depend on the layer is counted once
            for s in batch.sentences:
                self.counts += torch.tensor([s.ann["anaphors"].counts.get(name, 0) for name in COUNTS])
        n = len(types)
        if not n:
            return
        device = maps.device
        on_rows, on_member, on_columns = batch.memo(("coref.anaphors", device), lambda: [
            to_device(t, device) for t in (rows, member, columns)])
        looked = maps.predictions_at(rows, heads)  # [N,H] where each anaphor's head word looks (its row alone)
        right = _any(on_member, looked[on_member] == on_columns[:, None], n)  # [N,H] at an antecedent's head word
        self.keep_view(maps.layer, on_rows, right=right, head=looked)
        every = self.batch_buffer(batch, "coref.right", (n, self.layers, self.heads), torch.bool)  # [N,L,H]
        every[:, maps.layer] = right
        if maps.layer == self.layers - 1:  # the batch's hits added at once, every layer's (one product, not L)
            weights = self.bootstrap.weights(batch, device)  # [R,B] or None
            for prefix, labels in (("", types), ("nest_", nesting)):
                hits = getattr(self, f"{prefix}hits")
                hits.add(hits.ids(labels), every, sentences=on_rows, weights=weights)
        if maps.layer:  # the baselines are gold alone: on the host, once
            return
        weights = self.bootstrap.weights(batch)
        at_antecedent = baselines[member] == columns[:, None]  # [M,K]
        before = columns < heads[member]  # [M] the antecedent's head word precedes the anaphor's
        base_right = _any(member, at_antecedent, n)  # [N,K]
        causal_right = _any(member, at_antecedent & before[:, None], n)  # [N,K] reachable by a causal model too
        reachable = _any(member, before, n)  # [N]
        for prefix, labels in (("", types), ("nest_", nesting)):
            base, anaphors = getattr(self, f"{prefix}baseline_hits"), getattr(self, f"{prefix}anaphors")
            base.add(base.ids(labels), base_right, sentences=rows, weights=weights)
            anaphors.add(anaphors.ids(labels), torch.ones(n), sentences=rows, weights=weights)
            for name, values in (("reachable", reachable), ("causal_baseline_hits", causal_right)):
                state = getattr(self, f"{prefix}{name}")
                state.add(state.ids(labels), values)

    def compute(self, info: RunInfo) -> ProbeResult:
        labels, per_label, causal = {}, {}, {}
        for prefix in ("", "nest_"):
            hits, base, anaphors, reachable, causal_base = (getattr(self, f"{prefix}{x}") for x in (
                "hits", "baseline_hits", "anaphors", "reachable", "causal_baseline_hits"))
            for name in anaphors.names:
                labels[name] = LabelScores(count=int(anaphors[name]), scores=ratio(hits[name], anaphors[name]))
                per_label[name] = _baseline(anaphors[name], base[name])
                causal[name] = _causal_reading(anaphors[name], reachable[name], causal_base[name])
        total = self.anaphors.total()
        overall = LabelScores(count=int(total), scores=ratio(self.hits.total(), total))
        baselines = {"kinds": list(BASELINES), "labels": per_label}
        if self.anaphors.names:
            baselines["overall"] = _baseline(total, self.baseline_hits.total())
        counts = {name: int(n) for name, n in zip(COUNTS, self.counts)}
        window, stride = window_sizes(self.config["window"], self.config["stride"], info.settings["max_length"])
        extra = {"coref": {**counts, "window_rule": WINDOW_RULE, "window": window, "stride": stride,
                           "mention_head": self.config["mention_head"], "parser": describe()}}
        if self.causal and self.anaphors.names:
            extra["causal_constraint"] = {
                "note": CAUSAL_NOTE, "labels": causal,
                "overall": _causal_reading(total, self.reachable.total(), self.causal_baseline_hits.total())}
        result = ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels, overall=overall,
                             baselines=baselines, extra=extra, unit="windows", documents=counts["documents"],
                             baseline_name=BASELINE_NAME)
        attach_intervals(result, self.nest_hits, self.nest_anaphors, self.nest_baseline_hits)
        return attach_intervals(result, self.hits, self.anaphors, self.baseline_hits)


def _causal_reading(count: torch.Tensor, reachable: torch.Tensor, hits: torch.Tensor) -> dict:
    """What a causal model can reach of `count` anaphors: the share with an antecedent head word before their own
    (reachable), and the baselines (hits [K]) counting only such antecedents."""
    n = int(count)
    return {"antecedent_before_share": round(float(reachable) / n, 6) if n else None,
            "causal_baseline": _baseline(count, hits)}


def _baseline(count: torch.Tensor, hits: torch.Tensor) -> dict:
    """hits [K] of BASELINES over `count` anaphors → each kind's accuracy, the best and its kind."""
    n = int(count)
    acc = (hits / max(n, 1)).tolist()
    best = max(range(len(acc)), key=lambda k: acc[k])
    return {"count": n, "nearest": round(acc[0], 6), "head_match": round(acc[1], 6),
            "offsets": [round(x, 6) for x in acc[2:]], "best": round(acc[best], 6), "best_offset": BASELINES[best]}


def _anaphors(batch: Batch):
    """Flattened anaphors of a batch: rows [N] (window row), heads [N] (head word column), member [M] and columns
    [M] (anaphor index and head column of each antecedent), baselines [N,K] (each baseline's column, K =
    len(BASELINES)), the type and the nesting label of each anaphor."""
    rows, heads, member, columns, nearest, head_match, types, nesting = ([] for _ in range(8))
    for row, sentence in enumerate(batch.sentences):
        a = sentence.ann["anaphors"]
        for head, antecedents in zip(a.heads, a.antecedents):
            member += [len(heads)] * len(antecedents)
            columns += antecedents
            rows.append(row)
            heads.append(head)
        nearest += a.nearest
        head_match += a.head_match
        types += a.types
        nesting += [NESTING[0] if x else NESTING[1] for x in a.nested]
    heads_t = torch.tensor(heads, dtype=torch.long)  # [N]
    offsets = heads_t[:, None] + torch.tensor(OFFSETS)  # [N,6] the word at h + k (out of the window: no antecedent)
    # [N,K]; a baseline with no preceding mention points at NO_COLUMN (-1), no antecedent's column (≥ 1)
    baselines = torch.cat([torch.tensor([nearest, head_match], dtype=torch.long).reshape(2, -1).T, offsets], dim=1)
    return (torch.tensor(rows, dtype=torch.long), heads_t, torch.tensor(member, dtype=torch.long),
            torch.tensor(columns, dtype=torch.long), baselines, types, nesting)


def _any(member: torch.Tensor, hits: torch.Tensor, n: int) -> torch.Tensor:
    """[M,...] hits of (anaphor, antecedent) pairs → [N,...] whether any antecedent of each anaphor hit."""
    return torch.zeros((n, *hits.shape[1:]), device=hits.device).index_add_(0, member, hits.float()) > 0

