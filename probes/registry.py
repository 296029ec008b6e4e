"""Probe registry: built-in probes, third-party probes from the entry-point group
``probes.probes``, and probes defined in a user's file (``--code file.py``).

A probe is a ``probes.probe.Probe`` subclass with a unique ``name``; decorate it with
``@probes.register``. An entry point may name the class itself or a module that registers.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path

from probes.errors import InputError

ENTRY_POINT_GROUP = "probes.probes"
BUILTIN_MODULES = ("probes.builtin.dep", "probes.builtin.seg.probe", "probes.builtin.srl", "probes.builtin.frames",
                   "probes.builtin.pos", "probes.builtin.ner", "probes.builtin.con",
                   "probes.builtin.analyses.mass", "probes.builtin.analyses.entropy",
                   "probes.builtin.analyses.positional", "probes.builtin.analyses.rare",
                   "probes.builtin.analyses.patterns", "probes.builtin.analyses.head_distance",
                   "probes.builtin.analyses.word_order", "probes.builtin.analyses.term_matching")

_PROBES: dict[str, type] = {}
_loaded = False


def register(cls: type) -> type:
    """Class decorator: make a Probe subclass available by its ``name``."""
    if not getattr(cls, "name", ""):
        raise ValueError(f"{cls.__name__} has no probe name")
    existing = _PROBES.get(cls.name)
    if existing is not None and (existing.__module__, existing.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"probe name {cls.name!r} is taken by {existing.__module__}.{existing.__qualname__}")
    _PROBES[cls.name] = cls
    return cls


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        if isinstance(obj, type) and obj.__name__ and getattr(obj, "name", "") not in _PROBES:
            register(obj)


def available() -> dict[str, type]:
    """All registered probes, by name (sorted)."""
    _load()
    return dict(sorted(_PROBES.items()))


def get_probe(name: str) -> type:
    """The probe class registered as `name`; an unknown name lists the available ones."""
    probes = available()
    if name not in probes:
        raise InputError(f"unknown probe {name!r}; available: {', '.join(probes)}")
    return probes[name]


def load_code(path: str | Path) -> None:
    """Import a user's Python file so that the probes it registers become available."""
    p = Path(path)
    if not p.is_file():
        raise InputError("file not found", p)
    spec = importlib.util.spec_from_file_location(f"probes_user_code_{p.stem}", p)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise InputError(f"syntax error: {e.msg}", p, e.lineno) from None
