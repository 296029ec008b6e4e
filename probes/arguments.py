"""Arguments the CLI's commands share: input and output paths checked when the arguments are parsed
(before any model is loaded or corpus read), ``--code``, and every registered probe's options.

The path types raise ``InputError``, which argparse passes through: ``probes.cli.main`` prints it on
one line, exit 2, and nothing has been written.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from probes.errors import InputError
from probes.registry import declared


def input_path(text: str) -> Path:
    """An input file or folder argument, refused on one line when nothing is there."""
    path = Path(text)
    if not path.exists():
        raise InputError("file not found", path)
    return path


def add_code_argument(parser: argparse.ArgumentParser) -> None:
    """--code FILE.py (repeatable); probes.cli.main imports these files before it builds the parser."""
    parser.add_argument("--code", action="append", metavar="FILE.py", help="import a Python file that registers probes")


def option_flag(name: str) -> str:
    """A probe option's command-line flag: ``min_count`` → ``--min-count``."""
    return "--" + name.replace("_", "-")


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
