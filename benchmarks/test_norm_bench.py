"""dep with --weights norm on UD English EWT dev with MiniLM: time as a ratio to the bare eager forward
pass (target <= 1.3), beside dep on the attention itself for reference.

Run: pytest benchmarks/test_norm_bench.py --benchmark-enable -s
"""
from __future__ import annotations

import pytest
from conftest import report
from harness import bare_forward_seconds, measure

import probes


@pytest.mark.parametrize("weights", ["attention", "norm"])
@pytest.mark.parametrize("limit", [500, None], ids=["500-sentences", "all-2001"])
def test_norm_ratio(benchmark, minilm, shared_corpora, weights, limit):
    corpus = [str(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")]

    def run():
        return probes.run(["dep"], encoder=minilm, corpus=corpus, limit=limit, batch_size=32, progress=False,
                          weights=weights)

    def bare():
        return bare_forward_seconds(minilm, corpus, batch_size=32, limit=limit)

    m = benchmark.pedantic(lambda: measure(run, bare), rounds=1, iterations=1)
    report(benchmark, f"dep weights={weights} limit={limit}", m)
