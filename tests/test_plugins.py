"""Third-party probes: the entry-point group `probes.probes` and `--code file.py`."""
from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest
import torch

import probes
from probes.settings import registry
from probes.cli import main

PLUGIN = textwrap.dedent('''
    import torch
    import probes
    from probes.results.probe_result import LabelScores, ProbeResult


    @probes.register
    class RootMass(probes.Probe):
        """Mean attention weight from a word to the root column ([CLS]), per head."""
        name = "{name}"
        description = "mean attention from words to [CLS] (a plugin)"

        def __init__(self, layers, heads, **options):
            super().__init__(layers, heads, **options)
            self.add_state("total", torch.zeros(layers, heads, dtype=torch.float64))  # [L,H]
            self.add_state("words", torch.zeros((), dtype=torch.int64))

        def update(self, batch, maps):
            to_root = maps.word_attention[..., 0]  # [B,H,C]
            self.total[maps.layer] += (to_root * batch.word_columns[:, None, :]).sum((0, 2)).double()
            if maps.layer == 0:
                self.words += int(batch.n_words.sum())

        def compute(self, info):
            grid = (self.total / self.words).numpy()
            return ProbeResult(self.name, info, {{}}, {{}}, LabelScores(int(self.words), grid))
''')


@pytest.fixture
def clean_registry():
    """Plugins registered by a test disappear after it (built-ins are loaded first, and kept); the entry points
    are looked at again within it."""
    registry.available()
    with registry.PROBES.scoped():
        yield


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

        def update(self, batch, maps): ...

        def compute(self, info): ...

    with pytest.raises(ValueError, match="probe name 'dep' is taken"):
        probes.register(Other)
    sys.modules.pop("rootmass_plugin", None)


OPTION_PLUGIN = textwrap.dedent('''
    import probes
    from probes.scoring.probe import Option


    @probes.register
    class WithOption(probes.Probe):
        name = "{name}"
        description = "a plugin with one option"
        options = (Option({option!r}, {default!r}, "an option", {type}),)

        def update(self, batch, maps): ...

        def compute(self, info): ...
''')


def _plugin(tmp_path, name, option, default, type_="int"):
    path = tmp_path / f"{name}.py"
    path.write_text(OPTION_PLUGIN.format(name=name, option=option, default=default, type=type_))
    return path


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def test_option_named_like_a_run_argument_is_refused(tmp_path, capsys, clean_registry):
    """A --code plugin with an option `limit` used to crash even `probes list` (argparse: conflicting --limit)."""
    plugin = _plugin(tmp_path, "lim", "limit", 5)
    err = _one_line_error(capsys, ["list", "--code", str(plugin)])
    assert err == (f"probes: error: {plugin}:6: probe 'lim': option 'limit' is an argument of probes.run itself; "
                   "give the option another name")
    assert "lim" not in registry.PROBES.registered()


@pytest.mark.parametrize("option, command", [("out", "run"), ("quiet", "run"), ("mode", "ablate"),
                                             ("random_seed", "ablate"), ("help", "run")])
def test_option_named_like_a_cli_flag_is_refused(tmp_path, capsys, clean_registry, option, command):
    plugin = _plugin(tmp_path, "clash", option, 1)
    err = _one_line_error(capsys, ["list", "--code", str(plugin)])
    flag = "--" + option.replace("_", "-")
    assert err == (f"probes: error: {plugin}:6: probe 'clash': option {option!r} clashes with `probes {command}`'s "
                   f"own {flag}; give the option another name")


def test_shared_option_must_agree(tmp_path, capsys, clean_registry):
    """head_distance and word_order share `seed` (int, default 0); a plugin may share it only as it is."""
    plugin = _plugin(tmp_path, "seeded", "seed", 1)
    err = _one_line_error(capsys, ["list", "--code", str(plugin)])
    assert err == (f"probes: error: {plugin}:6: probe 'seeded': option 'seed' is also an option of probe "
                   "'head_distance' with another type, default or choices (int, default 0 there, int, default 1 "
                   "here); a shared option needs the same, or another name")
    same = _plugin(tmp_path, "sameseed", "seed", 0)
    assert main(["list", "--code", str(same)]) == 0
    assert any(line.split()[0] == "sameseed" for line in capsys.readouterr().out.splitlines())
    with pytest.raises(SystemExit):
        main(["run", "--help", "--code", str(same)])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "head_distance, sameseed, word_order options: --seed N " in help_text  # one section for the three


def test_list_accepts_code(tmp_path, capsys, clean_registry):
    plugin = tmp_path / "listed.py"
    plugin.write_text(PLUGIN.format(name="listed"))
    assert main(["list", "--code", str(plugin)]) == 0
    lines = [line.split(None, 1) for line in capsys.readouterr().out.splitlines()]
    assert ["listed", "mean attention from words to [CLS] (a plugin)"] in lines


@pytest.mark.parametrize("command", ["run", "ablate"])
def test_help_shows_no_internal_names(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    help_text = " ".join(text.split())
    assert "OPT_" not in text and "(default )" not in text and "(default None)" not in text
    assert "frames options: --max-sentence-words N " in help_text and "--max-fe-words N use frame" in help_text
    assert "(default 3)" in help_text and "--documents TEXT FrameNet" in help_text
    assert "rare options: --frequencies TEXT word" in help_text and "pos options: --tagset {upos,xpos} pos" in help_text
    assert text.count("\n  --seed N ") == 1  # head_distance and word_order
    assert "head_distance, word_order options: --seed N " in help_text  # share it: one flag, in one section


def test_ablate_passes_pool_beside_the_probe_options(monkeypatch):
    """--pool goes to ablate() in its RunSettings, as probes.run's pooling rule; the probe options are only the
    probes' own."""
    import probes.tools.ablation.sweep

    seen = {}

    def fake_ablate(target, **kwargs):
        seen.update(kwargs)
        raise probes.InputError("stop here")

    monkeypatch.setattr(probes.tools.ablation.sweep, "ablate", fake_ablate)
    assert main(["ablate", "dep", "--pool", "first-sum", "--subtypes", "--max-fe-words", "3"]) == 2
    assert seen["settings"].pool == "first-sum" and seen["subtypes"] is True and seen["max_fe_words"] == 3
    assert seen["settings"].changed() == {"pool"} and not any(key.startswith(("opt_", "set_")) for key in seen)


def test_a_plugin_presents_its_own_results(tmp_path, capsys, clean_registry):
    """`probes show` asks the probe class for the lines below the table; without the plugin's code, none."""
    from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

    plugin = tmp_path / "shown.py"
    plugin.write_text(PLUGIN.format(name="shown") + textwrap.dedent('''
        @classmethod
        def details(cls, result, head=None, sentences=3):
            return f"words seen: {result.overall.count}; head {head}"

        RootMass.details = details
    '''))
    info = RunInfo("m", ["c.conllu"], 1, 2, 3, {}, {}, {})
    ProbeResult("shown", info, {}, {}, LabelScores(7, np.array([[0.25, 0.5]]))).save(tmp_path / "r")
    assert main(["show", str(tmp_path / "r" / "shown.json")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("overall")
    assert main(["show", str(tmp_path / "r" / "shown.json"), "--head", "L0-H1", "--code", str(plugin)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "words seen: 7; head (0, 1)"
