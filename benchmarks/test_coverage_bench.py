"""The coverage experiment of benchmarks/interval_coverage.py for dep, as a benchmark: its wall time, and each
interval's measured coverage in extra_info (run: pytest benchmarks/test_coverage_bench.py --benchmark-enable -s)."""
from __future__ import annotations

from interval_coverage import CORPORA, chunk_results, coverage, table


def test_coverage(benchmark, minilm, shared_corpora):
    def run():
        results, pooled = chunk_results("dep", CORPORA["dep"], minilm)
        return coverage(results, pooled)

    tallies = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update({what: round(t.coverage(), 4) for what, t in tallies.items()})
    print("\n" + table("dep", tallies))
