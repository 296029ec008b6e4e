"""Probe registry: built-in probes, third-party probes from the entry-point group
``probes.probes``, and probes defined in a user's file (``--code file.py``).

A probe is a ``probes.probe.Probe`` subclass with a unique ``name``; decorate it with
``@probes.register``. An entry point may name the class itself or a module that registers.
Registering checks the probe's option names: none may be an argument of ``probes.run`` or a flag
of `probes run` / `probes ablate`, and an option several probes declare must have one type,
default and choices in all (it becomes one ``--flag``, see probes.arguments).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import sys
from importlib.metadata import entry_points
from pathlib import Path

from probes.errors import InputError

ENTRY_POINT_GROUP = "probes.probes"
BUILTIN_MODULES = ("probes.builtin.dep", "probes.builtin.seg.probe", "probes.builtin.srl", "probes.builtin.frames",
                   "probes.builtin.pos", "probes.builtin.ner", "probes.builtin.con", "probes.builtin.trees.probe",
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
    _check_option_names(cls)
    _PROBES[cls.name] = cls
    return cls


def _check_option_names(cls: type) -> None:
    """InputError (at the probe's file and line) for an option name that would clash on a parser or in run()."""
    from probes.arguments import option_flag
    from probes.cli import probe_option_parsers  # the CLI's own arguments: lazily, the CLI imports the probes
    from probes.runner import run

    taken = {name for name, p in inspect.signature(run).parameters.items() if p.kind is not p.VAR_KEYWORD}
    parsers = probe_option_parsers()
    for option in getattr(cls, "options", ()):
        if option.name in taken:
            raise InputError(f"probe {cls.name!r}: option {option.name!r} is an argument of probes.run itself; "
                             "give the option another name", *_where(cls))
        for command, parser in parsers.items():
            try:
                parser.add_argument(option_flag(option.name))
            except argparse.ArgumentError:
                raise InputError(f"probe {cls.name!r}: option {option.name!r} clashes with `probes {command}`'s own "
                                 f"{option_flag(option.name)}; give the option another name", *_where(cls)) from None
        for other in _PROBES.values():
            same = next((o for o in getattr(other, "options", ()) if o.name == option.name), None)
            if other.name != cls.name and same is not None and _kind(same) != _kind(option):
                raise InputError(f"probe {cls.name!r}: option {option.name!r} is also an option of probe "
                                 f"{other.name!r} with another type, default or choices ({_described(same)} there, "
                                 f"{_described(option)} here); a shared option needs the same, or another name",
                                 *_where(cls))


def _kind(option) -> tuple:
    return option.type, option.default, option.choices


def _described(option) -> str:
    choices = f", choices {', '.join(map(str, option.choices))}" if option.choices else ""
    return f"{option.type.__name__}, default {option.default!r}{choices}"


def _where(cls: type) -> tuple[str | None, int | None]:
    """The file and line that define `cls` (a --code plugin: the user's file), for the error message."""
    try:
        return inspect.getsourcefile(cls), inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):  # defined in an interactive session: no file to name
        return None, None


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
