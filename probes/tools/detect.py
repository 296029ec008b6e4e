"""The causal detectors without a corpus: ``detect`` runs them on generated repeated random tokens.

    probes.tools.detect.detect(["induction", "prev_token", "sink"], "path/to/gpt2", count=64, length=128)

is ``probes.run`` on `count` sequences of `length` random tokens repeated (probes.encoding.sequences) drawn with
`sequence_seed` from the model's vocabulary; the results record how the sequences were made in
settings["sequences"] and name them as their corpus. Every other argument is run()'s.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Iterable

from probes.encoding.sequences import repeated_description, repeated_random_tokens, write_token_ids
from probes.capture.model import Encoder, load_encoder
from probes.results.probe_result import ProbeResult
from probes.running.runner import run

DETECTORS = ("prev_token", "duplicate_token", "induction", "sink")


def detect(probes: str | Iterable[str] = DETECTORS, model: str | None = None, *, count: int = 64, length: int = 64,
           sequence_seed: int = 0, encoder: Encoder | None = None, device: str = "cpu", dtype: str = "float32",
           views: int = 0, **options: Any) -> dict[str, ProbeResult]:
    """Score every head with each named probe on generated repeated random tokens (see the module docstring).
    device, dtype: where and in what the model is loaded when no `encoder` is given (load_encoder's; the maps are
    float32 in any dtype). views: as run()'s, but none by default (a sequence's word-level view is its [T,T] map:
    random tokens have no words to show, and pooling them costs a pass over every layer's maps)."""
    if encoder is None:
        encoder = load_encoder(model, device=device, dtype=dtype)
    sequences = repeated_random_tokens(encoder.tokenizer, count, length, sequence_seed)
    made = {"kind": "random tokens repeated", "count": count, "length": length, "seed": sequence_seed}
    name = repeated_description(count, length, sequence_seed)
    with tempfile.TemporaryDirectory(prefix="probes-sequences-") as folder:
        path = Path(folder) / "repeated.ids"
        write_token_ids(path, sequences, name)
        results = run(probes, corpus=path, format="token_ids", encoder=encoder, views=views, **options)
    for result in results.values():
        result.info.settings["sequences"] = made
        result.info.corpus = [name]
    return results
