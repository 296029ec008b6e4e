"""Capture: how a forward pass's attention maps are read, one backend per way behind one interface
(probes.capture.backend: hooks, outputs, sdpa-qk), and the other readers of a model's internals during a pass (the
norm-based weights, head masking, hook sets). Everything here that touches transformers' or torch's internals does so
for one pass, in the pass's own thread, and undoes it when the pass ends."""
from __future__ import annotations

from probes.capture.backend import CAPTURES, CaptureBackend
from probes.capture.layer_hooks import HooksBackend
from probes.capture.outputs import OutputsBackend
from probes.capture.sdpa_qk import SdpaQkBackend
from probes.base.errors import InputError


def backend_named(name: str) -> CaptureBackend:
    """The capture backend called `name` (one of CAPTURES); InputError for any other."""
    for backend in (HooksBackend(), OutputsBackend(), SdpaQkBackend()):
        if backend.name == name:
            return backend
    raise InputError(f"unknown capture {name!r}; choose one of {', '.join(CAPTURES)}")
