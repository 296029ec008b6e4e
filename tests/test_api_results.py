"""Python API and the results files: schema, CSV, heatmaps, `probes show`, atomic writes."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import probes
from probes.cli import main
from probes.results.figures import save_result
from probes.base.files import write_atomic
from probes.results.probe_result import load_result

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny_result(tiny_model):
    encoder = probes.load_encoder(str(tiny_model("bert")))
    return probes.run(["dep"], encoder=encoder, limit=40, batch_size=8)["dep"]


def test_api_result_object(tiny_result):
    r = tiny_result
    assert set(r.scores) == set(r.labels) | {"overall"}
    assert r.scores["overall"].shape == (2, 4)
    best = r.best("det")
    assert best.score == np.nanmax(r.labels["det"].scores) and best.count == r.labels["det"].count
    with pytest.raises(KeyError, match="no label 'nosuch'"):
        r.best("nosuch")
    frame = r.to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == ["label", "layer", "head", "count", "score", "ci_low", "ci_high", "dep_to_head",
                                   "head_to_dep"]
    assert len(frame) == (len(r.labels) + 1) * 2 * 4
    row = frame[(frame["label"] == "det") & (frame["layer"] == 1) & (frame["head"] == 3)].iloc[0]
    assert row.score == r.labels["det"].scores[1, 3] and row.head_to_dep == r.labels["det"].extra["head_to_dep"][1, 3]


def test_json_follows_the_design_schema(tiny_result, tmp_path):
    written = save_result(tiny_result, tmp_path)
    data = json.loads((tmp_path / "dep.json").read_text())
    for key in ("probe", "model", "corpus", "layers", "heads", "sentences", "skipped", "options", "labels", "overall",
                "baselines", "version"):
        assert key in data
    assert data["probe"] == "dep" and data["layers"] == 2 and data["heads"] == 4
    assert isinstance(data["corpus"], list) and data["corpus"][0].endswith("en_ewt-ud-dev-sample.conllu")
    det = data["labels"]["det"]
    assert det["count"] == tiny_result.labels["det"].count
    assert len(det["scores"]) == 2 and len(det["scores"][0]) == 4  # [L][H], 0-indexed
    assert data["baselines"]["offsets"] == [-3, -2, -1, 1, 2, 3]
    assert data["sentences"] + data["skipped"] == 40
    assert data["provenance"]["transformers"].startswith("5.")
    assert len(data["provenance"]["corpus_sha256"][data["corpus"][0]]) == 64
    assert {p.name for p in written} == {"dep.json", "dep.csv", "dep.png"}
    assert (tmp_path / "dep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    csv = pd.read_csv(tmp_path / "dep.csv")
    assert len(csv) == len(tiny_result.to_frame())
    assert not list(tmp_path.glob(".*tmp"))  # no temporary files left behind


def test_round_trip_and_show(tiny_result, tmp_path, capsys):
    tiny_result.save(tmp_path)
    back = load_result(tmp_path / "dep.json")
    for label, entry in tiny_result.labels.items():  # full precision: the very same floats
        np.testing.assert_array_equal(back.labels[label].scores, entry.scores)
        for name, grid in entry.extra.items():
            np.testing.assert_array_equal(back.labels[label].extra[name], grid)
    assert main(["show", str(tmp_path / "dep.json"), "--top", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    lines = lines[:lines.index("")]  # the table; the best head's per-sentence view follows
    top = [name for name, _ in tiny_result.by_count()][:3]
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))  # the table's body follows its rule
    assert [line.split()[0] for line in lines[rule + 1:rule + 4]] == top and lines[rule + 4].startswith("overall")
    rare = [name for name, entry in tiny_result.labels.items() if entry.count < 20]
    assert f"{len(rare)} labels below the minimum count (20 instances) not shown; --all-labels shows them" in lines[rule + 5:]
    best = tiny_result.best(top[0])
    assert f"L{best.layer}-H{best.head}" in lines[rule + 1]
    base = tiny_result.baselines["labels"][top[0]]
    assert f"offset {base['best_offset']:+d}" in lines[rule + 1]


def test_show_bad_file(tmp_path, capsys):
    f = tmp_path / "dep.json"
    f.write_text("{not json")
    assert main(["show", str(f)]) == 2
    assert capsys.readouterr().err.strip() == f"probes: error: {f}:1: not valid JSON: Expecting property name enclosed in double quotes"


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    target.write_text("old")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr("probes.base.files.os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, b"new")
    assert target.read_text() == "old" and list(tmp_path.iterdir()) == [target]


def test_progress_bar_or_lines_unless_told_not_to(tmp_path, capsys, tiny_model):
    encoder = probes.load_encoder(str(tiny_model("bert")))
    probes.run(["dep"], encoder=encoder, limit=10, progress=True)
    assert "probing" in capsys.readouterr().err
    probes.run(["dep"], encoder=encoder, limit=10)  # stderr is not a terminal under pytest: progress lines
    assert capsys.readouterr().err.startswith("probing: ")
    probes.run(["dep"], encoder=encoder, limit=10, progress=False)
    assert capsys.readouterr().err == ""


def test_unknown_option(tiny_model):
    with pytest.raises(probes.InputError, match="no selected probe has an option 'nosuch'"):
        probes.run(["dep"], model=str(tiny_model("bert")), nosuch=1)


def test_csv_is_written_without_pandas_as_pandas_writes_it(tiny_result):
    """The CSV is the `Table` (no pandas import in a run): byte for byte what ``to_frame().to_csv`` gives, here
    on a real result and on cells pandas treats apart (a label with a comma and a quote, NaN and None, ints)."""
    from probes.base.files import Table

    assert tiny_result.to_table().to_csv() == tiny_result.to_frame().to_csv(index=False)
    rows = [['say "x", then y', 0, 1, 12, 0.1, float("nan"), None], ["plain", 1, 0, 3, 1 / 3, 2.5e-17, 1.0]]
    columns = ["label", "layer", "head", "count", "score", "ci_low", "extra"]
    written = Table(columns, rows).to_csv()
    assert written == pd.DataFrame(rows, columns=columns).to_csv(index=False)
    assert written.splitlines()[1] == '"say ""x"", then y",0,1,12,0.1,,'
