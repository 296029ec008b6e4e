"""Third-party probes: the entry-point group `probes.probes` and `--code file.py`."""
from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest
import torch

import probes
from probes import registry
from probes.cli import main

PLUGIN = textwrap.dedent('''
    import torch
    import probes
    from probes.results import LabelScores, ProbeResult


    @probes.register
    class RootMass(probes.Probe):
        """Mean attention weight from a word to the root column ([CLS]), per head."""
        name = "{name}"
        description = "mean attention from words to [CLS] (a plugin)"

        def __init__(self, layers, heads, **options):
            super().__init__(layers, heads, **options)
            self.total = torch.zeros(layers, heads, dtype=torch.float64)
            self.words = 0

        def update(self, batch):
            to_root = batch.word_attention[..., 0]  # [B,L,H,C]
            self.total += (to_root * batch.word_columns[:, None, None, :]).sum((0, 3)).double()
            self.words += int(batch.n_words.sum())

        def merge(self, other):
            self.total += other.total
            self.words += other.words

        def compute(self, info):
            grid = (self.total / self.words).numpy()
            return ProbeResult(self.name, info, {{}}, {{}}, LabelScores(self.words, grid))
''')


@pytest.fixture
def clean_registry(monkeypatch):
    """Plugins registered by a test disappear after it (built-ins are loaded first, and kept)."""
    registry.available()
    monkeypatch.setattr(registry, "_PROBES", dict(registry._PROBES))
    monkeypatch.setattr(registry, "_loaded", False)  # look at the entry points again


def _expected_root_mass(encoder, words_list):
    """Same quantity computed directly from the model's token attention, one sentence at a time."""
    total = torch.zeros(encoder.layers, encoder.heads, dtype=torch.float64)
    n = 0
    for words in words_list:
        enc = encoder.tokenizer([words], is_split_into_words=True, return_tensors="pt")
        atts = encoder.forward(enc["input_ids"], enc["attention_mask"]).attentions
        ids = enc.word_ids(0)
        for w in range(len(words)):
            rows = [t for t, i in enumerate(ids) if i == w]
            total += torch.stack([a[0, :, rows, 0].mean(-1) for a in atts]).double()
            n += 1
    return (total / n).numpy()


@pytest.mark.integration
def test_entry_point_plugin_is_registered_and_runs(tmp_path, monkeypatch, clean_registry, tiny_model):
    (tmp_path / "rootmass_plugin.py").write_text(PLUGIN.format(name="rootmass"))
    dist = tmp_path / "rootmass_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rootmass-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[probes.probes]\nrootmass = rootmass_plugin:RootMass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "rootmass" in probes.available()
    corpus = tmp_path / "c.conllu"
    corpus.write_text("1\tthe\t_\t_\t_\t_\t2\tdet\t_\t_\n2\tcat\t_\t_\t_\t_\t0\troot\t_\t_\n\n"
                      "1\tdogs\t_\t_\t_\t_\t2\tnsubj\t_\t_\n2\tbark\t_\t_\t_\t_\t0\troot\t_\t_\n3\tloudly\t_\t_\t_\t_\t2\tadvmod\t_\t_\n\n")
    encoder = probes.load_encoder(str(tiny_model("bert")))
    results = probes.run(["dep", "rootmass"], encoder=encoder, corpus=corpus)
    assert set(results) == {"dep", "rootmass"}
    got = results["rootmass"].overall
    assert got.count == 5
    np.testing.assert_allclose(got.scores, _expected_root_mass(encoder, [["the", "cat"], ["dogs", "bark", "loudly"]]),
                               rtol=1e-5)


@pytest.mark.integration
def test_code_option_registers_a_users_file(tmp_path, capsys, clean_registry, tiny_model):
    plugin = tmp_path / "my_probe.py"
    plugin.write_text(PLUGIN.format(name="mine"))
    out = tmp_path / "out"
    code = main(["run", "mine", "--code", str(plugin), "--model", str(tiny_model("bert")), "--limit", "5",
                 "--out", str(out), "--quiet", "--no-plots"])
    assert code == 0, capsys.readouterr().err
    data = json.loads((out / "mine.json").read_text())
    assert data["probe"] == "mine" and np.array(data["overall"]["scores"]).shape == (2, 4)


def test_code_file_with_syntax_error(tmp_path, capsys, clean_registry):
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\ndef broken(:\n")
    assert main(["run", "dep", "--code", str(bad)]) == 2
    assert capsys.readouterr().err.strip() == f"probes: error: {bad}:2: syntax error: invalid syntax"


def test_list_shows_builtin_probes(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[0] in probes.available()
    assert any(line.startswith("dep ") for line in out.splitlines())


def test_name_clash_is_refused(clean_registry):
    class Other(probes.Probe):
        name = "dep"

        def update(self, batch): ...

        def merge(self, other): ...

        def compute(self, info): ...

    with pytest.raises(ValueError, match="probe name 'dep' is taken"):
        probes.register(Other)
    sys.modules.pop("rootmass_plugin", None)
