"""Corpus files that exist but cannot be read: one line naming the path, for every reader and
every file a reader opens (no permission, a directory where a file is expected, a broken link)."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from reader_samples import SAMPLES, reader_format, write_sample

from probes.cli import main
from probes.corpus import read_corpus, textio
from probes.base.errors import InputError

CASES = [(name, rel) for name, (files, _) in sorted(SAMPLES.items()) for rel in sorted(files)]


def refused(name: str, folder: Path, target: Path) -> str:
    """Read sample `name` from `folder`; the one-line message of the InputError, which names `target`."""
    with pytest.raises(InputError) as e:
        read_corpus([folder / c for c in SAMPLES[name][1]], reader_format(name))
    message = str(e.value)
    assert "\n" not in message and str(target) in message, message
    return message


@pytest.mark.parametrize("name, rel", CASES)
def test_a_directory_where_a_file_is_expected(tmp_path, name, rel):
    write_sample(tmp_path, name)
    target = tmp_path / rel
    target.unlink()
    target.mkdir()
    message = refused(name, tmp_path, target)
    assert "is a directory" in message or "no file" in message or "no definition file" in message


@pytest.mark.parametrize("name, rel", CASES)
def test_a_broken_symbolic_link(tmp_path, name, rel):
    write_sample(tmp_path, name)
    target = tmp_path / rel
    target.unlink()
    target.symlink_to(tmp_path / "gone")
    message = refused(name, tmp_path, target)
    assert "broken symbolic link" in message or "no file" in message or "no definition file" in message


def refuse_reading(monkeypatch, target: Path) -> None:
    """Make opening `target` fail as the operating system does for a file without read permission
    (root reads files whatever their mode, so the refusal is simulated where the readers open files)."""
    def refusing_open(path, *args, **kwargs):
        if Path(path) == target:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return open(path, *args, **kwargs)

    monkeypatch.setattr(textio, "open", refusing_open, raising=False)


@pytest.mark.parametrize("name, rel", CASES)
def test_a_file_without_read_permission(tmp_path, monkeypatch, name, rel):
    write_sample(tmp_path, name)
    target = tmp_path / rel
    refuse_reading(monkeypatch, target)
    assert refused(name, tmp_path, target) == f"{target}: cannot read file (Permission denied)"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a user that file modes apply to")
def test_a_file_without_read_permission_for_real(tmp_path):
    write_sample(tmp_path, "conllu")
    target = tmp_path / "c.conllu"
    target.chmod(0)
    try:
        assert refused("conllu", tmp_path, target) == f"{target}: cannot read file (Permission denied)"
    finally:
        target.chmod(0o644)


def test_unreadable_corpus_through_the_cli(tmp_path, capsys, monkeypatch):
    f = write_sample(tmp_path, "conllu")[0]
    refuse_reading(monkeypatch, f)
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["run", "dep", "--corpus", str(f), "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err == f"probes: error: {f}: cannot read file (Permission denied)\n"
    assert not out.exists()
