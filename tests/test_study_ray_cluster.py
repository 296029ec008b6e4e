"""`probes study --engine ray` on a real Ray cluster started here: a head and a second node on this machine (each
with its own ports and temporary folder, token authentication), every Ray process killed at the end. A study
joins it and gives the local engine's results even when the second node's raylet is killed mid-study; a
cluster with fewer CPUs than --workers runs what it holds; a worker that cannot be placed stops the study with
one line; every failure to join is one line naming the address and the fix, exit 2, well within 60 s.

Select with `pytest -m ray_cluster`; skipped where Ray is not installed."""
from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

import probes
from probes.base.defaults import bundled_corpus
from tiny_models import build_tiny_model

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'attention-probes[ray]')")
pytestmark = [pytest.mark.integration, pytest.mark.ray_cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).with_name("ray")
JOIN_BOUND = 60.0  # seconds a failed join may take, start of the CLI included


def free_ports(n: int) -> list[int]:
    """n ports nothing listens on now (held together while chosen, so distinct)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class Cluster:
    """Ray nodes started with `ray start` under one temporary folder; `stop` kills every process of theirs."""

    def __init__(self, root: Path):
        self.root, self.port = root, free_ports(1)[0]
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                    "RAY_TMPDIR": str(root), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                    "TOKENIZERS_PARALLELISM": "false", "PROBES_RAY_PLACEMENT_S": "10"}
        self.env.pop("RAY_ADDRESS", None)

    def start(self, name: str, cpus: int) -> str:
        """Start node `name` (the first one: the head) with `cpus` CPUs; its node id."""
        # every port of the node drawn at once and none the head's: two draws can return one port twice
        node, agent, grpc, runtime, metrics, objects, *workers = [p for p in free_ports(23) if p != self.port][:22]
        where = ["--head", "--port", str(self.port), "--include-dashboard", "false"] if name == "head" \
            else ["--address", self.address]
        subprocess.run([str(RAY), "start", *where, "--num-cpus", str(cpus), "--temp-dir", str(self.root / name),
                        "--disable-usage-stats", "--node-manager-port", str(node), "--object-manager-port",
                        str(objects), "--dashboard-agent-listen-port", str(agent),
                        "--dashboard-agent-grpc-port", str(grpc), "--runtime-env-agent-port", str(runtime),
                        "--metrics-export-port", str(metrics), "--worker-port-list", ",".join(map(str, workers))],
                       env=self.env, check=True, capture_output=True, timeout=120)
        ids = {m.group(1) for f in (self.root / name / "session_latest").iterdir()
               if (m := re.search(r"_port_([0-9a-f]{40,})$", f.name))}
        assert len(ids) == 1, ids
        return ids.pop()

    def processes(self, name: str = "") -> list[psutil.Process]:
        """The processes of node `name` (all nodes: "") and every process they started."""
        mine = set()
        for p in psutil.process_iter(["cmdline"]):
            if any(str(self.root / name) in arg for arg in p.info["cmdline"] or []):
                mine.add(p)
                try:
                    mine.update(p.children(recursive=True))
                except psutil.Error:
                    pass
        return list(mine)

    def stop(self) -> None:
        procs = self.processes()
        for p in procs:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=20)

    def study(self, study_file: Path, out: Path, *args: str, env: dict | None = None, on_line=None,
              timeout: float = 300) -> tuple[int, str, str, float]:
        """Run `probes study` in a new process; (exit code, stdout, stderr, seconds). on_line(line, process):
        called with each stderr line as it comes."""
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "probes", "study", str(study_file), "--out", str(out),
                                    "--engine", "ray", "--quiet", "--no-plots", *args], env=env or self.env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        err: list[str] = []

        def read() -> None:
            for line in process.stderr:
                err.append(line)
                if on_line:
                    on_line(line, process)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            out_text = process.stdout.read()
            process.wait(timeout=timeout)
        finally:
            if process.poll() is None:
                process.kill()
        reader.join(timeout=10)
        return process.returncode, out_text, "".join(err), time.perf_counter() - started


@pytest.fixture(scope="module")
def cluster():
    """A head node with 1 CPU (the second node joins in `two_nodes`)."""
    root = Path(tempfile.mkdtemp(prefix="pr-", dir="/tmp"))  # short: Ray's socket paths live under it
    made = Cluster(root)
    try:
        made.head = made.start("head", 1)
        yield made
    finally:
        made.stop()
        assert not made.processes(), "a Ray process outlived the test"


@pytest.fixture(scope="module")
def study_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("study")
    models = {name: build_tiny_model("bert", folder / name, seed=seed) for seed, name in enumerate("ab")}
    path = folder / "study.toml"
    path.write_text("shards = 2\n[models]\n" + "".join(f'{k} = "{v}"\n' for k, v in models.items()) +
                    f'[settings]\nlimit = 12\nbatch_size = 2\n[[corpora]]\ncorpus = "{bundled_corpus()}"\n'
                    'probes = ["dep", "mass"]\n', encoding="utf-8")
    return path


def one_line(code: int, out: str, err: str, seconds: float) -> str:
    """The one error line of a refused join (exit 2, nothing on stdout, within the bound)."""
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith("probes: error: "), (code, out, err)
    assert seconds < JOIN_BOUND
    return lines[0]


def test_fewer_cpus_than_workers_runs_the_workers_it_holds(cluster, study_file, tmp_path):
    """The head has 1 CPU, --workers 2 asks for 2: the study says so, runs 1 actor, and finishes."""
    code, out, err, _ = cluster.study(study_file, tmp_path / "out", "--address", cluster.address, "--workers", "2")
    assert code == 0, err
    assert ("2 Ray workers asked for, the cluster has room for 1 (each asks for 1 CPU; the cluster has 1 of 1 CPUs "
            "free): 1 started") in err
    assert out.startswith("study: 4 of 4 units run") and len(out.splitlines()) == 1  # Ray prints nothing here
    records = [json.loads(p.read_text()) for p in (tmp_path / "out" / ".units").glob("*/unit.json")]
    assert [r["node"] for r in records] == [cluster.head] * 4
    assert (tmp_path / "out" / "ray.log").stat().st_size > 0


HOLD = """
import ray, time
ray.init(address="{address}", log_to_driver=False)
@ray.remote(num_cpus=1)
class Hold:
    def ready(self):
        return True
h = Hold.remote()
ray.get(h.ready.remote())
print("held", flush=True)
time.sleep(600)
"""


def test_a_worker_that_cannot_be_placed_stops_the_study_with_one_line(cluster, study_file, tmp_path):
    """Another job holds the head's only CPU: the actor cannot be placed; after PROBES_RAY_PLACEMENT_S (10 s)
    the study stops, naming the unit, what it asks for and what the cluster has (it used to wait forever)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD.format(address=cluster.address)], env=cluster.env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, out, err, _ = cluster.study(study_file, tmp_path / "out", "--address", cluster.address)
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and out == ""
    *events, line = err.strip().splitlines()
    assert events[-1] == (f"probes study: Ray worker 1 could not be placed within 10 s (1 CPU; the cluster has 0 of 1 "
                          f"CPUs free); unit a × dep+mass on {Path(bundled_corpus()).name} shard 0/2 and the rest of "
                          f"its run go to the other workers")
    assert line == ("probes: error: no Ray worker could be placed within 10 s for unit a × dep+mass on "
                    f"{Path(bundled_corpus()).name} shard 0/2: it asks for 1 CPU; the cluster has 0 of 1 CPUs free "
                    "(`ray status`): free some, add a node, or lower --workers")


def test_every_failure_to_join_is_one_line_naming_the_address_and_the_fix(cluster, study_file, tmp_path):
    nothing = free_ports(1)[0]
    no_token = {k: v for k, v in cluster.env.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    cases = {  # what is wrong: (address, environment, what the line says)
        "nothing listens": (f"127.0.0.1:{nothing}", cluster.env, "no Ray cluster at "),
        "no cluster for auto": ("auto", cluster.env, "--address auto: no Ray cluster was started on this machine"),
        "not a Ray head's port": (f"127.0.0.1:{free_ports(1)[0]}", cluster.env, "not a Ray head's GCS port"),
        "token auth not set": (cluster.address, no_token, "asks for token authentication: set RAY_AUTH_MODE=token"),
        "token missing": (cluster.address, {**no_token, "RAY_AUTH_MODE": "token", "HOME": str(tmp_path)},
                          "but no token is set here"),  # (HOME: no ~/.ray/auth_token from a local instance)
        "wrong token": (cluster.address, {**cluster.env, "RAY_AUTH_TOKEN": secrets.token_hex(32)},
                        "refused this token: set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN to the head's token"),
    }
    listener = socket.create_server(("", int(cases["not a Ray head's port"][0].rsplit(":", 1)[1])))
    try:
        for problem, (address, env, says) in cases.items():
            line = one_line(*cluster.study(study_file, tmp_path / problem, "--address", address, env=env))
            assert f"--address {address}: " in line and says in line, (problem, line)
    finally:
        listener.close()
    assert not any((tmp_path / problem / "study.json").exists() for problem in cases)


def test_another_ray_version_is_one_line(cluster, study_file, tmp_path):
    """The cluster runs this Ray; a driver whose Ray says it is 2.0.0 is refused by Ray's version check."""
    fake = ("import sys, ray; ray.__version__ = '2.0.0'; from probes.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", fake, "study", str(study_file), "--out", str(tmp_path / "out"),
                           "--engine", "ray", "--address", cluster.address, "--quiet"], env=cluster.env,
                          capture_output=True, text=True, timeout=120)
    line = one_line(done.returncode, done.stdout, done.stderr, time.perf_counter() - started)
    assert f"runs Ray {ray.__version__} on Python" in line and ", this process Ray 2.0.0 on Python" in line


def test_without_an_address_a_new_local_instance_starts_while_a_cluster_runs(cluster, study_file, tmp_path):
    """RAY_ADDRESS names the running cluster, --address is not given: a local instance starts (Ray's
    ray.init() would join the cluster and refuse num_cpus with a ValueError traceback)."""
    env = {**cluster.env, "RAY_ADDRESS": cluster.address}
    code, out, err, _ = cluster.study(study_file, tmp_path / "out", "--workers", "1", env=env)
    assert code == 0, err
    assert "probes study: a local Ray instance with" in err
    records = [json.loads(p.read_text()) for p in (tmp_path / "out" / ".units").glob("*/unit.json")]
    assert len(records) == 4 and cluster.head not in {r["node"] for r in records}


def test_two_nodes_survive_the_second_nodes_raylet_killed_mid_study(cluster, study_file, tmp_path):
    """A second node joins (1 CPU); the study's two actors (--workers by default: as many as the cluster has
    free CPUs) are placed one on each; the second node's raylet is killed (SIGKILL) as soon as they are: the
    unit it ran is retried, the rest go to the head, and the results are the local engine's."""
    second = cluster.start("second", 1)
    killed = []

    def kill_second(line: str, _process) -> None:
        if not killed and re.match(r"probes study: Ray worker \d on node " + second[:12], line):
            raylets = [p for p in cluster.processes("second") if p.name() == "raylet"]
            for p in raylets:
                p.send_signal(signal.SIGKILL)
            killed.append(len(raylets))

    code, out, err, _ = cluster.study(study_file, tmp_path / "out", "--address", cluster.address, on_line=kill_second)
    assert code == 0, err
    assert killed == [1]
    assert {f"probes study: Ray worker {i} on node" for i in (1, 2)} <= {line[:34] for line in err.splitlines()}
    assert "Ray workers asked for" not in err  # --workers by default: the cluster's 2 free CPUs
    assert re.search(rf"probes study: Ray worker \d on node {second[:12]} \(\S+\) died running ", err), err
    assert out.startswith("study: 4 of 4 units run") and len(out.splitlines()) == 1
    # Ray's dump of the lost raylet's log (tens of lines, printed on stdout by Ray) is in the study's log
    assert "Raylet is terminated" in (tmp_path / "out" / "ray.log").read_text(encoding="utf-8")
    records = [json.loads(p.read_text()) for p in (tmp_path / "out" / ".units").glob("*/unit.json")]
    assert {r["node"] for r in records} <= {cluster.head, second}
    assert sorted(r["attempts"] for r in records) == [1, 1, 1, 2]  # the unit the second node was running
    local = probes.study(study_file, tmp_path / "local", plots="none", progress=False)
    on_ray = pd.read_parquet(tmp_path / "out" / "study.parquet")
    # the same machine, but 1 torch thread in an actor against all cores here: within float32 rounding
    pd.testing.assert_frame_equal(on_ray, local.frame, check_exact=False, rtol=0, atol=1e-6)
    assert (on_ray["count"] == local.frame["count"]).all()
