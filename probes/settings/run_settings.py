"""The settings of a run, defined once: ``RunSettings``, a frozen dataclass whose fields carry their type,
default, help text and range checks, and say where else they appear. ``probes.run`` takes one (its keywords
override its fields); the flags of `probes run` (and the ones `probes ablate` shares), the keys a study file
may set (probes.tools.studies.spec), and the settings a results file records (``RunInfo.settings``) are all read from
these fields. Adding a setting is one field here.

A field's metadata: ``help`` (the flag's help), ``group`` (the section of `--help` that lists the flag: GROUPS),
``flag`` (the command line's flag: ``--name`` by default, None
for none) with its argparse keywords (``cli``), ``study`` (the types a study file may give it; absent: not a
study key), ``recorded`` ("always" or "given": recorded in every results file, or where it is set).

Light to import (the standard library, probes.base.choices, probes.base.argtypes): the command line's parser reads it
before any model is loaded, and the probe registry reads the reserved names (``reserved_names``) from it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from probes.base.argtypes import WHOLE, Shard, as_shard, check_output_folder, input_path, parse_heads, parse_shard
from probes.base.choices import (CAPTURES, DEFAULT_MIN_COUNT, DEFAULT_REPLICATES, DEFAULT_SEED, DEFAULT_SENTENCES, INVALID_TREES,
                            DTYPES, POOLING_RULES, TOKENIZE_CHOICES, WEIGHT_KINDS, check_bootstrap, check_dtype,
                            check_invalid_trees, check_tokenize, check_weights, parse_rule)
from probes.base.errors import InputError
from probes.base.protocols import PROTOCOLS


def setting(group: str | None, default: Any, help: str, *, flag: str | None = "", study: tuple | None = None,
            recorded: str | None = None, **cli: Any) -> Any:
    """A RunSettings field (see the module docstring); group: the GROUPS entry its flag is listed under in `--help`
    (None: with the command's own options); ``flag=""``: ``--name``."""
    metadata = {"help": help, "group": group, "flag": flag, "cli": cli, **({"study": study} if study else {}),
                **({"recorded": recorded} if recorded else {})}
    if isinstance(default, (list, tuple)):
        return field(default_factory=lambda: tuple(default), metadata=metadata)
    return field(default=default, metadata=metadata)


GROUPS = {  # the sections of `probes run --help`, in order: title -> what its flags set
    "reading": "which corpus is read and how: files, format, splits, tokenisation",
    "batching": "how the sentences are cut into forward passes and shards",
    "capture": "the model and the attention maps the probes read",
    "intervals": "the bootstrap's 95% intervals",
    "output": "what is written and shown",
}


class DefaultBatchSize(int):
    """The default batch_size, 32, told apart from a batch_size of 32 that was given (``RunSettings.batch_cap``
    lifts the default on a CUDA device, never a given one). Equal to 32 and written as 32 everywhere."""


DEFAULT_BATCH_SIZE = DefaultBatchSize(32)


@dataclass(frozen=True)
class RunSettings:
    """How a run reads its corpus, batches it, captures the maps and scores them (``probes.run``'s settings).
    Paths are kept as tuples of strings; a value out of range is an InputError when the settings are made."""

    format: str | None = setting("reading", None, "corpus format (default: from the file name; e.g. conllu)",
                                 recorded="always")
    fit: tuple[str, ...] = setting(
        "reading", (), "pos/ner/con: fit the per-head centroids on FILE (e.g. the dev split; repeat for several), "
        "then score --corpus (e.g. test); trees: the split the head ensemble is chosen on (default: --select-on, "
        "else --corpus itself)", recorded="given", action="append", metavar="FILE", type=input_path)
    select_on: tuple[str, ...] = setting(
        "reading", (), "choose every label's best head on FILE (e.g. the dev split; repeat for several) and report "
        "its score on --corpus (e.g. test); the probes with a fit phase are fitted on FILE too unless --fit or "
        "--fit-on say otherwise", recorded="given", action="append", metavar="FILE", type=input_path)
    min_count: int = setting(
        "output", DEFAULT_MIN_COUNT, "labels with fewer instances stay in the results, marked, but are left out of "
        f"the tables and figures unless --all-labels (default {DEFAULT_MIN_COUNT})", recorded="always", type=int,
        metavar="N")
    fit_on: str | None = setting(
        "reading", None, "pos/ner/con: 'same' fits the centroids on --corpus itself (He & Choi 2021's same-split "
        "setting); default: on --fit where given, else on --corpus", choices=("fit", "same"))
    annotate: str | None = setting(
        "reading", None, "read --corpus (and --fit) as raw text, one passage a line, annotated by spaCy (silver "
        "UPOS, XPOS, dependencies, entities); needs attention-probes[spacy]", metavar="spacy[:PIPELINE]")
    batch_size: int | None = setting(
        "batching", DEFAULT_BATCH_SIZE, "most sentences per forward pass (default 32; on a CUDA device no cap unless "
        "given: the token budget alone cuts the batches)", study=(int, type(None)), recorded="always", type=int,
        metavar="N")
    max_tokens: int | None = setting(
        "batching", None, "most padded subword positions (sentences × longest length) per forward pass (default: a "
        "quarter of the device's total memory at the model's cost per position, the same on every run; see "
        "docs/design.md, Memory and long inputs)", study=(int,), recorded="always", type=int, metavar="N")
    max_length: int | None = setting(
        "batching", None, "most subwords per sentence incl. special tokens (default: the model's limit); longer "
        "sentences are skipped and counted", study=(int,), recorded="always", type=int, metavar="N")
    limit: int | None = setting("reading", None, "use only the first N sentences of the corpus (and of the --fit "
                                "corpus)", study=(int,), recorded="always", type=int, metavar="N")
    invalid_trees: str = setting(
        "reading", "refuse", "a CoNLL-U sentence whose heads are not a tree: refuse the file (default) or skip the "
        "sentence, counted by rule in the results", study=(str,), choices=INVALID_TREES)
    device: str = setting("capture", "cpu", "cpu, cuda or cuda:N (default cpu)", study=(str,), recorded="always")
    pool: str | None = setting(
        "capture", None, "subword→word pooling, QUERY-KEY (default mean-sum: a word's row is the mean of its "
        "subwords' rows, its column the sum of their columns, as in Clark et al. 2019)", study=(str,),
        recorded="always", choices=POOLING_RULES)
    protocol: str | None = setting(
        "capture", None, "a paper's reading, every choice set at once: hechoi2021 (dep, the defaults), clark2019 "
        "(dep as Clark et al.'s code), kovaleva2019 (frames)", study=(str,), recorded="given",
        choices=tuple(PROTOCOLS))
    weights: str = setting(
        "capture", "attention", "what every probe reads: the attention probabilities (default) or norm, the "
        "norm-based maps of Kobayashi et al. 2020 (α·‖f(x)‖, each row renormalised to sum to 1)", study=(str,),
        recorded="always", choices=WEIGHT_KINDS)
    capture: str | None = setting(
        "capture", None, "how the maps are read (probes.capture): hooks (default for encoders in float32: hooks on the "
        "eager attention modules, one layer held at a time), outputs (transformers' output_attentions, every layer at "
        "once: the reference), sdpa-qk (the model runs SDPA; the maps are computed from its queries and keys; default "
        "for decoders, and for encoders in half precision)", study=(str,), recorded="given", choices=CAPTURES)
    dtype: str = setting(
        "capture", "float32", "the model's weights and forward pass: float32 (default), bfloat16 or float16; in half "
        "precision the maps are still computed in float32, from the half-precision queries and keys (capture "
        "sdpa-qk), and pooling and scoring stay float32 (docs/gpu.md, Half precision)", study=(str,),
        recorded="always", metavar="{" + ",".join(DTYPES) + "}")
    allow_unknown: bool = setting(
        "reading", False, "score a corpus even where more than half of its words tokenize only to the unknown token "
        "(default: refused, the model cannot read it)", study=(bool,), recorded="given", action="store_true")
    code: tuple[str, ...] = setting(None, (), "import a Python file that registers probes", action="append",
                                    metavar="FILE.py")
    tokenize: str = setting(
        "reading", "words", "what the tokenizer reads: the pre-split words (default) or each sentence's raw text "
        "(CoNLL-U `# text`, the unsegmented line), tokens mapped to words by character offsets; use text for "
        "Chinese segmentation so the model never sees the gold word boundaries", study=(str,), recorded="always",
        choices=TOKENIZE_CHOICES)
    view_heads: tuple[tuple[int, int], ...] = setting(
        "output", (), "keep these heads' attention maps of the example sentences too (e.g. 2:8,4:9), besides each "
        "label's best head; the number of example sentences is --examples", flag="--heads", study=(list,),
        type=parse_heads, metavar="L:H,...")
    views: int = setting(
        "output", DEFAULT_SENTENCES, "keep the per-sentence views of the first N sentences (every head's argmax, "
        "the chosen heads' attention maps) for `probes report` and `probes show` (default "
        f"{DEFAULT_SENTENCES}; 0 for none)", flag="--examples", study=(int,), type=int, metavar="N")
    replicates: int = setting(
        "intervals", DEFAULT_REPLICATES, f"bootstrap replicates for the 95%% intervals (default {DEFAULT_REPLICATES}; "
        "0: no intervals)", recorded="always", type=int, metavar="R")
    bootstrap_seed: int = setting("intervals", DEFAULT_SEED, "seed of the bootstrap's per-sentence weights (default "
                                  f"{DEFAULT_SEED})", recorded="always", type=int, metavar="N")
    shard: Shard = setting(
        "batching", WHOLE, "score only shard I of N (0 ≤ I < N), a fixed split by sentence; `probes merge` adds the "
        "shards' --state files up into the unsharded run's results", recorded="given", metavar="I/N",
        type=parse_shard)
    state: str | None = setting("output", None, "save each probe's additive state to DIR/<probe>.<I>-of-<N>.state.pt, "
                                "for `probes merge`", metavar="DIR", type=check_output_folder)

    def __post_init__(self) -> None:
        for name in ("fit", "select_on", "code"):
            object.__setattr__(self, name, _paths(getattr(self, name)))
        if self.shard is None or not isinstance(self.shard, Shard):
            object.__setattr__(self, "shard", as_shard(self.shard))
        if self.state is not None:
            object.__setattr__(self, "state", str(self.state))
        heads = self.view_heads
        if not all(isinstance(h, (list, tuple)) and len(h) == 2 and all(isinstance(x, int) for x in h) for h in heads):
            raise InputError(f"view_heads must be a list of [layer, head] pairs, not {heads!r}")
        object.__setattr__(self, "view_heads", tuple((int(layer), int(head)) for layer, head in heads))
        self.check()

    def check(self) -> None:
        """InputError for a value out of range (the messages name the setting as the library spells it)."""
        for name, least, what in (("batch_size", 1, "batch size must be at least 1"),
                                  ("max_tokens", 1, "max tokens must be at least 1"),
                                  ("max_length", 3, "max length must be at least 3 subwords"),
                                  ("limit", 1, "limit must be at least 1")):
            value = getattr(self, name)
            if value is not None and value < least:
                raise InputError(f"{what}, not {value}")
        if self.pool is not None:
            try:
                parse_rule(self.pool)
            except ValueError as e:
                raise InputError(str(e)) from None
        if isinstance(self.min_count, bool) or not isinstance(self.min_count, int) or self.min_count < 0:
            raise InputError(f"min count must be a whole number, 0 or more, not {self.min_count!r}")
        if self.views < 0:
            raise InputError(f"views must be at least 0, not {self.views}")
        check_invalid_trees(self.invalid_trees)
        check_tokenize(self.tokenize)
        check_weights(self.weights)
        check_dtype(self.dtype)
        if self.capture is not None and self.capture not in CAPTURES:
            raise InputError(f"unknown capture {self.capture!r}; choose one of {', '.join(CAPTURES)}")
        check_bootstrap(self.replicates, self.bootstrap_seed)
        if self.state is not None:
            check_output_folder(self.state)
        if self.select_on and (self.shard.count > 1 or self.state is not None):
            raise InputError("--select-on cannot be combined with --shard or --state (the selection split's scores are "
                             "not saved in the states; give --fit to fit on a split)")

    def changed(self) -> set[str]:
        """The fields whose values differ from the defaults."""
        default = RunSettings()
        return {f.name for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)}

    def batch_cap(self, cuda: bool) -> int | None:
        """The most sentences per forward pass: batch_size, except on a CUDA device (`cuda`) where it is not set
        (the default): there none, and the token budget alone cuts the batches (a cap of 32 short sentences leaves
        the device idle; benchmarks/gpu_bench.py, dep against dep_batch32)."""
        return None if cuda and isinstance(self.batch_size, DefaultBatchSize) else self.batch_size

    def replace(self, **changes: Any) -> RunSettings:
        """These settings with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def recorded(self, **resolved: Any) -> dict[str, Any]:
        """The settings a results file records (``RunInfo.settings``): every "always" field, and every "given" one
        that is set; `resolved` gives the values the run worked out (the token budget, the pooling rule, the model's
        max length, the device, the fit and selection splits' records)."""
        out = {}
        for f in fields(self):
            how = f.metadata.get("recorded")
            value = resolved.get(f.name, getattr(self, f.name))
            if f.name == "shard":
                value = str(value) if value.count > 1 else None
            if isinstance(value, DefaultBatchSize):
                value = int(value)
            if how == "always" or (how == "given" and value):
                out[f.name] = value
        return out

    def study_settings(self) -> dict[str, Any]:
        """The fields a study file may set (its [settings] table), where they differ from the default; batch_size
        wherever it was given, 32 included (a study's default is probes.run's)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if "study" in f.metadata and (not isinstance(value, DefaultBatchSize) if f.name == "batch_size" else value != f.default):
                out[f.name] = [list(h) for h in value] if f.name == "view_heads" else value
        return out


def _paths(value: str | Path | Iterable[str | Path] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, Path)):
        return (str(value),)
    return tuple(str(p) for p in value)


def setting_names() -> tuple[str, ...]:
    """Every RunSettings field, in order."""
    return tuple(f.name for f in fields(RunSettings))


def study_types() -> dict[str, tuple]:
    """{setting: the types a study file may give it} (probes.tools.studies.spec)."""
    return {f.name: f.metadata["study"] for f in fields(RunSettings) if "study" in f.metadata}


def option_flag(name: str) -> str:
    """A setting's or a probe option's command-line flag: ``min_count`` → ``--min-count``."""
    return "--" + name.replace("_", "-")


def flag_of(name: str) -> str | None:
    """The command line's flag of setting `name` (``batch_size`` → ``--batch-size``), None where it has none."""
    flag = RunSettings.__dataclass_fields__[name].metadata["flag"]
    return option_flag(name) if flag == "" else flag


def settings_from(given: dict[str, Any], base: RunSettings | None = None) -> tuple[RunSettings, dict[str, Any]]:
    """`base` (default RunSettings()) with the settings among `given` changed, and the rest of `given` (the probe
    options)."""
    names = set(setting_names())
    changes = {k: v for k, v in given.items() if k in names}
    settings = base or RunSettings()
    return (settings.replace(**changes) if changes else settings), {k: v for k, v in given.items() if k not in names}


RUN_ARGUMENTS = ("probes", "model", "corpus", "settings", "encoder", "progress")  # probes.run's own, besides settings
# the flags of the commands that take every probe's options, beside the settings' flags: a probe option must not take
# one (the registry checks at register time; tests/test_settings.py checks these against the real parsers)
COMMAND_FLAGS = {
    "run": ("help", "model", "gguf_file", "corpus", "all_labels", "out", "plots", "no_plots", "quiet"),
    "ablate": ("help", "model", "corpus", "label_from", "sweep", "mask", "keep", "in_layers", "importance",
               "no_normalize", "order", "order_corpus", "prune_step", "mode", "percent", "repeats", "random_seed",
               "label", "out", "top", "masks_per_pass", "no_plots", "quiet"),
}
# the settings `probes ablate` has flags for
ABLATE_SETTINGS = ("format", "batch_size", "max_length", "limit", "device", "dtype", "pool", "allow_unknown", "code")


def command_flags(command: str) -> set[str]:
    """Every flag of `probes run` or `probes ablate` before the probes' options are added (``--batch-size``)."""
    shared = setting_names() if command == "run" else ABLATE_SETTINGS
    own = {option_flag(name) for name in COMMAND_FLAGS[command]}
    return own | {flag for name in shared if (flag := flag_of(name))}
