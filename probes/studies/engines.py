"""Where a study's units run: this process, N local worker processes, or Ray workers.

Every engine takes the units to run (model by model) and yields one ``Outcome`` per unit as it finishes;
the driver writes the finished units. The units are cut into one contiguous run per worker, so a
worker loads each of its models once and processes all its units of that model.

    local, workers 1   in this process, one unit after another
    local, workers N   N processes (concurrent.futures, the 'spawn' context), each with 1/N of the CPU
                       threads; outcomes come back through a queue as each unit finishes
    ray                one actor per worker (``ray.init(address=...)`` joins a cluster; without an address
                       a local Ray instance with `workers` CPUs starts); an actor asks for one GPU where
                       CUDA is available, else one CPU; its outcomes (state files' bytes) come back to
                       the driver. Ray is an optional extra: attention-probes[ray].

A worker that dies takes its unfinished units with it: they come back as failed outcomes, which the
driver retries once like any other failure.
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


def _threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // workers)


def _in_worker(units: list[Unit], outcomes, threads: int) -> None:
    """A local worker process: run its units, sending each outcome back as it finishes."""
    for unit in units:
        outcomes.put(run_unit(unit, threads))


def _processes(units: list[Unit], workers: int) -> Iterator[Outcome]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    parts = chunks(units, workers)
    remaining = {u.key: u for u in units}
    with context.Manager() as manager, ProcessPoolExecutor(len(parts), mp_context=context) as pool:
        outcomes = manager.Queue()
        futures = [pool.submit(_in_worker, part, outcomes, _threads(len(parts))) for part in parts]
        while remaining:
            try:
                outcome = outcomes.get(timeout=0.2)
            except queues.Empty:
                if all(f.done() for f in futures) and outcomes.empty():
                    break
                continue
            if remaining.pop(outcome.key, None) is not None:
                yield outcome
        errors = [f.exception() for f in futures if f.exception() is not None]
    for unit in remaining.values():  # a worker process died before it got to them
        yield failed(unit, f"worker process died: {errors[0] if errors else 'no outcome'}")


def _ray(units: list[Unit], workers: int, address: str | None) -> Iterator[Outcome]:
    import ray
    import torch

    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    resources = {"num_gpus": 1} if torch.cuda.is_available() else {"num_cpus": 1}
    actor = ray.remote(**resources)(UnitWorker)
    parts = chunks(units, workers)
    actors = [actor.remote() for _ in parts]
    pending = {a.run.remote(u): u for a, part in zip(actors, parts) for u in part}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                unit = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except ray.exceptions.RayError as e:  # the actor died, or Ray lost the task
                    yield failed(unit, f"Ray worker failed: {type(e).__name__}: {str(e).splitlines()[0]}")
    finally:
        for a in actors:
            ray.kill(a)
        if started:
            ray.shutdown()


class UnitWorker:
    """A Ray actor: runs units one after another, keeping its loaded model for the next."""

    def run(self, unit: Unit) -> Outcome:
        return run_unit(unit)
