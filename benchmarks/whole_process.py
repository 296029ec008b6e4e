"""Whole-process plot benchmark (issue 13, issue 25 item 6): `probes run dep --out DIR` against a bare eager
forward, each a fresh process that loads the model and reads the corpus.

    python benchmarks/whole_process.py [--repeats N] [--bare-collector] CORPUS [RUN ARGS...]

runs N (default 3) pairs, bare process then run, and prints each pair's wall times and ratio, then the median
ratio of wall time and of CPU time (user + system of the process: less moved by other work on a busy machine), and
the ratio of the fastest run to the fastest bare process (interference from other work only slows a process);
the bare process reads and tokenises the corpus like the run, then runs the model's plain forward over the run's
own length-sorted batches (benchmarks.harness). --bare-collector gives the bare process the garbage-collector
handling of the `probes` command (probes.cli.entry: off while torch and transformers import, what they made frozen
after, everything frozen at the end): the ratio then shows what the run's own work
and outputs cost, without the process-level saving that the command has and a plain script lacks.
"""
from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time

BARE = """
import gc
import sys
from probes.cli import import_heavy
if sys.argv[2:] == ["collector"]:  # --bare-collector: the command's handling (probes.cli.entry)
    import_heavy()
from benchmarks.harness import bare_forward_seconds
from probes.base.defaults import default_model
from probes.capture.model import load_encoder
bare_forward_seconds(load_encoder(default_model()), [sys.argv[1]])
if sys.argv[2:] == ["collector"]:
    gc.freeze()
"""


def seconds(command: list[str]) -> tuple[float, float]:
    """The wall time and the CPU time of one process running `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main(*argv: str) -> None:
    argv = list(argv)
    repeats = int(argv[1]) if argv[0] == "--repeats" else 3
    argv = argv[2:] if argv[0] == "--repeats" else argv
    collector = ["collector"] if argv[0] == "--bare-collector" else []
    corpus, *extra = argv[1:] if collector else argv
    walls, cpus, fastest = [], [], [float("inf"), float("inf")]
    for _ in range(repeats):
        bare = seconds([sys.executable, "-c", BARE, corpus, *collector])
        with tempfile.TemporaryDirectory() as out:
            run = seconds([sys.executable, "-m", "probes", "run", "dep", "--corpus", corpus, "--out", out, "--quiet",
                           *extra])
        walls.append(run[0] / bare[0])
        fastest = [min(fastest[0], bare[0]), min(fastest[1], run[0])]
        cpus.append(run[1] / bare[1])
        print(f"bare forward {bare[0]:.1f} s ({bare[1]:.1f} CPU-s) · probes run dep --out {' '.join(extra)} "
              f"{run[0]:.1f} s ({run[1]:.1f} CPU-s) · ratio {walls[-1]:.3f} (CPU {cpus[-1]:.3f})", flush=True)
    print(f"median of {repeats}: ratio {statistics.median(walls):.3f} wall, {statistics.median(cpus):.3f} CPU; "
          f"fastest run / fastest bare: {fastest[1]:.1f} s / {fastest[0]:.1f} s = {fastest[1] / fastest[0]:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
