"""Work done ahead on a worker thread while the model runs: ``with Ahead() as ahead: ahead.submit(fn, *args)``.

An ``Ahead`` owns one worker thread for the length of its ``with`` block. ``submit`` queues ``fn(*args)`` on it and
returns a ``concurrent.futures.Future``; its ``result()`` waits, then hands back fn's value or raises fn's own
exception in the caller (an InputError keeps its one line, FILE:LINE and all). Work runs one item at a time in the
order submitted, so whatever is prepared ahead is prepared in the same order, by the same code, as without a worker:
the results do not change. Leaving the block (at the end, or on an exception in the caller) cancels the work not yet
started and joins the thread, so none outlives the block. ``Ahead(False)`` runs each fn at once, in the caller, when
it is submitted (no thread): the same calls in the same order.

The runner (probes.running.runner.Feed) keeps two: one reads the next chunk of the corpus (probes.running.chunks.Pass.ahead) while
the current chunk is fed, the other builds the chunk's batches (probes.encoding.batching.Batch) ahead of the model.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class Ahead:
    """One worker thread for the block (`enabled`), else each submitted call run at once in the caller."""

    def __init__(self, enabled: bool = True, name: str = "probes-ahead"):
        self.enabled, self.name = enabled, name
        self.worker: ThreadPoolExecutor | None = None

    def __enter__(self) -> "Ahead":
        if self.enabled:
            self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        return self

    def __exit__(self, *exc) -> None:
        if self.worker is not None:
            self.worker.shutdown(wait=True, cancel_futures=True)
            self.worker = None

    def submit(self, fn: Callable[..., T], *args: Any) -> "Future[T]":
        """fn(*args) on the worker, after everything submitted before it; without a worker, run now."""
        if self.worker is not None:
            return self.worker.submit(fn, *args)
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args))
        except Exception as e:  # noqa: BLE001 - handed to the caller by result(), as the worker's would be
            done.set_exception(e)
        return done
