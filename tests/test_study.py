"""Studies (probes.study): a study's results are each model's plain `probes.run`, every cell; a study run again
does no model work and rewrites nothing; adding a model or a corpus group runs only what is new; a study
killed (SIGKILL) mid-run and started again ends identical to an uninterrupted one; `probes run --model A
--model B` is a small study.

Two tiny random BERTs (tests/tiny_models.py, seeds 0 and 1) on the bundled EWT sample, one sentence a batch
(as tests/test_shards.py: batches then hold the same sentences sharded or not, so the float32 maps are the
same; the merged float64 sums may differ by rounding, 1e-15 relative).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import probes
from probe_corpora import excerpt
from probes.cli import main
from probes.base.defaults import bundled_corpus
from probes.capture.model import Encoder
from probes.tools.studies.units import UNITS_FOLDER
from tiny_models import build_tiny_model

pytestmark = pytest.mark.integration

LIMIT = 6


@pytest.fixture(scope="module")
def models(tiny_model, tmp_path_factory):
    """name -> checkpoint folder: two tiny BERTs of one shape and tokenizer, other weights."""
    return {"a": str(tiny_model("bert")), "b": str(build_tiny_model("bert", tmp_path_factory.mktemp("b"), seed=1))}


@pytest.fixture(scope="module")
def second_corpus(tmp_path_factory) -> str:
    """Another corpus file: the first 6 sentences of the bundled sample."""
    return str(excerpt(Path(bundled_corpus()), 6, tmp_path_factory.mktemp("c") / "six.conllu"))


def spec(models: dict[str, str], groups: list[dict], shards: int = 2) -> dict:
    return {"models": models, "shards": shards, "settings": {"limit": LIMIT, "batch_size": 1},
            "probes": {"dep": {"subtypes": True}}, "corpora": groups}


def dep_pos() -> dict:
    return {"corpus": bundled_corpus(), "probes": ["dep", "pos"]}


def mass(corpus: str) -> dict:
    return {"corpus": corpus, "probes": ["mass"], "shards": 1}


def cells(result) -> dict:
    """Every number a result reports, with its counts: per label and overall, each [L,H] grid; the baselines."""
    out = {"sentences": result.info.sentences, "skipped": result.info.skipped, "options": result.options,
           "baselines": json.loads(json.dumps(result.baselines))}
    for name, entry in [*result.labels.items(), ("overall", result.overall)]:
        out[name] = {"count": entry.count, "scores": entry.scores, **entry.extra}
    return out


def assert_same(a, b, where: str = "") -> None:
    """Equal structure and counts; floats to float64 rounding (rtol 1e-12)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (where, set(a) ^ set(b))
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, np.ndarray) or isinstance(a, float):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15, equal_nan=True, err_msg=where)
    else:
        assert a == b, (where, a, b)


def mtimes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


class Forwards:
    """Counts the model's forward passes (Encoder.layerwise calls) in this process."""

    def __init__(self, monkeypatch):
        self.calls = 0
        original = Encoder.layerwise

        def counted(encoder, *args, **kwargs):
            self.calls += 1
            return original(encoder, *args, **kwargs)

        monkeypatch.setattr(Encoder, "layerwise", counted)


@pytest.mark.slow
def test_study_equals_plain_runs_and_a_second_run_does_nothing(models, second_corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    done = probes.study(spec(models, [dep_pos(), mass(second_corpus)]), out, plots="none", progress=False)
    assert len(done.ran) == 2 * (2 + 1) and done.reference == "a"
    for name, path in models.items():
        plain = probes.run(["dep", "pos"], model=path, limit=LIMIT, batch_size=1, subtypes=True, progress=False)
        plain.update(probes.run(["mass"], model=path, corpus=second_corpus, limit=LIMIT, batch_size=1, progress=False))
        for probe, expected in plain.items():
            got = done.results[name][probe]
            assert got.info.sentences > 0 and got.info.model == path
            assert_same(cells(expected), cells(got), f"{name}/{probe}")
            assert_same(cells(expected), cells(probes.load_result(out / name / f"{probe}.json")), f"{name}/{probe} file")
            rows = done.frame[(done.frame.model == name) & (done.frame.probe == probe)]
            for label, entry in [*expected.labels.items(), ("overall", expected.overall)]:
                mine = rows[rows.label == label].sort_values(["layer", "head"])
                np.testing.assert_allclose(mine.score.to_numpy().reshape(entry.scores.shape), entry.scores,
                                           rtol=1e-12, equal_nan=True)
                assert set(mine["count"]) == {entry.count}
        # the unsharded group keeps the run's per-sentence views; the sharded one has none (not additive)
        assert done.results[name]["mass"].extra["sentence_views"] == json.loads(json.dumps(
            plain["mass"].extra["sentence_views"]))
        assert "sentence_views" not in done.results[name]["dep"].extra
    # the study figure's scores are what every other view shows of each label (ProbeResult.reported), none where
    # the result names no head
    from probes.tools.studies.outputs import named_scores

    top = named_scores(done.results, ["a", "b"])
    for model, results in done.results.items():
        for probe, result in results.items():
            for label in [*result.labels, "overall"]:
                shown = result.reported(label)
                want = shown.score if shown.found else float("nan")
                assert top.loc[(probe, label), model] == pytest.approx(want, rel=1e-12, nan_ok=True), (model, label)
    # the tidy table on disk: parquet and CSV, the same rows as the frame
    table = pd.read_parquet(out / "study.parquet")
    assert list(table.columns) == ["model", "probe", "label", "layer", "head", "score", "count"]
    pd.testing.assert_frame_equal(table, done.frame)
    pd.testing.assert_frame_equal(pd.read_csv(out / "study.csv"), done.frame, check_exact=False, rtol=1e-15)
    # the reference (a) against b, with paired intervals: the plain comparison of the two models' results
    from probes.tools.compare.results_diff import compare_results

    changes = pd.read_csv(out / "study-deltas.csv")
    assert set(changes.model) == {"b"} and set(changes.probe) == {"dep", "pos", "mass"}
    expected = compare_results(done.results["a"], done.results["b"]).to_frame()
    pd.testing.assert_frame_equal(changes.drop(columns="model")[["probe", "label", "delta_best", "delta_low", "delta_high"]],
                                  expected[["probe", "label", "delta_best", "delta_low", "delta_high"]],
                                  check_exact=False, rtol=1e-12)
    record = json.loads((out / "study.json").read_text())
    assert record["timings"]["units_run"] == 6 and {u["status"] for u in record["units"]} == {"ran"}
    assert all(u["seconds"] > 0 and u["worker"] for u in record["units"])

    before = mtimes(out)
    forwards = Forwards(monkeypatch)
    again = probes.study(spec(models, [dep_pos(), mass(second_corpus)]), out, plots="none", progress=False)
    assert forwards.calls == 0 and again.ran == [] and again.written == []
    assert mtimes(out) == before
    pd.testing.assert_frame_equal(again.frame, done.frame)

    # a new model runs only its own units; the others' results stay untouched
    models3 = {**models, "c": str(build_tiny_model("bert", tmp_path / "c", seed=2))}
    grown = probes.study(spec(models3, [dep_pos(), mass(second_corpus)]), out, plots="none", progress=False)
    assert len(grown.ran) == 3 and all(u.startswith("c × ") for u in grown.ran)
    after = mtimes(out)
    assert all(after[f] == before[f] for f in before if f.startswith(("a/", "b/", UNITS_FOLDER)))
    assert after["study.parquet"] != before["study.parquet"] and set(grown.frame.model) == {"a", "b", "c"}
    assert forwards.calls > 0

    # a new corpus group (a new probe): its units for every model, nothing else
    forwards.calls = 0
    more = probes.study(spec(models3, [dep_pos(), mass(second_corpus), {"corpus": second_corpus, "probes": ["rare"]}]),
                        out, plots="none", progress=False)
    assert sorted(more.ran) == sorted(f"{m} × rare on six.conllu shard {i}/2" for m in models3 for i in range(2))
    assert all(mtimes(out)[f] == after[f] for f in after if f.endswith(("dep.json", "mass.json")))


def write_toml(path: Path, models: dict[str, str], shards: int) -> Path:
    table = "\n".join(f'{k} = "{v}"' for k, v in models.items())
    path.write_text(f"""shards = {shards}
[models]
{table}
[settings]
limit = {LIMIT}
batch_size = 1
[[corpora]]
corpus = "{bundled_corpus()}"
probes = ["dep", "mass"]
""", encoding="utf-8")
    return path


@pytest.mark.slow
def test_killed_study_resumes_to_the_uninterrupted_results(models, tmp_path):
    """SIGKILL the `probes study` process once some units are finished (not all), start it again: the results
    equal an uninterrupted run's, number for number."""
    study_file = write_toml(tmp_path / "study.toml", models, shards=4)
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(probes.__file__).parents[1]),
                                                        os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([sys.executable, "-m", "probes", "study", str(study_file), "--out", str(out),
                                "--no-plots", "--quiet"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    units = out / UNITS_FOLDER
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if units.is_dir() and len([p for p in units.iterdir() if not p.name.startswith(".")]) >= 2:
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = [p for p in units.iterdir() if not p.name.startswith(".")]
    assert process.returncode == -signal.SIGKILL, process.stderr.read().decode()
    assert 2 <= len(finished) < 8 and not (out / "study.json").exists()

    resumed = probes.study(study_file, out, plots="none", progress=False)
    assert len(resumed.ran) == 8 - len(finished)
    whole = probes.study(study_file, tmp_path / "whole", plots="none", progress=False)
    assert len(whole.ran) == 8
    pd.testing.assert_frame_equal(resumed.frame, whole.frame, check_exact=True)
    for name in models:
        for probe in ("dep", "mass"):
            assert_same(cells(whole.results[name][probe]), cells(resumed.results[name][probe]), f"{name}/{probe}")


@pytest.mark.slow
def test_run_with_several_models_is_a_small_study(models, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "dep", "--model", models["a"], "--model", models["b"], "--limit", "6", "--out", str(out),
                 "--no-plots", "--quiet"]) == 0
    written = capsys.readouterr().out  # with --out too, each model's table under its name, then where it went
    assert written.count("== ") == 2 and written.count(f"dep in {out}") == 2
    folders = sorted(p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(folders) == 2 and folders[0] != folders[1]  # one folder per model, named by a short model name
    for folder, path in zip(sorted(folders, key=lambda f: [models["a"], models["b"]].index(
            json.loads((out / f / "dep.json").read_text())["model"])), [models["a"], models["b"]]):
        probes.run(["dep"], model=path, limit=6, progress=False)["dep"].save(tmp_path / folder)
        saved, expected = (json.loads((where / folder / "dep.json").read_text()) for where in (out, tmp_path))
        for data in (saved, expected):
            data.pop("provenance")
            data["settings"].pop("max_tokens")  # the default token budget follows the free memory
        assert saved == expected  # every cell, count and the per-sentence views, as `probes run` writes them
    # without --out: each model's table printed under its name
    assert main(["run", "dep", "--model", models["a"], "--model", models["b"], "--limit", "6", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("== ") == 2 and "nsubj" in printed


def test_run_with_several_models_refuses_shards(models, tmp_path, capsys):
    state = tmp_path / "state"
    assert main(["run", "dep", "--model", models["a"], "--model", models["b"], "--shard", "0/2", "--state",
                 str(state)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--shard and --state take one --model" in err
    assert not state.exists()


def test_report_of_a_study_folder_shows_every_model(models, tmp_path):
    """`probes report OUT` on the folder `probes study` wrote (study.json, the tidy tables, .units, one folder per
    model): one model on the page per model of the study, in the study's order, each with its probes."""
    study_file = write_toml(tmp_path / "study.toml", {"b": models["b"], "a": models["a"]}, shards=1)
    out = tmp_path / "out"
    assert main(["study", str(study_file), "--out", str(out), "--no-plots", "--quiet"]) == 0
    assert (out / "study.json").is_file() and (out / UNITS_FOLDER).is_dir()
    page = tmp_path / "report.html"
    assert main(["report", str(out), "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    payload = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)[1])
    assert [Path(m["path"]).name for m in payload["models"]] == ["b", "a"]
    assert [m["model"] for m in payload["models"]] == [models["b"], models["a"]]
    for model in payload["models"]:
        assert set(model["probes"]) == {"dep", "mass"}
        saved = json.loads((Path(model["path"]) / "dep.json").read_text())
        assert model["probes"]["dep"]["overall"]["scores"] == saved["overall"]["scores"]
