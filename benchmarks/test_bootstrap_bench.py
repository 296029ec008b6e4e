"""The bootstrap's cost: dep on UD English EWT dev with MiniLM, R = 1000 replicates against the same run without
(R = 0), as a time ratio (target ≤ 1.10), with peak memory; with torch's default threads and with one thread
(on a shared machine one thread's times are the steadier: small ops of several threads wait on each other).

Run: pytest benchmarks/test_bootstrap_bench.py --benchmark-enable -s
"""
from __future__ import annotations

import time

import pytest
import torch
from harness import measure

import probes


def _seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


@pytest.mark.parametrize("threads", [None, 1], ids=["default-threads", "one-thread"])
@pytest.mark.parametrize("limit", [500, None], ids=["500-sentences", "all-2001"])
def test_bootstrap_ratio(benchmark, minilm, shared_corpora, limit, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    corpus = [str(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")]

    def run(replicates: int):
        return probes.run(["dep"], encoder=minilm, corpus=corpus, limit=limit, batch_size=32, progress=False,
                          replicates=replicates)

    try:
        m = benchmark.pedantic(lambda: measure(lambda: run(1000), lambda: _seconds(lambda: run(0))), rounds=1,
                               iterations=1)
    finally:
        torch.set_num_threads(before)
    benchmark.extra_info.update({"ratio_to_no_replicates": round(m.ratio, 4), "run_s": round(m.run_seconds, 3),
                                 "no_replicates_s": round(m.bare_seconds, 3), "peak_rss_mb": round(m.peak_rss_mb, 1),
                                 "sentences": m.sentences})
    print(f"\ndep limit={limit} threads={threads or before}: {m.sentences} sentences, R=1000 {m.run_seconds:.2f}s, "
          f"R=0 {m.bare_seconds:.2f}s, ratio {m.ratio:.3f}, peak RSS {m.peak_rss_mb:.0f} MB")
