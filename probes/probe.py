"""The probe interface: additive accumulators fed by batches, scores computed at the end.

Like torchmetrics' ``Metric``: ``update(batch)`` adds counts and sums to fixed-shape state,
``compute(info)`` turns them into a ProbeResult, and ``merge(other)`` adds another shard's state,
so a corpus split across processes or machines gives the same scores as one run.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from probes.batching import Batch
from probes.corpus.sentence import Sentence
from probes.presentation import Presentation
from probes.results import ProbeResult, RunInfo


@dataclass(frozen=True)
class Option:
    """A probe option: ``--name`` on the command line, ``name=`` in ``probes.run``."""

    name: str
    default: Any
    help: str
    type: type = str
    choices: tuple | None = None


class Probe(Presentation, ABC):
    """Base class of every probe. Subclasses set the class variables and implement the three methods."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""  # one line, shown by `probes list`
    needs: ClassVar[tuple[str, ...]] = ()  # Sentence.ann keys a sentence must have to be scored
    needs_vectors: ClassVar[bool] = False  # whether the run must capture per-head context vectors
    needs_fit: ClassVar[bool] = False  # whether scoring needs a fit phase first: fit_update() on a fit corpus
    corpus_format: ClassVar[str] = "conllu"  # reader used when the user names no --format
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, layers: int, heads: int, **options: Any):
        self.layers, self.heads = layers, heads
        known = {o.name: o for o in self.options}
        unknown = set(options) - set(known)
        if unknown:
            raise ValueError(f"probe {self.name!r} has no option {sorted(unknown)[0]!r}")
        self.config = {name: options.get(name, o.default) for name, o in known.items()}

    def reader_options(self) -> dict[str, Any]:
        """Options this probe needs from the corpus reader (e.g. keep relation subtypes)."""
        return {}

    def prepare(self, sentences: list[Sentence]) -> None:
        """Called once with every sentence the run read, before the first batch (e.g. to count word
        frequencies over the corpus: a pass over the text, no model)."""

    def shuffle_seed(self) -> int | None:
        """A seed to have each batch's word-shuffled twin run too (``batch.twin``, see probes.shuffle), or None."""
        return None

    def skip_reason(self, sentence: Sentence) -> str | None:
        """Why this probe cannot score a sentence, or None. Skipped sentences are counted."""
        missing = [k for k in self.needs if k not in sentence.ann]
        return f"no_{missing[0]}" if missing else None

    def fit_update(self, batch: Batch) -> None:
        """Fit phase, for probes with ``needs_fit``: add a batch of the fit corpus. The runner feeds every
        fit batch before the first ``update``; probes without ``needs_fit`` never get fit batches."""

    @abstractmethod
    def update(self, batch: Batch) -> None:
        """See the class docstring."""

    @abstractmethod
    def merge(self, other: "Probe") -> None:
        """See the class docstring."""

    @abstractmethod
    def compute(self, info: RunInfo) -> ProbeResult:
        """See the class docstring."""


class LabelSums:
    """Per-label additive state of a fixed trailing shape: sums[label] is a tensor of `shape`.

    Labels are added as they appear; two tables merge by label name, so shards that saw
    different label sets still combine by adding.
    """

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float64):
        self.names: list[str] = []
        self._index: dict[str, int] = {}
        self.sums = torch.zeros((0, *shape), dtype=dtype)

    def ids(self, labels: list[str]) -> torch.Tensor:
        """Row index of each label, adding rows for new labels."""
        new = [x for x in dict.fromkeys(labels) if x not in self._index]
        if new:
            for x in new:
                self._index[x] = len(self.names)
                self.names.append(x)
            pad = torch.zeros((len(new), *self.sums.shape[1:]), dtype=self.sums.dtype)
            self.sums = torch.cat([self.sums, pad])
        return torch.tensor([self._index[x] for x in labels], dtype=torch.long)

    def add(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        """sums[rows[i]] += values[i] for every i (rows may repeat).

        Done as a one-hot matrix product [labels, N] @ [N, ...]: far faster on CPU than index_add_
        for many rows and few labels. Products run in float64, so counts and sums stay exact.
        """
        values = values.to(self.sums.dtype).cpu().reshape(len(rows), -1)
        onehot = torch.zeros(len(self.names), len(rows), dtype=self.sums.dtype)
        onehot[rows, torch.arange(len(rows))] = 1
        self.sums += (onehot @ values).reshape(self.sums.shape)

    def merge(self, other: "LabelSums") -> None:
        self.add(self.ids(other.names), other.sums)

    def total(self) -> torch.Tensor:
        return self.sums.sum(0)

    def __getitem__(self, label: str) -> torch.Tensor:
        return self.sums[self._index[label]]
