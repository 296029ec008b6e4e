"""What every probe's state must do, checked on hand-built batches fed layer by layer as the runner does:
two shards merged give the one run's result (every count, every cell), a state_dict saved with
torch.save and loaded into a fresh probe gives it too and keeps counting, reset goes back to a fresh
probe's state, and each layer's scores land in that layer's slice."""
from __future__ import annotations

import io
from typing import Any, Callable

import numpy as np
import torch

from probes.scoring.probe import Probe
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo
from helpers import HandBatch, feed


def two_layers(hand: HandBatch) -> HandBatch:
    """`hand` with a second layer that holds the first layer's heads in reverse order (maps and vectors)."""
    (attention,) = hand.attentions
    context = None if hand.context is None else (hand.context[0], hand.context[0].flip(1))
    return HandBatch(hand.batch, (attention, attention.flip(1)), context)


def info(layers: int, heads: int, **settings: Any) -> RunInfo:
    return RunInfo(model="hand", corpus=["hand"], layers=layers, heads=heads, sentences=0, skipped={},
                   settings=settings, provenance={})


def assert_same(a: Any, b: Any, where: str = "") -> None:
    """a and b equal exactly, NaN where NaN: results, label scores, dicts, lists, arrays and tensors."""
    if isinstance(a, ProbeResult):
        assert isinstance(b, ProbeResult)
        for field in ("labels", "overall", "baselines", "extra", "options"):
            assert_same(getattr(a, field), getattr(b, field), f"{where}.{field}")
    elif isinstance(a, LabelScores):
        assert isinstance(b, LabelScores) and a.count == b.count, f"{where}: count {a.count} != {b.count}"
        assert_same(a.scores, b.scores, f"{where}.scores")
        assert_same(a.extra, b.extra, f"{where}.extra")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{where}: keys {list(a)} != {list(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{where}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, (np.ndarray, torch.Tensor)):
        assert type(a) is type(b) and a.dtype == b.dtype, f"{where}: {a!r} != {b!r}"
        x, y = (a.numpy(), b.numpy()) if isinstance(a, torch.Tensor) else (a, b)
        np.testing.assert_array_equal(x, y, err_msg=where)
    else:
        assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"


def check_state(make: Callable[[], Probe], batches: list[HandBatch], run: RunInfo,
                fit: tuple[HandBatch, ...] = ()) -> ProbeResult:
    """Run the checks of the module docstring with a probe from `make()` on `batches` (at least two),
    after a fit phase on `fit` (two batches or more) for probes that need one. Returns the one run's result."""

    def scored(probe: Probe, hands: list[HandBatch]) -> Probe:
        for hand in hands:
            for sentence in hand.batch.sentences:  # as the runner does before any forward pass
                assert probe.skip_reason(sentence) is None
            feed(probe, hand)
        return probe

    def fitted(hands: tuple[HandBatch, ...]) -> Probe:
        probe = make()
        for hand in hands:
            feed(probe, hand, "fit_update")
        return probe

    whole = scored(fitted(fit), batches)
    expected = whole.compute(run)

    # two shards: each fitted on half the fit corpus, fits merged (merge_fit) before scoring half the batches
    half = len(fit) // 2
    first, second = fitted(fit[:half]), fitted(fit[half:])
    first.merge_fit(second)
    second = make()
    second.merge_fit(first)
    first, second = scored(first, batches[:1]), scored(second, batches[1:])
    first.merge(second)
    assert_same(first.compute(run), expected, "merged")

    # a saved and reloaded state gives the same result, and goes on counting like the original
    saved = io.BytesIO()
    torch.save(whole.state_dict(), saved)
    saved.seek(0)
    loaded = make()
    loaded.load_state_dict(torch.load(saved, weights_only=True))
    assert_same(loaded.compute(run), expected, "loaded")
    assert_same(scored(loaded, batches[:1]).compute(run), scored(whole, batches[:1]).compute(run), "loaded, fed")

    # reset: a fresh probe's state, and the same result once fed again
    whole.reset()
    assert_same(whole.state_dict(), make().state_dict(), "reset")
    for hand in fit:
        feed(whole, hand, "fit_update")
    assert_same(scored(whole, batches).compute(run), expected, "after reset")

    # layer 1 holds layer 0's heads reversed (see two_layers): so do its scores
    if run.layers == 2:
        for name, entry in [*expected.labels.items(), ("overall", expected.overall)]:
            for key, grid in {"scores": entry.scores, **entry.extra}.items():
                np.testing.assert_array_equal(grid[1], grid[0][::-1], err_msg=f"{name} {key}")
    return expected
