"""trees on UD English EWT dev with MiniLM: time as a ratio to the bare eager forward pass, peak memory.

Four settings: every head's trees (four variants) with no ensemble, the same without the bootstrap's
replicates (--replicates 0: what the intervals cost), with the head ensemble chosen on the bundled EWT
sample (--fit; its forward pass counts in the run's time, not in the bare pass), and as `probes run trees` runs by
default: the ensemble chosen on the scored corpus itself (its fit pass feeds the 500 sentences of the selection
sample, probes.running.chunks.fitted_part).
Also printed: the run's own capture pass with no probe, which ends at the last layer's maps (skipping that
layer's W_O and feed-forward, which the bare pass computes), and the run's time as a ratio to it: what the
probe itself costs.
Run: pytest benchmarks/test_trees_bench.py --benchmark-enable -s
"""
from __future__ import annotations

import pytest
from conftest import report
from harness import bare_forward_seconds, measure

import probes
from probes.base.defaults import bundled_corpus


@pytest.mark.parametrize("ensemble, replicates", [(None, None), (None, 0), ("sample", None), ("corpus", None)],
                         ids=["heads-only", "heads-only-no-replicates", "ensemble-on-sample", "ensemble-on-corpus"])
def test_trees_ratio(benchmark, minilm, shared_corpora, ensemble, replicates):
    corpus = [str(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")]
    options = {None: {"ensemble_heads": 0}, "sample": {"fit": bundled_corpus()}, "corpus": {}}[ensemble]
    if replicates is not None:
        options["replicates"] = replicates

    def run():
        return probes.run(["trees"], encoder=minilm, corpus=corpus, batch_size=32, progress=False, **options)

    def bare():
        return bare_forward_seconds(minilm, corpus, batch_size=32)

    m = benchmark.pedantic(lambda: measure(run, bare, repeats=2), rounds=1, iterations=1)
    report(benchmark, f"trees ensemble={ensemble} replicates={'default' if replicates is None else replicates}", m)
    capture = bare_forward_seconds(minilm, corpus, batch_size=32, capture=True, repeats=2)
    benchmark.extra_info.update({"capture_pass_s": round(capture, 3),
                                 "ratio_to_capture_pass": round(m.run_seconds / capture, 4)})
    print(f"the run's own pass with no probe (it ends at the last layer's maps): {capture:.2f}s, "
          f"{capture / m.bare_seconds:.3f}× the bare pass; the run takes {m.run_seconds / capture:.3f}× it")
