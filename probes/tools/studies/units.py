"""A study's units: (model, corpus group, shard), each one ``probes.run`` feeding every probe of the group,
their fingerprints, the work a worker does for one, and the cache of finished units on disk.

A unit's key is the SHA-256 of everything its states depend on: the project version, the model (its
path, and the sha256 of its weights and of every other file of its folder: config, tokenizer), the
group's probes with their options as the probes convert them, the corpus and fit files (paths and
sha256), the run settings, the code files registering probes, and the shard. Finished units live in
``OUT/.units/<key>/``: the probes' state files (``probes.running.state_files``), ``views.json`` (the per-sentence
views of an unsharded unit) and ``unit.json`` (what ran, where: host:pid and the Ray node, with how many
threads, how long). The
folder is written under a temporary name and renamed when complete, so a unit is either finished or
absent, whenever the study is killed. Only the driver writes there; workers return the files' bytes.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.base.checkpoint import weight_files, weights_sha256
from probes.capture.model import Encoder, load_encoder
from probes.base.provenance import probes_version, sha256
from probes.settings.registry import get_probe
from probes.base.files import UMASK, write_result_files
from probes.tools.studies.spec import Group, Model, StudySpec

UNITS_FOLDER = ".units"
RECORD = "unit.json"
VIEWS = "views.json"


@dataclass(frozen=True)
class Unit:
    model: Model
    group: Group
    group_index: int
    shard: int
    key: str
    code: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        shard = f" shard {self.shard}/{self.group.shards}" if self.group.shards > 1 else ""
        return f"{self.model.name} × {'+'.join(self.group.probes)} on {self.group.name}{shard}"

    @property
    def encoder(self) -> tuple:
        """What the unit's encoder is loaded from: (model path, device, max_length, dtype); units that share it share
        a worker's loaded encoder."""
        settings = self.group.settings
        return self.model.path, settings.get("device", "cpu"), settings.get("max_length"), settings.get("dtype", "float32")


@dataclass
class Outcome:
    """What a worker sends back for a unit: the files of its folder, or the error that stopped it."""

    key: str
    files: dict[str, bytes] | None  # file name -> bytes; None when it failed
    error: str | None = None
    seconds: float = 0.0  # the unit's probes.run (reading, tokenising, forward passes, scoring)
    load_seconds: float = 0.0  # loading the model, when this unit had to (0: the worker's loaded one)
    sentences: int = 0
    worker: str = ""  # host:pid of the process that ran it
    threads: int = 0  # torch's intra-op threads in the worker that ran it
    node: str | None = None  # the Ray node it ran on (None: not on Ray)


def plan_units(spec: StudySpec) -> list[Unit]:
    """Every unit of the study, model by model (a worker then loads each model once)."""
    models = {m.path: model_digest(m.path) for m in spec.models}
    code = [[path, sha256(path)] for path in spec.code]
    groups = [group_digest(g, code) for g in spec.groups]
    units = []
    for model in spec.models:
        for index, (group, digest) in enumerate(zip(spec.groups, groups)):
            for shard in range(group.shards):
                key = _sha({"probes": probes_version(), "model": [model.path, models[model.path]], "group": digest,
                            "shard": [shard, group.shards]})
                units.append(Unit(model, group, index, shard, key, tuple(spec.code)))
    return units


def model_digest(path: str) -> str:
    """sha256 of a checkpoint: its weights and every other file of its folder (config, tokenizer files)."""
    digest = hashlib.sha256(weights_sha256(path).encode())
    folder = Path(path)
    if folder.is_dir():
        weights = set(weight_files(folder))
        for f in sorted(p for p in folder.iterdir() if p.is_file() and p not in weights):
            digest.update(f"{f.name}\0{sha256(str(f))}\0".encode())
    return digest.hexdigest()


def group_digest(group: Group, code: list) -> str:
    """sha256 of what a group's units compute besides the model and shard."""
    options = {n: get_probe(n)(1, 1, **{k: v for k, v in group.options.items()
                                        if k in {o.name for o in get_probe(n).options}}).config
               for n in group.probes}
    settings = {k: v for k, v in group.settings.items() if k != "fit"}
    return _sha({"probes": options, "corpus": [[p, sha256(p)] for p in group.corpus], "settings": settings,
                 "fit": [[p, sha256(p)] for p in group.settings.get("fit", [])], "code": code})


def _sha(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


# ---- a worker's side ------------------------------------------------------------------------------

def run_unit(unit: Unit, loaded: dict[tuple, Encoder], threads: int | None = None) -> Outcome:
    """Run one unit in this process; an exception becomes a failed Outcome naming it. loaded: the encoder the
    caller (a worker) keeps between its units, {(model, device, max length, dtype, capture): Encoder}, one at a time: the
    unit's model is loaded into it unless it is there already. threads: torch's intra-op threads for this process."""
    from probes.running.runner import run

    try:
        import torch

        if threads:
            torch.set_num_threads(threads)
        settings = dict(unit.group.settings)
        whole = unit.group.shards == 1
        if not whole:  # the per-sentence views are not additive: a sharded unit keeps none
            settings["views"] = 0
        if "view_heads" in settings:
            settings["view_heads"] = [tuple(h) for h in settings["view_heads"]]
        which = (*unit.encoder, settings.get("capture"))
        load_seconds = 0.0
        if which not in loaded:
            loaded.clear()
            started = time.perf_counter()
            loaded[which] = load_encoder(unit.model.path, device=which[1], max_length=which[2], dtype=which[3],
                                          capture=settings.get("capture"))
            load_seconds = time.perf_counter() - started
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="probes-unit-") as tmp:
            results = run(list(unit.group.probes), encoder=loaded[which], corpus=list(unit.group.corpus),
                          shard=(unit.shard, unit.group.shards), state=tmp, progress=False, code=list(unit.code),
                          **settings, **unit.group.options)
            if whole:  # the per-sentence views, which the states do not hold
                write_result_files(tmp, {VIEWS: {name: r.extra.get("sentence_views") for name, r in results.items()}})
            files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir())}
        sentences = next(iter(results.values())).info.sentences
        return Outcome(unit.key, files, None, time.perf_counter() - started, load_seconds, sentences, _worker(),
                       torch.get_num_threads())
    except Exception as e:  # reported by name by the driver (after one retry), never dropped
        return failed(unit, f"{type(e).__name__}: {e}")


def failed(unit: Unit, error: str) -> Outcome:
    return Outcome(unit.key, None, error, worker=_worker())


def _worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# ---- the cache ------------------------------------------------------------------------------------

class UnitStore:
    """Finished units under ``OUT/.units/<key>/`` (see the module docstring)."""

    def __init__(self, out: Path):
        self.root = Path(out) / UNITS_FOLDER

    def folder(self, unit: Unit) -> Path:
        return self.root / unit.key

    def done(self, unit: Unit) -> bool:
        return (self.folder(unit) / RECORD).is_file()

    def record(self, unit: Unit) -> dict[str, Any]:
        return json.loads((self.folder(unit) / RECORD).read_text(encoding="utf-8"))

    def views(self, unit: Unit) -> dict[str, Any]:
        """{probe: sentence views} of an unsharded unit ({} for a sharded one)."""
        path = self.folder(unit) / VIEWS
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def save(self, unit: Unit, outcome: Outcome, attempts: int) -> dict[str, Any]:
        """Write the unit's folder: its files and record under a temporary name, then one rename."""
        record = {"unit": unit.name, "key": unit.key, "model": unit.model.name, "model_path": unit.model.path,
                  "corpus": unit.group.name, "probes": list(unit.group.probes),
                  "shard": f"{unit.shard}/{unit.group.shards}", "sentences": outcome.sentences,
                  "seconds": round(outcome.seconds, 3), "load_seconds": round(outcome.load_seconds, 3),
                  "worker": outcome.worker, "node": outcome.node, "threads": outcome.threads, "attempts": attempts,
                  "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=f".tmp-{unit.key[:16]}-"))
        tmp.chmod(0o777 & ~UMASK)  # mkdtemp makes it 0700; a unit folder is an ordinary folder
        try:
            write_result_files(tmp, {**outcome.files, RECORD: record})
            os.replace(tmp, self.folder(unit))
        except OSError:
            if not self.done(unit):
                raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        return record

    def clean(self) -> None:
        """Remove the temporary folders of units a killed study was writing."""
        if self.root.is_dir():
            for tmp in self.root.glob(".tmp-*"):
                shutil.rmtree(tmp, ignore_errors=True)
