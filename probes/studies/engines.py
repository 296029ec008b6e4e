"""Where a study's units run: this process, N local worker processes, or Ray workers.

Every engine takes the units to run (model by model) and yields one ``Outcome`` per unit as it finishes;
the driver writes the finished units. Units are handed to the workers one at a time (``Schedule``): each
worker starts on its contiguous run of the units, so it loads each of its models once and processes all its
units of that model, and one that finishes early takes over units still waiting in another's run.

    local, workers 1   in this process, one unit after another (torch's threads as they are: all cores)
    local, workers N   N processes (concurrent.futures, the 'spawn' context), each with 1/N of the cores as
                       torch threads; outcomes come back through a queue as each unit finishes
    ray                one actor per worker (``ray.init(address=...)`` joins a cluster; without an address a
                       local Ray instance with this machine's cores starts, each actor asking for 1/N of
                       them and running that many torch threads); an actor asks for one GPU where CUDA is
                       available, and one CPU on a cluster; its outcomes (state files' bytes) come back to
                       the driver. Ray is an optional extra: attention-probes[ray].

A worker that dies takes the unit it was running with it (a local process takes the pool, so every unit not
yet finished): they come back as failed outcomes, which the driver retries once like any other failure.
"""
from __future__ import annotations

import os
import queue as queues
from typing import Iterator

from probes.errors import InputError
from probes.studies.units import Outcome, Unit, failed, run_unit

ENGINES = ("local", "ray")


def check_engine(engine: str, workers: int, address: str | None) -> None:
    """InputError for an engine that does not exist or cannot start, a worker count below 1, or an address
    without Ray."""
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise InputError(f"workers must be a whole number ≥ 1, not {workers!r}")
    if address is not None and engine != "ray":
        raise InputError("--address joins a Ray cluster: give --engine ray too")
    if engine == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise InputError("the ray engine needs Ray: pip install 'attention-probes[ray]'") from None


def execute(units: list[Unit], engine: str, workers: int, address: str | None = None) -> Iterator[Outcome]:
    """One Outcome per unit, in the order they finish."""
    if not units:
        return iter(())
    if engine == "ray":
        return _ray(units, workers, address)
    if workers == 1:
        return (run_unit(u) for u in units)
    return _processes(units, workers)


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


def _in_worker(index: int, tasks, outcomes, threads: int) -> None:
    """A local worker process: run the units the driver hands it (None: stop), sending each outcome back as it
    finishes."""
    while (unit := tasks.get()) is not None:
        outcomes.put((index, run_unit(unit, threads)))


def _processes(units: list[Unit], workers: int) -> Iterator[Outcome]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    schedule = Schedule(units, workers)
    running: dict[int, Unit] = {}  # worker -> the unit it was handed
    with context.Manager() as manager, ProcessPoolExecutor(schedule.workers, mp_context=context) as pool:
        outcomes = manager.Queue()
        tasks = [manager.Queue() for _ in range(schedule.workers)]

        def hand(worker: int) -> None:
            unit = schedule.next(worker)
            tasks[worker].put(unit)
            if unit is not None:
                running[worker] = unit

        for worker in range(schedule.workers):
            hand(worker)
        futures = [pool.submit(_in_worker, i, tasks[i], outcomes, _threads(schedule.workers))
                   for i in range(schedule.workers)]
        try:
            while running:
                try:
                    worker, outcome = outcomes.get(timeout=0.2)
                except queues.Empty:
                    if all(f.done() for f in futures) and outcomes.empty():
                        break
                    continue
                running.pop(worker)
                hand(worker)  # before the driver saves this outcome: the worker goes on meanwhile
                yield outcome
        finally:  # the driver stopped early (an error, ^C): every worker stops after its unit, so the pool can close
            for task in tasks:
                task.put(None)
        errors = [f.exception() for f in futures if f.exception() is not None]
    for unit in [*running.values(), *schedule.left()]:  # a worker process died before it finished them
        yield failed(unit, f"worker process died: {errors[0] if errors else 'no outcome'}")


def _ray(units: list[Unit], workers: int, address: str | None) -> Iterator[Outcome]:
    import ray
    import torch

    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(workers, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False)
    schedule = Schedule(units, workers)
    if torch.cuda.is_available():
        resources, threads = {"num_gpus": 1}, None
    elif address:  # a cluster: one CPU each, Ray's default of one thread
        resources, threads = {"num_cpus": 1}, None
    else:  # this machine's cores shared out, as the local worker processes share them
        threads = _threads(schedule.workers)
        resources = {"num_cpus": threads}
    actor = ray.remote(**resources)(UnitWorker)
    actors = [actor.remote(threads) for _ in range(schedule.workers)]
    pending = {}  # the unit each actor runs: ref -> (actor's index, unit)

    def hand(worker: int) -> None:
        unit = schedule.next(worker)
        if unit is not None:
            pending[actors[worker].run.remote(unit)] = worker, unit

    for worker in range(schedule.workers):
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
                    outcome = failed(unit, f"Ray worker failed: {type(e).__name__}: {str(e).splitlines()[0]}")
                    alive = not isinstance(e, ray.exceptions.RayActorError)  # a dead actor is handed nothing more
                if alive:
                    hand(worker)  # before the driver saves this outcome: the actor goes on meanwhile
                yield outcome
        for unit in schedule.left():  # every actor died
            yield failed(unit, "Ray worker failed: no Ray worker left to run it")
    finally:
        for a in actors:
            ray.kill(a)
        if started:
            ray.shutdown()


class UnitWorker:
    """A Ray actor: runs units one after another with `threads` intra-op threads (None: Ray's setting), keeping
    its loaded model for the next."""

    def __init__(self, threads: int | None = None):
        self.threads = threads

    def run(self, unit: Unit) -> Outcome:
        return run_unit(unit, self.threads)
