"""The probe interface: additive state fed one layer at a time, scores computed at the end.

Like torchmetrics' ``Metric``: a probe declares its state once (``add_state``; ``replicated=True`` for sums the
bootstrap's intervals need, which the base class gives the run's replicates), ``update(batch, maps)``
adds counts and sums for one layer of one batch, ``compute(info)`` turns the state into a
ProbeResult. Because every piece of state is a sum, ``merge`` (add another shard's state), ``reset``
and ``state_dict`` / ``load_state_dict`` (save and reload a shard) come free, and a corpus split
across processes or machines gives the same scores as one run.

The runner calls ``update`` once per (batch, layer), layers in order 0..L-1, with that layer's maps
only (``probes.capture.maps.LayerMaps``); a probe writes into the layer's slice of its [.., L, H] state.

A probe that sets ``state_on_device`` keeps its state on the run's device (``to``: the runner moves it there before
its first batch and back to the CPU before ``compute`` and before saving it): ``update`` adds device tensors to it and
never reads a value back to the host, so that a GPU run never waits for the host layer by layer (issue 44;
tests/test_host_reads.py counts the reads). State it adds from the batch's sentences alone (gold counts) is declared
``host=True`` and stays on the CPU, where those numbers are made.
"""
from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Iterable, Protocol

import numpy as np
import torch

from probes.base.devices import CPU, to_device
from probes.encoding.batching import Batch
from probes.results.bootstrap import Bootstrap, add_replicates, add_weighted_sums
from probes.corpus.sentence import Sentence
from probes.base.errors import InputError
from probes.capture.maps import LayerMaps
from probes.base.options import Declaration, Option
from probes.results.presentation import Presentation
from probes.results.probe_result import ProbeResult, RunInfo


class Additive(Protocol):
    """Non-tensor probe state (``LabelSums``, ``probes.scoring.centroids.Centroids``): added by ``merge``. State with a
    ``to(device)`` (moving it in place, returning itself) follows the probe to the run's device; state without one
    stays on the host."""

    def merge(self, other: Any) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class Probe(Presentation, ABC):
    """Base class of every probe. Subclasses set the class variables, declare their state in
    ``__init__`` with ``add_state`` and implement ``update`` and ``compute``."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""  # one line, shown by `probes list`
    needs: ClassVar[tuple[str, ...]] = ()  # Sentence.ann keys a sentence must have to be scored
    needs_vectors: ClassVar[bool] = False  # whether the run must capture per-head context vectors
    needs_fit: ClassVar[bool] = False  # whether scoring needs a fit phase first: fit_update() on a fit corpus
    # whether update reads the maps only through LayerMaps.entries (a few entries of each map, never the whole map,
    # the word-level views or the context): a run of such probes alone lets a causal model's capture compute just
    # those entries (probes.capture.sdpa_qk)
    reads_entries: ClassVar[bool] = False
    # whether the state follows the run to its device (``to``): set by a probe whose update adds device tensors to its
    # state (through LabelSums, add_replicated, or tensors of the maps' device); without it the state stays on the CPU
    state_on_device: ClassVar[bool] = False
    corpus_format: ClassVar[str] = "conllu"  # reader used when the user names no --format
    options: ClassVar[tuple[Option, ...]] = ()

    def __init_subclass__(cls, declared: Declaration | None = None, **kwargs: Any):
        """``class DependencyProbe(Probe, declared=DEP)``: a built-in probe's name, description, options and score's
        name are its declaration's (probes.settings.declared), which the command line reads without importing the
        probe."""
        super().__init_subclass__(**kwargs)
        if declared is not None:
            cls.name, cls.description, cls.options = declared.name, declared.description, declared.options
            cls.score = declared.score

    def __init__(self, layers: int, heads: int, *, replicates: int = 0, bootstrap_seed: int = 0, **options: Any):
        """replicates, bootstrap_seed: the run's bootstrap (probes.results.bootstrap), which the state declared
        ``replicated`` (``add_state``) keeps replicate sums of."""
        self.layers, self.heads = layers, heads
        self.bootstrap = Bootstrap(replicates, bootstrap_seed)
        known = {o.name: o for o in self.options}
        unknown = set(options) - set(known)
        if unknown:
            raise InputError(f"probe {self.name!r} has no option {sorted(unknown)[0]!r}")
        self.config = {name: o.convert(options[name], self.name) if name in options else o.default
                       for name, o in known.items()}
        self._defaults: dict[str, Any] = {}  # state name -> its initial value (reset copies it)
        self._fit_state: set[str] = set()  # state of the fit phase (merged apart, see merge_fit)
        self._host_state: set[str] = set()  # state kept on the CPU whatever the device (add_state's host)
        self.device = CPU  # where the state is (``to``)
        self.causal = False  # whether the run's model is decoder-only (read_model): results state what that rules out

    def add_state(self, name: str, default: torch.Tensor | "Additive", *, fit: bool = False,
                  replicated: bool = False, host: bool = False) -> None:
        """Declare additive state: a tensor of sums (float64) or counts (int64), or an object with
        ``merge``/``state_dict``/``load_state_dict`` (``LabelSums``, ``probes.scoring.centroids.Centroids``).
        It becomes ``self.<name>``; merge adds it, reset restores `default`, state_dict saves it.
        fit=True: state of the fit phase (``fit_update``), merged by ``merge_fit``.
        replicated=True: sums the bootstrap's intervals need, kept per replicate of the run's bootstrap
        (``self.bootstrap``; none without replicates): an empty ``LabelSums`` keeps its replicate sums, weighted by
        ``add(..., sentences=rows, batch=batch)``; a float64 tensor of `shape` becomes [R, *shape] zeros, added to by
        ``add_replicated``.
        host=True: state added to from the batch's sentences alone (gold counts, what ``skip_reason`` tallies), kept
        on the CPU whatever the run's device (``to``): those numbers are made on the host, and copying them to a
        device per batch would cost it more than adding them."""
        if isinstance(default, torch.Tensor) and default.dtype not in (torch.float64, torch.int64):
            raise TypeError(f"state {name!r} must be float64 sums or int64 counts, not {default.dtype}")
        if replicated:
            default = default.new_zeros((self.bootstrap.replicates, *default.shape)) \
                if isinstance(default, torch.Tensor) else default.with_bootstrap(self.bootstrap)
        self._defaults[name] = default
        if fit:
            self._fit_state.add(name)
        if host:
            self._host_state.add(name)
        setattr(self, name, _moved(copy.deepcopy(default), CPU if host else self.device))

    def add_replicated(self, table: torch.Tensor, sentences: torch.Tensor | None, values: torch.Tensor, batch: Batch,
                       at: tuple = ()) -> None:
        """table[:, at] += Σ_i weights[:, sentences[i]] · values[i] for a tensor declared ``replicated`` ([R, ...]),
        weights the bootstrap's of `batch` (probes.results.bootstrap.add_replicates; sentences None: one value per
        batch row); nothing without replicates. sentences and values on the table's device."""
        add_replicates(table, sentences, values, self.bootstrap.weights(batch, table.device, table.dtype), at=at)

    def to(self, device: torch.device | str) -> "Probe":
        """Move the state (all but ``host`` state) to `device`, where the probe keeps it there (``state_on_device``;
        else it stays on the CPU); this probe, for chaining."""
        self.device = torch.device(device) if self.state_on_device else CPU
        for name in self._defaults.keys() - self._host_state:
            setattr(self, name, _moved(getattr(self, name), self.device))
        return self

    def reader_options(self) -> dict[str, Any]:
        """Options this probe needs from the corpus reader (e.g. keep relation subtypes)."""
        return {}

    def prepare(self, sentences: Iterable[Sentence]) -> None:
        """Called once before the first batch with every sentence the run reads (after --limit, in every
        shard), e.g. to count word frequencies over the corpus: a pass over the text, no model. `sentences`
        is streamed (probes.corpus.CorpusStream): iterating it reads the corpus files again, one sentence
        at a time, so a probe that needs no pass should not iterate it, and one that does should keep
        what it counts, not the sentences."""

    def fit_subset(self, sentences: list[Sentence]) -> Callable[[Sentence], bool] | None:
        """Which of `sentences` (every sentence a fit phase held in memory feeds: those of a fit corpus of one chunk,
        probes.running.chunks) this probe's fit reads, as a test on each; None (the default): all. A fit phase whose
        every fitting probe gives a test feeds only the sentences one of them keeps (trees: its selection sample)."""
        return None

    def rows(self, sentence: Sentence, tokenizer, max_length: int) -> list[Sentence]:
        """The batch rows a sentence this probe can score becomes (called after ``skip_reason``, before
        tokenising; max_length the model's limit in subwords): the sentence itself by default; coref cuts a
        document into windows of whole sentences (probes.encoding.windows)."""
        return [sentence]

    def read_model(self, encoder: Any) -> None:
        """Called once with the run's loaded model (probes.capture.model.Encoder) before the first batch: a probe that
        scores a head's weights as well as its maps (induction's OV copying score) reads them here (and calls this
        one). Here: whether the model is decoder-only (``self.causal``), whose words attend only to themselves and
        earlier words, a constraint the probes that score directed pairs state in their results."""
        self.causal = bool(getattr(encoder, "causal", False))

    def shuffle_seed(self) -> int | None:
        """A seed to have each batch's word-shuffled twin run too (``maps.twin``, see probes.encoding.shuffle), or None."""
        return None

    def skip_reason(self, sentence: Sentence) -> str | None:
        """Why this probe cannot score a sentence, or None. Skipped sentences are counted."""
        missing = [k for k in self.needs if k not in sentence.ann]
        return f"no_{missing[0]}" if missing else None

    def batch_buffer(self, batch: Batch, name: str, shape: tuple[int, ...], dtype: torch.dtype,
                     zeroed: bool = False) -> torch.Tensor:
        """An uninitialised tensor (`zeroed`: zeros) of `shape` that this probe keeps for the rest of `batch` (in its
        memo, under `name`), on the state's device: e.g. each layer's hits [N,L,H] written into their layer's slice
        and added to the state at the last layer, one replicate-sum product per batch instead of one per layer."""
        make = torch.zeros if zeroed else torch.empty
        return batch.memo((name, id(self)), lambda: make(shape, dtype=dtype, device=self.device))

    def fit_update(self, batch: Batch, maps: LayerMaps) -> None:
        """Fit phase, for probes with ``needs_fit``: add one layer of a batch of the fit corpus. The runner
        feeds every fit batch before the first ``update``; probes without ``needs_fit`` never get fit batches."""

    def fitted(self, device: torch.device) -> None:
        """After the fit phase (every fit batch fed, before the first ``update``): work done once on the fit's state,
        outside any batch, on the run's `device` where it is device work (trees chooses its head ensemble). Nothing
        by default; state merged in later (``merge_fit``) must not rely on it."""

    def beside_bytes(self, sentences: list[Sentence], head_dim: int) -> int | None:
        """Bytes this probe would keep to fit within the scoring pass itself (``fit_beside``) when its fit corpus is
        the scored corpus, `sentences` (the batches of both passes the same), for a model of `head_dim`; None where
        it cannot (the default: its fit phase, a forward pass of its own, comes first)."""
        return None

    def fit_beside(self) -> None:
        """From now on ``update`` fits (as ``fit_update`` does) and keeps what scoring needs, and ``score_kept``
        scores it once the pass is over (after ``fitted``): the fit phase's forward pass is saved. Only for a probe
        whose ``beside_bytes`` is not None."""
        raise RuntimeError(f"{self.name}: fit_beside called on a probe whose beside_bytes is None (it fits in a "
                           "fit phase of its own)")

    def score_kept(self, viewed: Callable[[Any, int], None]) -> None:
        """After a pass fed under ``fit_beside``: score what was kept, batch by batch and layer by layer in the pass's
        order, calling viewed(the batch as kept, with its sentences, indices and ``memo``; the layer) after each, when
        its view (``kept_view``) is the layer's. Nothing by default."""

    @abstractmethod
    def update(self, batch: Batch, maps: LayerMaps) -> None:
        """Add layer ``maps.layer`` of `batch` to the state (see the module docstring)."""

    @abstractmethod
    def compute(self, info: RunInfo) -> ProbeResult:
        """The result of everything added so far."""

    def merge(self, other: "Probe") -> None:
        """Add another shard's scoring state (same probe, options and model shape)."""
        self._check_same(other)
        for name in self._defaults.keys() - self._fit_state:
            _add_into(self, name, getattr(other, name))

    def merge_fit(self, other: "Probe") -> None:
        """Add another shard's fit-phase state; merge every shard's fit before scoring. The fit phase keeps no
        bootstrap replicates, so `other` may have other replicates (e.g. a --select-on copy that keeps none)."""
        self._check_same(other, bootstrap=False)
        for name in self._fit_state:
            _add_into(self, name, getattr(other, name))

    def reset(self) -> None:
        """Back to the declared initial state (on the state's device)."""
        for name, default in self._defaults.items():
            setattr(self, name, _moved(copy.deepcopy(default), CPU if name in self._host_state else self.device))

    def state_dict(self) -> dict[str, Any]:
        """Every declared state by name: tensors as they are (copies, on their device), other state as its own
        ``state_dict()``."""
        return self._copied(self._defaults.keys())

    def _copied(self, names) -> dict[str, Any]:
        """The declared state `names` as ``state_dict`` gives it."""
        return {name: (value.clone() if isinstance(value := getattr(self, name), torch.Tensor) else value.state_dict())
                for name in names}

    def retry_point(self, method: str = "update") -> Any:
        """What ``restore`` takes to bring the state back to now, should the next batch fail: the runner takes one
        before every batch on an accelerator (its out-of-memory split, probes.running.runner.Feed). A copy of the
        state a batch fed to `method` adds to (``fed_state``), the rest left out: a scoring pass copies no fit state (a
        selection sample, centroids), a fit pass none of the scores' sums. A probe with an earlier batch's work still
        pending (trees' decoding) keeps it pending instead of waiting for it here."""
        return self._copied(self.fed_state(method))

    def fed_state(self, method: str) -> set[str]:
        """The state a batch fed to `method` adds to: ``fit_update`` the fit state (``add_state(..., fit=True)``),
        ``update`` the rest (a probe fitting beside the scoring adds to its fit state there too: it says so)."""
        return set(self._fit_state) if method == "fit_update" else set(self._defaults) - self._fit_state

    def restore(self, point: Any) -> None:
        """Back to a ``retry_point``: the state it copied replaced, the rest as it is, and what the failed batch
        left outside the state dropped (``drop_unfinished``)."""
        self._load(point)
        self.drop_unfinished()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the state by a ``state_dict()`` of the same probe (from any device: copied to the state's); what a
        batch not finished left outside the state is dropped (``drop_unfinished``)."""
        if set(state) != set(self._defaults):
            raise ValueError(f"{self.name}: state has {sorted(state)}, expected {sorted(self._defaults)}")
        self._load(state)
        self.drop_unfinished()

    def drop_unfinished(self) -> None:
        """Drop what a batch not finished (one that ran out of memory: its later layers never came) left outside
        the declared state, such as layers stashed until the batch's last. Nothing by default."""

    def _load(self, state: dict[str, Any]) -> None:
        """Replace the state named in `state` (``load_state_dict``'s checks of each)."""
        for name, value in state.items():
            mine = getattr(self, name)
            if isinstance(mine, torch.Tensor):
                if value.shape != mine.shape or value.dtype != mine.dtype:
                    raise ValueError(f"{self.name}: state {name!r} has shape {tuple(value.shape)} {value.dtype}, "
                                     f"expected {tuple(mine.shape)} {mine.dtype}")
                setattr(self, name, value.to(mine.device, copy=True))
            else:
                mine.load_state_dict(value)

    def _check_same(self, other: "Probe", bootstrap: bool = True) -> None:
        if type(other) is not type(self) or (other.layers, other.heads) != (self.layers, self.heads) \
                or other.config != self.config or (bootstrap and other.bootstrap != self.bootstrap):
            raise ValueError(f"cannot merge {other.name} ({other.layers}×{other.heads}, {other.config}, {other.bootstrap}) "
                             f"into {self.name} ({self.layers}×{self.heads}, {self.config}, {self.bootstrap})")


def _add_into(probe: Probe, name: str, theirs: Any) -> None:
    mine = getattr(probe, name)
    if isinstance(mine, torch.Tensor):
        mine += theirs.to(mine.device)
    else:
        mine.merge(theirs)


def _moved(state: Any, device: torch.device) -> Any:
    """State (a tensor, or Additive state) on `device`: Additive state without ``to`` stays where it is."""
    if isinstance(state, torch.Tensor):
        return state.to(device)
    return state.to(device) if hasattr(state, "to") else state


class LabelSums:
    """Per-label additive state of a fixed trailing shape: sums[label] is a tensor of `shape`.

    Labels are added as they appear; two tables merge by label name, so shards that saw
    different label sets still combine by adding.

    With replicates R > 0 (a probe's state declared ``replicated``: ``Probe.add_state``, which gives the table the
    run's bootstrap: ``with_bootstrap``) it also keeps the bootstrap's replicate sums (probes.results.bootstrap) of its main part, replicas [labels, R, *main shape] in `replicate_dtype`: the whole of `shape`, or with `main`
    given only sums[:, main] (e.g. the "either" way of dep's [3, L, H] hits). float32 holds the replicate
    sums of counts exactly up to 2^24 per cell; give float64 for sums of fractional values.

    The sums live on one device (``to``); ``add`` takes values there (others are copied there first), and the label
    look-up (``ids``) is host work whose ids go to that device once per list of labels asked.
    """

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float64, *, replicates: int = 0,
                 main: int | None = None, replicate_dtype: torch.dtype = torch.float32):
        self.shape = tuple(shape)
        self.names: list[str] = []
        self._index: dict[str, int] = {}
        self._last: tuple[list[str] | None, torch.Tensor | None] = (None, None)  # the labels last asked, their ids
        self.sums = torch.zeros((0, *shape), dtype=dtype)  # [labels, *shape]
        self.replicates, self.main_index = replicates, main
        self.replicate_dtype = replicate_dtype
        self.bootstrap: Bootstrap | None = None  # whose weights ``add(..., batch=...)`` draws (``with_bootstrap``)
        self._main_shape = self.shape if main is None else self.shape[1:]
        # [R, room, *main shape]: replicate-major, so that a batch's sums go in as one [R,B] × [B, labels·F] product;
        # rows past the labels' are room for labels yet to come (see ids)
        self._replicas = torch.zeros((replicates, 0, *self._main_shape), dtype=replicate_dtype)

    def with_bootstrap(self, bootstrap: Bootstrap) -> "LabelSums":
        """An empty table of this one's shape, main part and types that keeps `bootstrap`'s replicate sums (R =
        its replicates; none for 0) and draws a batch's weights from it (``add(..., batch=...)``)."""
        table = LabelSums(self.shape, self.sums.dtype, replicates=bootstrap.replicates, main=self.main_index,
                          replicate_dtype=self.replicate_dtype)
        table.bootstrap = bootstrap
        return table

    def to(self, device: torch.device | str) -> "LabelSums":
        """Move the sums and replicate sums to `device` (in place); this table."""
        self.sums, self._replicas = self.sums.to(device), self._replicas.to(device)
        self._last = (None, None)
        return self

    @property
    def replicas(self) -> torch.Tensor:
        """[labels, R, *main shape] the replicate sums: a view of the state (kept replicate-major)."""
        return self._replicas[:, : len(self.names)].transpose(0, 1)

    def ids(self, labels: list[str]) -> torch.Tensor:
        """Row index of each label ([N] int64 on the sums' device), adding rows for new labels. The same list object
        asked again (a batch's labels, layer after layer) gets the same tensor without another look-up or copy: do
        not change a list once asked."""
        if labels is self._last[0] and len(labels) == len(self._last[1]):
            return self._last[1]
        if not self._index.keys() >= set(labels):
            for x in dict.fromkeys(labels):  # new labels in order of first appearance
                if x not in self._index:
                    self._index[x] = len(self.names)
                    self.names.append(x)
            self.sums = torch.cat([self.sums, self.sums.new_zeros((len(self.names) - len(self.sums), *self.shape))])
            self._make_room()
        ids = np.fromiter(map(self._index.__getitem__, labels), dtype=np.int64, count=len(labels))
        self._last = (labels, to_device(torch.from_numpy(ids), self.sums.device))
        return self._last[1]

    def _make_room(self) -> None:
        """Replicate rows for every label: where they are short, room for half as many again, so that labels
        added one by one copy the replicate table a few times, not once each."""
        held = self._replicas.shape[1]
        if len(self.names) > held:
            room = self._replicas.new_zeros((self.replicates, len(self.names) * 3 // 2, *self._main_shape))
            room[:, :held] = self._replicas
            self._replicas = room

    def add(self, rows: torch.Tensor, values: torch.Tensor, at: tuple = (), *, sentences: torch.Tensor | None = None,
            weights: torch.Tensor | None = None, batch: Batch | None = None) -> None:
        """sums[rows[i]][at] += values[i] for every i (rows may repeat); `at` indexes the trailing
        dimensions, e.g. ``(slice(None), layer)`` adds [N, 3, H] values into the layer's slice of a
        (3, L, H) table.

        Done as a one-hot matrix product [labels, N] @ [N, ...]: far faster on CPU than index_add_
        for many rows and few labels. Products run in float64, so counts and sums stay exact. On the sums' device:
        rows, values, sentences and weights given elsewhere are copied there.

        sentences [N] (each value's sentence row in the batch) and weights [R,B] (the batch's replicate
        weights, ``Bootstrap.weights``), or `batch` whose weights the table's bootstrap draws (``with_bootstrap``), add
        the main part to the replicas too, where the table keeps them.
        With `main` set, `at` must take the whole of the first trailing dimension (or leave it out).
        """
        device = self.sums.device
        target = self.sums[(slice(None), *at)]  # a view: [labels, *values.shape[1:]]
        rows, values = to_device(rows, device), to_device(values, device).to(self.sums.dtype).reshape(len(rows), -1)
        onehot = torch.zeros(len(self.names), len(rows), dtype=self.sums.dtype, device=device)  # [labels,N]
        onehot.scatter_(0, rows.view(1, -1), 1.0)  # onehot[rows[i], i] = 1
        target += (onehot @ values).reshape(target.shape)
        if self.replicates and weights is None and batch is not None:
            weights = self.bootstrap.weights(batch, device)
        if self.replicates and weights is not None:
            sentences, weights = to_device(sentences, device), to_device(weights, device)
            main, main_at = (values, at) if self.main_index is None else \
                (values.view(len(rows), self.shape[0], -1)[:, self.main_index], at[1:])
            replicas = self._replicas[(slice(None), slice(len(self.names)), *main_at)]  # [R, labels, ...] a view
            add_weighted_sums(replicas, rows, sentences, main, weights)

    def merge(self, other: "LabelSums") -> None:
        if other.names:  # a table that saw no label (a shard without any) adds nothing
            rows = self.ids(other.names)
            self.add(rows, other.sums)
            self.replicas.index_add_(0, rows, other.replicas.to(self._replicas.device))

    def total(self) -> torch.Tensor:
        """The sum over labels, of `shape` (zeros when no label was added)."""
        return self.sums.sum(0)

    def main(self, label: str | None = None) -> torch.Tensor:
        """The main part of the sums (see the class docstring) of `label`, or summed over labels for None."""
        sums = self.sums if self.main_index is None else self.sums[:, self.main_index]
        return sums.sum(0) if label is None else sums[self._index[label]]

    def replicated(self, label: str | None = None) -> torch.Tensor:
        """[R, *main shape] the replicate sums of `label`, or summed over labels for None."""
        return self.replicas.sum(0) if label is None else self.replicas[self._index[label]]

    def __getitem__(self, label: str) -> torch.Tensor:
        return self.sums[self._index[label]]

    def state_dict(self) -> dict[str, Any]:
        state = {"names": list(self.names), "sums": self.sums.clone()}
        if not self.replicates:
            return state
        return {**state, "replicas": self.replicas.clone(memory_format=torch.contiguous_format)}  # [labels, R, ...]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        sums = state["sums"]
        if tuple(sums.shape[1:]) != self.shape or len(state["names"]) != sums.shape[0]:
            raise ValueError(f"label sums of shape {tuple(sums.shape)} for {len(state['names'])} labels, "
                             f"expected [labels, {', '.join(map(str, self.shape))}]")
        replicas = state.get("replicas", self.replicas.new_zeros((len(sums), 0, *self.replicas.shape[2:])))
        if replicas.shape != (len(sums), *self.replicas.shape[1:]):
            raise ValueError(f"replicate sums of shape {tuple(replicas.shape)}, expected "
                             f"{(len(sums), *self.replicas.shape[1:])} ({self.replicates} replicates)")
        self.names = list(state["names"])
        self._index = {x: i for i, x in enumerate(self.names)}
        self._last = (None, None)
        self.sums = sums.to(self.sums.device, self.sums.dtype, copy=True)
        self._replicas = replicas.to(self._replicas.device, self._replicas.dtype).transpose(0, 1).clone(
            memory_format=torch.contiguous_format)


def ratio(sums: torch.Tensor, count: torch.Tensor | float) -> np.ndarray:
    """sums / count as numpy, or NaN everywhere when the count is 0 (nothing was counted)."""
    n = float(count)
    return (sums / n).numpy() if n else np.full(tuple(sums.shape), np.nan)
