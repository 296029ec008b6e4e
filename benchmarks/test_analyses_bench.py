"""The whole analysis set on UD English EWT dev with MiniLM: time as a ratio to the bare eager forward pass.

Variants:
  one-pass         mass, entropy, positional, rare, patterns, head_distance (default 4 query tokens per
                   sentence): one forward pass per batch; target ratio <= 1.3
  with-word-order  the same plus word_order, which runs every batch a second time on the shuffled
                   sentences: its reference is the bare forward pass over both, i.e. run twice
  exact-distance   one-pass with head_distance over every token (--distance-rows 0), for the record

Run: pytest benchmarks/test_analyses_bench.py --benchmark-enable -s
"""
from __future__ import annotations

import pytest
from conftest import report
from harness import bare_forward_seconds, measure

import probes

ONE_PASS = ["mass", "entropy", "positional", "rare", "patterns", "head_distance"]
VARIANTS = {"one-pass": (ONE_PASS, {}, 1), "with-word-order": ([*ONE_PASS, "word_order"], {}, 2),
            "exact-distance": (ONE_PASS, {"distance_rows": 0}, 1)}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("limit", [500, None], ids=["500-sentences", "all-2001"])
def test_analyses_ratio(benchmark, minilm, shared_corpora, variant, limit):
    corpus = [str(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")]
    names, options, passes = VARIANTS[variant]

    def run():
        return probes.run(names, encoder=minilm, corpus=corpus, limit=limit, batch_size=32, progress=False,
                          **options)

    def bare():  # one bare pass per forward pass the run makes (the shuffled twin has the same lengths)
        return sum(bare_forward_seconds(minilm, corpus, batch_size=32, limit=limit) for _ in range(passes))

    m = benchmark.pedantic(lambda: measure(run, bare), rounds=1, iterations=1)
    report(benchmark, f"analyses {variant} limit={limit}", m)
