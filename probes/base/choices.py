"""The defaults and choices of the run's settings, and the checks of a value against them, named once and light to
import: the command line's parser reads them before any model, torch or numpy is loaded, and the modules that implement
them import them from here."""
from __future__ import annotations

from numbers import Integral

from probes.base.errors import InputError

DEFAULT_MIN_COUNT = 20  # labels with fewer instances are marked and left out of tables and figures unless asked
DEFAULT_REPLICATES = 1000  # bootstrap replicates of the 95% intervals (probes.results.bootstrap)
DEFAULT_SEED = 0  # seed of the bootstrap's per-sentence weights
DEFAULT_SENTENCES = 20  # example sentences whose per-sentence views a run keeps (probes.results.examples)
POOLING_RULES = ("mean-sum", "first-sum", "last-sum", "mean-mean", "first")  # subword→word QUERY-KEY (probes.encoding.pooling)
WEIGHT_KINDS = ("attention", "norm")  # what LayerMaps.attention holds: the probabilities, or the norm-based map
CAPTURES = ("hooks", "outputs", "sdpa-qk")  # how a pass's maps are read (probes.capture.backend)
DTYPES = ("float32", "bfloat16", "float16")  # the model's weights and pass (probes.capture.model); maps stay float32
TOKENIZE_CHOICES = ("words", "text")  # what the tokenizer reads: the pre-split words or the raw text (probes.encoding.subwords)
QUERY_RULES = ("mean", "first", "last")  # subword→word pooling of a word's rows (probes.encoding.pooling)
KEY_RULES = ("sum", "mean", "first")  # ... and of its columns
MASK64 = (1 << 64) - 1  # the largest bootstrap seed (probes.results.bootstrap)
INVALID_TREES = ("refuse", "skip")  # what a reader does with a sentence that is not a tree (probes.corpus.trees)
PLOT_KINDS = ("overview", "labels", "all-labels", "none")  # the figures a saved result gets (probes.results.presentation)
COMPARE_SORTS = ("count", "score", "delta", "label")  # orders of `probes compare`'s table (probes.tools.compare)
CLASSIFY = "classify"  # the ablation target that is a fine-tuned classifier, not a probe (probes.tools.ablation)
SWEEPS = ("heads", "layers", "halves", "random")  # head sets an ablation sweeps (probes.capture.ablation_masks)
MODES = ("zero", "uniform")  # what a disabled head becomes (probes.capture.masking)
# the OV copying score's vocabulary (without the special tokens, or whole) and layer norms (left out, or folded in)
COPYING_VOCABULARIES = ("no-special", "all")  # (probes.capture.causal_families)
COPYING_NORMS = ("ignore", "fold")


def check_invalid_trees(invalid_trees: str) -> None:
    """InputError unless `invalid_trees` is one of INVALID_TREES."""
    if invalid_trees not in INVALID_TREES:
        raise InputError(f"invalid_trees must be one of {', '.join(INVALID_TREES)}, not {invalid_trees!r}")


def check_tokenize(tokenize: str) -> None:
    """InputError unless `tokenize` names an encoder (TOKENIZE_CHOICES)."""
    if tokenize not in TOKENIZE_CHOICES:
        raise InputError(f"tokenize must be one of {', '.join(TOKENIZE_CHOICES)}, not {tokenize!r}")


def check_weights(kind: str) -> None:
    """A weights kind the runner knows (WEIGHT_KINDS), else InputError."""
    if kind not in WEIGHT_KINDS:
        raise InputError(f"unknown weights {kind!r}; choose one of {', '.join(WEIGHT_KINDS)}")


def check_dtype(dtype: str) -> None:
    """A dtype the model may be loaded and run in (DTYPES), else InputError naming the option."""
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")


def check_bootstrap(replicates: int, seed: int) -> None:
    """InputError unless replicates and seed are whole numbers, replicates ≥ 0 and 0 ≤ seed < 2^64."""
    for name, value in (("replicates", replicates), ("bootstrap seed", seed)):
        if not isinstance(value, Integral) or isinstance(value, bool):
            raise InputError(f"{name} must be a whole number, not {value!r}")
    if replicates < 0:
        raise InputError(f"replicates must be 0 (no intervals) or more, not {replicates}")
    if not 0 <= seed <= MASK64:
        raise InputError(f"bootstrap seed must be between 0 and 2^64 - 1, not {seed}")


def parse_rule(rule: str) -> tuple[str, str]:
    """A pooling rule QUERY-KEY (or "first") as its (query, key) rules; ValueError naming the choices otherwise."""
    if rule == "first":
        return "first", "first"
    query, _, key = rule.partition("-")
    if query not in QUERY_RULES or key not in KEY_RULES:
        raise ValueError(f"unknown pooling rule {rule!r}; choose one of {', '.join(POOLING_RULES)}")
    return query, key
