"""A saved result's pictures: the class that presents it, found by its probe's name, and a save with them.

A result is plain data (probes.results.probe_result); ``figures_of(result, kind)`` asks its probe's class (a
``probes.results.presentation.Presentation``) to draw it, and ``save_result`` writes the data files and those pictures
into one folder (``probes.save_result``; ``ProbeResult.save`` writes the data files alone).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from probes.settings.declared import BUILTIN
from probes.base.files import write_result_files
from probes.base.options import Declaration
from probes.results.presentation import Presentation
from probes.settings.registry import declared, get_probe
from probes.results.probe_result import ProbeResult


def presentation_of(result: ProbeResult) -> type[Presentation]:
    """The class presenting `result`: for a built-in probe, the Presentation its declaration names (the probe's class
    inherits it), so that showing its result imports neither torch nor any probe's code; for a plugin probe, its
    class, when registered (only that probe's code is imported); else the defaults (an array file loaded as a
    result, or a plugin's result read without its code)."""
    if result.info.provenance.get("array_file"):  # named after its file, whatever probe that name may be
        return Presentation
    if result.probe in BUILTIN:
        return builtin_presentation(BUILTIN[result.probe])
    cls = get_probe(result.probe) if result.probe in declared() else None
    return cls if isinstance(cls, type) and issubclass(cls, Presentation) else Presentation


def builtin_presentation(declaration: Declaration) -> type[Presentation]:
    """The Presentation subclass a built-in probe's declaration names (its class inherits it: a test checks), or
    the default."""
    if declaration.presentation is None:
        return Presentation
    module, name = declaration.presentation.split(":")
    return getattr(importlib.import_module(module), name)


def figures_of(result: ProbeResult, kind: str = "overview") -> dict[str, bytes]:
    """{file name: PNG}: the pictures `result`'s probe draws of it, saved beside the JSON.
    kind: "overview" (one picture of the labels), "labels" (and one per label), "all-labels" or "none"."""
    return presentation_of(result).figures(result, kind)


def save_result(result: ProbeResult, directory: str | Path, *, plots: bool | str = True,
                draw: Callable[[ProbeResult, str], dict[str, bytes]] = figures_of) -> list[Path]:
    """Write `result`'s JSON, CSV and figures into `directory`; return the paths written. plots: a kind of
    ``figures_of`` ("overview", "labels", "all-labels", "none"); True is "overview", False "none". draw: what
    draws them (``figures_of``)."""
    kind = ("overview" if plots else "none") if isinstance(plots, bool) else plots
    return write_result_files(directory, {**result.data_files(), **draw(result, kind)})
