"""``ablate()``: evaluate a target with many sets of heads disabled.

Classifier targets batch the masks: the examples are cut into length-sorted batches once; each
batch is repeated G times along the batch dimension (rows mask-major) and run once with a
[G·B, L, H] head mask, so M masks cost at most M plain evaluations' worth of forward computation
in M/G passes per batch (G = ``masks_per_pass``, lowered for long batches so that one pass holds
at most ``tokens_per_pass`` padded tokens). Masks are grouped by their first layer with a
disabled head, and the layers below it run once per batch, not G times (probes.capture.sharing):
a single-head sweep then costs about 0.62 × (L·H + 1) plain evaluations for 6 × 12 heads. The
baseline and every mask see identical inputs.
Probe targets read and tokenise the corpus once and batch the masks the same way (probes.tools.ablation.probe_target).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

from probes.tools.ablation.classifier import ClassifierTarget
from probes.capture.masking import MODES, HeadMasker
from probes.capture.ablation_masks import build_masks, mask_tensor
from probes.tools.ablation.probe_target import ProbeTarget
from probes.tools.ablation.result import AblationResult
from probes.base.choices import CLASSIFY
from probes.base.errors import InputError
from probes.base.progress import progress_bar
from probes.settings.registry import load_code
from probes.settings.run_settings import RunSettings, settings_from

CLASSIFY_SETTINGS = ("format", "batch_size", "max_length", "limit", "device", "code")  # what the classify target reads


def ablate(target: str = CLASSIFY, model: str | None = None, corpus: str | Path | Iterable[str | Path] | None = None,
           settings: RunSettings | None = None, *, sweeps: Iterable[str] | None = None, masks: Iterable[str] = (),
           keeps: Iterable[str] = (), in_layers: str | None = None, mode: str = "zero",
           percents: Iterable[float] = (10.0,), repeats: int = 5, random_seed: int = 0, label_from: str = "label",
           label: str = "overall", masks_per_pass: int = 16, tokens_per_pass: int = 16384,
           progress: bool | None = None, **overrides: Any) -> AblationResult:
    """Disable heads and measure what `target` loses (or gains).

    target: "classify" (a sequence-classification checkpoint on labelled data: accuracy, macro-F1)
      or a registered probe's name (its `label` scores: best head and mean over heads).
    model: checkpoint directory or hub name (probe targets default to the packaged MiniLM).
    corpus: data file(s): for classify a TSV (text[, text_pair], label) or CoNLL-U with a sentence
      label (`label_from`: a comment key such as "label", or "sent_id-prefix"); for a probe, its
      corpus (default: the bundled sample).
    settings: how the data is read, batched and run, as ``probes.run`` takes them (probes.settings.run_settings.RunSettings:
      format, batch_size, max_length, limit, device, ...; default RunSettings()). The classify target reads
      CLASSIFY_SETTINGS of them; a probe target every one, as ``probes.run`` does.
    sweeps: any of "heads" (every single head), "layers", "halves", "random" (k% of heads for each k in `percents`,
      `repeats` draws, seeded by `random_seed`: a name of its own, ``seed`` being a probe option); masks: user
      masks such as "2:3,4:0" or "2:*"; keeps: keep-masks such as "2:3,3:1": every other head of the layers
      `in_layers` ("0-5"; default every layer) is disabled. With none of these, every single head is swept.
    mode: "zero" (a disabled head's output is 0) or "uniform" (it attends equally to all real tokens).
      In zero mode a probe target's grid has NaN at each mask's disabled heads: a head whose output is
      gone is not scored (its attention is still computed, but nothing reads it), and it is never "best".
    masks_per_pass, tokens_per_pass: how many masks share a pass.
    overrides: RunSettings fields by name, changing `settings` (``limit=50``), and, for probe targets, probe options
      by name (e.g. ``subtypes=True`` for dep), as ``probes.run`` takes them.
    Returns an AblationResult; masks[0] is the baseline, evaluated in the same passes.
    """
    started = time.perf_counter()
    settings, options = settings_from(overrides, settings)
    check_settings(mode, masks_per_pass=masks_per_pass, tokens_per_pass=tokens_per_pass)
    for path in settings.code:
        load_code(path)
    paths = [str(p) for p in ([corpus] if isinstance(corpus, (str, Path)) else list(corpus or []))]
    if target == CLASSIFY:
        if options:
            raise InputError(f"option {sorted(options)[0]!r} is for probe targets, not for classify")
        if unread := sorted(settings.changed() - set(CLASSIFY_SETTINGS)):
            raise InputError(f"setting {unread[0]!r} is for probe targets, not for classify")
        if not paths:
            raise InputError("the classify target needs labelled data: give a TSV or CoNLL-U file")
        if model is None:
            raise InputError("the classify target needs a fine-tuned sequence-classification checkpoint (--model)")
        evaluated = ClassifierTarget(model, paths, format=settings.format, label_from=label_from, limit=settings.limit,
                                     device=settings.device, max_length=settings.max_length)
    else:
        evaluated = ProbeTarget(target, model, paths, settings, options, label=label, mode=mode)
    masks, keeps = list(masks), list(keeps)
    sweeps = list(sweeps) if sweeps is not None else ([] if masks or keeps else ["heads"])
    mask_list = build_masks(evaluated.layers, evaluated.heads, sweeps, masks, percents=list(percents),
                            repeats=repeats, seed=random_seed, keeps=keeps, in_layers=in_layers)
    table = mask_tensor(mask_list, evaluated.layers, evaluated.heads)  # [M,L,H]
    evaluate_masks(evaluated, table, mode, batch_size=settings.batch_size, masks_per_pass=masks_per_pass,
                   tokens_per_pass=tokens_per_pass, progress=progress)
    recorded = {"mode": mode, "batch_size": settings.batch_size, "masks_per_pass": masks_per_pass,
                "tokens_per_pass": tokens_per_pass, "limit": settings.limit, "device": settings.device,
                "dtype": settings.dtype,
                "format": settings.format, "seed": random_seed, "percents": list(percents), "repeats": repeats,
                "in_layers": in_layers, **({"label_from": label_from} if target == CLASSIFY else {})}
    values, grids, extra, info = evaluated.finish(recorded, time.perf_counter() - started)
    return AblationResult(target=target, mode=mode, masks=mask_list, values=values, info=info, grids=grids,
                          extra=extra)


def check_settings(mode: str, **values: int | None) -> None:
    """InputError for an unknown mode or a count below 1 (batch_size=32, limit=None, ...: None is not checked)."""
    if mode not in MODES:
        raise InputError(f"unknown masking mode {mode!r}; choose one of {', '.join(MODES)}")
    for name, value in values.items():
        if value is not None and value < 1:
            raise InputError(f"{name.replace('_', ' ')} must be at least 1, not {value}")


def evaluate_masks(evaluated: ClassifierTarget | ProbeTarget, table, mode: str, *, batch_size: int,
                   masks_per_pass: int, tokens_per_pass: int, progress: bool | None) -> None:
    """Evaluate the target under each mask of `table` ([M,L,H] bool), with a progress bar."""
    with HeadMasker(evaluated.model, evaluated.modules, evaluated.heads, evaluated.head_dim, mode) as masker, \
            progress_bar(None if evaluated.units is None else table.shape[0] * evaluated.units, progress,
                         "ablating") as bar:
        evaluated.evaluate(table, masker, bar, batch_size=batch_size, masks_per_pass=masks_per_pass,
                           tokens_per_pass=tokens_per_pass)
