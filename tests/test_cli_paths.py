"""Paths on the command line: every output path is checked before any work (a model that does not exist is
never reached), and one place in the CLI turns errors into one line: InputError and OSError on a path, exit 2;
anything else keeps its traceback."""
from __future__ import annotations

import errno
import os

import numpy as np
import pytest

import probes.cli
from probes.cli import main
from probes.base.errors import InputError
from probes.base.argtypes import check_output_folder

NO_MODEL = "/nonexistent/model"  # loading it would fail: an error about the output must come first


def one_line_error(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def output_commands(out: str, tmp_path) -> dict[str, list[str]]:
    """Each command that writes, with `out` as its output path and inputs that exist."""
    grid = tmp_path / "grid.npy"
    np.save(grid, np.ones((2, 3)))
    return {
        "run": ["run", "dep", "--model", NO_MODEL, "--out", out],
        "ablate": ["ablate", "dep", "--model", NO_MODEL, "--out", out],
        "similarity": ["similarity", "--model", NO_MODEL, "--model", NO_MODEL, "--out", out],
        "compare": ["compare", str(grid), str(grid), "--out", out],
        "plot": ["plot", str(grid), "--out", out],
    }


@pytest.mark.parametrize("command", ["run", "ablate", "similarity", "compare", "plot"])
def test_output_folder_that_is_a_file(tmp_path, capsys, command):
    taken = tmp_path / "results"
    taken.write_text("a file, not a folder")
    err = one_line_error(capsys, output_commands(str(taken), tmp_path)[command])
    assert err == f"probes: error: {taken}: exists and is not a folder; give a folder for the output files"
    assert taken.read_text() == "a file, not a folder"


@pytest.mark.parametrize("command", ["run", "ablate", "similarity", "compare", "plot"])
def test_output_folder_under_a_file(tmp_path, capsys, command):
    taken = tmp_path / "results"
    taken.write_text("x")
    err = one_line_error(capsys, output_commands(str(taken / "run1" / "dep"), tmp_path)[command])
    assert err == (f"probes: error: {taken}: is a file, so the output folder {taken / 'run1' / 'dep'} cannot be made "
                   "under it")


def test_output_folder_that_cannot_be_written(tmp_path, capsys, monkeypatch):
    """The probe file is refused (as in a read-only folder; simulated, since root may write anywhere)."""
    import probes.base.files

    def refused(dir, prefix):
        raise PermissionError(errno.EACCES, "Permission denied", os.path.join(dir, prefix + "x"))

    monkeypatch.setattr(probes.base.files.tempfile, "mkstemp", refused)
    out = tmp_path / "new" / "out"
    err = one_line_error(capsys, ["run", "dep", "--model", NO_MODEL, "--out", str(out)])
    assert err == f"probes: error: {out}: cannot write the output here (Permission denied)"
    assert list(tmp_path.iterdir()) == []  # the folders made for the test are gone again


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_read_only_folder(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        err = one_line_error(capsys, ["run", "dep", "--model", NO_MODEL, "--out", str(locked / "out")])
    finally:
        locked.chmod(0o700)
    assert err.startswith(f"probes: error: {locked / 'out'}: cannot write the output here (Permission denied")


def test_output_check_leaves_nothing(tmp_path):
    out = tmp_path / "a" / "b" / "c"
    assert check_output_folder(out) == out
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "kept").mkdir()
    check_output_folder(tmp_path / "kept")
    assert list((tmp_path / "kept").iterdir()) == []


def test_output_files(tmp_path, capsys):
    """correlate --out FILE.csv and annotate -o FILE.conllu: a folder there, or no folder for the file."""
    grid = tmp_path / "grid.npy"
    np.save(grid, np.ones((2, 3)))
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    err = one_line_error(capsys, ["correlate", str(grid), str(grid), "--out", str(folder)])
    assert err == f"probes: error: {folder}: is a folder; give a file name for the output"
    err = one_line_error(capsys, ["correlate", str(grid), str(grid), "--out", str(tmp_path / "no" / "c.csv")])
    assert err == f"probes: error: {tmp_path / 'no'}: no such folder for the output"
    text = tmp_path / "raw.txt"
    text.write_text("Dogs bark.\n")
    err = one_line_error(capsys, ["annotate", str(text), "-o", str(folder)])
    assert err == f"probes: error: {folder}: is a folder; give a file name for the output"


@pytest.mark.parametrize("argv", [["compare", "{missing}", "{grid}"], ["correlate", "{grid}", "{missing}"],
                                  ["plot", "{missing}", "--out", "{out}"], ["show", "{missing}"],
                                  ["annotate", "{missing}", "-o", "{out}.conllu"],
                                  ["run", "dep", "--corpus", "{missing}", "--model", NO_MODEL],
                                  ["ablate", "dep", "--corpus", "{missing}", "--model", NO_MODEL],
                                  ["similarity", "--model", "a", "--model", "b", "--corpus", "{missing}"]])
def test_missing_inputs_before_any_work(tmp_path, capsys, argv):
    grid = tmp_path / "grid.npy"
    np.save(grid, np.ones((2, 3)))
    missing = tmp_path / "missing.json"
    args = [a.format(missing=missing, grid=grid, out=tmp_path / "out") for a in argv]
    assert one_line_error(capsys, args) == f"probes: error: {missing}: file not found"
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.conllu").exists()


# ---------------------------------------------------------------------------------------------
# One error path: main
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("error, line", [
    (PermissionError(13, "Permission denied", "/data/corpus.conllu"), "/data/corpus.conllu: Permission denied"),
    (IsADirectoryError(21, "Is a directory", "/data/dir"), "/data/dir: Is a directory"),
    (FileNotFoundError(2, "No such file or directory", "/data/gone"), "/data/gone: No such file or directory"),
    (OSError(18, "Invalid cross-device link", "/a/tmp", None, "/b/x.json"),
     "/a/tmp → /b/x.json: Invalid cross-device link"),
    (InputError("bad line", "/data/c.conllu", 7), "/data/c.conllu:7: bad line"),
])
def test_errors_on_paths_become_one_line(capsys, monkeypatch, error, line):
    def failing(args):
        raise error

    monkeypatch.setitem(probes.cli.COMMANDS, "list", failing)
    assert one_line_error(capsys, ["list"]) == f"probes: error: {line}"


@pytest.mark.parametrize("error", [RuntimeError("a bug"), OSError(28, "No space left on device"), KeyError("x")])
def test_unexpected_errors_keep_their_traceback(monkeypatch, error):
    """A bug is reported with its traceback; so is an OSError that names no path (nothing to point the user at)."""
    def failing(args):
        raise error

    monkeypatch.setitem(probes.cli.COMMANDS, "list", failing)
    with pytest.raises(type(error)):
        main(["list"])


def test_corpus_that_is_a_folder(tmp_path, capsys):
    """A real OSError on a user's path: the corpus is a folder. One line naming it, whichever part refuses it."""
    folder = tmp_path / "corpus.conllu"
    folder.mkdir()
    err = one_line_error(capsys, ["run", "dep", "--corpus", str(folder)])  # the packaged model: only the corpus is bad
    assert err.startswith(f"probes: error: {folder}")


def test_no_command_catches_errors_itself():
    """The commands leave errors to main: no try/except in the code that defines them."""
    import ast
    import inspect

    import probes.tools.ablation.commands
    import probes.tools.compare.commands

    for module in (probes.cli, probes.tools.compare.commands, probes.tools.ablation.commands):
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("cmd_"):
                assert not any(isinstance(n, ast.Try) for n in ast.walk(node)), f"{module.__name__}.{node.name}"
