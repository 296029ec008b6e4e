"""Progress on stderr: a bar on a terminal (tqdm), lines in a log, or nothing: ``with progress_bar(n, None) as bar``."""
from __future__ import annotations

import sys
import time
from typing import Callable

LINE_STEP = 0.10  # without a terminal, a line each time another tenth of the total is done ...
LINE_SECONDS = 30.0  # ... or this long after the last line, whichever comes first


class progress_bar:
    """Progress over sentences (or `unit`s) on stderr.

    enabled: True (a tqdm bar), False (nothing), or None: a bar where stderr is a terminal, else progress lines
    (``ProgressLines``: a log, such as a cluster job's, shows how far a long run is). initial: units already done.
    clock: seconds, for the lines' timing (a test gives its own).
    """

    def __init__(self, total: int | None, enabled: bool | None, desc: str = "probing", *, unit: str = "sent",
                 initial: int = 0, clock: Callable[[], float] = time.monotonic):
        terminal = sys.stderr.isatty()
        self.enabled = terminal if enabled is None else enabled
        self.lines = ProgressLines(total, desc, unit, initial, clock) if enabled is None and not terminal else None
        self.total, self.desc, self.unit, self.initial = total, desc, unit, initial

    def __enter__(self):
        if self.enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, initial=self.initial, unit=self.unit, desc=self.desc, file=sys.stderr)
        return self

    def update(self, n: int = 1) -> None:
        if self.enabled:
            self.bar.update(n)
        elif self.lines is not None:
            self.lines.update(n)

    def write(self, line: str) -> None:
        """A line on stderr, above the bar where there is one."""
        if self.enabled:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr)

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.close()


class ProgressLines:
    """Progress as lines on stderr, as tqdm writes to a file: "probing: 201/2001 sent (10%), 12 s", one each time
    the count passes another LINE_STEP of the total, or LINE_SECONDS after the last line (the only lines where
    the total is not known). Nothing before the first unit is done."""

    def __init__(self, total: int | None, desc: str, unit: str, initial: int = 0,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.desc, self.unit, self.clock = total, desc, unit, clock
        self.done = initial
        self.started = self.said = clock()
        self.step = self._step()

    def _step(self) -> int:
        """How many whole LINE_STEPs of the total are done (0 where the total is not known)."""
        return int(self.done / self.total / LINE_STEP + 1e-9) if self.total else 0

    def update(self, n: int = 1) -> None:
        self.done += n
        now, step = self.clock(), self._step()
        if step > self.step or now - self.said >= LINE_SECONDS:
            self.step, self.said = step, now
            print(self.line(now), file=sys.stderr, flush=True)

    def line(self, now: float) -> str:
        elapsed = f"{now - self.started:.0f} s"
        if not self.total:
            return f"{self.desc}: {self.done} {self.unit}, {elapsed}"
        return f"{self.desc}: {self.done}/{self.total} {self.unit} ({100 * self.done // self.total}%), {elapsed}"
