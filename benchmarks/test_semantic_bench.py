"""srl on UP English EWT dev and frames on all FrameNet 1.7 documents with MiniLM: time as a ratio
to the bare eager forward pass over the same batches (target ≤ 1.2), and peak memory.

"The same batches" means the sentences the probe scores: srl leaves out UP's no-up sentences, and
frames only sends the model the sentences with an instance left after the paper's filters (375
short sentences of 9,636), so the bare pass reads the corpus with the probe's reader options,
drops what the probe's skip_reason drops, and tokenises and length-sorts the rest as the run does.

The run's time includes parsing the corpus. For frames that parse (106 XML documents, 62 MB)
costs several times the forward pass over 375 short sentences, so the report also gives the ratio
without the reading time (the probe's own overhead: tokenising, pooling, scoring).

Run: pytest benchmarks/test_semantic_bench.py --benchmark-enable -s
"""
from __future__ import annotations

import time

import pytest
from conftest import report
from harness import bare_forward_over, measure

import probes
from probes.corpus import read_corpus
from probes.settings.registry import get_probe


def _read_kept(encoder, name: str, corpus: str, limit: int | None, options: dict):
    """The corpus as the run reads it, and the sentences the probe keeps."""
    probe = get_probe(name)(encoder.layers, encoder.heads, **options)
    sentences = read_corpus([corpus], **probe.reader_options()).sentences
    sentences = sentences[:limit] if limit else sentences
    return [s for s in sentences if probe.skip_reason(s) is None]


def bare_forward_seconds(encoder, name: str, corpus: str, *, batch_size: int = 32, limit: int | None = None,
                         **options) -> float:
    """The plain eager forward over the batches a run of probe `name` makes."""
    return bare_forward_over(encoder, _read_kept(encoder, name, corpus, limit, options), batch_size=batch_size)


def reading_seconds(encoder, name: str, corpus: str, limit: int | None, options: dict) -> float:
    start = time.perf_counter()
    _read_kept(encoder, name, corpus, limit, options)
    return time.perf_counter() - start


def _bench(benchmark, minilm, name: str, corpus: str, limit: int | None = None, **options):
    def run():
        return probes.run([name], encoder=minilm, corpus=corpus, limit=limit, batch_size=32, progress=False, **options)

    def bare():
        return bare_forward_seconds(minilm, name, corpus, batch_size=32, limit=limit, **options)

    m = benchmark.pedantic(lambda: measure(run, bare), rounds=1, iterations=1)
    report(benchmark, f"{name} limit={limit}", m)
    read = reading_seconds(minilm, name, corpus, limit, options)
    without = (m.run_seconds - read) / m.bare_seconds
    benchmark.extra_info.update({"read_s": round(read, 3), "ratio_without_reading": round(without, 4)})
    print(f"{name}: reading the corpus {read:.2f}s; ratio without it {without:.3f}")


@pytest.mark.parametrize("limit", [500, None], ids=["500-sentences", "all-2002"])
def test_srl_ratio(benchmark, minilm, shared_corpora, limit):
    _bench(benchmark, minilm, "srl", str(shared_corpora / "up-english-ewt" / "en_ewt-up-dev.conllu"), limit)


@pytest.mark.parametrize("documents", ["standard-test", None], ids=["standard-test", "all-106"])
def test_frames_ratio(benchmark, minilm, shared_corpora, documents):
    _bench(benchmark, minilm, "frames", str(shared_corpora / "framenet-1.7"), documents=documents)
