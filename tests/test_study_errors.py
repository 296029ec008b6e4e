"""Bad study files: `probes study` exits 2 with one line naming the file, the line of the offending key
(found in the text: tomllib gives no positions) and its key path, and writes nothing. Checked before any
model is loaded."""
from __future__ import annotations

import pytest

from probes.cli import main
from probes.base.defaults import bundled_corpus
from probes.tools.studies import read_study
from probes.tools.studies.engines import chunks

GOOD = """\
shards = 2
[models]
a = "{model}"
[settings]
limit = 4
[probes.dep]
subtypes = true
[[corpora]]
corpus = "{corpus}"
probes = ["dep"]
"""


def study_file(tmp_path, text: str, model: str) -> str:
    path = tmp_path / "study.toml"
    path.write_text(text.format(model=model, corpus=bundled_corpus()), encoding="utf-8")
    return str(path)


CASES = {  # name -> (the study file's text, the line expected in the message, what the message says)
    "unknown top-level key": (GOOD.replace("shards = 2", "shards = 2\nshard = 3"), 2, "unknown key 'shard'"),
    "unknown key in a corpus": (GOOD + 'fit_onn = "same"\n', 11, "corpora[0].fit_onn: unknown key 'fit_onn'"),
    "unknown setting": (GOOD.replace("limit = 4", "limit = 4\nbatchsize = 2"), 6, "settings.batchsize: unknown key"),
    "missing model": (GOOD.replace('a = "{model}"', 'a = "no/such/folder/x"'), 3, "model path does not exist"),
    "option of the wrong type": (GOOD.replace("subtypes = true", 'subtypes = "maybe"'), 7,
                                 "probes.dep.subtypes: probe 'dep' option 'subtypes' takes true or false"),
    "unknown option": (GOOD.replace("subtypes = true", "subtype = true"), 7, "probe 'dep' has no option 'subtype'"),
    "unknown probe": (GOOD.replace('probes = ["dep"]', 'probes = ["dep", "depp"]'), 10, "unknown probe 'depp'"),
    "unknown probe's options": (GOOD.replace("[probes.dep]", "[probes.depp]"), 6, "unknown probe 'depp'"),
    "empty model list": (GOOD.replace('[models]\na = "{model}"', "models = []"), 2, "the model list is empty"),
    "no models": (GOOD.replace('[models]\na = "{model}"', ""), None, "no models"),
    "setting of the wrong type": (GOOD.replace("limit = 4", 'limit = "4"'), 5, "settings.limit: must be int"),
    "missing corpus": (GOOD.replace('corpus = "{corpus}"', 'corpus = "nowhere.conllu"'), 9, "file not found"),
    "probe in two corpora": (GOOD + '[[corpora]]\ncorpus = "{corpus}"\nprobes = ["dep"]\n', 13,
                             "probe 'dep' is already scored on corpora[0]"),
    "fit for a probe without one": (GOOD + 'fit = "{corpus}"\n', 8, "no selected probe fits anything"),
    "bad shards": (GOOD.replace("shards = 2", "shards = 0"), 1, "shards: must be a whole number ≥ 1"),
    "reference not a model": (GOOD.replace("shards = 2", 'shards = 2\nreference = "b"'), 2,
                              "reference: 'b' is none of the models"),
    "not TOML": (GOOD.replace("limit = 4", "limit = = 4"), 5, "not valid TOML"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_study_file_exits_2_with_one_line(case, tmp_path, tiny_model, capsys):
    text, line, expected = CASES[case]
    path = study_file(tmp_path, text, str(tiny_model("bert")))
    out = tmp_path / "out"
    capsys.readouterr()  # what building the model printed
    assert main(["study", path, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"probes: error: {path}{f':{line}:' if line else ':'} "), err
    assert expected in err, err
    assert not out.exists()


def test_the_good_file_is_read(tmp_path, tiny_model):
    spec = read_study(study_file(tmp_path, GOOD, str(tiny_model("bert"))))
    assert [m.name for m in spec.models] == ["a"] and spec.reference == "a"
    (group,) = spec.groups
    assert (group.probes, group.shards, group.options, group.settings) == (("dep",), 2, {"subtypes": True}, {"limit": 4})


def test_bad_engine_settings(tmp_path, tiny_model, capsys):
    path = study_file(tmp_path, GOOD, str(tiny_model("bert")))
    capsys.readouterr()
    for argv, expected in ((["--workers", "0"], "workers must be a whole number ≥ 1"),
                           (["--address", "auto"], "--address joins a Ray cluster: give --engine ray too")):
        assert main(["study", path, "--out", str(tmp_path / "out"), *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "out").exists()


def test_chunks_are_contiguous_and_cover_the_units():
    units = list(range(7))
    assert chunks(units, 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert chunks(units, 10) == [[u] for u in units]
    assert chunks(units, 1) == [units]
