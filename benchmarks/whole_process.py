"""Whole-process plot benchmark (issue 13): `probes run dep --out DIR` against a bare eager forward, each a
fresh process that loads the model and reads the corpus.

    python benchmarks/whole_process.py CORPUS [RUN ARGS...]

prints both wall times and their ratio; the bare process reads and tokenises the corpus like the run, then
runs the model's plain forward over the run's own length-sorted batches (benchmarks.harness).
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time

BARE = """
import sys
from benchmarks.harness import bare_forward_seconds
from probes.defaults import default_model
from probes.model import load_encoder
bare_forward_seconds(load_encoder(default_model()), [sys.argv[1]])
"""


def seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(corpus: str, *extra: str) -> None:
    bare = seconds([sys.executable, "-c", BARE, corpus])
    with tempfile.TemporaryDirectory() as out:
        run = seconds([sys.executable, "-m", "probes", "run", "dep", "--corpus", corpus, "--out", out, "--quiet",
                       *extra])
    print(f"bare forward {bare:.1f} s · probes run dep --out {' '.join(extra)} {run:.1f} s · ratio {run / bare:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
