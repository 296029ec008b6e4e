"""Where a run's time goes on this machine's CPU: runs of the packaged MiniLM on EWT dev timed in parts.

    python benchmarks/host_phases.py [--runs dep,trees,six] [--repeats 5] [--corpus FILE] [--limit N]

Each run of benchmarks/gpu_phases.py's RUNS named (float32, the default capture) once to warm up, then `repeats`
times timed in parts (gpu_phases.phases: the fit and scoring passes, reading, preparing, computing, attaching,
trees' ensemble choice and decoding, each with its seconds and minor page faults, and each probe's updates on the
model's thread); per part the median and the least of the repeats (the host's noise only slows: the least is the
nearest to the part's own cost). The host work
outside the passes is what a GPU run cannot hide behind the device (issue 44): these are its CPU figures
(docs/benchmarks.md, "Host work outside the pass").
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

import probes
from benchmarks import gpu_phases
from benchmarks.gpu_check import ewt_dev
from probes.base.defaults import default_model

PARTS = ("fit_pass", "scoring_pass", "reading", "preparing", "kept", "computing", "attaching", "ensemble", "decode_host")


def measured(name: str, encoder: probes.Encoder, corpus: str, limit: int | None, repeats: int) -> dict:
    """Run `name` of gpu_phases.RUNS once, then `repeats` times in parts: per part (and the whole) the median and
    least seconds, and the median page faults."""
    chosen, settings, _ = gpu_phases.RUNS[name]

    def run():
        return probes.run(chosen, corpus=corpus, encoder=encoder, limit=limit, progress=False, **settings)

    run()
    timed = [gpu_phases.phases(run, lambda: None) for _ in range(repeats)]
    report = {"seconds": {"median": statistics.median(t["seconds"] for t in timed),
                          "least": min(t["seconds"] for t in timed)},
              "rest": {"median": statistics.median(t["rest"] for t in timed), "least": min(t["rest"] for t in timed)}}
    report["updates"] = {probe: statistics.median(t["updates"][probe]["seconds"] for t in timed)
                         for probe in timed[0]["updates"]}
    for part in PARTS:
        if timed[0][part]["calls"]:
            seconds = [t[part]["seconds"] for t in timed]
            report[part] = {"median": statistics.median(seconds), "least": min(seconds),
                            "faults": statistics.median(t[part]["faults"] for t in timed)}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="dep,trees,six", help="of benchmarks/gpu_phases.py's RUNS (float32 ones)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--corpus", help="default: EWT dev under ../shared or ./shared")
    parser.add_argument("--limit", type=int, help="the corpus' first N sentences")
    args = parser.parse_args(argv)
    corpus = args.corpus or ewt_dev()
    if corpus is None:
        print("EWT dev not found under ../shared or ./shared: pass --corpus", file=sys.stderr)
        return 2
    names = args.runs.split(",")
    unknown = [n for n in names if n not in gpu_phases.RUNS or gpu_phases.RUNS[n][2] != "float32"]
    if unknown:
        print(f"not a float32 run of benchmarks/gpu_phases.py: {', '.join(unknown)}", file=sys.stderr)
        return 2
    encoder = probes.load_encoder(default_model())
    print(f"{Path(corpus).name}, {args.limit or 'all'} sentences, MiniLM on the CPU ({torch.get_num_threads()} "
          f"threads), {args.repeats} repeats: median (least) seconds, [median page faults]")
    for name in names:
        report = measured(name, encoder, corpus, args.limit, args.repeats)
        parts = ", ".join(f"{part} {r['median']:.3f} ({r['least']:.3f}) [{r['faults']:.0f}]"
                          for part, r in report.items() if part in PARTS)
        print(f"{name}: {report['seconds']['median']:.3f} ({report['seconds']['least']:.3f}) s, outside the passes "
              f"{report['rest']['median']:.3f} ({report['rest']['least']:.3f}): {parts}")
        print("  updates on the model's thread (median): "
              + ", ".join(f"{probe} {seconds:.3f}" for probe, seconds in report["updates"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
