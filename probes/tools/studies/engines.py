"""Where a study's units run: this process, N local worker processes, or Ray workers.

Every engine takes the units to run (model by model) and yields one ``Outcome`` per unit as it finishes;
the driver writes the finished units. Units are handed to the workers one at a time (``Schedule``): each
worker starts on its contiguous run of the units, so it loads each of its models once and processes all its
units of that model, and one that finishes early takes over units still waiting in another's run.

    local, workers 1   in this process, one unit after another (torch's threads as they are: all cores)
    local, workers N   N processes (multiprocessing's 'spawn' context), each with 1/N of the cores as torch
                       threads; outcomes come back through a queue as each unit finishes; each process ends
                       with the driver, however the driver ends (``die_with``)
    ray                one actor per worker (``raycluster.join``: a cluster at --address, bounded, one-line
                       errors; without an address a new local Ray instance with this machine's cores, each
                       actor asking for 1/N of them and running that many torch threads); an actor asks for
                       one GPU where CUDA is available, and one CPU on a cluster; as many actors as asked for
                       and the cluster has room for (default: as it has room for), each placed within
                       ``raycluster.placement_seconds()`` or named and given up; its outcomes (state files'
                       bytes, the Ray node it ran on) come back to the driver. Ray is an optional extra:
                       attention-probes[ray]. Ray's own output goes to the log file the driver names.

A worker that dies takes the unit it was running with it: it comes back as a failed outcome, which the driver
retries once like any other failure; its other units go to the workers left.
"""
from __future__ import annotations

import os
import queue as queues
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from probes.base.errors import InputError
from probes.tools.studies.units import Outcome, Unit, failed, run_unit

ENGINES = ("local", "ray")
STOP_SECONDS = 600.0  # how long local workers may take to finish their units once told to stop
Say = Callable[[str], None]  # prints one line of the engine's own (a worker placed, lost, ...)


def check_engine(engine: str, workers: int | None, address: str | None) -> None:
    """InputError for an engine that does not exist or cannot start, a worker count below 1 (None: the engine's
    default), or an address without Ray."""
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise InputError(f"workers must be a whole number ≥ 1, not {workers!r}")
    if address is not None and engine != "ray":
        raise InputError("--address joins a Ray cluster: give --engine ray too")
    if engine == "ray":
        from probes.tools.studies.raycluster import import_ray

        import_ray()


def execute(units: list[Unit], engine: str, workers: int | None, address: str | None = None, say: Say | None = None,
            log: Path | None = None) -> Iterator[Outcome]:
    """One Outcome per unit, in the order they finish. workers None: 1 local, or as many Ray workers as the
    cluster has room for. say: the engine's own lines (Ray workers placed, not placed, lost; default: on
    stderr); log: where Ray's own output goes (None: where Ray prints it)."""
    if not units:
        return iter(())
    if engine == "ray":
        return _ray(units, workers, address, say or (lambda line: print(line, file=sys.stderr)), log)
    if workers in (None, 1):
        return _here(units)
    return _processes(units, workers)


def _here(units: list[Unit]) -> Iterator[Outcome]:
    """The units run one after another in this process, each model loaded once and dropped when the last of its
    units is done (or the study ends): nothing is kept for a later call."""
    loaded: dict = {}
    for unit in units:
        yield run_unit(unit, loaded)


def chunks(units: list[Unit], n: int) -> list[list[Unit]]:
    """`units` cut into at most n contiguous runs of near-equal length (model by model as given)."""
    n = min(n, len(units))
    size, extra = divmod(len(units), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (i < extra)
        out.append(units[start:end])
        start = end
    return out


class Schedule:
    """The units handed to the workers one at a time. Worker i starts on the i-th contiguous run (``chunks``), so
    it loads each of its models once; a worker whose run is done takes over the last unit still waiting in
    another's run: one of the model it holds where there is one, else the last of the longest run (a slower
    worker, or one with longer units, is relieved from its end)."""

    def __init__(self, units: list[Unit], workers: int):
        self.runs = chunks(units, workers)
        self.holds: list[tuple | None] = [None] * len(self.runs)  # each worker's encoder (Unit.encoder)

    @property
    def workers(self) -> int:
        return len(self.runs)

    def next(self, worker: int) -> Unit | None:
        """The unit `worker` runs next (None: nothing is left)."""
        own = self.runs[worker]
        if own:
            unit = own.pop(0)
        else:
            same = [run for run in self.runs if run and run[-1].encoder == self.holds[worker]]
            longest = max(same or self.runs, key=len)
            if not longest:
                return None
            unit = longest.pop()
        self.holds[worker] = unit.encoder
        return unit

    def left(self) -> list[Unit]:
        """The units no worker has been given."""
        return [u for run in self.runs for u in run]


def _threads(workers: int) -> int:
    """Intra-op threads of each of `workers` workers on this machine: its cores shared out (at least 1)."""
    return max(1, (os.cpu_count() or 1) // workers)


def die_with(parent: int) -> None:
    """End this process when process `parent` ends, however it ends (SIGKILL too): on Linux the kernel's
    parent-death signal, elsewhere a thread that watches the parent's pid every second."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    else:
        import threading

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, daemon=True, name="probes-parent-watch").start()
    if os.getppid() != parent:  # the parent was gone before the signal was asked for
        os._exit(1)


def _in_worker(index: int, tasks, outcomes, threads: int, parent: int) -> None:
    """A local worker process: run the units the driver hands it (None: stop), sending each outcome back as it
    finishes; it ends with the driver (``die_with``)."""
    die_with(parent)
    loaded: dict = {}  # the worker's encoder, kept for its next unit
    while (unit := tasks.get()) is not None:
        outcomes.put((index, run_unit(unit, loaded, threads)))


def _processes(units: list[Unit], workers: int) -> Iterator[Outcome]:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    schedule = Schedule(units, workers)
    running: dict[int, Unit] = {}  # worker -> the unit it was handed
    outcomes = context.Queue()
    tasks = [context.Queue() for _ in range(schedule.workers)]
    processes = [context.Process(target=_in_worker, daemon=True, name=f"probes-study-worker-{i}",
                                 args=(i, tasks[i], outcomes, _threads(schedule.workers), os.getpid()))
                 for i in range(schedule.workers)]

    def hand(worker: int) -> None:
        unit = schedule.next(worker)
        tasks[worker].put(unit)
        if unit is not None:
            running[worker] = unit

    for worker, process in enumerate(processes):
        hand(worker)
        process.start()
    try:
        while running:
            try:
                worker, outcome = outcomes.get(timeout=0.2)
            except queues.Empty:
                for worker in [w for w in running if not processes[w].is_alive()]:  # it died: it loses its unit
                    yield failed(running.pop(worker), f"worker process died (exit code {processes[worker].exitcode})")
                if not any(p.is_alive() for p in processes):
                    break
                continue
            running.pop(worker)
            hand(worker)  # before the driver saves this outcome: the worker goes on meanwhile
            yield outcome
    finally:  # done, or the driver stopped early (an error, ^C): every worker stops after its unit
        for task in tasks:
            task.put(None)
        deadline = time.monotonic() + STOP_SECONDS
        while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
            try:  # a process ends only once what it sent is read: outcomes after the driver stopped are dropped
                outcomes.get(timeout=0.2)
            except queues.Empty:
                pass
        for process in processes:
            if process.is_alive():
                process.kill()
    for unit in [*running.values(), *schedule.left()]:  # every worker process died before it finished them
        yield failed(unit, "worker process died: no worker process left to run it")


def _ray(units: list[Unit], workers: int | None, address: str | None, say: Say, log: Path | None) -> Iterator[Outcome]:
    from probes.tools.studies import raycluster

    ray = raycluster.import_ray()
    import torch

    started = not ray.is_initialized()
    if started:
        with raycluster.ray_output(log, stderr_too=True):
            cpus = max(workers or 1, os.cpu_count() or 1)
            joined = raycluster.join(address) if address else raycluster.start_local(cpus)
        say(f"probes study: {joined} (Ray's own messages: {log})")
    try:
        with raycluster.ray_output(log):
            yield from _on_ray(units, workers, address, say, ray, torch.cuda.is_available())
    finally:
        if started:
            with raycluster.ray_output(log, stderr_too=True):
                ray.shutdown()


def _on_ray(units: list[Unit], workers: int | None, address: str | None, say: Say, ray,
            cuda: bool) -> Iterator[Outcome]:
    """The units on the running Ray session: as many actors as asked for (default: as the cluster has room for)
    and it has room for, each placed within raycluster.placement_seconds() or given up."""
    from probes.tools.studies import raycluster

    if cuda:
        resources, threads = {"num_gpus": 1}, None
    elif address:  # a cluster: one CPU each, Ray's default of one thread
        resources, threads = {"num_cpus": 1}, None
    else:  # this machine's cores shared out, as the local worker processes share them
        threads = _threads(min(workers or os.cpu_count() or 1, len(units)))
        resources = {"num_cpus": threads}
    room = raycluster.capacity(resources)
    wanted = workers or room
    if wanted > room:
        say(f"probes study: {wanted} Ray workers asked for, the cluster has room for {max(room, 0)} "
            f"(each asks for {raycluster.describe(resources)}): {max(room, 1)} started")
    schedule = Schedule(units, max(1, min(wanted, room)))
    actors = [ray.remote(**resources)(UnitWorker).remote(threads) for _ in range(schedule.workers)]
    seconds = raycluster.placement_seconds()
    placed, lost = raycluster.place(actors, seconds)
    for i in lost:
        say(f"probes study: Ray worker {i + 1} could not be placed within {seconds:g} s "
            f"({raycluster.describe(resources)}); unit {schedule.runs[i][0].name} and the rest of its run go to "
            f"the other workers")
    if not placed:
        raise InputError(f"no Ray worker could be placed within {seconds:g} s for unit "
                         f"{schedule.runs[0][0].name}: it asks for {raycluster.describe(resources)} (`ray status`): "
                         f"free some, add a node, or lower --workers")
    for i, (node, host) in sorted(placed.items()):
        say(f"probes study: Ray worker {i + 1} on node {node[:12]} ({host})")
    pending = {}  # the unit each actor runs: ref -> (actor's index, unit)

    def hand(worker: int) -> None:
        unit = schedule.next(worker)
        if unit is not None:
            pending[actors[worker].run.remote(unit)] = worker, unit

    for worker in placed:
        hand(worker)
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                worker, unit = pending.pop(ref)
                alive = True
                try:
                    outcome = ray.get(ref)
                except ray.exceptions.RayError as e:  # the actor died, or Ray lost the task
                    problem = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                    outcome = failed(unit, f"Ray worker failed: {problem}")
                    alive = not isinstance(e, ray.exceptions.RayActorError)  # a dead actor is handed nothing more
                    if not alive:
                        node, host = placed[worker]
                        say(f"probes study: Ray worker {worker + 1} on node {node[:12]} ({host}) died "
                            f"running {unit.name}")
                if alive:
                    hand(worker)  # before the driver saves this outcome: the actor goes on meanwhile
                yield outcome
        for unit in schedule.left():  # every actor died
            yield failed(unit, "Ray worker failed: no Ray worker left to run it")
    finally:
        for a in actors:
            ray.kill(a)


class UnitWorker:
    """A Ray actor: runs units one after another with `threads` intra-op threads (None: Ray's setting), keeping
    its loaded model for the next; its outcomes name the Ray node they ran on."""

    def __init__(self, threads: int | None = None):
        self.threads = threads
        self.loaded: dict = {}  # the actor's encoder, kept for its next unit

    def where(self) -> tuple[str, str]:
        from probes.tools.studies.raycluster import where

        return where()

    def run(self, unit: Unit) -> Outcome:
        outcome = run_unit(unit, self.loaded, self.threads)
        outcome.node = self.where()[0]
        return outcome
