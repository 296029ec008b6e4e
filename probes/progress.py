"""A progress bar on stderr (tqdm), or a silent stand-in: ``with progress_bar(n, None) as bar``."""
from __future__ import annotations

import sys


class progress_bar:
    """tqdm over sentences (or `unit`s) on stderr, or a silent stand-in.

    enabled: True, False, or None for "when stderr is a terminal". initial: units already done.
    """

    def __init__(self, total: int | None, enabled: bool | None, desc: str = "probing", *, unit: str = "sent",
                 initial: int = 0):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total, self.desc, self.unit, self.initial = total, desc, unit, initial

    def __enter__(self):
        if self.enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, initial=self.initial, unit=self.unit, desc=self.desc, file=sys.stderr)
        return self

    def update(self, n: int = 1) -> None:
        if self.enabled:
            self.bar.update(n)

    def write(self, line: str) -> None:
        """A line on stderr, above the bar where there is one."""
        if self.enabled:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr)

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.close()
