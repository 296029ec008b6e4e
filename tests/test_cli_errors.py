"""Bad input: exit code 2, one line naming file:line and the problem, no traceback, nothing written."""
from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import run_refused
from probes.cli import main

GOOD = "1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_\n\n"



@pytest.mark.parametrize("content, line, problem", [
    ("", None, "file is empty"),
    (GOOD + "1\tHi\thi\tINTJ\tUH\t_\t0\n\n", 4, "expected 10 tab-separated columns, found 7"),
    (GOOD.replace("\t2\tnsubj", "\tX\tnsubj"), 1, "HEAD 'X' is not an integer"),
    (GOOD.replace("\t2\tnsubj", "\t9\tnsubj"), 1, "not a tree (invalid_tree_head): word 1 has HEAD 9, outside the "
                                                   "sentence (2 words); --invalid-trees skip sets such sentences aside"),
    (GOOD + GOOD.replace("2\tbark", "3\tbark"), 5, "word IDs out of sequence: expected 2, found 3"),
])
def test_bad_conllu(tmp_path, capsys, content, line, problem):
    f = tmp_path / "bad.conllu"
    f.write_text(content, encoding="utf-8")
    err = run_refused(capsys, tmp_path / "out", "dep", "--corpus", str(f))
    where = f"{f}:{line}: " if line else f"{f}: "
    assert err == f"probes: error: {where}{problem}"


def test_binary_junk(tmp_path, capsys):
    f = tmp_path / "junk.conllu"
    f.write_bytes(GOOD.encode() + bytes(range(256)) * 4)
    err = run_refused(capsys, tmp_path / "out", "dep", "--corpus", str(f))
    assert err == f"probes: error: {f}:4: binary data (NUL byte), not a text corpus file"


def test_not_utf8(tmp_path, capsys):
    f = tmp_path / "latin1.conllu"
    f.write_bytes(GOOD.encode() + "1\tCafé\t_\t_\t_\t_\t0\troot\t_\t_\n".encode("latin-1"))
    err = run_refused(capsys, tmp_path / "out", "dep", "--corpus", str(f))
    assert err == f"probes: error: {f}:4: not UTF-8 text (byte 0xe9)"


def test_missing_file(tmp_path, capsys):
    f = tmp_path / "nope.conllu"
    assert run_refused(capsys, tmp_path / "out", "dep", "--corpus", str(f)) == f"probes: error: {f}: file not found"


def test_unknown_probe_lists_available(tmp_path, capsys):
    code = main(["run", "nosuch", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "probes: error: unknown probe 'nosuch'; available: " + ", ".join(
        __import__("probes").available())
    assert "dep" in err and not (tmp_path / "out").exists()


def test_model_path_does_not_exist(tmp_path, capsys):
    f = tmp_path / "ok.conllu"
    f.write_text(GOOD)
    err = run_refused(capsys, tmp_path / "out", "dep", "--corpus", str(f), "--model", str(tmp_path / "no-model"))
    assert err == f"probes: error: {tmp_path / 'no-model'}: model path does not exist"


@pytest.mark.integration
def test_model_without_attention(tmp_path, capsys, tiny_model):
    f = tmp_path / "ok.conllu"
    f.write_text(GOOD)
    err = run_refused(capsys, tmp_path / "out", "dep", "--corpus", str(f), "--model", str(tiny_model("fnet")))
    assert "attention cannot be captured" in err and "fnet" in err


@pytest.mark.integration
def test_every_sentence_too_long(tmp_path, capsys, tiny_model):
    words = [f"w{i}" for i in range(70)]  # the tiny models accept 64 positions
    rows = "".join(f"{i}\t{w}\t_\t_\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_\n"
                   for i, w in enumerate(words, 1))
    f = tmp_path / "long.conllu"
    f.write_text(rows + "\n" + rows + "\n")
    err = run_refused(capsys, tmp_path / "out", "dep", "--corpus", str(f), "--model", str(tiny_model("bert")))
    assert err == (f"probes: error: {f}: no sentence can be scored (of 2: 2 too long; model limit 64 subwords)")


def test_entry_point_exit_code(tmp_path):
    """The installed command itself: exit 2, one line on stderr, no traceback."""
    f = tmp_path / "bad.conllu"
    f.write_text(GOOD.replace("\t2\tnsubj", "\t-1\tnsubj"))
    proc = subprocess.run([sys.executable, "-m", "probes", "run", "dep", "--corpus", str(f), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"probes: error: {f}:1: HEAD '-1' is not an integer"
    assert not (tmp_path / "out").exists()
