"""Where a run's time goes, measured from outside the library: benchmarks/gpu_bench.py's "phases" step.

One run of each of RUNS (after gpu_bench's own runs warmed them up), its wall time cut into phases by timers put
around the library's functions for that run and taken off after it (unittest.mock.patch.object):
    fit_pass      Feed.all over fit_update: trees' fit (and pos's, where it cannot fit beside the scoring), a
                  forward pass over the fit corpus
    scoring_pass  Feed.all over update: the forward pass that scores (and fits pos, Probe.fit_beside)
    rest          the run's time outside both, of which (seconds, calls):
      kept          pos's scoring of the units it kept in the scoring pass (Probe.score_kept)
      reading       RunCorpus' construction: the scored corpus' first chunk read and checked
      preparing     RunCorpus.start: the probes' pre-pass, the first chunk filtered and tokenised
      moving        Probe.to: the probes' state sent to the device before the passes, read back after
      computing     each probe's compute: its result, intervals included
      attaching     the per-sentence views attached to the results (ExampleRecorder.attach)
and inside the passes, trees' own (seconds, calls):
    ensemble      the head-ensemble choice on the selection sample (probes.builtin.trees.probe.select_heads): on
                  trees' own thread, beside the scoring pass, where trees are decoded on the host
    decode_host   the compiled decoders, on trees' own thread, beside the model's pass
    decode_device the batched decoders on the model's thread (on CUDA: launching their work, queued behind the
                  model's)
    waiting       the model's thread waiting for a batch's trees (LayerTrees.result, DeviceTrees.result)
and within the passes, on the model's thread, each probe's own (``updates``: its update and fit_update calls, a
layer each; on CUDA the host's time to launch their work, and any wait for the device in them): what the passes
spend beyond the model's own layers, probe by probe.
Every phase also counts the host's minor page faults in it (getrusage: memory the process touches for the first
time; each is a trap into the kernel, dearer under a sandboxing runtime such as gVisor), and the whole run the
garbage collector's collections by generation and their seconds (gc.callbacks, this process's own: a full
collection walks every object the process holds, the model's included).
Then the run again under torch.profiler (the CPU, and CUDA where there is one): the TOP operations by self host
time and, on CUDA, by self device time, with their calls, and the count of every operation.
"""
from __future__ import annotations

import contextlib
import gc
import gzip
import resource
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable
from unittest import mock

import torch

import probes
from probes.builtin.trees import batched
from probes.builtin.trees import probe as trees
from probes.running import runner
from probes.scoring.probe import Probe
from probes.settings.registry import get_probe

SIX = ["dep", "pos", "trees", "mass", "entropy", "positional"]
RUNS = {"dep": (["dep"], {}, "float32"), "pos": (["pos"], {}, "float32"), "trees": (["trees"], {}, "float32"),
        "trees_on_device": (["trees"], {"tree_decoding": "device"}, "float32"), "six": (SIX, {}, "float32"),
        "dep_sdpa_qk": (["dep"], {}, "sdpa-qk"), "dep_bfloat16": (["dep"], {"dtype": "bfloat16"}, "bfloat16"),
        "six_bfloat16": (SIX, {"dtype": "bfloat16"}, "bfloat16")}  # name -> (probes, settings, encoder's key)
PROFILED = ("dep", "trees", "trees_on_device", "six", "dep_sdpa_qk", "dep_bfloat16")
TRACED = ("dep", "dep_bfloat16")  # runs whose profile is also written as a gzipped Chrome trace (where asked)
TOP = 15  # operations listed by each ordering
PARTS = ("fit_pass", "scoring_pass", "reading", "preparing", "moving", "kept", "computing", "attaching", "ensemble",
         "decode_host", "decode_device", "waiting")  # the timed functions' labels (the module docstring)
UPDATE = "update:"  # the label of a probe's updates: UPDATE + its name


def minor_faults() -> int:
    """The process' minor page faults so far (all its threads)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Clock:
    """Seconds, calls and minor page faults per name, of the functions ``wrap`` times."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.faults: dict[str, int] = defaultdict(int)

    def wrap(self, name: str, function: Callable) -> Callable:
        def timed(*args, **kwargs):
            start, faulted = time.perf_counter(), minor_faults()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.faults[name] += minor_faults() - faulted
                self.calls[name] += 1
        return timed


@contextlib.contextmanager
def collections():
    """Yields a dict that, after the block, holds the garbage collector's collections in it by generation and their
    seconds (a callback of this process's gc, removed after the block)."""
    counted = {"collections": [0, 0, 0], "seconds": 0.0}
    started = [0.0]

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            counted["seconds"] += time.perf_counter() - started[0]
            counted["collections"][info["generation"]] += 1

    gc.callbacks.append(callback)
    try:
        yield counted
    finally:
        gc.callbacks.remove(callback)


@contextlib.contextmanager
def clocked(clock: Clock):
    """The timers of the module docstring around the library's functions, for the block only."""
    plain_all = runner.Feed.all

    def feed_all(self, probes_, method, *args, **kwargs):
        name = "fit_pass" if method == "fit_update" else "scoring_pass"
        return clock.wrap(name, plain_all)(self, probes_, method, *args, **kwargs)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(runner.Feed, "all", feed_all))
        for owner, name, label in ((runner.RunCorpus, "__init__", "reading"), (runner.RunCorpus, "start", "preparing"),
                                   (Probe, "to", "moving"), (runner.ExampleRecorder, "attach", "attaching"),
                                   *((get_probe(n), "compute", "computing") for n in sorted(set(SIX))),
                                   (get_probe("pos"), "score_kept", "kept")):
            stack.enter_context(mock.patch.object(owner, name, clock.wrap(label, getattr(owner, name))))
        for probe in sorted(set(SIX)):
            for method in ("update", "fit_update"):
                owner = get_probe(probe)
                stack.enter_context(mock.patch.object(owner, method, clock.wrap(f"{UPDATE}{probe}",
                                                                                getattr(owner, method))))
        for owner, name, label in ((trees, "select_heads", "ensemble"), (trees, "decode", "decode_host"),
                                   (batched, "decode", "decode_device"), (trees.LayerTrees, "result", "waiting"),
                                   (trees.DeviceTrees, "result", "waiting")):
            stack.enter_context(mock.patch.object(owner, name, clock.wrap(label, getattr(owner, name))))
        yield


def phases(run: Callable[[], Any], sync: Callable[[], None]) -> dict:
    """One `run()`'s wall time and phases (see the module docstring)."""
    clock = Clock()
    start, faulted = time.perf_counter(), minor_faults()
    with clocked(clock), collections() as collected:
        run()
        sync()
    wall, faults = time.perf_counter() - start, minor_faults() - faulted
    passes = clock.seconds["fit_pass"] + clock.seconds["scoring_pass"]
    updates = {name[len(UPDATE):]: {"seconds": clock.seconds[name], "calls": clock.calls[name]}
               for name in sorted(clock.calls) if name.startswith(UPDATE)}
    return {"seconds": wall, "rest": wall - passes, "faults": faults, "gc": collected, "updates": updates,
            **{name: {"seconds": clock.seconds[name], "calls": clock.calls[name], "faults": clock.faults[name]}
               for name in PARTS}}


def top_operations(run: Callable[[], Any], sync: Callable[[], None], device: torch.device,
                   trace: Path | None = None) -> dict:
    """`run()` under torch.profiler: the TOP operations by self host time and (CUDA) by self device time; with
    `trace`, the whole profile as a gzipped Chrome trace there (chrome://tracing, ui.perfetto.dev)."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profile:
        run()
        sync()
    if trace is not None:
        with tempfile.TemporaryDirectory() as folder:
            plain = Path(folder) / "trace.json"
            profile.export_chrome_trace(str(plain))
            with plain.open("rb") as source, gzip.open(trace, "wb", compresslevel=6) as target:
                shutil.copyfileobj(source, target)
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


def measured(encoders: dict[str, probes.Encoder], corpus: str, limit: int | None, device: torch.device,
             sync: Callable[[], None], warm: bool = False, traces: Path | None = None,
             names: list[str] | None = None) -> dict:
    """Every run of RUNS whose encoder is in `encoders` ("float32": loaded in float32 with the default capture,
    "sdpa-qk": in float32 with capture sdpa-qk, "bfloat16"): its phases, and the profile of those of PROFILED.
    warm: run each once first (its kernels, caches and compiled decoders made outside the figures). traces: a folder
    for the Chrome traces of TRACED (NAME.trace.json.gz). names: those of RUNS to run (default: all)."""
    report = {}
    for name in RUNS if names is None else names:
        chosen, settings, key = RUNS[name]
        if key not in encoders:
            continue

        def run(chosen=chosen, settings=settings, encoder=encoders[key]):
            return probes.run(chosen, corpus=corpus, encoder=encoder, limit=limit, progress=False, **settings)

        if warm:
            run()
        report[name] = {"probes": chosen, "settings": settings, "encoder": key, "phases": phases(run, sync)}
        if name in PROFILED:
            trace = None if traces is None or name not in TRACED else traces / f"{name}.trace.json.gz"
            report[name]["profile"] = top_operations(run, sync, device, trace)
    return report
