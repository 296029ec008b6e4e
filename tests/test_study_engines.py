"""The study engines give the in-process engine's results: two local worker processes (spawn), and Ray
on a local two-CPU instance (skipped only where Ray cannot be imported). A unit that fails is retried once,
then reported by name (`probes study` exits 1) and nothing but the finished units is written."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import probes
from probes.cli import main
from probes.base.defaults import bundled_corpus
from tiny_models import build_tiny_model

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def study_spec(tiny_model, tmp_path_factory) -> dict:
    b = build_tiny_model("bert", tmp_path_factory.mktemp("b"), seed=1)
    return {"models": {"a": str(tiny_model("bert")), "b": str(b)}, "shards": 2,
            "settings": {"limit": 6, "batch_size": 1}, "corpora": [{"corpus": bundled_corpus(), "probes": ["dep"]}]}


@pytest.fixture(scope="module")
def in_process(study_spec, tmp_path_factory):
    return probes.study(study_spec, tmp_path_factory.mktemp("local"), plots="none", progress=False)


def same_study(done, expected) -> None:
    assert sorted(done.ran) == sorted(expected.ran) and len(done.ran) == 4
    pd.testing.assert_frame_equal(done.frame, expected.frame, check_exact=True)
    for model, results in expected.results.items():
        for probe, result in results.items():
            assert done.results[model][probe].info.sentences == result.info.sentences


@pytest.mark.slow
def test_two_local_worker_processes(study_spec, in_process, tmp_path):
    done = probes.study(study_spec, tmp_path / "out", workers=2, plots="none", progress=False)
    same_study(done, in_process)
    workers = {u["worker"] for u in done.units}
    assert len(workers) == 2  # two processes, each with its contiguous run of units
    engine = json.loads((tmp_path / "out" / "study.json").read_text())["engine"]
    assert engine == {"engine": "local", "workers": 2, "address": None}


@pytest.mark.slow
def test_ray_engine_on_a_local_instance(study_spec, in_process, tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'attention-probes[ray]')")
    done = probes.study(study_spec, tmp_path / "out", engine="ray", workers=2, plots="none", progress=False)
    same_study(done, in_process)
    assert len({u["worker"] for u in done.units}) == 2


def test_a_failing_unit_is_retried_once_then_reported_by_name(study_spec, tmp_path, capsys, monkeypatch):
    """A corpus that turns unreadable after the study was checked (here: a folder in its place) fails every
    unit of it: tried twice, named, exit 1; the other corpus' units are kept, and no results are written."""
    from probes.tools.studies import driver

    broken = tmp_path / "broken.conllu"
    broken.write_text(open(bundled_corpus(), encoding="utf-8").read(), encoding="utf-8")
    models = "\n".join(f'{k} = "{v}"' for k, v in study_spec["models"].items())
    study_file = tmp_path / "study.toml"
    study_file.write_text(f"""[models]\n{models}\n[settings]\nlimit = 4\n
[[corpora]]\ncorpus = "{bundled_corpus()}"\nprobes = ["dep"]\n
[[corpora]]\ncorpus = "{broken}"\nprobes = ["mass"]\n""", encoding="utf-8")
    planned = driver.plan_units

    def then_break(spec):
        units = planned(spec)
        broken.unlink()
        broken.mkdir()
        return units

    monkeypatch.setattr(driver, "plan_units", then_break)
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["study", str(study_file), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    for model in ("a", "b"):
        name = f"{model} × mass on broken.conllu"
        assert err.count(f"probes study: {name}: failed (will retry): ") == 1, err
        assert err.count(f"probes study: {name}: failed: ") == 1
        assert err.count(f"probes: error: unit {name} failed twice: ") == 1
    assert len(list((out / ".units").iterdir())) == 2  # the dep units, kept for the next run
    assert not (out / "study.json").exists() and not (out / "a").exists()


@pytest.mark.slow
def test_local_workers_end_with_a_killed_driver(study_spec, tmp_path):
    """`probes study --workers 2` killed with SIGKILL after its first unit: every process it started (the two
    workers, multiprocessing's helpers) ends within 10 s (the workers used to live on, about 580 MB each)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import psutil

    study_file = tmp_path / "study.toml"
    study_file.write_text("shards = 2\n[models]\n" + "".join(f'{k} = "{v}"\n' for k, v in study_spec["models"].items())
                          + f'[settings]\nlimit = 6\nbatch_size = 1\n[[corpora]]\ncorpus = "{bundled_corpus()}"\n'
                          'probes = ["dep"]\n', encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    driver = subprocess.Popen([sys.executable, "-m", "probes", "study", str(study_file), "--out", str(tmp_path / "out"),
                               "--workers", "2", "--quiet", "--no-plots"], stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(root)}, cwd=root)
    try:
        for line in driver.stderr:
            if " sentences in " in line:  # the first unit is finished
                break
        started = psutil.Process(driver.pid).children(recursive=True)
        assert len(started) >= 2  # the two workers (and multiprocessing's resource tracker)
    finally:
        driver.kill()
        driver.wait()
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, [p.pid for p in alive]
