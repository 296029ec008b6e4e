"""Running a study: plan its units, run the ones not already finished, write what they add up to.

A failed unit is retried once (in a second round, on the same engine); one that fails again is
reported by name (StudyFailed, exit 1 in the CLI) and nothing but the finished units is written.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.base.argtypes import check_output_folder
from probes.base.errors import InputError, StudyFailed
from probes.base.progress import progress_bar
from probes.results.probe_result import ProbeResult
from probes.tools.studies import outputs
from probes.tools.studies.engines import check_engine, execute
from probes.tools.studies.spec import StudySpec, read_study
from probes.tools.studies.units import Unit, UnitStore, plan_units

ATTEMPTS = 2  # a failed unit is tried once more
RAY_LOG = "ray.log"  # in OUT: Ray's own output (the ray engine's)


@dataclass
class Study:
    """A finished study: the tidy table (``frame``), each model's results, and what ran."""

    spec: StudySpec
    out: Path
    frame: Any  # pandas DataFrame: model, probe, label, layer, head, score, count
    results: dict[str, dict[str, ProbeResult]]  # model name -> probe -> result
    units: list[dict[str, Any]]  # per unit: its record, and "status" ran (now) or cached
    written: list[Path]  # the files this run wrote (none for a study run again unchanged)

    @property
    def reference(self) -> str:
        return self.spec.reference

    @property
    def ran(self) -> list[str]:
        """The units that ran (did model work) in this call."""
        return [u["unit"] for u in self.units if u["status"] == "ran"]


def study(source: str | Path | dict[str, Any], out: str | Path | None = None, *, engine: str = "local",
          workers: int | None = None, address: str | None = None, plots: bool | str = "overview",
          progress: bool | None = None) -> Study:
    """Run a study (a TOML file or a dict of the same shape; see probes.tools.studies.spec) into `out` (default: the
    file's ``out``). engine "local" (`workers` processes; 1 or None: this process) or "ray" (`address`: "auto"
    joins the cluster this machine runs, HOST:PORT the one whose head is there; none: a new local Ray instance;
    `workers` actors, default and at most as many as the cluster has room for; Ray's own output goes to
    OUT/ray.log). plots: the figures of each result, as
    ``ProbeResult.save``. progress: a bar over units on stderr (default: when stderr is a terminal); one line
    per unit run is printed on stderr either way. Returns the Study; raises StudyFailed naming the units
    that failed twice, InputError for a bad study (before anything is run or written)."""
    started = time.perf_counter()
    spec = read_study(source)
    check_engine(engine, workers, address)
    folder = out if out is not None else spec.out
    if folder is None:
        raise InputError("no output folder: give out = \"...\" in the study file, or --out DIR",
                         spec.source or "study")
    folder = check_output_folder(folder)
    units = plan_units(spec)
    store = UnitStore(folder)
    store.clean()
    todo = list({u.key: u for u in units if not store.done(u)}.values())
    ran = _run(todo, store, engine, workers, address, progress, len({u.key for u in units}))
    before = outputs.previous(folder)
    made, record, written = outputs.results(spec, units, store, folder, before, plots)
    records = [{**store.record(u), "model": u.model.name, "status": "ran" if u.key in ran else "cached"}
               for u in units]
    table = outputs.frame(made)
    expected = [*outputs.TABLES, *([outputs.DELTAS] if len(spec.models) > 1 else [])]
    if written or before.get("results") != record or not all((folder / f).is_file() for f in expected):
        summary = outputs.summary(spec, folder, {"engine": engine, "workers": workers, "address": address}, records,
                                  record, time.perf_counter() - started)
        pictures = {} if plots in (False, "none") else outputs.figures(made, [m.name for m in spec.models])
        written += outputs.write_study(folder, table, summary, pictures, outputs.deltas(made, spec.reference))
    return Study(spec, folder, table, made, records, written)


def _run(todo: list[Unit], store: UnitStore, engine: str, workers: int, address: str | None,
         progress: bool | None, total: int) -> set[str]:
    """Run `todo` (retrying failures once), saving each finished unit; the keys of those that ran."""
    ran: set[str] = set()
    failures: dict[str, str] = {}
    cached = total - len(todo)
    if cached:
        print(f"probes study: {cached} of {total} units already finished", file=sys.stderr)
    with progress_bar(total, progress, "study", unit="unit", initial=cached) as bar:
        for attempt in range(1, ATTEMPTS + 1):
            by_key = {u.key: u for u in todo}
            failures = {}
            for outcome in execute(todo, engine, workers, address, bar.write, store.root.parent / RAY_LOG):
                unit = by_key[outcome.key]
                if outcome.files is None:
                    failures[unit.key] = outcome.error
                    bar.write(f"probes study: {unit.name}: failed{' (will retry)' if attempt < ATTEMPTS else ''}: {outcome.error}")
                    continue
                store.save(unit, outcome, attempt)
                ran.add(unit.key)
                load = f", model loaded in {outcome.load_seconds:.1f} s" if outcome.load_seconds else ""
                node = f" on Ray node {outcome.node[:12]}" if outcome.node else ""
                bar.write(f"probes study: {unit.name}: {outcome.sentences} sentences in {outcome.seconds:.1f} s{load} "
                          f"({outcome.worker}{node})")
                bar.update()
            todo = [by_key[k] for k in failures]
            if not todo:
                break
    if failures:
        raise StudyFailed({by_key[k].name: e for k, e in failures.items()})
    return ran
