"""A progress bar over sentences on stderr (tqdm), or a silent stand-in: ``with progress_bar(n, None) as bar``."""
from __future__ import annotations

import sys


class progress_bar:
    """tqdm over sentences on stderr, or a silent stand-in.

    enabled: True, False, or None for "when stderr is a terminal".
    """

    def __init__(self, total: int, enabled: bool | None, desc: str = "probing"):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total, self.desc = total, desc

    def __enter__(self):
        if self.enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, unit="sent", desc=self.desc, file=sys.stderr)
        return self

    def update(self, n: int) -> None:
        if self.enabled:
            self.bar.update(n)

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.close()
