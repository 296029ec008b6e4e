"""Probe registry: built-in probes, third-party probes from the entry-point group
``probes.probes``, and probes defined in a user's file (``--code file.py``).

The built-in probes are declared in probes.builtin.declared (name, description, options): ``declared()``
lists every probe from there without importing the built-in probes' code (so neither torch), for `probes
list` and the command line's flags; ``get_probe`` imports a built-in probe's module when it is first used.

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
from typing import Any

from probes.builtin.declared import BUILTIN
from probes.errors import InputError

ENTRY_POINT_GROUP = "probes.probes"

_PROBES: dict[str, type] = {}
_loaded = False
_plugins_loaded = False


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
        for other in {**BUILTIN, **_PROBES}.values():
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
    for declaration in BUILTIN.values():
        importlib.import_module(declaration.module)
    _load_plugins()


def _load_plugins() -> None:
    """Import the entry points' probes (a name the built-in probes have is left to them)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        if isinstance(obj, type) and obj.__name__ and getattr(obj, "name", "") not in {**BUILTIN, **_PROBES}:
            register(obj)


def available() -> dict[str, type]:
    """All registered probes, by name (sorted)."""
    _load()
    return dict(sorted(_PROBES.items()))


def declared() -> dict[str, Any]:
    """Every probe's name, description and options, by name (sorted), without importing the built-in probes' code:
    a built-in probe not yet used is its Declaration (probes.builtin.declared), every other probe its class."""
    _load_plugins()
    return dict(sorted({**BUILTIN, **_PROBES}.items()))


def get_probe(name: str) -> type:
    """The probe class registered as `name` (a built-in probe's module is imported now); an unknown name lists
    the available ones."""
    if name in BUILTIN and name not in _PROBES:
        importlib.import_module(BUILTIN[name].module)
    if name not in _PROBES:
        _load()
    if name not in _PROBES:
        raise InputError(f"unknown probe {name!r}; available: {', '.join(declared())}")
    return _PROBES[name]


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
