"""Comparing checkpoints and results: what fine-tuning changed, head by head.

    compare_results(a, b)            two results folders (or files): per label best heads, deltas, movers
    checkpoint_similarity(a, b, ...) per-head cosine similarity of two checkpoints' attention maps
    load_any(path)                   a results file or any layers × heads array (.npy, .json, .csv) as a result
    correlate(grid, results)         Spearman's ρ over heads between a grid and every probe label, with
                                     permutation p-values corrected over the labels (Holm, BH)
"""
from probes.base.exports import lazy_exports

_PUBLIC = {"checkpoint_similarity": "probes.tools.compare.checkpoints", "correlate": "probes.tools.compare.correlate",
           "load_any": "probes.tools.compare.grids", "Comparison": "probes.tools.compare.results_diff",
           "compare_results": "probes.tools.compare.results_diff", "load_results": "probes.tools.compare.results_diff"}
__all__ = ["checkpoint_similarity", "correlate", "load_any", "compare_results", "Comparison", "load_results"]
lazy_exports(__name__, _PUBLIC)
