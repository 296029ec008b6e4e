"""How soon the command line answers (issue 25 item 6): the median wall time of 5 fresh processes each for
`probes --version`, `--help`, `probes list`, the argument errors (`probes run dep --limt 50`, an unknown probe
`probes run depp`, a missing model path and a missing corpus), and the commands that read a result without a
model: `probes show`, `probes compare` and `probes report` of a small dep result written first (2 labels,
6 × 12 heads, 100 replicates).

    python benchmarks/startup.py [REPEATS]
"""
from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

COMMANDS = {"--version": ["--version"], "--help": ["--help"], "list": ["list"],
            "argument error": ["run", "dep", "--limt", "50"], "unknown probe": ["run", "depp"],
            "missing model": ["run", "dep", "--model", "./no-such-model"],
            "missing corpus": ["run", "dep", "--corpus", "no-such.conllu"]}


def seconds(argv: list[str]) -> tuple[float, float]:
    """The wall time of one fresh process, and its CPU time (user + system: less moved by a busy machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "probes", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def result_commands(folder: Path) -> dict[str, list[str]]:
    """A dep result with intervals saved in `folder`, and the commands that read it."""
    from probes.results.intervals import attach_interval
    from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

    generator = np.random.default_rng(0)
    entries = {}
    for label in ("nsubj", "overall"):
        entries[label] = LabelScores(200, generator.uniform(0, 1, (6, 12)))
        attach_interval(entries[label], np.clip(entries[label].scores + generator.normal(0, 0.03, (100, 6, 12)), 0, 1))
    ProbeResult("dep", RunInfo("m", ["c.conllu"], 6, 12, 100, {}, {}, {}), {}, {"nsubj": entries["nsubj"]},
                entries["overall"]).save(folder)
    path = str(folder / "dep.json")
    return {"show RESULT": ["show", path], "compare A B": ["compare", path, path],
            "report DIR": ["report", str(folder), "--out", str(folder / "report.html")]}


def main(repeats: int = 5) -> None:
    folder = Path(tempfile.mkdtemp())
    for name, argv in {**COMMANDS, **result_commands(folder)}.items():
        walls, cpus = zip(*(seconds(argv) for _ in range(repeats)))
        print(f"probes {name}: median {statistics.median(walls):.3f} s wall, {statistics.median(cpus):.3f} s CPU "
              f"of {repeats} (wall min {min(walls):.3f}, max {max(walls):.3f})")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
