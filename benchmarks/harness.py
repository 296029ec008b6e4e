"""Benchmark harness: a probe run's time as a ratio to the bare eager forward pass over the same
length-sorted batches, measured in the same process, plus peak resident memory.

    ratio = time(probes.run(...)) / time(bare forward over the same batches)

The bare pass uses the same encoder, batch size and the batches the run itself makes
(tokenised and sorted the same way); the run's time includes reading the corpus, tokenising,
pooling, scoring and computing the results (not model loading).
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import torch

from probes.encoding.batching import Batch, length_sorted_batches
from probes.corpus import read_corpus
from probes.encoding.subwords import encode


@dataclass
class Measurement:
    run_seconds: float
    bare_seconds: float
    ratio: float
    peak_rss_mb: float
    rss_growth_mb: float
    sentences: int


def bare_forward_seconds(encoder, corpus_paths, *, batch_size: int = 32, limit: int | None = None,
                         format: str | None = None, repeats: int = 1, vectors: bool = False,
                         tokenize: str = "words", capture: bool = False) -> float:
    """Best-of-`repeats` time of the plain eager forward over the run's own length-sorted batches
    (tokenize: as in probes.run, "words" or "text"; capture: see ``bare_forward_over``)."""
    sentences = read_corpus(list(corpus_paths), format=format).sentences
    return bare_forward_over(encoder, sentences[:limit] if limit else sentences, batch_size=batch_size,
                             repeats=repeats, tokenize=tokenize, capture=capture)


def bare_forward_over(encoder, sentences, *, batch_size: int | None = 32, repeats: int = 1, tokenize: str = "words",
                      capture: bool = False, max_tokens: int | None = None) -> float:
    """Best-of-`repeats` time of the plain eager forward over `sentences` (those a run keeps), tokenised and
    length-sorted into batches as a run does (at most `batch_size` sentences, None: no cap, and `max_tokens` padded
    positions, None: no budget). capture: instead, the run's own capture pass with no probe (Encoder.layerwise,
    each layer's maps handed to a callback that does nothing; it ends at the last layer's maps, so it skips that
    layer's W_O and feed-forward, which the plain pass computes). `encoder`: anything with the Encoder's tokenizer,
    max_length, device and bare_forward (benchmarks/gpu_bench.py's SDPA model)."""
    items, _ = encode(encoder.tokenizer, sentences, encoder.max_length, tokenize)
    batches = [Batch.from_encoded([sentences[e.index] for e in chunk], chunk, encoder.tokenizer, "mean-sum")
               for chunk in length_sorted_batches(items, batch_size, max_tokens)]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for b in batches:
            if capture:
                encoder.layerwise(b.input_ids, b.attention_mask, lambda layer, attention, context: None)
            else:
                encoder.bare_forward(b.input_ids, b.attention_mask)
        if encoder.device.type == "cuda":
            torch.cuda.synchronize(encoder.device)  # the kernels queued, not only launched
        best = min(best, time.perf_counter() - start)
    return best


# A fresh process's bare pass (argv: batch size, limit or 0, repeats, corpus paths), without probes.running.runner.
_BARE_APART = """
import sys
from harness import bare_forward_seconds
from probes.base.defaults import default_model
from probes.capture.model import load_encoder
size, limit, repeats = (int(x) for x in sys.argv[1:4])
seconds = bare_forward_seconds(load_encoder(default_model()), sys.argv[4:], batch_size=size, limit=limit or None,
                               repeats=repeats)
print(seconds)
"""


def bare_forward_seconds_apart(corpus_paths, *, batch_size: int = 32, limit: int | None = None,
                               repeats: int = 5) -> float:
    """``bare_forward_seconds`` with the default model in a fresh process that never imports probes.running.runner, the
    plain pass as a user's own script would run it (nothing a run did before it in the process)."""
    here = Path(__file__).resolve().parent
    paths = [str(here), str(here.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run([sys.executable, "-c", _BARE_APART, str(batch_size), str(limit or 0), str(repeats),
                           *map(str, corpus_paths)], check=True, capture_output=True, text=True, env=env)
    return float(done.stdout.split()[-1])


class PeakRSS:
    """Samples this process's resident memory every 5 ms while active; .peak_mb, .growth_mb."""

    def __enter__(self):
        self.process = psutil.Process()
        self.start = self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)
        self.peak_mb = self.peak / 2**20
        self.growth_mb = (self.peak - self.start) / 2**20


def measure(run, bare, repeats: int = 2) -> Measurement:
    """Time `run()` and `bare()` alternately, best of `repeats` each; peak RSS during the runs."""
    gc.collect()
    run_best = bare_best = float("inf")
    sentences = 0
    with PeakRSS() as memory:
        for _ in range(repeats):
            start = time.perf_counter()
            results = run()
            run_best = min(run_best, time.perf_counter() - start)
            sentences = next(iter(results.values())).info.sentences
            del results
            bare_best = min(bare_best, bare())
    return Measurement(run_best, bare_best, run_best / bare_best, memory.peak_mb, memory.growth_mb, sentences)
