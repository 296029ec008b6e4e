"""CRAFT article lists: `--format craft --corpus craft-ids-test.txt` reads the listed articles' trees.

An ids file lists one article id a line (CRAFT's craft-ids-dev.txt / craft-ids-test.txt); the
trees are `<id>.tree` in the `penn/` folder beside the ids file (CRAFT's layout), or beside the
ids file itself when there is no such folder. See probes.corpus.ptb.read_craft.
"""
from __future__ import annotations

from pathlib import Path

from probes.corpus.ptb import read_craft
from probes.corpus.sentence import Corpus
from probes.base.errors import InputError


def read_craft_list(path: str | Path, *, unescape: bool = True) -> Corpus:
    """The Penn trees of the CRAFT articles listed in `path` (see the module docstring)."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise InputError("file not found (expected a CRAFT ids file such as craft-ids-test.txt)", path)
    penn = path.parent / "penn"
    return read_craft(penn if penn.is_dir() else path.parent, path, unescape=unescape)
