"""trees: a dependency tree decoded from each head's word-level attention, scored by UAS.

For every head and sentence, the word-level attention over the root ([CLS], column 0) and the words
(probes.builtin.trees.scoring; the end column is never a target) is decoded into a tree two ways —
maximum spanning arborescence (Chu–Liu–Edmonds) and best projective tree (Eisner) — on two forms of the
matrix, the attention itself (arc h → d scored by A[d, h]) and its symmetrised form. Every tree has
exactly one word attached to the root (probes.builtin.trees.decoders). Scores: the share of gold arcs
whose dependent gets its gold head (directed UAS); undirected UAS also accepts the gold head hanging
from the dependent. Every word counts, punctuation included.

Main variant (``scores``): Chu–Liu–Edmonds on the attention form, directed UAS. ``extra`` grids:
``<decoder>_<form>`` and ``<decoder>_<form>_undirected`` for the other variants (cle_attention_undirected
is the main variant's undirected UAS). Labels: the main variant's directed accuracy per relation.
Baselines: right-branching (every word heads the next; word 1 hangs from the root) and left-branching
(every word heads the previous; word n hangs from the root), directed and undirected.

Head ensemble (``--ensemble-heads``, 0 for none): heads chosen greedily on a bounded sample of the
selection split (the fit phase: ``--select-on FILE``, else the scored corpus itself), their matrices
averaged per sentence and decoded with the main variant (probes.builtin.trees.ensemble, .sample). With host
decoding the choice is made on trees' own thread, queued ahead of the first scored batch's decoding, while the model's
pass begins.

Sentences of different lengths share a batch: each is decoded over its own n+1 nodes only, so padding
changes no tree. Where (``--tree-decoding``): on the host (the default; probes.builtin.trees.decoders) or on the
model's device (probes.builtin.trees.batched: the same trees, as batched tensor code): there each layer's word
attention is kept on the device as it comes, and at the batch's last layer every tree of the batch is decoded at
once, the heads copied to the host without waiting (``DeviceTrees``). On the host, decoding is done beside the
model's pass: each layer's word attention is copied into host memory as the layer comes (pinned, without waiting, on
CUDA) and decoded on a thread of the probe's own (all B×H trees of the layer, both forms and both decoders, in one
compiled call that leaves Python free; then the head ensemble's part and the gold arcs the trees attach), while the
model computes the next layers and the next batch. A batch is scored (``settle``) at the next batch's last layer,
its trees decoded by then, or as soon as the state is read, merged, computed or replaced, waiting for them: the
state never shows half a batch. The runner's retry point before each batch (``retry_point``: its out-of-memory
split) does not wait: it keeps the last batch still to score. The view's marks of a layer (``keep_view``) wait for
that layer's trees only where they are read (the batches whose sentences the examples record).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from functools import partial

import torch

from probes.builtin.gold_arcs import gold_arcs
from probes.encoding.batching import Batch
from probes.results.bootstrap import attach_intervals
from probes.settings.declared import TREES
from probes.builtin.trees import batched
from probes.builtin.trees.decoders import DECODERS, decode
from probes.builtin.trees.details import TreesPresentation
from probes.builtin.trees.ensemble import decode_main, select_heads
from probes.builtin.trees.sample import SelectionSample, sentence_key, sentence_keys, smallest_keys
from probes.builtin.trees.scoring import FORMS, attached, attachment
from probes.base.devices import HostCopy, to_device
from probes.base.errors import InputError
from probes.capture.maps import LayerMaps
from probes.corpus.sentence import Sentence
from probes.results.presentation import arc_items
from probes.scoring.probe import LabelSums, Probe, ratio
from probes.settings.registry import register
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

MAIN = "cle_attention"
BASELINES = ("right_branching", "left_branching")
# what a decoder-only model's trees mean (extra["causal_constraint"], Probe.causal)
CAUSAL_NOTE = ("decoder-only model: a word attends only to itself and earlier words, so the attention form's "
               "arcs from a word to a later head weigh 0: its directed trees hang words from earlier words (or the "
               "root), and take a later head only where a tree must (the one word attached to the root, ties at 0); "
               "directed UAS is then about bounded by dep's head_precedes_share; the symmetrised form (A + Aᵀ) "
               "reads each pair both ways and is not bounded by direction")


@register
class TreesProbe(TreesPresentation, Probe, declared=TREES):
    needs = ("head", "deprel")
    needs_fit = True  # the selection split of the head ensemble (an instance with no ensemble needs none)
    view = "arcs"

    def __init__(self, layers: int, heads: int, **options):
        super().__init__(layers, heads, **options)
        if self.config["ensemble_heads"] < 0 or self.config["select_sentences"] < 1:
            raise InputError("trees: --ensemble-heads must be 0 or more and --select-sentences 1 or more")
        self.needs_fit = self.config["ensemble_heads"] > 0
        shape = (len(DECODERS), len(FORMS), 2, layers, heads)  # [decoder, form, directed/undirected, L, H]
        self.add_state("hits", torch.zeros(shape, dtype=torch.int64))
        self.add_state("arcs", torch.zeros((), dtype=torch.int64))
        # replicated: the main variant per relation, [labels, R, L, H] and [labels, R]
        self.add_state("relation_hits", LabelSums((layers, heads)), replicated=True)  # [labels, L, H] main variant, directed
        self.add_state("relation_arcs", LabelSums(()), replicated=True)
        self.add_state("baseline_hits", torch.zeros((len(BASELINES), 2), dtype=torch.int64))  # [baseline, way]
        self.add_state("ensemble_hits", torch.zeros(2, dtype=torch.int64))  # [way]
        self.add_state("sample", SelectionSample(self.config["select_sentences"], layers, heads), fit=True)
        # the head ensemble, chosen from `sample` when first needed: on trees' thread with host decoding (``_choice``)
        self._ensemble: Future | None = None
        # the batch in progress, from its layer 0 to its last: the fit's sampled rows and their host copies; the
        # scored batch's trees, decoding
        self._sampled: tuple[list[int], torch.Tensor | None, list[HostCopy]] | None = None
        self._decoding: LayerTrees | DeviceTrees | None = None
        # the last batch, its trees decoding: settle
        self._unsettled: tuple[Batch, LayerTrees | DeviceTrees, bool] | None = None
        self._worker: ThreadPoolExecutor | None = None  # the thread that decodes, in order of submission

    def view_items(self, sentence: Sentence) -> list[dict]:
        return arc_items(sentence)

    def fit_subset(self, sentences: list[Sentence]) -> Callable[[Sentence], bool]:
        """The sentences of the selection sample a fit fed `sentences` would keep (their keys the smallest): the
        others' maps would be computed and dropped."""
        kept = smallest_keys(map(sentence_key, sentences), self.config["select_sentences"])
        return lambda sentence: sentence_key(sentence) in kept

    def fit_update(self, batch: Batch, maps: LayerMaps) -> None:
        keys = batch.memo("trees.keys", lambda: sentence_keys(batch))
        if maps.layer == 0:
            self.sample.admit(keys, [s.ann["head"] for s in batch.sentences])
            rows = self.sample.rows(keys)  # the batch's rows in the sample
            self._sampled = (rows, torch.tensor(rows, device=maps.device) if rows else None, [])
        rows, index, copies = self._sampled
        if not rows:
            return
        copies.append(HostCopy(maps.word_attention[index], torch.float32))  # [k,H,C,C] the sampled rows' alone
        if maps.layer == self.layers - 1:
            attention = torch.stack([copy.landed() for copy in copies])  # [L,k,H,C,C]
            self.sample.fill([keys[b] for b in rows], attention, [len(batch.sentences[b].words) for b in rows])
            self._sampled = None

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        rows, dependents, heads, labels = gold_arcs(batch)
        if maps.layer == 0:
            if self.config["tree_decoding"] == "device":
                self._decoding = DeviceTrees(self.layers, batch.n_words, self.ensemble(maps.device),
                                             (rows, dependents, heads))
            else:
                self._decoding = LayerTrees(self._thread(), self.layers, batch.n_words, self._choice(),
                                            (rows, dependents, heads))
        decoding = self._decoding
        # [B,H,C,C]: root, words and the end column (never read)
        decoding.submit(maps.layer, maps.word_attention)
        # the view's marks of this layer, made only if read: set as keep_view would (its **marks would read them)
        marks = LayerMarks(partial(decoding.main, maps.layer), self.heads, (rows, dependents, heads))
        self.kept_view = (maps.layer, rows, marks)
        if maps.layer < self.layers - 1:
            return
        decoding.submit_ensemble()
        self.settle()  # the previous batch, decoded meanwhile
        self._decoding, self._unsettled = None, (batch, decoding, torch.is_inference_mode_enabled())

    def settle(self) -> None:
        """Score the batch whose trees were decoding, if any, once they are (waiting for them here): at the next
        batch's last layer, and before the state is read, merged, computed or replaced."""
        if self._unsettled is None:
            return
        batch, decoding, inference = self._unsettled
        self._unsettled = None
        with torch.inference_mode(inference):  # as the batch's update was (the runner's is): its state's tensors
            self._score(batch, decoding)

    def _score(self, batch: Batch, decoding: LayerTrees | DeviceTrees) -> None:
        rows, dependents, heads, labels = gold_arcs(batch)
        hits, main, ensemble = decoding.result()  # [D,F,2,L,H], [N,L,H], [B,M] or None
        self.hits += hits
        self.arcs += len(labels)
        self.relation_arcs.add(self.relation_arcs.ids(labels), torch.ones(len(labels)), sentences=rows, batch=batch)
        self.baseline_hits += _baselines(dependents, heads, batch.n_words[rows])
        self.relation_hits.add(self.relation_hits.ids(labels), main, sentences=rows, batch=batch)
        if ensemble is not None:
            directed, undirected = attached(ensemble, rows, dependents, heads)
            self.ensemble_hits += torch.stack([directed.sum(), undirected.sum()])

    def fitted(self, device: torch.device) -> None:
        """The head ensemble's choice, started once the fit phase is over, before the first scored batch."""
        self._choice(device)

    def ensemble(self, device: torch.device | None = None) -> list[tuple[int, int, float]]:
        """The greedy head ensemble on the selection sample: (layer, head, sample UAS so far) per head, once chosen
        (``_choice``; waiting for it)."""
        return self._choice(device).result()

    def _choice(self, device: torch.device | None = None) -> Future:
        """The head ensemble's choice (select_heads), started when first asked for. With ``--tree-decoding device``
        it is made at once, on `device` (the maps' device) where one is given. On the host it is queued on trees'
        thread, ahead of the layers' decoding that reads it: the model's pass starts meanwhile, and only the trees
        (and whatever waits for them) wait for the choice."""
        if self._ensemble is None:
            most = self.config["ensemble_heads"]
            if self.config["tree_decoding"] == "device":
                self._ensemble = Future()
                self._ensemble.set_result(select_heads(self.sample, most, device))
            else:
                self._ensemble = self._thread().submit(select_heads, self.sample, most, None)
        return self._ensemble

    def _thread(self) -> ThreadPoolExecutor:
        """The probe's own thread, for its life (a thread's first parallel call costs): the ensemble's choice and
        the decoding, in order of submission."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trees-decode")
        return self._worker

    def _unchosen(self) -> None:
        """Drop the ensemble's choice, once a choice still being made is over: it reads the sample, about to
        change."""
        if self._ensemble is not None:
            wait([self._ensemble])
        self._ensemble = None

    def merge(self, other: "TreesProbe") -> None:
        self.settle()
        other.settle()
        super().merge(other)

    def merge_fit(self, other: "TreesProbe") -> None:
        self._unchosen()
        super().merge_fit(other)

    def reset(self) -> None:
        self._unchosen()
        super().reset()
        self._sampled = self._decoding = self._unsettled = None

    def state_dict(self) -> dict:
        self.settle()
        return super().state_dict()

    def retry_point(self, method: str = "update") -> tuple:
        """The state as it is (Probe.retry_point), without scoring the last batch first (its trees may still be
        decoding: waiting for them here would stop the model until they are), that batch still to score, and the
        ensemble's choice."""
        return super().retry_point(method), self._unsettled, self._ensemble

    def restore(self, point: tuple) -> None:
        state, unsettled, ensemble = point
        super().restore(state)
        self._unsettled, self._ensemble = unsettled, ensemble

    def load_state_dict(self, state) -> None:
        """Replace the state; a batch not scored yet, or not finished (one that ran out of memory), is dropped."""
        self._unchosen()
        super().load_state_dict(state)
        self._unsettled = None

    def drop_unfinished(self) -> None:
        """The fit's sampled rows and the trees decoding of a batch not finished."""
        self._sampled = self._decoding = None

    def compute(self, info: RunInfo) -> ProbeResult:
        self.settle()
        arcs = int(self.arcs)
        grids = {}
        for d, decoder in enumerate(DECODERS):
            for f, form in enumerate(FORMS):
                grids[f"{decoder}_{form}"] = ratio(self.hits[d, f, 0].double(), arcs)
                grids[f"{decoder}_{form}_undirected"] = ratio(self.hits[d, f, 1].double(), arcs)
        overall = LabelScores(count=arcs, scores=grids.pop(MAIN), extra=grids)
        labels = {name: LabelScores(count=int(self.relation_arcs[name]),
                                    scores=ratio(self.relation_hits[name], self.relation_arcs[name]))
                  for name in self.relation_arcs.names}
        baselines = {name: {"uas": _share(self.baseline_hits[i, 0], arcs),
                            "undirected_uas": _share(self.baseline_hits[i, 1], arcs), "count": arcs}
                     for i, name in enumerate(BASELINES)}
        chosen = self.ensemble() if self.needs_fit else []
        ensemble = None
        if chosen:
            ensemble = {"heads": [[lay, h] for lay, h, _ in chosen],
                        "selection_uas": [uas for _, _, uas in chosen],
                        "uas": _share(self.ensemble_hits[0], arcs),
                        "undirected_uas": _share(self.ensemble_hits[1], arcs), "count": arcs,
                        "selected_on": info.settings.get("fit"), "sample_sentences": len(self.sample),
                        "sample_limit": self.config["select_sentences"]}
        extra = {"main": MAIN, "ensemble": ensemble}
        if self.causal:
            extra["causal_constraint"] = {"note": CAUSAL_NOTE}
        result = ProbeResult(probe=self.name, info=info, options=dict(self.config), labels=labels, overall=overall,
                             baselines=baselines, extra=extra)
        return attach_intervals(result, self.relation_hits, self.relation_arcs)  # overall: every relation's arcs


class LayerTrees:
    """A batch's trees, decoded and their gold arcs counted on the probe's thread (`worker`) from each layer's host
    copy while the model computes the next layers: ``submit`` each layer as it comes, at the last layer
    ``submit_ensemble``, then ``result``. Every unit is decoded on its own (probes.builtin.trees.decoders), so
    decoding by layer gives the trees of one call. `chosen`: the head ensemble's choice, (layer, head, UAS) per head
    (empty for none), queued on `worker` before these jobs (done by the time they read it); `arcs`: the batch's gold
    arcs, sentence row, dependent and head [N] each (probes.builtin.gold_arcs)."""

    def __init__(self, worker: ThreadPoolExecutor, layers: int, n_words: torch.Tensor, chosen: Future,
                 arcs: tuple[torch.Tensor, torch.Tensor, torch.Tensor]):
        self.worker, self.n_words, self.chosen, self.arcs = worker, n_words, chosen, arcs
        self.trees: list[Future | None] = [None] * layers  # per layer: its trees [D,B·H,F,C], ensemble part, counts
        self.ensemble: Future | None = None  # the ensemble's average's main tree [B,M]

    def submit(self, layer: int, attention: torch.Tensor) -> None:
        """Decode the layer's word attention [B,H,C,C] on the probe's thread, once copied into host memory."""
        self.trees[layer] = self.worker.submit(_decode_layer, HostCopy(attention, torch.float32), self.n_words,
                                               self.chosen, layer, self.arcs)

    def submit_ensemble(self) -> None:
        self.ensemble = self.worker.submit(_decode_ensemble, self.trees, self.chosen, self.n_words)

    def result(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Once decoded and counted: [D,F,2,L,H] the gold arcs every layer's trees attach and [N,L,H] the main
        variant's attachment per arc (probes.builtin.trees.scoring.attachment), and the ensemble's trees [B,M] (None
        without one)."""
        counted = [layer.result()[2] for layer in self.trees]
        return torch.cat([hits for hits, _ in counted], 3), torch.cat([main for _, main in counted], 1), \
            self.ensemble.result()

    def main(self, layer: int) -> torch.Tensor:
        """[B·H,C] the main variant's trees of a layer, once decoded (waiting for them)."""
        return self.trees[layer].result()[0][0, :, 0]


class DeviceTrees:
    """A batch's trees decoded on the maps' device (probes.builtin.trees.batched), as LayerTrees' are on the host:
    ``submit`` keeps each layer's word attention there ([L,B,H,C,C], a copy: the maps' buffer is the next layer's),
    ``submit_ensemble`` at the last layer decodes every tree of the batch at once and the head ensemble's average,
    then copies the heads to the host without waiting (HostCopy, as int16); ``result`` reads them there and counts
    the gold arcs `arcs` (probes.builtin.gold_arcs) they attach."""

    def __init__(self, layers: int, n_words: torch.Tensor, chosen: list[tuple[int, int, float]],
                 arcs: tuple[torch.Tensor, torch.Tensor, torch.Tensor]):
        self.layers, self.n_words, self.chosen, self.arcs = layers, n_words, chosen, arcs
        self.kept: torch.Tensor | None = None  # [L,B,H,C,C] until decoded
        self.heads: torch.Tensor | None = None  # [D,L,B·H,F,C] on the device, once decoded
        self.copies: tuple[HostCopy, HostCopy | None] | None = None  # the heads and the ensemble's [B,M] on the host

    def submit(self, layer: int, attention: torch.Tensor) -> None:
        if self.kept is None:
            self.kept = attention.new_empty((self.layers, *attention.shape))
        self.kept[layer].copy_(attention)

    def submit_ensemble(self) -> None:
        """Decode every tree of the batch (all layers, heads, forms and both decoders) and the ensemble's."""
        layers, b, h, c = self.kept.shape[:4]
        lengths = self.n_words.repeat_interleave(h).repeat(layers)  # [L·B·H] in the order of the units
        heads = batched.decode(self.kept.view(-1, c, c), lengths)  # [D,L·B·H,F,C]
        self.heads = heads.view(len(DECODERS), layers, b * h, len(FORMS), c)
        ensemble = None
        if self.chosen:  # each layer's chosen heads summed in float64, then the layers in order (as _decode_layer)
            total = None
            for layer in range(layers):
                mine = [head for lay, head, _ in self.chosen if lay == layer]
                if mine:
                    chosen = to_device(torch.tensor(mine), self.kept.device)
                    part = _heads_summed(self.kept[layer], chosen)  # [B,M,M]
                    total = part if total is None else total.add_(part)
            average = batched.arc_scores(total / len(self.chosen), FORMS[0])
            ensemble = HostCopy(batched.chu_liu_edmonds(average, self.n_words).to(torch.int16))  # [B,M]
        self.copies = (HostCopy(self.heads.to(torch.int16)), ensemble)
        self.kept = None

    def result(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """As LayerTrees.result: [D,F,2,L,H] and [N,L,H] counted on the host, and the ensemble's [B,M] (or None)."""
        heads, ensemble = self.copies
        d, layers, _, f, c = self.heads.shape
        predicted = heads.landed().long().view(d, layers, len(self.n_words), -1, f, c)  # [D,L,B,H,F,C]
        return (*attachment(predicted, *self.arcs), None if ensemble is None else ensemble.landed().long())

    def main(self, layer: int) -> torch.Tensor:
        """[B·H,C] the main variant's trees of a layer (on the device), once the batch is decoded."""
        return self.heads[0, layer, :, 0]


def _decode_layer(copy: HostCopy, n_words: torch.Tensor, chosen: Future, layer: int,
                  arcs: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None,
                                                                                  tuple[torch.Tensor, torch.Tensor]]:
    """The trees [D,B·H,F,C] of every head of `layer`, once its host copy [B,H,C,C] is in (a sentence's heads side by
    side, so that Eisner decodes them together: decoders.LANES), the sum [B,M,M] in float64 of the layer's heads of
    the ensemble `chosen` (made: queued before) over the root and the words (None where none is the layer's), and
    the gold arcs `arcs` the trees attach ([D,F,2,1,H] and [N,1,H]: probes.builtin.trees.scoring.attachment),
    counted here so that the model's thread need not. The copy is dropped with the job."""
    attention = copy.landed()  # [B,H,C,C]
    b, h, c = attention.shape[:3]
    mine = [head for lay, head, _ in chosen.result() if lay == layer]
    part = _heads_summed(attention, mine) if mine else None  # [B,M,M]
    trees = decode(attention.view(b * h, c, c), n_words.repeat_interleave(h))  # [D,B·H,F,C]
    return trees, part, attachment(trees.view(len(DECODERS), 1, b, h, len(FORMS), c), *arcs)


def _heads_summed(attention: torch.Tensor, heads) -> torch.Tensor:
    """[B,M,M] the sum in float64 of word attention [B,H,C,C]'s `heads` (a list, or an index on its device) over the
    root and the words (the end column dropped): a layer's part of the head ensemble's average."""
    return attention[:, heads][..., :-1, :-1].double().sum(1)


def _decode_ensemble(layers: list[Future], chosen: Future, n_words: torch.Tensor) -> torch.Tensor | None:
    """[B,M] the main variant's trees of the average of the ensemble heads' word attention (`chosen`, made) of every
    sentence, their layers' parts (``_decode_layer``) summed layer by layer in float64; None without an ensemble."""
    count = len(chosen.result())
    if not count:
        return None
    total = None
    for layer in layers:  # done already: the thread takes its jobs in order
        part = layer.result()[1]
        if part is not None:
            total = part.clone() if total is None else total.add_(part)
    return decode_main(total / count, n_words)


class LayerMarks(Mapping):
    """The view's marks of one layer (``Presentation.keep_view``), "right" and "head" [N,H] each: each gold arc's
    dependent's head in the main variant's tree of each head, and whether it is the gold one. Made when first read,
    from the layer's trees (waiting for them): only the batches whose sentences the examples record read them
    (probes.results.examples)."""

    def __init__(self, main: Callable[[], torch.Tensor], heads: int,
                 arcs: tuple[torch.Tensor, torch.Tensor, torch.Tensor]):
        self._main, self._heads, self._arcs = main, heads, arcs
        self._marks: dict[str, torch.Tensor] | None = None

    def _made(self) -> dict[str, torch.Tensor]:
        if self._marks is None:
            main = self._main()  # [B·H,C] the main variant's trees of the layer: on the host, or the maps' device
            rows, dependents, heads = (to_device(arc, main.device) for arc in self._arcs)  # [N] each, without waiting
            predicted = main.view(-1, self._heads, main.shape[-1]).transpose(0, 1)  # [H,B,C]
            head = predicted[:, rows, dependents]  # [H,N]
            self._marks = {"right": (head == heads).T, "head": head.T}
        return self._marks

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._made()[name]

    def __iter__(self):
        return iter(("right", "head"))

    def __len__(self) -> int:
        return 2


def _share(hits: torch.Tensor, count: int) -> float:
    return float(hits) / count if count else float("nan")


def _baselines(dependents: torch.Tensor, heads: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[2,2] gold arcs right (directed, undirected) for right- and left-branching trees of each arc's sentence.
    Right-branching: head(d) = d − 1 (word 1 from the root); left-branching: head(d) = d + 1, word n from the root."""
    right = heads == dependents - 1
    left = heads == torch.where(dependents == lengths, 0, dependents + 1)
    right_reverse = (heads >= 1) & (heads - 1 == dependents)  # the gold head's own right-branching head
    left_reverse = (heads >= 1) & (heads < lengths) & (heads + 1 == dependents)
    return torch.stack([torch.stack([right.sum(), (right | right_reverse).sum()]),
                        torch.stack([left.sum(), (left | left_reverse).sum()])])
