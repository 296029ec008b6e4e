"""Arguments the CLI's commands share: the run settings' flags (probes.settings), ``--code``, and every registered
probe's options.

The path types (probes.argtypes) raise ``InputError``, which argparse passes through: ``probes.cli.main`` prints it
on one line, exit 2, and nothing has been written.
"""
from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from typing import Any

from probes.registry import declared
from probes.settings import RunSettings, flag_of, option_flag


def add_settings(parser: argparse.ArgumentParser, names: tuple[str, ...] | None = None, **helps: str) -> None:
    """The flags of the RunSettings fields `names` (default: every field that has one), their type, choices and
    help text from the field; `helps` gives a command its own help text for a field. ``chosen_settings`` reads
    back the ones given."""
    for f in fields(RunSettings):
        flag = flag_of(f.name)
        if flag is None or (names is not None and f.name not in names):
            continue
        cli = dict(f.metadata["cli"])
        listed = f.default is MISSING or f.name == "shard"  # a tuple (default_factory), or a Shard: made by RunSettings
        cli["default"] = None if listed else f.default
        if "metavar" not in cli and "choices" not in cli and cli.get("action") != "store_true":
            cli["metavar"] = f.name.upper()
        parser.add_argument(flag, dest=f"set_{f.name}", help=helps.get(f.name, f.metadata["help"]), **cli)


def chosen_settings(args: argparse.Namespace) -> dict[str, Any]:
    """{setting: value} of the settings' flags given (or defaulted) on the command line (see ``add_settings``)."""
    return {k[4:]: v for k, v in vars(args).items() if k.startswith("set_") and v is not None}


def add_code_argument(parser: argparse.ArgumentParser) -> None:
    """--code FILE.py (repeatable); probes.cli.main imports these files before it builds the parser."""
    add_settings(parser, ("code",))


def add_probe_options(parser: argparse.ArgumentParser) -> None:
    """Every registered probe's options as flags of `parser` (``min_count`` → ``--min-count N``), in a group
    "probe options"; an option several probes share appears once, naming them all. ``chosen_options``
    reads back the ones given."""
    owners: dict[str, list[str]] = {}
    first = {}  # option name -> the first probe's Option of that name (the registry checks that the others agree)
    for cls in declared().values():
        for option in cls.options:
            owners.setdefault(option.name, []).append(cls.name)
            first.setdefault(option.name, option)
    group = parser.add_argument_group("probe options")
    for name, option in first.items():
        text = f"[{', '.join(owners[name])}] {option.help}"
        if option.type is bool:
            group.add_argument(option_flag(name), dest=f"opt_{name}", action="store_true", default=None, help=text)
            continue
        if option.default not in (None, ""):
            text += f" (default {option.default})"
        group.add_argument(option_flag(name), dest=f"opt_{name}", type=option.type, choices=option.choices,
                           default=None, metavar=None if option.choices else {int: "N", float: "X"}.get(option.type, "TEXT"),
                           help=text)


def chosen_options(args: argparse.Namespace) -> dict[str, Any]:
    """{option name: value} of the probe options given on the command line (see ``add_probe_options``)."""
    return {k[4:]: v for k, v in vars(args).items() if k.startswith("opt_") and v is not None}
