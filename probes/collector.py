"""Python's garbage collector in a `probes` process: off while a command imports torch and transformers, and
kept from walking what they made.

Those imports make about 400,000 tracked objects and next to no garbage, yet the collector's full passes while they
load walk them, and the interpreter's last collection at exit walks them all again (the cost: docs/benchmarks.md). Inside
``process()`` (the `probes` command's own process, not a library call nor a test calling ``cli.main``),
``loading()`` pauses the collector around a command's heavy imports and then freezes what exists
(``gc.freeze``: moved out of every later pass, as CPython's documentation advises before forking), and the
process's end freezes what is left, so the exit collection has nothing to walk. The collector runs as usual
everywhere else: while a command works it is on.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_owned = [False]  # inside process(): the collector is this command's to manage


@contextmanager
def process() -> Iterator[None]:
    """The `probes` command's whole run; at its end every object left is frozen (the exit collection skips them:
    the process ends, and atexit handlers and finalizers still run)."""
    _owned[0] = True
    try:
        yield
    finally:
        _owned[0] = False
        gc.freeze()


@contextmanager
def loading() -> Iterator[None]:
    """A command's heavy imports: the collector off while they load, what exists frozen after (inside process()
    only; elsewhere nothing changes)."""
    if not _owned[0] or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()

