"""Arguments the CLI's commands share: the run settings' flags (probes.settings.run_settings), ``--code``, and every registered
probe's options.

The path types (probes.base.argtypes) raise ``InputError``, which argparse passes through: ``probes.cli.main`` prints it
on one line, exit 2, and nothing has been written.
"""
from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from typing import Any

from probes.settings.registry import declared
from probes.settings.run_settings import GROUPS, RunSettings, flag_of, option_flag


def setting_groups(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The sections of `parser`'s help that list the settings' flags (probes.settings.run_settings.GROUPS, in order): a command
    adds its own flags to them too. A section with no flag is not printed."""
    return {title: parser.add_argument_group(title, description) for title, description in GROUPS.items()}


def add_settings(parser: argparse.ArgumentParser, names: tuple[str, ...] | None = None,
                 groups: dict[str, Any] | None = None, **helps: str) -> None:
    """The flags of the RunSettings fields `names` (default: every field that has one), their type, choices and
    help text from the field, each in its field's section of the help (`groups`, from ``setting_groups``; made
    here where not given; a field without a group: among the command's own options); `helps` gives a command its
    own help text for a field. ``chosen_settings`` reads back the ones given."""
    groups = setting_groups(parser) if groups is None else groups
    for f in fields(RunSettings):
        flag = flag_of(f.name)
        if flag is None or (names is not None and f.name not in names):
            continue
        cli = dict(f.metadata["cli"])
        listed = f.default is MISSING or f.name == "shard"  # a tuple (default_factory), or a Shard: made by RunSettings
        cli["default"] = None if listed else f.default
        if "metavar" not in cli and "choices" not in cli and cli.get("action") != "store_true":
            cli["metavar"] = f.name.upper()
        group = f.metadata["group"]
        (parser if group is None else groups[group]).add_argument(
            flag, dest=f"set_{f.name}", help=helps.get(f.name, f.metadata["help"]), **cli)


def chosen_settings(args: argparse.Namespace) -> dict[str, Any]:
    """{setting: value} of the settings' flags given (or defaulted) on the command line (see ``add_settings``)."""
    return {k[4:]: v for k, v in vars(args).items() if k.startswith("set_") and v is not None}


def add_code_argument(parser: argparse.ArgumentParser) -> None:
    """--code FILE.py (repeatable); probes.cli.main imports these files before it builds the parser."""
    add_settings(parser, ("code",))


def add_probe_options(parser: argparse.ArgumentParser) -> None:
    """Every registered probe's options as flags of `parser` (``min_count`` → ``--min-count N``), each probe's in a
    section of the help named after it ("dep options"); an option several probes share appears once, in a section
    naming them all ("head_distance, word_order options"). ``chosen_options`` reads back the ones given."""
    owners: dict[str, list[str]] = {}
    first = {}  # option name -> the first probe's Option of that name (the registry checks that the others agree)
    for cls in declared().values():
        for option in cls.options:
            owners.setdefault(option.name, []).append(cls.name)
            first.setdefault(option.name, option)
    groups: dict[str, Any] = {}  # section title -> its argument group, in the order the probes come
    for name, option in first.items():
        title = f"{', '.join(owners[name])} options"
        group = groups.get(title) or groups.setdefault(title, parser.add_argument_group(title))
        text = option.help
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
