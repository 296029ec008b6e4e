"""The defaults and choices of the run's settings, named once and light to import: the command line's parser
reads them before any model, torch or numpy is loaded, and the modules that implement them import them from here."""
from __future__ import annotations

DEFAULT_MIN_COUNT = 20  # labels with fewer instances are marked and left out of tables and figures unless asked
DEFAULT_REPLICATES = 1000  # bootstrap replicates of the 95% intervals (probes.bootstrap)
DEFAULT_SEED = 0  # seed of the bootstrap's per-sentence weights
DEFAULT_SENTENCES = 20  # example sentences whose per-sentence views a run keeps (probes.examples)
POOLING_RULES = ("mean-sum", "first-sum", "last-sum", "mean-mean", "first")  # subword→word QUERY-KEY (probes.pooling)
WEIGHT_KINDS = ("attention", "norm")  # what LayerMaps.attention holds: the probabilities, or the norm-based map
INVALID_TREES = ("refuse", "skip")  # what a reader does with a sentence that is not a tree (probes.corpus.trees)
PLOT_KINDS = ("overview", "labels", "all-labels", "none")  # the figures a saved result gets (probes.presentation)
COMPARE_SORTS = ("count", "score", "delta", "label")  # orders of `probes compare`'s table (probes.compare)
SWEEPS = ("heads", "layers", "halves", "random")  # head sets an ablation sweeps (probes.ablation.masks)
MODES = ("zero", "uniform")  # what a disabled head becomes (probes.ablation.masking)
