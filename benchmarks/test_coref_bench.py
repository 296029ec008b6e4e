"""coref on LitBank with MiniLM: time as a ratio to the bare eager forward pass over the same windows, peak memory.

The run's time includes reading the documents (spaCy's tagger and parser over every sentence: the mention
heads and the anaphor types), cutting them into windows and scoring; the bare pass is the plain forward over
the windows the run makes (the model's 512 subwords, stride 256), length-sorted into the same batches.
views=0 (``--examples 0``) keeps no per-window views: the views of the first 20 windows pool the whole
[B,H,C,C] word map of every batch that holds one of them (probes.results.examples), and length-sorted windows of
nearly equal length spread those 20 over most batches of a small corpus.

Run: pytest benchmarks/test_coref_bench.py --benchmark-enable -s
"""
from __future__ import annotations

import pytest
from conftest import report
from harness import bare_forward_over, measure

import probes
from probes.builtin.coref import CoreferenceProbe
from probes.corpus import read_corpus


@pytest.mark.parametrize("documents, views", [(10, 20), (10, 0), (None, 20)],
                         ids=["10-documents", "10-documents-no-views", "all-100"])
def test_coref_ratio(benchmark, minilm, shared_corpora, documents, views):
    corpus = sorted(str(p) for p in (shared_corpora / "litbank-coref").glob("*.conll"))[:documents]
    cutter = CoreferenceProbe(minilm.layers, minilm.heads)
    windows = [w for d in read_corpus(corpus, "coref").sentences
               for w in cutter.rows(d, minilm.tokenizer, minilm.max_length)]

    def run():
        return probes.run(["coref"], encoder=minilm, corpus=corpus, batch_size=32, progress=False, views=views)

    def bare():
        return bare_forward_over(minilm, windows, batch_size=32)

    m = benchmark.pedantic(lambda: measure(run, bare), rounds=1, iterations=1)
    report(benchmark, f"coref documents={documents} views={views}", m)
