"""Where a run's time goes, measured from outside the library: benchmarks/gpu_bench.py's "phases" step.

One run of each of RUNS (after gpu_bench's own runs warmed them up), its wall time cut into phases by timers put
around the library's functions for that run and taken off after it (unittest.mock.patch.object):
    fit_pass      Feed.all over fit_update: pos's and trees' fit, a forward pass over the fit corpus
    scoring_pass  Feed.all over update: the forward pass that scores
    rest          the run's time outside both: reading, tokenising, the run's checks, computing, writing
and inside the passes, trees' own (seconds, calls):
    ensemble      the head-ensemble choice on the selection sample (probes.builtin.trees.probe.select_heads)
    decode_host   the compiled decoders, on trees' own thread, beside the model's pass
    decode_device the batched decoders on the model's thread (on CUDA: launching their work, queued behind the
                  model's)
    waiting       the model's thread waiting for a batch's trees (LayerTrees.result, DeviceTrees.result)
Then the run again under torch.profiler (the CPU, and CUDA where there is one): the TOP operations by self host
time and, on CUDA, by self device time, with their calls, and the count of every operation.
"""
from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from typing import Any, Callable
from unittest import mock

import torch

import probes
from probes.builtin.trees import batched
from probes.builtin.trees import probe as trees
from probes.running import runner

RUNS = {"dep": (["dep"], {}), "trees": (["trees"], {}), "trees_on_device": (["trees"], {"tree_decoding": "device"}),
        "six": (["dep", "pos", "trees", "mass", "entropy", "positional"], {})}
PROFILED = ("dep", "trees", "trees_on_device")
TOP = 15  # operations listed by each ordering


class Clock:
    """Seconds and calls per name, of the functions ``wrap`` times."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, name: str, function: Callable) -> Callable:
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1
        return timed


@contextlib.contextmanager
def clocked(clock: Clock):
    """The timers of the module docstring around the library's functions, for the block only."""
    plain_all = runner.Feed.all

    def feed_all(self, probes_, method, *args, **kwargs):
        name = "fit_pass" if method == "fit_update" else "scoring_pass"
        return clock.wrap(name, plain_all)(self, probes_, method, *args, **kwargs)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(runner.Feed, "all", feed_all))
        for owner, name, label in ((trees, "select_heads", "ensemble"), (trees, "decode", "decode_host"),
                                   (batched, "decode", "decode_device"), (trees.LayerTrees, "result", "waiting"),
                                   (trees.DeviceTrees, "result", "waiting")):
            stack.enter_context(mock.patch.object(owner, name, clock.wrap(label, getattr(owner, name))))
        yield


def phases(run: Callable[[], Any], sync: Callable[[], None]) -> dict:
    """One `run()`'s wall time and phases (see the module docstring)."""
    clock = Clock()
    start = time.perf_counter()
    with clocked(clock):
        run()
        sync()
    wall = time.perf_counter() - start
    passes = clock.seconds["fit_pass"] + clock.seconds["scoring_pass"]
    return {"seconds": wall, "rest": wall - passes,
            **{name: {"seconds": clock.seconds[name], "calls": clock.calls[name]} for name in
               ("fit_pass", "scoring_pass", "ensemble", "decode_host", "decode_device", "waiting")}}


def top_operations(run: Callable[[], Any], sync: Callable[[], None], device: torch.device) -> dict:
    """`run()` under torch.profiler: the TOP operations by self host time and (CUDA) by self device time."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profile:
        run()
        sync()
    events = profile.key_averages()

    def row(event) -> dict:
        return {"name": event.key, "calls": event.count, "self_host_ms": event.self_cpu_time_total / 1e3,
                "self_device_ms": getattr(event, "self_device_time_total", 0) / 1e3}

    report = {"operations": sum(e.count for e in events),
              "by_host": [row(e) for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:TOP]]}
    if device.type == "cuda":
        report["by_device"] = [row(e) for e in
                               sorted(events, key=lambda e: -getattr(e, "self_device_time_total", 0))[:TOP]]
    return report


def measured(encoder: probes.Encoder, corpus: str, limit: int | None, device: torch.device,
             sync: Callable[[], None]) -> dict:
    """Every run of RUNS: its phases, and the profile of those of PROFILED."""
    report = {}
    for name, (names, settings) in RUNS.items():
        def run(names=names, settings=settings):
            return probes.run(names, corpus=corpus, encoder=encoder, limit=limit, progress=False, **settings)

        report[name] = {"probes": names, "settings": settings, "phases": phases(run, sync)}
        if name in PROFILED:
            report[name]["profile"] = top_operations(run, sync, device)
    return report
