"""pos (per-head centroids) with MiniLM, fit on EWT dev and scored on EWT test: time as a ratio to the
bare eager forward passes the run needs (one over the fit sentences, one over the scored ones), and
peak memory at 500 and at 2,000 sentences (centroid state is [labels, L, H, d] sums: memory must not
grow with the corpus). Both runs use sentences of at most 96 subwords (2 of the first 2,000 test
sentences are longer, none of the first 500), so the largest batch, whose attention maps set the
transient peak, is about the same size in both.

Run: pytest benchmarks/test_cluster_bench.py --benchmark-enable -s
"""
from __future__ import annotations

import pytest
from conftest import report
from harness import bare_forward_seconds, measure

import probes

MAX_LENGTH = 96
PEAKS: dict[int, float] = {}


@pytest.fixture(scope="module")
def encoder(minilm):
    from probes.base.defaults import default_model

    return probes.load_encoder(default_model(), max_length=MAX_LENGTH)


@pytest.mark.parametrize("limit", [500, 2000], ids=["500-sentences", "2000-sentences"])
def test_pos_fit_dev_score_test(benchmark, encoder, shared_corpora, limit):
    ewt = shared_corpora / "ud-english-ewt"
    fit, scored = [str(ewt / "en_ewt-ud-dev.conllu")], [str(ewt / "en_ewt-ud-test.conllu")]

    def run():
        return probes.run(["pos"], encoder=encoder, corpus=scored, fit=fit, limit=limit, batch_size=32, progress=False)

    def bare():  # the two passes the run needs: the fit sentences, then the scored ones
        return (bare_forward_seconds(encoder, fit, batch_size=32, limit=limit)
                + bare_forward_seconds(encoder, scored, batch_size=32, limit=limit))

    m = benchmark.pedantic(lambda: measure(run, bare), rounds=1, iterations=1)
    report(benchmark, f"pos fit=dev score=test limit={limit}", m)
    assert m.sentences == {500: 500, 2000: 1998}[limit]  # 2 test sentences are longer than 96 subwords
    PEAKS[limit] = m.peak_rss_mb
    if 500 in PEAKS and 2000 in PEAKS:  # 4x the sentences: no more memory than batch-to-batch noise
        assert PEAKS[2000] - PEAKS[500] < 64, PEAKS
