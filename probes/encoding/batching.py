"""Batches of tokenised sentences (``probes.encoding.subwords``): the model's inputs and the word↔subword layout.

Column layout of word-level maps (W = longest sentence of the batch, in words):
    column 0        the start special token ([CLS], <s>): the dependency root
    columns 1..n    the sentence's words, so CoNLL-U IDs index columns directly
    column W+1      the end special token(s) ([SEP], </s>): kept, never a target
Columns n+1..W of a shorter sentence are padding (all zero).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Hashable

import numpy as np
import torch

from probes.base.devices import CPU
from probes.corpus.sentence import Sentence
from probes.encoding.subwords import END_COLUMN, Encoded
from probes.base.ordered import in_order
from probes.encoding import pooling as word_pooling
from probes.encoding.pooling import Segments, pooling_matrices, segments
from probes.encoding.shuffle import twin_layout

PAD_COLUMN = -1
# The default token budget (default_max_tokens): bytes of one padded subword position in a batch are
# 4 · (MAP_COPIES · H · T · layers held + ACTIVATION_COPIES · hidden), T the longest sentence; a batch
# may take MEMORY_SHARE of the device's TOTAL memory (total_memory): not of what is free at the moment,
# which changes from run to run and with it the batches (and, through float32 rounding, the last bits of
# the scores). A quarter of the total: about half of what a machine that runs little else has free.
MAP_COPIES = 8  # [B,H,T,T] float32 tensors alive at once per layer held: scores, probabilities, probes' temporaries
ACTIVATION_COPIES = 16  # [B,T,hidden] float32 tensors alive at once in a layer (q, k, v, context, 4× FFN, ...)
MEMORY_SHARE = 0.25
# On a CUDA device the default budget is at most DEVICE_TOKENS padded positions: the bare pass's throughput over
# budgets rises to a plateau and falls beyond it (bigger batches of length-sorted sentences are slower), and this
# budget lies on the plateau of both the BERT-base and the BERT-large shape, within 10% of each one's best.
# benchmarks/gpu_bench.py measures that curve and checks this constant against it (docs/benchmarks.md, GPU).
DEVICE_TOKENS = 8192
MEMINFO = "/proc/meminfo"  # the system's memory, MemTotal read from it
# the memory limit of the process' control group (cgroup v2, then v1): "max" or a huge number where none is set
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def length_sorted_batches(encoded: list[Encoded], batch_size: int | None,
                          max_tokens: int | None = None) -> list[list[Encoded]]:
    """Sort by subword length (ties by corpus order) and cut into batches of at most `batch_size` sentences
    (None: no cap) whose padded size, sentences × longest length, is at most `max_tokens` (None: no budget);
    a sentence longer than the budget alone makes a batch of one."""
    ordered = sorted(encoded, key=lambda e: (len(e.input_ids), e.index))
    batches: list[list[Encoded]] = []
    for e in ordered:  # ascending lengths: the sentence added is the batch's longest
        current = batches[-1] if batches else []
        full = len(current) == batch_size or (max_tokens is not None and (len(current) + 1) * len(e.input_ids) > max_tokens)
        if not current or full:
            batches.append([e])
        else:
            current.append(e)
    return batches


def default_max_tokens(heads: int, hidden: int, longest: int, total_bytes: int, layers_held: int = 1, *,
                       cuda: bool = False) -> int:
    """The default token budget: padded positions (sentences × length) a batch may hold so that it takes at
    most MEMORY_SHARE of `total_bytes` (the device's memory in all, total_memory), with `longest` the longest
    sentence (subwords) and `layers_held` the layers' maps held at once (1 for capture "hooks", L for
    "outputs"); on a CUDA device (`cuda`) at most DEVICE_TOKENS besides; at least one sentence of `longest`.
    The same model, corpus and machine give the same budget on every run."""
    per_token = 4 * (MAP_COPIES * heads * longest * layers_held + ACTIVATION_COPIES * hidden)
    budget = int(MEMORY_SHARE * total_bytes) // per_token
    return max(longest, min(budget, DEVICE_TOKENS) if cuda else budget)


def transfer(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor` on `device`. A host tensor bound for a CUDA device is copied into pinned (page-locked) memory and
    sent without blocking the host: the copy is queued on the current stream, before every kernel that reads it,
    and the host goes on to the next layer's work meanwhile. Anywhere else a plain ``.to(device)`` (on the CPU,
    the tensor itself)."""
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def total_memory(device: torch.device) -> int:
    """Bytes of memory `device` has in all, whatever is in use at the moment: a CUDA device's total memory,
    else the system's physical memory (MEMINFO's MemTotal, or the physical pages where there is no /proc),
    at most the memory limit of the process' control group where one is set (a container's share)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    try:
        with open(MEMINFO, encoding="ascii") as f:
            total = next(line for line in f if line.startswith("MemTotal:"))
        physical = int(total.split()[1]) * 1024
    except (OSError, StopIteration, ValueError, IndexError):
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return min([physical, *_cgroup_limits()])


def _cgroup_limits() -> list[int]:
    """The memory limits (bytes) of CGROUP_LIMITS that are set: none where a file is missing or says "max"."""
    limits = []
    for path in CGROUP_LIMITS:
        try:
            with open(path, encoding="ascii") as f:
                limits.append(int(f.read().strip()))
        except (OSError, ValueError):
            continue
    return limits


class Batch:
    """One forward pass's worth of sentences: the model's inputs and the word↔subword layout, built whole.

    Token level:  input_ids, attention_mask [B,T]; columns [B,T] (PAD_COLUMN on padding).
    The maps of each layer come separately, as ``probes.capture.maps.LayerMaps``.
    offsets:      per sentence, [T_b,2] character span of each subword (see ``Encoded.offsets``), or None.
    word_spans:   per sentence, the character span of each word in ann["text"] when the tokenizer read the
                  raw text (``tokenize="text"``), else None; tokenized_from says which: "text" or "words".
    unk_token_id: the tokenizer's unknown-token id (None where not known).
    twin:         the word-shuffled twin of this batch, built with it when `shuffle_seed` is given (see
                  probes.encoding.shuffle), else None; a twin has position_of [B,T] (original position → position
                  in the twin) and shuffled [B] (whether the sentence's order changed), and no twin itself.
    """

    def __init__(self, sentences: list[Sentence], columns: list[np.ndarray], *, pool: str = "mean-sum",
                 input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                 indices: list[int] | None = None, offsets: list[np.ndarray] | None = None,
                 word_spans: list[list[tuple[int, int]]] | None = None, unk_token_id: int | None = None,
                 token_type_ids: torch.Tensor | None = None, shuffle_seed: int | None = None,
                 position_of: torch.Tensor | None = None, shuffled: torch.Tensor | None = None):
        """columns[b]: word column of each subword of sentence b (see ``Encoded.columns``); position_of and
        shuffled are given only to a twin, by its batch."""
        self.sentences = sentences
        self.indices = indices if indices is not None else list(range(len(sentences)))
        self.n_words = torch.tensor([len(s.words) for s in sentences])  # [B]
        self.width = int(self.n_words.max()) + 2  # C
        column = torch.arange(self.width)  # [C]
        self.word_columns = (column >= 1) & (column <= self.n_words[:, None])  # [B,C] the real words' columns (1..n)
        length = max(len(c) for c in columns)
        padded = torch.full((len(sentences), length), PAD_COLUMN, dtype=torch.long)
        for row, c in enumerate(columns):
            padded[row, :len(c)] = torch.as_tensor(c, dtype=torch.long)
        self.columns = padded.masked_fill(padded == END_COLUMN, self.width - 1)  # [B,T]
        self.input_ids = input_ids  # [B,T]
        self.attention_mask = attention_mask if attention_mask is not None else (padded != PAD_COLUMN).long()  # [B,T]
        self.token_type_ids = token_type_ids  # [B,T] segment ids of sentence pairs, else None
        self.pool = pool
        self.offsets = offsets
        self.word_spans = word_spans
        self.tokenized_from = "words" if word_spans is None else "text"
        self.unk_token_id = unk_token_id  # the tokenizer's [UNK] id, where known
        self.position_of = position_of  # [B,T] on a twin: each original position's place in the twin
        self.shuffled = shuffled  # [B] bool on a twin: whether the sentence's word order changed
        self._pooling: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}  # device -> query, key [B,C,T]
        self._memo: dict[Hashable, Any] = {}  # see memo()
        self.twin = None if shuffle_seed is None else self._shuffled(shuffle_seed)

    @classmethod
    def from_encoded(cls, sentences: list[Sentence], items: list[Encoded], tokenizer, pool: str,
                     shuffle_seed: int | None = None) -> "Batch":
        """A batch of tokenised sentences (sentences[b] is the one of items[b]), padded by the tokenizer
        (its own attention mask); with `shuffle_seed`, its word-shuffled twin too (see probes.encoding.shuffle)."""
        features = {"input_ids": [e.input_ids for e in items]}
        if any(e.token_type_ids is not None for e in items):
            features["token_type_ids"] = [e.token_type_ids or [0] * len(e.input_ids) for e in items]
        padded = tokenizer.pad(features, padding=True, return_tensors="pt", return_attention_mask=True)
        return cls(sentences, [e.columns for e in items], pool=pool, input_ids=padded["input_ids"],
                   attention_mask=padded["attention_mask"], indices=[e.index for e in items],
                   offsets=[e.offsets for e in items],
                   word_spans=[e.word_spans for e in items] if items[0].word_spans is not None else None,
                   unk_token_id=tokenizer.unk_token_id, token_type_ids=padded.get("token_type_ids"),
                   shuffle_seed=shuffle_seed)

    def _shuffled(self, seed: int) -> "Batch":
        """The word-shuffled twin (see probes.encoding.shuffle): the same sentences, inputs gathered into the new order."""
        lengths = self.attention_mask.sum(1).tolist()
        layout = twin_layout(self.sentences, self.columns, lengths, seed)
        columns = self.columns.gather(1, layout.source)  # [B,T]

        def gathered(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.gather(1, layout.source)

        return Batch(self.sentences, [columns[b, :n].numpy() for b, n in enumerate(lengths)], pool=self.pool,
                     input_ids=gathered(self.input_ids), attention_mask=self.attention_mask, indices=self.indices,
                     token_type_ids=gathered(self.token_type_ids), position_of=layout.position_of,
                     shuffled=layout.shuffled)

    @property
    def end_column(self) -> int:
        return self.width - 1

    def memo(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """`make()` computed once per batch under `key` and shared: what a probe derives from the batch
        alone (gold arcs, token masks) is computed at the first layer, not again at every layer."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def pooling(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Query and key pooling matrices [B,C,T] on `device` (see probes.encoding.pooling), made once per device."""
        if device not in self._pooling:
            self._pooling[device] = pooling_matrices(transfer(self.columns, device), self.width, self.pool)
        return self._pooling[device]

    def segments(self, device: torch.device) -> tuple[Segments, Segments]:
        """The query and key pooling matrices as segment sums read them on `device` (probes.encoding.pooling.Segments,
        with their tails where sums must come in order there: probes.base.ordered.in_order): made on the host once a
        batch (its layout is host data; ``ready`` makes them ahead) and sent to `device` once, for every layer's
        pooling."""
        ordered = in_order(device)
        made = self._host_segments(ordered)
        return self.memo(("segments", ordered, device), lambda: tuple(s.to(device) for s in made))

    def ready(self, device: torch.device) -> "Batch":
        """This batch, with what its layers' pooling on `device` reads from the host made now, on the calling thread
        (the runner's batch builder, ahead of the model): the Segments of a batch pooled by sums (wider than
        probes.encoding.pooling.PRODUCT_WIDTH), its twin's too. On the CPU nothing: there the model's own threads
        take the cores, and work beside them slows the pass (docs/benchmarks.md)."""
        if torch.device(device).type == "cpu":
            return self
        for batch in (self, self.twin):
            if batch is not None and batch.width > word_pooling.PRODUCT_WIDTH:
                batch._host_segments(in_order(device))
        return self

    def _host_segments(self, ordered: bool) -> tuple[Segments, Segments]:
        return self.memo(("segments", ordered), lambda: tuple(segments(p, ordered) for p in self.pooling(CPU)))


def token_segments(batch: Batch) -> torch.Tensor:
    """[B,T] segment of each subword: 0 or 1 for the words of a pair's first or second sentence (0 for
    every word of a single sentence), -1 for special tokens and padding."""
    split = torch.tensor([s.ann.get("pair", len(s.words)) for s in batch.sentences])  # [B] words in segment 0
    columns = batch.columns  # [B,T]
    words = (columns >= 1) & (columns < batch.end_column)
    segment = (columns > split[:, None]).long()
    return segment.masked_fill(~words, -1)
