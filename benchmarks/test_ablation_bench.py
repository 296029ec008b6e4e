"""Head ablation of the EWT genre classifier: the full single-head and per-layer sweeps on EWT test, with
heatmaps, and the single-head sweep's time as a ratio to (L×H+1) plain evaluations; and a probe target's
single-head sweep (dep on 500 EWT dev sentences) as a ratio to (L×H+1) bare forward passes.

    python benchmarks/finetune_genre.py --out results/genre-minilm     # once; a few minutes on a CPU
    pytest benchmarks/test_ablation_bench.py --benchmark-enable -s     # writes results/ablation-genre/{heads,layers}/

    probe ratio = time(probes.ablate("dep", sweeps=["heads"]): loading the model, reading, tokenising, every
                  mask's passes and scores) / ((L×H+1) × time(bare eager forward over the same batches of 32))
    (target: ≤ 1.1)

The checkpoint is $PROBES_GENRE_CHECKPOINT, else results/genre-minilm (fine-tuned here first when absent).
$PROBES_ABLATION_LIMIT=N uses only the first N test sentences (a quick check that the benchmark runs).

    ratio = time(probes.ablate: L×H+1 masks, the baseline included, everything from loading the model on)
            / ((L×H+1) × time(one plain evaluation: the same length-sorted batches of 32, no hooks))
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from finetune_genre import evaluate, fine_tune
from harness import PeakRSS, bare_forward_seconds

from probes.tools.ablation import ablate
from probes.tools.ablation.classifier import ClassifierTarget
from probes.tools.ablation.labelled import SENT_ID_PREFIX
from probes.settings.run_settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "ablation-genre"


@pytest.fixture(scope="module")
def genre_checkpoint(shared_corpora) -> Path:
    path = Path(os.environ.get("PROBES_GENRE_CHECKPOINT", ROOT / "results" / "genre-minilm"))
    if not (path / "config.json").exists():
        fine_tune(path, train=shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")
    return path


def _plain_seconds(target: ClassifierTarget, batch_size: int = 32) -> float:
    """One plain evaluation: batch, pad, forward, argmax; no masks, no hooks."""
    start = time.perf_counter()
    for chunk in target.chunks(batch_size):
        target.predict(chunk)
    return time.perf_counter() - start


def test_genre_sweeps(benchmark, genre_checkpoint, shared_corpora):
    test = shared_corpora / "ud-english-ewt" / "en_ewt-ud-test.conllu"
    limit = int(os.environ.get("PROBES_ABLATION_LIMIT", 0)) or None
    common = dict(model=str(genre_checkpoint), corpus=test, settings=RunSettings(limit=limit),
                  label_from=SENT_ID_PREFIX, progress=False)
    target = ClassifierTarget(str(genre_checkpoint), [test], label_from=SENT_ID_PREFIX, limit=limit)
    _plain_seconds(target)  # warm-up
    timings = {}

    def run():
        plain = [_plain_seconds(target)]
        with PeakRSS() as memory:
            start = time.perf_counter()
            heads = ablate("classify", sweeps=["heads"], **common)
            timings["heads_s"] = time.perf_counter() - start
        plain.append(_plain_seconds(target))
        start = time.perf_counter()
        layers = ablate("classify", sweeps=["layers"], **common)
        timings["layers_s"] = time.perf_counter() - start
        timings["plain_s"] = min(plain)
        timings["peak_rss_mb"] = memory.peak_mb
        return heads, layers

    heads, layers = benchmark.pedantic(run, rounds=1, iterations=1)
    masks = len(heads.masks)  # L×H + 1
    ratio = timings["heads_s"] / (masks * timings["plain_s"])
    heads.save(OUT / "heads")
    layers.save(OUT / "layers")
    summary = {"checkpoint": str(genre_checkpoint), "sentences": heads.info.sentences, "masks": masks,
               "baseline": heads.baseline, "ratio_heads_sweep_to_plain": round(ratio, 4),
               "layers_ratio": round(timings["layers_s"] / (len(layers.masks) * timings["plain_s"]), 4),
               **{k: round(v, 3) for k, v in timings.items()},
               "hurt_most": [(m.name, round(d, 4)) for m, d in heads.ranked("accuracy", "heads")[:5]],
               "help_most": [(m.name, round(d, 4)) for m, d in heads.ranked("accuracy", "heads")[::-1][:5]],
               "layers": [(m.name, round(d, 4)) for m, d in layers.ranked("accuracy", "layers")]}
    if limit is None:
        summary["finetune"] = evaluate(genre_checkpoint, test)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1))
    benchmark.extra_info.update(summary)
    print("\n" + heads.summary() + "\n" + layers.summary())
    print(f"single-head sweep: {masks} masks in {timings['heads_s']:.1f}s; "
          f"one plain evaluation {timings['plain_s']:.2f}s; ratio {ratio:.3f}; "
          f"peak RSS {timings['peak_rss_mb']:.0f} MB")
    assert heads.baseline["accuracy"] == pytest.approx(layers.baseline["accuracy"], abs=1.5 / target.scored)
    assert heads.info.sentences == target.scored


def test_dep_heads_sweep_ratio(benchmark, minilm, shared_corpora):
    dev = str(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")
    timings = {}

    def run():
        bare = [bare_forward_seconds(minilm, [dev], batch_size=32, limit=500)]
        start = time.perf_counter()
        result = ablate("dep", corpus=dev, settings=RunSettings(limit=500, batch_size=32), sweeps=["heads"],
                        progress=False)
        timings["sweep_s"] = time.perf_counter() - start
        bare.append(bare_forward_seconds(minilm, [dev], batch_size=32, limit=500))
        timings["bare_s"] = min(bare)
        return result

    result = benchmark.pedantic(run, rounds=1, iterations=1)
    masks = len(result.masks)  # L×H + 1
    ratio = timings["sweep_s"] / (masks * timings["bare_s"])
    benchmark.extra_info.update({"masks": masks, "sentences": result.info.sentences, "ratio": round(ratio, 4),
                                 **{k: round(v, 3) for k, v in timings.items()}})
    print(f"\ndep heads sweep: {masks} masks, {result.info.sentences} sentences in {timings['sweep_s']:.1f}s; "
          f"bare forward {timings['bare_s']:.2f}s; ratio to (L·H+1) bare passes {ratio:.3f}")
    assert result.info.sentences == 500
    assert ratio <= 1.1
