"""seg on UD Chinese GSDSimp dev + test (1,000 sentences, raw text) with MiniLM: time as a ratio to the
bare eager forward pass over the same batches (target ≤ 1.15), peak memory. The run includes the
greedy best-10 ensembles under both combination rules.

Run: pytest benchmarks/test_seg_bench.py --benchmark-enable -s
"""
from __future__ import annotations

import pytest
from conftest import report
from harness import bare_forward_seconds, measure

import probes


@pytest.mark.parametrize("limit", [200, None], ids=["200-sentences", "all-1000"])
def test_seg_ratio(benchmark, minilm, shared_corpora, limit):
    folder = shared_corpora / "ud-chinese-gsdsimp"
    corpus = [str(folder / "zh_gsdsimp-ud-dev.conllu"), str(folder / "zh_gsdsimp-ud-test.conllu")]

    def run():
        return probes.run(["seg"], encoder=minilm, corpus=corpus, limit=limit, batch_size=32, tokenize="text",
                          progress=False)

    def bare():
        return bare_forward_seconds(minilm, corpus, batch_size=32, limit=limit, tokenize="text")

    m = benchmark.pedantic(lambda: measure(run, bare), rounds=1, iterations=1)
    report(benchmark, f"seg limit={limit}", m)
