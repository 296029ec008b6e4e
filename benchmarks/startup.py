"""How soon the command line answers (issue 25 item 6): the median wall time of 5 fresh processes each for
`probes --version`, `--help`, `probes list` and an argument error (`probes run dep --limt 50`).

    python benchmarks/startup.py [REPEATS]
"""
from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

COMMANDS = {"--version": ["--version"], "--help": ["--help"], "list": ["list"],
            "argument error": ["run", "dep", "--limt", "50"]}


def seconds(argv: list[str]) -> tuple[float, float]:
    """The wall time of one fresh process, and its CPU time (user + system: less moved by a busy machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "probes", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main(repeats: int = 5) -> None:
    for name, argv in COMMANDS.items():
        walls, cpus = zip(*(seconds(argv) for _ in range(repeats)))
        print(f"probes {name}: median {statistics.median(walls):.3f} s wall, {statistics.median(cpus):.3f} s CPU "
              f"of {repeats} (wall min {min(walls):.3f}, max {max(walls):.3f})")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
