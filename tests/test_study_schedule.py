"""How the study engines hand units to their workers (probes.tools.studies.engines.Schedule) and how many torch threads
each worker runs: 1/N of the cores for N local processes or N actors on a local Ray instance, all of them for
one, recorded per unit in unit.json and study.json."""
from __future__ import annotations

import json
import os

import pytest

import probes
from probes.base.defaults import bundled_corpus
from probes.tools.studies import StudyFailed
from probes.tools.studies.engines import Schedule
from probes.tools.studies.spec import Group, Model
from probes.tools.studies.units import Unit


def units(plan: str) -> list[Unit]:
    """One unit per letter, the letter naming its model ("AAB": two units of model A, one of B)."""
    group = Group("g", ("dep",), ("c.conllu",), {}, {}, 1)
    return [Unit(Model(m, f"/models/{m}"), group, 0, 0, f"{m}{i}") for i, m in enumerate(plan)]


def handed(schedule: Schedule, order: list[int]) -> list[str | None]:
    """The keys handed to the workers asking in `order` (None: nothing left for it)."""
    return [getattr(schedule.next(w), "key", None) for w in order]


def test_each_worker_starts_on_its_contiguous_run():
    schedule = Schedule(units("AAABBB"), 2)
    assert schedule.workers == 2
    assert handed(schedule, [0, 1, 0, 1, 0, 1, 0, 1]) == ["A0", "B3", "A1", "B4", "A2", "B5", None, None]
    assert schedule.left() == []


def test_a_worker_done_early_takes_the_last_waiting_unit_of_the_longest_run():
    schedule = Schedule(units("AAABBB"), 2)
    # worker 1 is slow on B3: worker 0 finishes its run, then takes B5 (the end of worker 1's run), then B4
    assert handed(schedule, [0, 1, 0, 0, 0, 0]) == ["A0", "B3", "A1", "A2", "B5", "B4"]
    assert handed(schedule, [1, 0]) == [None, None]


def test_a_worker_done_early_takes_a_unit_of_the_model_it_holds_first():
    schedule = Schedule(units("AAABBB"), 3)  # runs AA, AB, BB
    assert handed(schedule, [0, 1, 2, 2]) == ["A0", "A2", "B4", "B5"]
    # worker 2 holds B: of the waiting A1 (worker 0's) and B3 (worker 1's), both last of runs as long, it takes B3
    assert [u.key for u in schedule.left()] == ["A1", "B3"]
    assert handed(schedule, [2, 0, 1]) == ["B3", "A1", None]


def test_fewer_units_than_workers():
    schedule = Schedule(units("AB"), 4)
    assert schedule.workers == 2
    assert handed(schedule, [0, 1, 0, 1]) == ["A0", "B1", None, None]


@pytest.fixture(scope="module")
def study_spec(tiny_model, tmp_path_factory) -> dict:
    from tiny_models import build_tiny_model

    b = build_tiny_model("bert", tmp_path_factory.mktemp("b"), seed=1)
    return {"models": {"a": str(tiny_model("bert")), "b": str(b)}, "settings": {"limit": 4, "batch_size": 2},
            "corpora": [{"corpus": bundled_corpus(), "probes": ["dep"]}]}


def recorded_threads(out) -> list[int]:
    return [u["threads"] for u in json.loads((out / "study.json").read_text())["units"]]


@pytest.mark.slow
@pytest.mark.integration
def test_one_ray_actor_on_a_local_instance_runs_every_core(study_spec, tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'attention-probes[ray]')")
    done = probes.study(study_spec, tmp_path / "out", engine="ray", workers=1, plots="none", progress=False)
    assert len(done.ran) == 2 and len({u["worker"] for u in done.units}) == 1
    assert recorded_threads(tmp_path / "out") == [os.cpu_count()] * 2  # Ray alone would give its actor one


@pytest.mark.slow
@pytest.mark.integration
def test_local_worker_processes_share_the_cores(study_spec, tmp_path):
    done = probes.study(study_spec, tmp_path / "out", workers=2, plots="none", progress=False)
    assert len({u["worker"] for u in done.units}) == 2
    assert recorded_threads(tmp_path / "out") == [max(1, os.cpu_count() // 2)] * 2
    for unit in done.units:
        record = json.loads((tmp_path / "out" / ".units" / unit["key"] / "unit.json").read_text())
        assert record["threads"] == unit["threads"]


CRASH = '''
import os
import probes


@probes.register
class Crash(probes.Probe):
    """Kills the process that scores it (a worker dying mid-unit)."""
    name = "crash-worker"
    description = "exits its process on the first batch (a test of the study engines)"

    def update(self, batch, maps):
        os._exit(3)

    def compute(self, info):
        raise AssertionError("never reached")
'''


@pytest.mark.integration
@pytest.mark.parametrize("engine, death", [pytest.param("ray", "ActorDiedError", marks=pytest.mark.slow),
                                           ("local", "worker process died (exit code 3)")])
def test_a_dead_worker_loses_only_the_unit_it_was_running(tiny_model, tmp_path, engine, death):
    """Units crash, dep, mass on 2 workers (Ray actors, local processes): runs [crash, dep] and [mass]. The first
    worker dies on crash; dep, waiting in its run, is taken over by the other worker and finishes in the first
    round; crash fails twice."""
    if engine == "ray":
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'attention-probes[ray]')")
    from probes.settings import registry

    registry.available()
    with registry.PROBES.scoped():  # the plugin is gone after the test
        _run_crashing_study(tiny_model, tmp_path, engine, death)


def _run_crashing_study(tiny_model, tmp_path, engine, death):
    code = tmp_path / "crash.py"
    code.write_text(CRASH, encoding="utf-8")
    spec = {"models": {"a": str(tiny_model("bert"))}, "settings": {"limit": 3, "batch_size": 2}, "code": str(code),
            "corpora": [{"corpus": bundled_corpus(), "probes": [name], "name": name}
                        for name in ("crash-worker", "dep", "mass")]}
    with pytest.raises(StudyFailed) as failed:
        probes.study(spec, tmp_path / "out", engine=engine, workers=2, plots="none", progress=False)
    assert list(failed.value.failures) == ["a × crash-worker on crash-worker"]
    assert death in failed.value.failures["a × crash-worker on crash-worker"]
    records = [json.loads(p.read_text()) for p in (tmp_path / "out" / ".units").glob("*/unit.json")]
    assert sorted((r["corpus"], r["attempts"]) for r in records) == [("dep", 1), ("mass", 1)]
    assert len({r["worker"] for r in records}) == 1  # both on the worker that lived


@pytest.mark.integration
def test_local_workers_stop_when_the_driver_stops_early(study_spec):
    """The driver leaving after its first outcome (an error while saving it, ^C) closes the engine: each worker
    process finishes its unit, is told to stop and the pool closes, rather than waiting for units forever."""
    import threading

    from probes.tools.studies.engines import execute
    from probes.tools.studies.spec import read_study
    from probes.tools.studies.units import plan_units

    spec = read_study({**study_spec, "corpora": [*study_spec["corpora"], {"corpus": bundled_corpus(), "probes": ["mass"]}]})
    outcomes = execute(plan_units(spec), "local", 2)
    first = next(outcomes)
    assert first.files is not None
    closing = threading.Thread(target=outcomes.close, daemon=True)
    closing.start()
    closing.join(timeout=120)
    assert not closing.is_alive()
