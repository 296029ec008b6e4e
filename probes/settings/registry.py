"""Probe registry (``PROBES``, a probes.base.registries.Registry): built-in probes, third-party probes from the
entry-point group ``probes.probes``, and probes defined in a user's file (``--code file.py``).

The built-in probes are declared in probes.settings.declared (name, description, options): ``declared()``
lists every probe from there without importing the built-in probes' code (so neither torch), for `probes
list` and the command line's flags; ``get_probe`` imports a built-in probe's module when it is first used.

A probe is a ``probes.scoring.probe.Probe`` subclass with a unique ``name``; decorate it with
``@probes.register``. An entry point may name the class itself or a module that registers.
Registering checks the probe's option names: none may be an argument of ``probes.run`` (a RunSettings field)
or a flag of `probes run` / `probes ablate` (probes.settings.run_settings names them all), and an option several probes
declare must have one type, default and choices in all (it becomes one ``--flag``, see probes.tools.arguments).
"""
from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

from probes.settings.declared import BUILTIN
from probes.base.errors import InputError
from probes.base.registries import Registry, unknown_name
from probes.settings.run_settings import COMMAND_FLAGS, RUN_ARGUMENTS, command_flags, option_flag, setting_names

ENTRY_POINT_GROUP = "probes.probes"


def _from_entry_point(name: str, obj: object, value: str) -> None:
    """An entry point's class is registered by its probe name (one a built-in has is left to it); a module
    registered its probes when it was imported."""
    if isinstance(obj, type) and obj.__name__ and getattr(obj, "name", "") not in {**BUILTIN, **PROBES.registered()}:
        register(obj)


# the probe classes by name: a built-in's module registers its class when imported (``@register``)
PROBES: Registry[type] = Registry("probe", ENTRY_POINT_GROUP, {name: d.module for name, d in BUILTIN.items()},
                                  check=_from_entry_point, sort=True, any_name=True)


def register(cls: type) -> type:
    """Class decorator: make a Probe subclass available by its ``name``."""
    if not getattr(cls, "name", ""):
        raise ValueError(f"{cls.__name__} has no probe name")
    existing = PROBES.registered().get(cls.name)
    if existing is not None and (existing.__module__, existing.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"probe name {cls.name!r} is taken by {existing.__module__}.{existing.__qualname__}")
    _check_option_names(cls)
    return PROBES.add(cls.name, cls)


def _check_option_names(cls: type) -> None:
    """InputError (at the probe's file and line) for an option name that would clash on a parser or in run()."""
    taken = {*RUN_ARGUMENTS, *setting_names()}
    for option in getattr(cls, "options", ()):
        if option.name in taken:
            raise InputError(f"probe {cls.name!r}: option {option.name!r} is an argument of probes.run itself; "
                             "give the option another name", *_where(cls))
        for command in COMMAND_FLAGS:
            if option_flag(option.name) in command_flags(command):
                raise InputError(f"probe {cls.name!r}: option {option.name!r} clashes with `probes {command}`'s own "
                                 f"{option_flag(option.name)}; give the option another name", *_where(cls))
        for other in {**BUILTIN, **PROBES.registered()}.values():
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


def available() -> dict[str, type]:
    """All registered probes, by name (sorted)."""
    return dict(sorted(PROBES.load_all().items()))


def declared() -> dict[str, Any]:
    """Every probe's name, description and options, by name (sorted), without importing the built-in probes' code:
    a built-in probe not yet used is its Declaration (probes.settings.declared), every other probe its class."""
    return dict(sorted({**BUILTIN, **PROBES.load_plugins()}.items()))


def check_probe_names(names: list[str]) -> None:
    """InputError for the first of `names` that no probe has, naming the closest one, without importing any built-in
    probe's code (the command line refuses a misspelt probe before it loads torch)."""
    known = declared()
    for name in names:
        if name not in known:
            raise unknown_name("probe", name, list(known))


def get_probe(name: str) -> type:
    """The probe class registered as `name` (a built-in probe's module is imported now); an unknown name lists
    the available ones."""
    return PROBES.get(name)


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
