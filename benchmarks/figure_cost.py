"""What a run's default figures cost in the process that ran it (issue 25 item 6). Each measurement is a fresh
process that loads the packaged model (so that it holds what a run holds) and imports the result's probe, then
saves a results file's result once, timed in CPU seconds (less moved by other work than wall time on a busy
machine): with --plots none (JSON and CSV) and with the default overview, which pays for matplotlib's import and
its first drawing as a run does. Prints the median of N (default 3) of each and their difference.

    python benchmarks/figure_cost.py DIR/dep.json [N]
"""
from __future__ import annotations

import statistics
import subprocess
import sys

SAVE = """
import resource, sys, tempfile
import probes.running.runner
from probes.base.defaults import default_model
from probes.capture.model import load_encoder
from probes.results.figures import save_result
from probes.settings.registry import get_probe
from probes.results.probe_result import load_result
encoder = load_encoder(default_model())
result = load_result(sys.argv[1])
get_probe(result.probe)
result.to_frame()  # pandas imported, as the run's CSV needs it either way
with tempfile.TemporaryDirectory() as out:
    before = resource.getrusage(resource.RUSAGE_SELF)
    save_result(result, out, plots=sys.argv[2])
    after = resource.getrusage(resource.RUSAGE_SELF)
print(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
"""


def save_seconds(path: str, plots: str) -> float:
    done = subprocess.run([sys.executable, "-c", SAVE, path, plots], check=True, capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def main(path: str, repeats: str = "3") -> None:
    times: dict[str, list[float]] = {"none": [], "overview": []}
    for _ in range(int(repeats)):
        for plots, seconds in times.items():
            seconds.append(save_seconds(path, plots))
    none, overview = (statistics.median(times[k]) for k in ("none", "overview"))
    print(f"{path}: save with --plots none {none:.2f} CPU-s, with the overview {overview:.2f} CPU-s; the figures "
          f"{overview - none:.2f} CPU-s (median of {repeats})")


if __name__ == "__main__":
    main(*sys.argv[1:])
