"""dep on UD English EWT dev with MiniLM: time as a ratio to the bare eager forward pass (best of 5 alternating runs
each: interference from other work only slows a run, so the fastest is the closest to its own cost), peak memory.

The bare pass beside the run shares the run's process; the ratio is also given against the same bare pass in a
fresh process (``bare_forward_seconds_apart``, best of 5).

Run: pytest benchmarks/ --benchmark-enable -s   (or: tox -e bench)
"""
from __future__ import annotations

import pytest
from conftest import report
from harness import bare_forward_seconds, bare_forward_seconds_apart, measure

import probes


@pytest.mark.parametrize("limit", [500, None], ids=["500-sentences", "all-2001"])
def test_dep_ratio(benchmark, minilm, shared_corpora, limit):
    corpus = [str(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")]

    def run():
        return probes.run(["dep"], encoder=minilm, corpus=corpus, limit=limit, batch_size=32, progress=False)

    def bare():
        return bare_forward_seconds(minilm, corpus, batch_size=32, limit=limit)

    # best of 5: the host's noise only slows
    m = benchmark.pedantic(lambda: measure(run, bare, repeats=5), rounds=1, iterations=1)
    report(benchmark, f"dep limit={limit}", m)
    apart = bare_forward_seconds_apart(corpus, batch_size=32, limit=limit)
    ratio = m.run_seconds / apart
    benchmark.extra_info.update({"bare_forward_apart_s": round(apart, 3), "ratio_to_bare_apart": round(ratio, 4)})
    print(f"bare forward in a process of its own : {apart:.2f}s, ratio {ratio:.3f}")
