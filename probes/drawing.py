"""Figures drawn by a child process that imports matplotlib while the command imports torch.

`probes run --out` spends about 4 s importing torch and transformers on one core, and then about 0.45 s importing
matplotlib for its figures. A ``Drawing`` started before those imports runs ``python -m probes.drawing``: a child
that imports matplotlib and the presentations on the other core meanwhile, then draws each result it is sent
(``probes.figures.figures_of``) and sends back the PNGs, the same bytes as drawn in the command's own process.

Only built-in probes' results go to the child (their presentations import no probe's code); a plugin's result,
and any result the child cannot draw (it failed to start, died, or raised), are drawn in the command's process, so
that an error or a warning is the one drawing there gives. The child ends when its input closes (the command
finished, or died); ``close`` ends it at once when nothing was asked of it.

Frames on both pipes: an 8-byte little-endian length, then a pickle. Request: (result, kind). Reply: ("ok",
{file name: PNG bytes}, [(warning category name, message)]) or ("error", message).
"""
from __future__ import annotations

import builtins
import os
import pickle
import struct
import subprocess
import sys
import warnings
from typing import BinaryIO

from probes.builtin.declared import BUILTIN
from probes.figures import figures_of
from probes.results import ProbeResult

LENGTH = struct.Struct("<Q")


def write_frame(stream: BinaryIO, value) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(LENGTH.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: BinaryIO):
    """The next frame's value; EOFError where the stream ends."""
    head = stream.read(LENGTH.size)
    if len(head) < LENGTH.size:
        raise EOFError
    size = LENGTH.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class Drawing:
    """The figures of a command's results, drawn in a child process where possible (see the module docstring)."""

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self.used = False

    def start(self) -> "Drawing":
        """Start the child; where it cannot start, every figure is drawn here."""
        try:
            self.child = subprocess.Popen([sys.executable, "-m", "probes.drawing"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            self.child = None
        return self

    def figures(self, result: ProbeResult, kind: str = "overview") -> dict[str, bytes]:
        """``figures_of(result, kind)``, drawn by the child for a built-in probe's result."""
        if kind == "none" or self.child is None or result.probe not in BUILTIN:
            return figures_of(result, kind)
        self.used = True
        try:
            write_frame(self.child.stdin, (result, kind))
            reply = read_frame(self.child.stdout)
        except (OSError, EOFError, pickle.PickleError):
            self._end(kill=True)
            return figures_of(result, kind)
        if reply[0] != "ok":
            return figures_of(result, kind)
        _, pictures, said = reply
        for category, message in said:  # the child's warnings, in their category (UserWarning if not built in)
            cls = getattr(builtins, category, None)
            warnings.warn(message, cls if isinstance(cls, type) and issubclass(cls, Warning) else UserWarning,
                          stacklevel=2)
        return pictures

    def close(self) -> None:
        """End the child: its input closed and waited for where it drew (it exits on the end of its input), killed
        at once where it drew nothing (it may still be importing)."""
        self._end(kill=not self.used)

    def _end(self, kill: bool) -> None:
        child, self.child = self.child, None
        if child is None:
            return
        try:
            if kill:
                child.kill()
            else:
                child.stdin.close()
            child.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            child.kill()
            child.wait()
        finally:
            for stream in (child.stdin, child.stdout):
                if stream is not None and not stream.closed:
                    stream.close()

    def __enter__(self) -> "Drawing":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """The child: matplotlib imported and a first figure drawn (its fonts loaded) while the command works, then each
    request drawn and answered until the input ends."""
    import numpy as np

    from probes.plots import Grid, overview_png

    overview_png([Grid(np.eye(2), "warm-up", marked=np.eye(2, dtype=bool))], "warm-up")  # [2,2]: every path once
    while True:
        try:
            result, kind = read_frame(requests)
        except EOFError:
            return
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                pictures = figures_of(result, kind)
            reply = ("ok", pictures, [(w.category.__name__, str(w.message)) for w in caught])
        except Exception as e:  # noqa: BLE001 - the command's process draws it again and gets the error itself
            reply = ("error", f"{type(e).__name__}: {e}")
        write_frame(replies, reply)


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
    os._exit(0)  # every reply written and flushed: the child holds nothing that its interpreter's teardown would save
