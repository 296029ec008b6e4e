"""Per-sentence views: what chosen heads did on the first sentences of a run (`probes report`, `probes show`).

The runner feeds an ``ExampleRecorder`` like a probe (``update(batch, maps)`` once per batch and
layer, the fit phase excepted). For the first N scored sentences (corpus order, ``Encoded.index``
< N: the index counts the run's usable sentences across the chunks it is read in, probes.running.chunks) it keeps, for every head:

    predictions  int16   [L,H,n+1]      each word row's argmax column (``LayerMaps.predictions``:
                                         0 = the start special / root, 1..n the words), in memory
    attention    uint8   [L,H,C,C]      word-level attention over the batch's columns (root, words, padding
                                         columns, the end special), weight × 255 rounded (of its float16
                                         value), in a temporary file; read back over root, words and end

so that the heads wanted at the end (the best head of every label, known only once a probe has
computed, and the heads a user named) can be picked then. The maps grow as N·L·H·n² (for a 24×16
model and 20 sentences of 400 words, 1.2 GB; of 512 subwords, 2 GB). Within a batch, both stay on the run's device
layer by layer (the batch's R recorded rows, every layer: [R,L,H,C] and [R,L,H,C,C], R·L·H·C² bytes of maps, R at
most N); on CUDA, where they fit, the rows' float32 maps are staged until the batch's last layer, whose few operations
make every layer's argmaxes and quantisation at once (``staged``: a copy a layer instead of eight launches). The
predictions leave for the host once, at the batch's last layer, in a copy the host does not wait for; they are read a
batch later, at the next batch's last layer (or when the kept sentences are first read), so that a
GPU run never waits for the host per layer nor between batches (issue 44). The maps stay where they are, on the
device, until the views are made, and then only the chosen heads' maps are copied to the host, while all the run's
held maps take at most HELD_SHARE of the device's memory (``held_budget``). Past that, a batch's maps go to an
unnamed temporary file (deleted when the recorder is) as each layer comes, one block per sentence and layer (a host
read a layer, bounded memory), and only the chosen heads' blocks are read back. Batches without a recorded sentence
cost nothing.

Each probe with a view of its own (probes.results.presentation: ``Presentation.view``; dep and trees: gold arcs, srl:
predicate → argument, frames: target → frame element, pos/ner/con: units) also gives, at every layer, what each
head made of each of its items (``kept_view``, set by its ``update`` from the tensors it scores with), kept
for the recorded sentences: stacked on the device layer by layer, read at the last layer in one copy per probe.

``view(result)`` is what a result carries under ``extra["sentence_views"]`` (the JSON key
``sentence_views``): every head's argmax arcs, the attention maps of the chosen heads only, and the probe's own
view where it has one, packed as base64 (``pack``/``unpack``) to keep the results file small::

    {"heads": [[layer, head], ...],            # the heads whose maps are kept (named + best per label)
     "specials": [start, end],                 # the names of the root and end columns: the model's special tokens
     #                                           ([CLS], [SEP]; <s>, </s>), probes.encoding.subwords.special_names
     "named": [[layer, head], ...],            # the heads the user named
     "kind": "arcs" | "roles" | "frames" | "units" | "mentions" | None,   # the probe's view (VIEW_KINDS), None: none
     "labels": [...],                          # what a "predicted" mark indexes (units)
     "sentences": [{"index": i, "sent_id": ..., "words": [...],
                    "predictions": uint16 [L*H, n+1], layer-major (row l * H + h),
                    "attention": {"L-H": uint8 [n+2, n+2], weight × 255 rounded},
                    "items": [...],            # the probe's view_items of the sentence
                    "marks": {"right": uint8 [L*H, items], "predicted" / "head": int16 [L*H, items],
                              "weight": uint8 [L*H, items] (× 255 rounded)}}]}

For MiniLM (6×12) and 20 sentences of about 20 words that is ≈ 80 kB of argmax columns and ≈ 0.7 kB per
kept map and sentence.
"""
from __future__ import annotations

import tempfile
from typing import IO, Any, Iterable

import numpy as np
import torch

from probes.encoding.batching import Batch, total_memory
from probes.base.choices import DEFAULT_SENTENCES
from probes.base.devices import HostCopy, to_device
from probes.base.errors import InputError
from probes.capture.maps import LayerMaps
from probes.encoding.pooling import PART_BYTES, PARTS, at_once
from probes.base.packing import FALLBACK_SPECIALS, MARK_TYPES, pack
from probes.results.probe_result import ProbeResult
from probes.base.scratch import Scratch

# the share of the device's memory (probes.encoding.batching.total_memory) that all of a run's held maps may take
# (quantised, [R,L,H,C,C] uint8 a batch): within it they stay on the device until the views are made, with no host
# read a layer and only the chosen heads' maps ever copied (EWT's sentences: a few MB; 20 sentences of 512 subwords
# with 24 × 16 heads: 2 GB); past it, a batch's maps are written as each layer comes, one read a layer
HELD_SHARE = 1 / 16


def staged(size: int, device: torch.device) -> bool:
    """Whether a batch's recorded maps (`size` entries: [R,L,H,C,C]) are staged in float32 until its last layer, where
    their argmaxes and quantisation are made for every layer at once: on CUDA (each layer's eight operations there are
    kernel launches), where the float32 maps and their quantisation's temporaries (10 bytes an entry) fit within
    probes.encoding.pooling.PART_BYTES. The views are the same either way: an argmax and a rounding of the same
    floats."""
    return device.type == "cuda" and 10 * size <= PART_BYTES


def held_budget(device: torch.device) -> int:
    """Bytes of quantised maps a run's recorder may hold on `device` (HELD_SHARE of its memory)."""
    return int(total_memory(device) * HELD_SHARE)


class ExampleRecorder:
    """Keeps every head's argmax and word-level maps for the first `sentences` scored sentences, and what each of
    `probes` with a view (``Presentation.view``) made of their items; fed after them at every layer."""

    needs_vectors = False  # read by the runner as of a probe

    def __init__(self, layers: int, heads: int, sentences: int = DEFAULT_SENTENCES,
                 named: Iterable[tuple[int, int]] = (), probes: Iterable[Any] = (),
                 specials: tuple[str, str] = FALLBACK_SPECIALS):
        self.layers, self.heads, self.limit = layers, heads, sentences
        self.specials = list(specials)  # the names of the root and the end columns
        self.viewing = {p.name: p for p in probes if p.view}
        self.named = sorted({(int(layer), int(head)) for layer, head in named})
        for layer, head in self.named:
            if not (0 <= layer < layers and 0 <= head < heads):
                raise InputError(f"no head L{layer}-H{head}: the model has {layers} layers × {heads} heads "
                                 "(0-indexed)")
        self._kept: dict[int, dict[str, Any]] = {}  # sentence index -> sentence, predictions, maps_at (``kept``)
        self._pending: dict[str, Any] | None = None  # the last batch's recorded rows, on their way to the host
        self._store: IO[bytes] | None = None  # the maps not held (an unnamed temporary file), opened at the first one
        self._room: int | None = None  # bytes the held maps may still take on the device (held_budget, at the first)

    @property
    def kept(self) -> dict[int, dict[str, Any]]:
        """Sentence index -> what is kept of it: sentence, predictions, held (its maps [L,H,C,C] on the device, or
        None), maps_at (else their blocks in the store), width, views (every batch fed)."""
        self.settle()
        return self._kept

    def shuffle_seed(self) -> None:
        return None

    @property
    def reads_entries(self) -> bool:
        """As a probe's (probes.scoring.probe.Probe.reads_entries): recording no sentence, it reads nothing of the maps."""
        return self.limit == 0

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        """Keep layer ``maps.layer`` of the batch's recorded sentences (on the device; to the host at the last)."""
        rows = batch.memo(("examples.rows", self.limit),
                          lambda: [b for b, index in enumerate(batch.indices) if index < self.limit])
        kept = {name: probe.kept_view for name, probe in self.viewing.items()}
        for probe in self.viewing.values():  # read once: a probe that finds no item in a batch keeps nothing new
            probe.kept_view = None
        if not rows:
            return
        h, c, device = maps.attention.shape[1], batch.width, maps.attention.device
        held = batch.memo(("examples.held", id(self)), lambda: self._held(len(rows), h, c, device))
        # the rows a group at a time, as many as keep a group's [g,H,C,C] (its gathered maps and their quantisation's
        # temporaries) within an eighth of the layer's map, or on CUDA PART_BYTES where that is more
        # (probes.encoding.pooling.at_once): all of a batch of short sentences at once (a few operations a layer),
        # on the CPU one at a time where the sentences are long (never a second map)
        step = at_once(maps.attention.numel() // PARTS // (h * c * c), h * c * c * 4, device)
        stage = held["staged"]  # [R,L,H,C,C] float32, or None: each layer's argmax and quantisation made now
        for start in range(0, len(rows), step):
            group = rows[start:start + step]
            attention = maps.word_attention_of(group)  # [g,H,C,C]: a view of the pooled map where the rows follow
            if stage is not None:
                stage[start:start + len(group), maps.layer].copy_(attention)
                continue
            held["predictions"][start:start + len(group), maps.layer] = attention[..., :-1].argmax(dim=-1)  # [g,H,C]
            quantized = quantize(attention, maps.scratch)  # [g,H,C,C] uint8; the layer's scratch holds it
            if held["maps"] is None:  # past the budget: written now (a host read a layer, bounded memory)
                for k, one in enumerate(quantized.cpu().numpy(), start):
                    held["maps_at"][k, maps.layer] = self._write(one)
            else:
                held["maps"][start:start + len(group), maps.layer] = quantized
        for name in self.viewing:
            if kept[name] is not None and kept[name][0] == maps.layer:
                held["marks"].setdefault(name, [None] * self.layers)[maps.layer] = kept[name][1:]
        if maps.layer == self.layers - 1:
            if stage is not None:  # every layer's at once: a few operations a batch, not a few a layer
                held["predictions"].copy_(stage[..., :-1].argmax(dim=-1))  # [R,L,H,C]
                held["maps"].copy_(quantize(stage, maps.scratch))  # [R,L,H,C,C]
                held["staged"] = None  # the batch may outlive its pass (trees settles it a batch later): not these
            self._keep(batch, rows, held)

    def late_view(self, probe: Any, batch: Any, layer: int) -> None:
        """What `probe` made of `batch`'s items at `layer` (its ``kept_view``), where it scored them after the pass
        (probes.scoring.probe.Probe.score_kept; batch as it kept it: its sentences and indices, ``memo``): kept for the
        recorded sentences as ``update`` keeps a view, the batch's layers in one copy at its last."""
        kept, probe.kept_view = probe.kept_view, None
        rows = [b for b, index in enumerate(batch.indices) if index < self.limit]
        if probe.name not in self.viewing or not rows:
            return
        per_layer = batch.memo(("examples.late", id(self), probe.name), lambda: [None] * self.layers)
        if kept is not None and kept[0] == layer:
            per_layer[layer] = kept[1:]
        if layer == self.layers - 1 and any(marks is not None for marks in per_layer):
            pending = {"rows": rows, "sentences": [batch.sentences[b] for b in rows],
                       "indices": [batch.indices[b] for b in rows]}
            self.settle()
            self._keep_marks(probe.name, probe, _marks_copy(per_layer), pending)

    def _held(self, rows: int, heads: int, columns: int, device: torch.device) -> dict[str, Any]:
        """What a batch's recorded rows keep: every layer's predictions on the device until its last layer, and the
        quantised maps there too, held until the views are made, where the run's held maps stay within
        ``held_budget`` (else written layer by layer: "maps_at", their offsets in the store); where held and
        ``staged``, their float32 maps of every layer until its last ("staged")."""
        size = rows * self.layers * heads * columns * columns  # bytes of [R,L,H,C,C] uint8
        if self._room is None:
            self._room = held_budget(device)
        hold = size <= self._room
        self._room -= size if hold else 0
        shape = (rows, self.layers, heads, columns, columns)
        return {"predictions": torch.empty((rows, self.layers, heads, columns), dtype=torch.int16, device=device),
                "maps": torch.empty(shape, dtype=torch.uint8, device=device) if hold else None,
                "staged": torch.empty(shape, dtype=torch.float32, device=device) if hold and staged(size, device)
                else None,
                "maps_at": np.full((rows, self.layers), -1, dtype=np.int64),
                "marks": {}}  # probe -> [L] of (rows [N], {mark: [N,H]}) where it kept them

    def _keep(self, batch: Batch, rows: list[int], held: dict[str, Any]) -> None:
        """The batch's recorded rows, every layer, on their way to the host: the predictions, and each viewing probe's
        marks (one copy a probe), copied without the host waiting (probes.base.devices.HostCopy), the held maps left on
        the device; then the previous batch's, landed meanwhile, kept (``settle``). So the host reads a batch's copies
        once the device has the next batch's layers queued, and never stops it between batches."""
        predictions = held["predictions"]  # [R,L,H,C] int16
        copied = HostCopy(predictions, given=True)
        marks = {name: _marks_copy(per_layer) for name, per_layer in held["marks"].items()}
        self.settle()
        self._pending = {"sentences": [batch.sentences[b] for b in rows], "indices": [batch.indices[b] for b in rows],
                         "rows": rows, "width": batch.width, "predictions": copied, "maps": held["maps"],
                         "maps_at": held["maps_at"], "marks": marks}

    def settle(self) -> None:
        """Keep the batch whose copies were on their way, if any (waiting for them here): at the next batch's last
        layer, and before the kept sentences are read."""
        if self._pending is None:
            return
        pending, self._pending = self._pending, None
        predictions, maps = pending["predictions"].landed().numpy(), pending["maps"]  # [R,L,H,C]; [R,L,H,C,C] or None
        for k, (sentence, index) in enumerate(zip(pending["sentences"], pending["indices"])):
            entry = self._kept.setdefault(index, {
                "sentence": sentence,
                "predictions": np.zeros((self.layers, self.heads, len(sentence.words) + 1), dtype=np.int16),
                "held": None,  # [L,H,C,C] uint8 its maps, held on the device
                "maps_at": np.full(self.layers, -1, dtype=np.int64),  # [L] else each layer's block in the store
                "width": 0,  # its maps' side: the batch's C columns
                "views": {}})  # probe -> {"items": [...], "marks": {name: [L] of [items,H]}}
            entry["predictions"][:] = predictions[k, :, :, : len(sentence.words) + 1]
            entry["held"] = None if maps is None else maps[k]
            entry["maps_at"][:] = pending["maps_at"][k]
            entry["width"] = pending["width"]
        for name, copied in pending["marks"].items():
            self._keep_marks(name, self.viewing[name], copied, pending)

    def _keep_marks(self, name: str, probe: Any, copied: tuple, pending: dict[str, Any]) -> None:
        """The marks [items,H] of `probe`'s view (``_marks_copy``: its copy, the layers it kept marks at, their names,
        [layers kept, marks, N, H]) for each recorded row of the pending batch."""
        copy, layers, names, shape = copied
        flat = copy.landed().numpy()
        n = shape[2]
        grids, of_item = flat[: flat.size - n].reshape(shape), flat[flat.size - n:]
        for b, sentence, index in zip(pending["rows"], pending["sentences"], pending["indices"]):
            views = self._kept[index]["views"]
            if name not in views:
                views[name] = {"items": probe.view_items(sentence), "marks": {}}
            mine = of_item == b  # [N] this sentence's items
            for i, layer in enumerate(layers):
                for j, mark in enumerate(names):
                    views[name]["marks"].setdefault(mark, [None] * self.layers)[layer] = grids[i, j][mine]

    def _write(self, maps: np.ndarray) -> int:
        """Append one sentence's layer of maps (uint8 [H,C,C], the batch's columns) to the store; where it begins."""
        if self._store is None:
            self._store = tempfile.TemporaryFile()
        offset = self._store.seek(0, 2)
        self._store.write(maps.data)
        return offset

    def maps(self, index: int, heads: list[tuple[int, int]]) -> list[np.ndarray]:
        """The kept maps of sentence `index` (corpus order) for `heads` ((layer, head) each): uint8 [n+2,n+2] each,
        over the root, the n words and the end special, weight × 255. Held maps come to the host in one copy (the
        chosen heads' alone), the others are read from the store."""
        entry = self.kept[index]
        n, width = len(entry["sentence"].words), entry["width"]
        if not heads:
            return []
        if entry["held"] is not None:
            held = entry["held"]  # [L,H,C,C] on the device
            layers, chosen = (to_device(torch.tensor(part), held.device) for part in zip(*heads))  # [K] each
            blocks = held[layers, chosen].cpu().numpy()  # [K,C,C]
        else:
            blocks = []
            for layer, head in heads:
                self._store.seek(int(entry["maps_at"][layer]) + head * width * width)
                blocks.append(np.frombuffer(self._store.read(width * width), dtype=np.uint8).reshape(width, width))
        keep = np.r_[0:n + 1, width - 1]  # [n+2] the root, the words, the end special (padding columns between)
        return [block[np.ix_(keep, keep)] for block in blocks]

    def retry_point(self, method: str = "update") -> int | None:
        """The room left for held maps: a batch fed again (after an out-of-memory split, see
        probes.running.runner.Feed) writes the same entries again, and the failed batch's held maps, dropped with it,
        give their room back."""
        return self._room

    def restore(self, point: int | None) -> None:
        """See retry_point."""
        self._room = point

    def chosen_heads(self, result: ProbeResult) -> list[tuple[int, int]]:
        """The named heads and the best head of every label and of overall (where one is named), sorted."""
        best = [result.best(name) for name in [*result.labels, "overall"]]
        found = {(b.layer, b.head) for b in best if b.found}
        return sorted(found | set(self.named))

    def view(self, result: ProbeResult) -> dict[str, Any]:
        """The per-sentence view of `result` (see the module docstring)."""
        heads = self.chosen_heads(result)
        probe = self.viewing.get(result.probe)
        sentences = []
        for index in sorted(self.kept):
            entry = self.kept[index]
            sentence = entry["sentence"]
            sentences.append({
                "index": index, "sent_id": sentence.sent_id, "words": list(sentence.words),
                "predictions": pack(entry["predictions"], np.uint16),
                "attention": {f"{layer}-{head}": pack(block, np.uint8)
                              for (layer, head), block in zip(heads, self.maps(index, heads))},
                **(_packed_view(entry["views"].get(result.probe), self.layers, self.heads) if probe else {})})
        return {"heads": [list(h) for h in heads], "named": [list(h) for h in self.named], "specials": self.specials,
                "kind": probe.view if probe else None, "labels": probe.view_labels() if probe else [],
                "sentences": sentences}

    def attach(self, result: ProbeResult) -> ProbeResult:
        """`result` with its view under ``extra["sentence_views"]`` (nothing when no sentence was kept)."""
        if self.kept:
            result.extra["sentence_views"] = self.view(result)
        return result


def _marks_copy(per_layer: list) -> tuple[HostCopy, list[int], list[str], tuple[int, ...]]:
    """A probe's marks (``kept_view``) at the layers of `per_layer` (rows [N], {mark: [N,H]}; None where it kept none)
    on their way to the host in one copy, as float64 (which holds a bool, an index and a float32 weight exactly;
    ``_packed_view`` casts them to their packed types), the rows last: (the copy, the layers kept, the marks' names,
    [layers kept, marks, N, H])."""
    layers = [layer for layer, kept in enumerate(per_layer) if kept is not None]
    of_item, first = per_layer[layers[0]]
    names = list(first)
    stacked = torch.stack([torch.stack([per_layer[layer][1][mark].double() for mark in names])
                           for layer in layers])  # [layers kept, marks, N, H]
    flat = torch.cat([stacked.reshape(-1), to_device(of_item, stacked.device).double()])
    return HostCopy(flat, given=True), layers, names, tuple(stacked.shape)


def _packed_view(view: dict | None, layers: int, heads: int) -> dict[str, Any]:
    """A sentence's items and marks, each mark packed as [L*H, items] (layer-major, as the predictions); no items
    and no marks where the probe kept none for the sentence (it has no item: no word tagged, no argument...),
    whether or not other sentences of its batch had some: the view does not depend on the batching."""
    grids = {mark: np.stack(per_layer).transpose(0, 2, 1).reshape(layers * heads, -1)  # [L,items,H] → [L*H, items]
             for mark, per_layer in (view or {"marks": {}})["marks"].items()}
    if not grids or all(grid.shape[1] == 0 for grid in grids.values()):
        return {"items": [], "marks": {}}
    marks = {}
    for mark, grid in grids.items():
        if mark == "weight":
            grid = np.rint(grid.astype(np.float64) * 255)
        marks[mark] = pack(grid.astype(MARK_TYPES[mark]), MARK_TYPES[mark])
    return {"items": view["items"], "marks": marks}


def quantize(attention: torch.Tensor, scratch: Scratch) -> torch.Tensor:
    """Attention weights → uint8: the weight rounded to float16, × 255 in float32, rounded half to even.
    scratch: the steps' tensors come from it (probes.capture.maps.LayerMaps.scratch), the result included, which then
    holds only until the next call."""
    shape, device = tuple(attention.shape), attention.device
    half = scratch("quantize.half", shape, torch.float16, device).copy_(attention)
    wide = scratch("temporary", shape, torch.float32, device).copy_(half).mul_(255).round_()
    return scratch("quantize.bytes", shape, torch.uint8, device).copy_(wide)
