"""Several models at once (``probes.run_models``, `probes run --model A --model B`): a small study of the
same probes, corpus and settings, one results folder per model.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Iterable

from probes.base.defaults import bundled_corpus
from probes.base.errors import InputError
from probes.base.files import safe_name, short_model_name
from probes.settings.registry import get_probe
from probes.results.probe_result import ProbeResult
from probes.settings.run_settings import RunSettings, settings_from
from probes.tools.studies.driver import study


def model_folders(models: Iterable[str]) -> dict[str, str]:
    """{folder name: model}: each model's short name (probes.base.files.short_model_name), made file-safe, numbered
    where two models share one."""
    names: dict[str, str] = {}
    for i, model in enumerate(models):
        name = safe_name(short_model_name(model))
        names[name if name not in names else f"{name}-{i + 1}"] = model
    return names


def run_models(probes: str | Iterable[str], models: Iterable[str], corpus: str | Path | Iterable[str | Path] | None = None,
               settings: RunSettings | None = None, *, out: str | Path | None = None, plots: bool | str = "overview",
               progress: bool | None = None, **overrides: Any) -> dict[str, dict[str, ProbeResult]]:
    """Run `probes` on `corpus` with each of `models`, as a study (probes.tools.studies): {folder name (``model_folders``):
    {probe: result}}. out: each model's results are written to OUT/<folder name>/ (with the study's table); without
    it the study runs in a temporary folder. settings, overrides: as ``probes.run``'s (no shard or state: for those,
    write a study file)."""
    settings, options = settings_from(overrides, settings)
    names = [probes] if isinstance(probes, str) else list(probes)
    if settings.shard.count > 1 or settings.state:
        raise InputError("--shard and --state take one --model; for several, write a study file (`probes study`)")
    corpora = [corpus] if isinstance(corpus, (str, Path)) else list(corpus or [])
    group = {"corpus": [str(c) for c in corpora or [bundled_corpus()]], "probes": names,
             **({"fit": list(settings.fit)} if settings.fit else {}),
             **{k: getattr(settings, k) for k in ("fit_on", "format", "annotate") if getattr(settings, k)}}
    own = {name: {k: v for k, v in options.items() if any(o.name == k for o in get_probe(name).options)}
           for name in dict.fromkeys(names)}
    spec = {"models": model_folders(models), "settings": settings.study_settings(), "corpora": [group],
            "probes": {k: v for k, v in own.items() if v}, **({"code": list(settings.code)} if settings.code else {})}
    with tempfile.TemporaryDirectory(prefix="probes-models-") as scratch:
        return study(spec, out or scratch, plots=plots, progress=progress).results
