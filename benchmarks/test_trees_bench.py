"""trees on UD English EWT dev with MiniLM: time as a ratio to the bare eager forward pass, peak memory.

Two settings: every head's trees (four variants) with no ensemble, and with the head ensemble chosen on the
bundled EWT sample (--select-on; its forward pass counts in the run's time, not in the bare pass).
Run: pytest benchmarks/test_trees_bench.py --benchmark-enable -s
"""
from __future__ import annotations

import pytest
from conftest import report
from harness import bare_forward_seconds, measure

import probes
from probes.defaults import bundled_corpus


@pytest.mark.parametrize("ensemble", [False, True], ids=["heads-only", "ensemble-on-sample"])
def test_trees_ratio(benchmark, minilm, shared_corpora, ensemble):
    corpus = [str(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")]
    options = {"fit": bundled_corpus()} if ensemble else {"ensemble_heads": 0}

    def run():
        return probes.run(["trees"], encoder=minilm, corpus=corpus, batch_size=32, progress=False, **options)

    def bare():
        return bare_forward_seconds(minilm, corpus, batch_size=32)

    m = benchmark.pedantic(lambda: measure(run, bare, repeats=1), rounds=1, iterations=1)
    report(benchmark, f"trees ensemble={ensemble}", m)
