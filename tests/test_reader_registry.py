"""Corpus formats from the entry-point group `probes.readers`, beside the built-in readers."""
from __future__ import annotations

import json
import sys
import textwrap

import pytest

from probes.cli import main
from probes.corpus import read_corpus, reader_names
from probes.corpus.readers import BUILTIN_READERS
from probes.base.errors import InputError

# A third-party format: one sentence a line, "word/HEAD" tokens (a toy dependency format).
PLUGIN = textwrap.dedent('''
    from pathlib import Path

    from probes.corpus.sentence import Corpus, Sentence


    def read_toy(path, *, lowercase=False):
        path = Path(path)
        corpus = Corpus(sentences=[], files=[str(path)])
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            pairs = [t.rsplit("/", 1) for t in line.split()]
            words = [w.lower() if lowercase else w for w, _ in pairs]
            heads = [int(h) for _, h in pairs]
            corpus.sentences.append(Sentence(words=words, ann={"head": heads, "deprel": ["dep"] * len(words)},
                                             sent_id=f"toy-{n}", source=str(path), line=n))
        return corpus
''')


@pytest.fixture
def toy_plugin(tmp_path, monkeypatch):
    """An installed distribution declaring [probes.readers] toy (and a broken entry, and one named like a built-in)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "toy_reader.py").write_text(PLUGIN, encoding="utf-8")
    dist = site / "toy_reader-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-reader\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[probes.readers]\ntoy = toy_reader:read_toy\n"
                                           "broken = no_such_module:read\nconllu = toy_reader:read_toy\n",
                                           encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    yield
    sys.modules.pop("toy_reader", None)


def test_builtin_formats_are_registered():
    assert reader_names()[:len(BUILTIN_READERS)] == list(BUILTIN_READERS)
    assert {"conllu", "propbank", "conll2012", "framenet", "segmented", "iob2", "ptb", "craft", "spacy",
            "pairs"} <= set(BUILTIN_READERS)


def test_entry_point_reader_reads_with_its_own_options(tmp_path, toy_plugin):
    f = tmp_path / "c.toy"
    f.write_text("Dogs/2 bark/0\nCats/2 purr/0 loudly/2\n", encoding="utf-8")
    assert reader_names()[-2:] == ["broken", "toy"]  # listed after the built-ins, without loading them
    # options the reader does not name (subtypes, for conllu) are not passed to it
    c = read_corpus([f], format="toy", lowercase=True, subtypes=True)
    assert [s.words for s in c.sentences] == [["dogs", "bark"], ["cats", "purr", "loudly"]]
    assert c.sentences[1].ann["head"] == [2, 0, 2] and c.files == [str(f)]


def test_unknown_and_broken_formats(tmp_path, toy_plugin):
    f = tmp_path / "c.toy"
    f.write_text("Dogs/2 bark/0\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_corpus([f], format="nosuch")
    assert str(e.value) == f"unknown corpus format 'nosuch'; available: {', '.join(BUILTIN_READERS)}, broken, toy"
    with pytest.raises(InputError) as e:
        read_corpus([f], format="broken")
    assert str(e.value) == ("corpus format 'broken': cannot load no_such_module:read (ModuleNotFoundError: "
                            "No module named 'no_such_module')")
    # an entry point named like a built-in does not replace it
    g = tmp_path / "c.conllu"
    g.write_text("1\tDogs\t_\t_\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    assert read_corpus([g], format="conllu").sentences[0].ann["deprel"] == ["root"]


@pytest.mark.integration
def test_plugin_format_through_the_cli(tmp_path, capsys, toy_plugin, tiny_model):
    f = tmp_path / "c.toy"
    f.write_text("Dogs/2 bark/0\nCats/2 purr/0 loudly/2\n", encoding="utf-8")
    out = tmp_path / "out"
    code = main(["run", "dep", "--format", "toy", "--corpus", str(f), "--model", str(tiny_model("bert")),
                 "--out", str(out), "--quiet", "--no-plots"])
    assert code == 0, capsys.readouterr().err
    data = json.loads((out / "dep.json").read_text(encoding="utf-8"))
    assert data["sentences"] == 2 and data["overall"]["count"] == 5  # every word has a head (the root's is [CLS])
