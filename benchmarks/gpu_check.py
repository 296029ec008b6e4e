"""The GPU check (issue 24 item 8): one call that a session with a CUDA device runs, with a CPU rehearsal.

    python benchmarks/gpu_check.py [--dry-run] [--out DIR]

Seven steps, one JSON report (DIR/gpu_check.json) and a short table on stdout:
 1. cuda_tests: the test files of tests/ that need CUDA (a ``cuda`` marker, or ``skipif(not torch.cuda.is_available``),
    run through pytest in a subprocess: passed / failed / skipped counts.
 2. cuda_vs_cpu: dep, pos, trees, mass, entropy and positional with the packaged MiniLM on EWT dev (--dry-run: the
    bundled sample, 20 sentences) on the device and on the CPU, each side timed: per probe the largest |Δscore|
    over every label's [L,H] grid, the cells that differ at all and those beyond TOLERANCE (a cell moves only where
    a near-tie's argmax flipped between the two devices' float32 maps; see tests/test_invariance_and_minilm.py).
    Then trees again on the device with its trees decoded there (``tree_decoding="device"``): against the host's
    decoding of the same maps (every cell equal: the same trees) and against the CPU's run.
 3. large_model: a randomly initialised BERT-large-shaped model (24 layers × 16 heads, hidden 1024; --dry-run: 2
    layers, sentences of 128 subwords) with the MiniLM tokenizer, on sentences of 512 subwords: the default
    max_tokens the run recorded (probes.encoding.batching.default_max_tokens of its shape), the largest batch run, and
    sentences per second.
 4. oom_split: a real out-of-memory split and retry (probes.running.runner.Feed.batch): the device's memory is filled but
    for OOM_HEADROOM before a run whose one batch cannot fit (--dry-run: Encoder.layerwise raises OutOfMemoryError
    on more than half the batch, as tests/test_capture_invariance.py does); the stderr line "ran out of memory"
    must come, and the scores are compared with an undisturbed run's.
 5. device_speed: dep alone on step 2's corpus on the device, against the bare forward over the same batches there
    (benchmarks.harness, synchronised): the ratio the CPU benchmarks report, on the GPU.
 6. decoders: the four causal detectors on the trained 2-layer GPT-2 of tests/data/induction-gpt2 (64 sequences
    of 24 random tokens repeated, as docs/decoders.md's table; --dry-run: 8 of 16), on the device (whole maps from another SDPA kernel) and on
    the CPU (entries read beside its flash kernel): per detector the largest |Δscore| and each one's best head on
    the device; then a randomly initialised GPT-2 of 12 layers × 16 heads, width 1024 (--dry-run: 2 × 4, width 64)
    on contexts of 4,096 tokens (--dry-run: 128): sequences per second and the device's peak memory.
 7. half_precision: MiniLM's dep on step 2's corpus on the device in bfloat16 and float16 against float32 (replicates=0,
    views=0), on the overall grid and every label of at least HALF_COUNT instances: the largest |Δscore|, the cells
    over HALF_TOLERANCE, the most arcs a cell moved (|Δ| × the label's count), the labels whose best cell moved, and
    each side's time (tests/test_half_precision.py measures the same on the CPU).

Each step's failure is recorded in the report (its error's last lines) and the next step still runs; the report
is written after every step, so a run cut short still leaves what it measured.

Without a CUDA device and without --dry-run it exits 2 with one line.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch

import probes
from benchmarks.harness import bare_forward_seconds
from probes.encoding.batching import default_max_tokens, total_memory
from probes.tools.detect import detect
from probes.base.defaults import bundled_corpus, default_model
from probes.base.files import write_atomic
from probes.capture.model import Encoder
from probes.results.probe_result import best_head
from probes.running.runner import Feed

ROOT = Path(__file__).resolve().parent.parent
EWT_DEV = Path("corpora") / "ud-english-ewt" / "en_ewt-ud-dev.conllu"  # under ../shared or ./shared
CUDA_MENTION = re.compile(r"mark\.cuda\b|skipif\(\s*not torch\.cuda\.is_available")  # tests that need CUDA
TOLERANCE = 0.01  # |Δscore| a cell may move between devices by near-tie flips before it is counted as beyond
OOM_HEADROOM = 2 << 30  # bytes left free on the device for the split run: one 512-subword sentence fits, 64 do not
LARGE = {"layers": 24, "heads": 16, "hidden": 1024, "length": 512, "sentences": 256, "oom_sentences": 64}
REHEARSAL = {"layers": 2, "heads": 16, "hidden": 1024, "length": 128, "sentences": 20, "oom_sentences": 20}
WORDS = "the cat sat on a mat and the dog ran to it .".split()  # one subword each in the MiniLM vocabulary
STEP2 = ["dep", "pos", "trees", "mass", "entropy", "positional"]  # the probes that read EWT dev, argmax and mean
INDUCTION = ROOT / "tests" / "data" / "induction-gpt2"  # the trained 2-layer GPT-2 (benchmarks/train_induction.py)
DETECTORS = ["prev_token", "duplicate_token", "induction", "sink"]
DECODER = {"layers": 12, "heads": 16, "hidden": 1024, "length": 2048, "count": 16, "sequences": 64}  # T = 4,096
HALF_COUNT = 50  # a label's instances for its cells to be compared in step 7 (issue 44 item 5)
HALF_TOLERANCE = 0.01  # |Δscore| a half-precision cell may move from float32's (issue 44 item 5)
DECODER_REHEARSAL = {"layers": 2, "heads": 4, "hidden": 64, "length": 64, "count": 4, "sequences": 8}


def cuda_tests(dry_run: bool) -> dict:
    """Step 1: the test files that need CUDA, run by pytest in a subprocess."""
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")
                   if CUDA_MENTION.search(p.read_text(encoding="utf-8")))
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    if files:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files], cwd=ROOT,
                              capture_output=True, text=True)
        summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        for count, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary):
            counts["errors" if word.startswith("error") else word] += int(count)
        failures = [line for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
        if failures:  # which, and the end of pytest's report of them
            counts["failures"] = failures
            counts["output_tail"] = "\n".join(done.stdout.splitlines()[-80:])
    return {"files": files, **counts, "simulated": False,
            "note": "on the CPU the CUDA tests skip" if dry_run else ""}


def score_delta(a: dict, b: dict) -> dict:
    """Per probe: the largest |Δscore| over every label's [L,H] grid (NaN on both sides: equal), the cells that
    differ and those beyond TOLERANCE; a label present on one side only counts all its cells as beyond."""
    report = {}
    for name, result in a.items():
        ours, theirs = result.scores, b[name].scores  # label -> [L,H]
        largest, differ, beyond, cells = 0.0, 0, 0, 0
        for label in ours.keys() | theirs.keys():
            if label not in ours or label not in theirs:
                size = (ours.get(label) if label in ours else theirs[label]).size
                largest, differ, beyond, cells = math.inf, differ + size, beyond + size, cells + size
                continue
            x, y = ours[label], theirs[label]
            both_nan = np.isnan(x) & np.isnan(y)
            delta = np.where(both_nan, 0.0, np.abs(x - y))  # [L,H]; NaN on one side only stays NaN
            delta = np.where(np.isnan(delta), np.inf, delta)
            largest = max(largest, float(delta.max()))
            differ += int((delta > 0).sum())
            beyond += int((delta > TOLERANCE).sum())
            cells += delta.size
        report[name] = {"max_abs_delta": largest, "cells": cells, "cells_differ": differ,
                        "cells_beyond_tolerance": beyond, "tolerance": TOLERANCE}
    return report


def cuda_vs_cpu(device: str, dry_run: bool, corpus: str | None) -> dict:
    """Step 2: STEP2's probes with MiniLM on `corpus` (None: the bundled sample) on the device and on the CPU, same
    batching, each side timed."""
    limit = REHEARSAL["sentences"] if dry_run else None
    runs, seconds = [], []
    for d in (device, "cpu"):  # warm-up on each side: CUDA's context and kernels, numba's compiled trees
        probes.run(STEP2, corpus=corpus, limit=4, device=d, progress=False)
    for d in (device, "cpu"):
        start = time.perf_counter()
        runs.append(probes.run(STEP2, corpus=corpus, limit=limit, device=d, progress=False))
        seconds.append(time.perf_counter() - start)
    ours, cpu = runs
    start = time.perf_counter()
    trees = probes.run(["trees"], corpus=corpus, limit=limit, device=device, progress=False, tree_decoding="device")
    trees_seconds = time.perf_counter() - start
    return {"corpus": corpus or "bundled sample", "devices": [device, "cpu"], "seconds": seconds,
            "sentences": cpu["dep"].info.sentences, "probes": score_delta(ours, cpu),
            "trees_on_device": {"seconds": trees_seconds,
                                "against_host_decoding": score_delta(trees, {"trees": ours["trees"]})["trees"],
                                "against_cpu": score_delta(trees, {"trees": cpu["trees"]})["trees"]},
            "simulated": dry_run}


def device_speed(device: str, dry_run: bool, corpus: str | None) -> dict:
    """Step 5: dep alone on `corpus` on the device against the bare forward over the same batches (best of 3)."""
    limit = REHEARSAL["sentences"] if dry_run else None
    encoder = probes.load_encoder(default_model(), device=device)
    paths = [corpus or bundled_corpus()]
    probes.run(["dep"], corpus=corpus, limit=limit, encoder=encoder, progress=False)  # warm-up: kernels, caches
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        probes.run(["dep"], corpus=corpus, limit=limit, encoder=encoder, progress=False)
        runs.append(time.perf_counter() - start)
    bare = bare_forward_seconds(encoder, paths, limit=limit, repeats=3)
    return {"device": device, "run_seconds": min(runs), "bare_seconds": bare, "ratio": min(runs) / bare,
            "simulated": dry_run}


def save_random(model_class, config, tokenizer, out: Path, device: torch.device) -> Path:
    """A `model_class` of `config`, randomly initialised (seed 0) on `device`, saved with `tokenizer` in `out`."""
    torch.manual_seed(0)
    with torch.device(device):
        model = model_class(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_bert(out: Path, shape: dict, device: torch.device, tokenizer_folder: str) -> Path:
    """A BERT of `shape` (random init, seed 0, made on `device`) with the tokenizer of `tokenizer_folder` (MiniLM's)
    in `out`."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    tokenizer.model_max_length = shape["length"]
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=shape["hidden"], num_hidden_layers=shape["layers"],
                        num_attention_heads=shape["heads"], intermediate_size=4 * shape["hidden"],
                        max_position_embeddings=shape["length"])
    return save_random(BertModel, config, tokenizer, out, device)


def long_corpus(path: Path, sentences: int, length: int) -> Path:
    """A CoNLL-U file of `sentences` chains of `length` - 2 one-subword words (each word's head the one before):
    `length` subwords with [CLS] and [SEP]."""
    n = length - 2
    blocks = []
    for s in range(sentences):
        words = [WORDS[(s + i) % len(WORDS)] for i in range(n)]
        rows = [f"{i + 1}\t{w}\t{w}\tX\tX\t_\t{i}\t{'root' if i == 0 else 'dep'}\t_\t_" for i, w in enumerate(words)]
        blocks.append(f"# sent_id = long-{s}\n" + "\n".join(rows) + "\n")
    path.write_text("\n".join(blocks) + "\n", encoding="utf-8")
    return path


@contextlib.contextmanager
def patched(owner, name: str, value):
    """`owner.name` set to `value` inside the block, restored after."""
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


@contextlib.contextmanager
def batches_seen():
    """Records the rows of every forward pass (Encoder.layerwise's input_ids [rows,T]) into the list yielded."""
    seen: list[int] = []
    layerwise = Encoder.layerwise

    def spy(self, input_ids, attention_mask, on_layer, **kwargs):
        seen.append(input_ids.shape[0])
        return layerwise(self, input_ids, attention_mask, on_layer, **kwargs)

    with patched(Encoder, "layerwise", spy):
        yield seen


def large_model(model: Path, corpus: Path, device: str, shape: dict, dry_run: bool) -> dict:
    """Step 3: the default max_tokens, the largest batch and sentences per second of the large-shaped model."""
    encoder = probes.load_encoder(str(model), device=device)
    with batches_seen() as seen:
        start = time.perf_counter()
        result = probes.run(["dep"], corpus=str(corpus), encoder=encoder, batch_size=None, progress=False)["dep"]
        seconds = time.perf_counter() - start
    layers_held = encoder.layers if encoder.backend.all_layers else 1
    expected = default_max_tokens(encoder.heads, encoder.heads * encoder.head_dim, shape["length"],
                                  total_memory(encoder.device), layers_held, cuda=encoder.device.type == "cuda")
    return {"layers": encoder.layers, "heads": encoder.heads, "hidden": encoder.heads * encoder.head_dim,
            "length": shape["length"], "sentences": result.info.sentences, "device": str(encoder.device),
            "total_memory": total_memory(encoder.device), "max_tokens": result.info.settings["max_tokens"],
            "default_max_tokens": expected, "largest_batch": max(seen), "batches": len(seen),
            "seconds": seconds, "sentences_per_second": result.info.sentences / seconds, "simulated": dry_run}


def oom_split(model: Path, corpus: Path, device: str, shape: dict, dry_run: bool) -> dict:
    """Step 4: one batch of every sentence that runs out of memory, split and retried, against an undisturbed run."""
    encoder = probes.load_encoder(str(model), device=device)
    sentences = shape["oom_sentences"]
    settings = {"corpus": str(corpus), "encoder": encoder, "batch_size": sentences, "max_tokens": 1 << 40,
                "limit": sentences, "progress": False}
    undisturbed = probes.run(["dep"], **settings)
    stderr = io.StringIO()
    with contextlib.ExitStack() as stack:
        if dry_run:  # the CPU's memory errors are not caught by the runner: pretend an accelerator that fits half
            layerwise = Encoder.layerwise

            def short_of_memory(self, input_ids, attention_mask, on_layer, **kwargs):
                if input_ids.shape[0] > sentences // 2:
                    raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
                return layerwise(self, input_ids, attention_mask, on_layer, **kwargs)

            stack.enter_context(patched(Encoder, "layerwise", short_of_memory))
            stack.enter_context(patched(Feed, "retry_on_cpu", True))
            filler = None
        else:  # all the device's free memory taken but OOM_HEADROOM, held for the run and freed after
            torch.cuda.empty_cache()  # the undisturbed run's cached blocks would otherwise stay free to the allocator
            free, _ = torch.cuda.mem_get_info(encoder.device)
            filler = torch.empty(max(free - OOM_HEADROOM, 0), dtype=torch.uint8, device=encoder.device)
        seen = stack.enter_context(batches_seen())  # outermost: the batches that failed too
        stack.enter_context(contextlib.redirect_stderr(stderr))
        split = probes.run(["dep"], **settings)
        del filler
    said = stderr.getvalue()
    sys.stderr.write(said)
    return {"sentences": sentences, "batches": seen, "split": "ran out of memory" in said, "stderr": said.strip(),
            "probes": score_delta(split, undisturbed), "simulated": dry_run}


def build_decoder(out: Path, shape: dict) -> Path:
    """A GPT-2 of `shape` (random init, seed 0) with the trained model's tokenizer, positions for 2 × length."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(INDUCTION)
    tokenizer.model_max_length = 2 * shape["length"]
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=shape["hidden"], n_layer=shape["layers"],
                        n_head=shape["heads"], n_positions=2 * shape["length"],
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    return save_random(GPT2LMHeadModel, config, tokenizer, out, torch.device("cpu"))


def decoders(device: str, dry_run: bool, tmp: Path) -> dict:
    """Step 6: the detectors on the trained GPT-2, device against CPU; then a larger random GPT-2's speed."""
    count, length = (8, 16) if dry_run else (32, 24)  # docs/decoders.md's table: 32 sequences of 24 tokens, seed 0
    runs = {d: detect(DETECTORS, str(INDUCTION), count=count, length=length, sequence_seed=0, device=d,
                      progress=False) for d in (device, "cpu")}
    best = {}
    for name, result in runs[device].items():
        for label, cell in result.labels.items():
            named = best_head(cell.scores, label, cell.count)  # no head named on a tie, at 0 or without instances
            best[f"{name}/{label}"] = {"head": named.name, "score": named.score, "count": int(cell.count),
                                       "reason": named.reason}
    shape = DECODER_REHEARSAL if dry_run else DECODER
    model = build_decoder(tmp / "decoder", shape)
    encoder = probes.load_encoder(str(model), device=device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    detect(DETECTORS, encoder=encoder, count=shape["sequences"], length=shape["length"], sequence_seed=0,
           batch_size=shape["count"], progress=False)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    return {"trained": {"count": count, "length": length, "probes": score_delta(runs[device], runs["cpu"]),
                        "best_on_device": best},
            "large": {**shape, "context": 2 * shape["length"], "seconds": seconds,
                      "sequences_per_second": shape["sequences"] / seconds, "peak_bytes": peak},
            "simulated": dry_run}


def half_precision(device: str, dry_run: bool, corpus: str | None) -> dict:
    """Step 7: MiniLM's dep in bfloat16 and float16 against float32 on the device (see the module docstring)."""
    limit = REHEARSAL["sentences"] if dry_run else None
    runs, seconds = {}, {}
    for dtype in ("float32", "bfloat16", "float16"):
        encoder = probes.load_encoder(default_model(), device=device, dtype=dtype)
        settings = dict(corpus=corpus, encoder=encoder, replicates=0, views=0, progress=False)
        probes.run(["dep"], limit=4, **settings)  # warm-up: the dtype's kernels
        start = time.perf_counter()
        runs[dtype] = probes.run(["dep"], limit=limit, **settings)["dep"]
        seconds[dtype] = time.perf_counter() - start
        del encoder
    full = runs["float32"]
    grids = [("overall", full.overall)] + [(n, c) for n, c in full.labels.items() if c.count >= HALF_COUNT]
    report = {"corpus": corpus or "bundled sample", "sentences": full.info.sentences, "labels": len(grids) - 1,
              "min_count": HALF_COUNT, "tolerance": HALF_TOLERANCE, "seconds": seconds, "simulated": dry_run,
              # the SDPA order the runs had (probes.cli.sdpa_order sets it for the command): "1" puts cuDNN last
              "cudnn_sdpa_deprioritized": os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED")}
    for dtype in ("bfloat16", "float16"):
        half = runs[dtype]
        largest, over, arcs, cells, moved, worst = 0.0, 0, 0.0, 0, [], None
        for name, ours in grids:
            theirs = half.overall if name == "overall" else half.labels[name]
            delta = np.abs(ours.scores - theirs.scores)  # [L,H]
            if float(delta.max()) > largest:
                largest, worst = float(delta.max()), {"label": name, "count": int(ours.count)}
            over += int((delta > HALF_TOLERANCE).sum())
            arcs = max(arcs, float(delta.max()) * int(ours.count))
            cells += delta.size
            if np.argmax(ours.scores) != np.argmax(theirs.scores):
                moved.append(name)
        report[dtype] = {"max_abs_delta": largest, "worst": worst, "cells": cells, "cells_over_tolerance": over,
                         "most_arcs_moved": round(arcs, 3), "best_cell_moved": moved,
                         "speedup": seconds["float32"] / seconds[dtype]}
    return report


def table(report: dict) -> str:
    """The report's main figures, a line per step (a failed step: its error's last line)."""
    mark = {True: " (simulated)", False: ""}

    def line(number: int, key: str, say) -> str:
        step = report.get(key)
        if step is None:
            return f"{number} {key}: not run"
        if "error" in step:
            return f"{number} {key}: FAILED {step['error'].strip().splitlines()[-1]}"
        return f"{number} {say(step)}" + "".join(f"\n    {f}" for f in step.get("failures", []))

    def devices(d: dict) -> str:
        dep, trees = d["probes"]["dep"], d["trees_on_device"]["against_host_decoding"]
        worst = max(d["probes"].items(), key=lambda kv: kv[1]["max_abs_delta"])
        return (f"{d['devices'][0]} vs cpu{mark[d['simulated']]}: dep max |Δ| {dep['max_abs_delta']:.3g}, "
                f"{dep['cells_differ']} of {dep['cells']} cells differ, {dep['cells_beyond_tolerance']} beyond "
                f"{TOLERANCE}; largest over {len(d['probes'])} probes {worst[1]['max_abs_delta']:.3g} ({worst[0]}); "
                f"{d['seconds'][0]:.1f} s against {d['seconds'][1]:.1f} s; trees decoded on the device: "
                f"{trees['cells_differ']} of {trees['cells']} cells differ from the host's decoding")

    def decoded(d: dict) -> str:
        worst = max(d["trained"]["probes"].items(), key=lambda kv: kv[1]["max_abs_delta"])
        large = d["large"]
        peak = "" if large["peak_bytes"] is None else f", peak {large['peak_bytes'] / 2**30:.1f} GiB"
        return (f"decoders{mark[d['simulated']]}: trained GPT-2 detectors max |Δ| {worst[1]['max_abs_delta']:.3g} "
                f"({worst[0]}); {large['layers']}x{large['heads']} h{large['hidden']} at {large['context']} tokens "
                f"{large['sequences_per_second']:.3g} sequences/s{peak}")

    return "\n".join([
        f"device: {report['device']}{' (dry run)' if report['dry_run'] else ''}",
        line(1, "cuda_tests", lambda t: f"cuda tests{mark[t['simulated']]}: {len(t['files'])} files, {t['passed']} "
                                        f"passed, {t['failed']} failed, {t['skipped']} skipped, {t['errors']} errors"),
        line(2, "cuda_vs_cpu", devices),
        line(3, "large_model", lambda g: f"large {g['layers']}x{g['heads']} h{g['hidden']} at {g['length']}"
                                         f"{mark[g['simulated']]}: default max_tokens {g['max_tokens']}, largest "
                                         f"batch {g['largest_batch']}, {g['sentences_per_second']:.3g} sentences/s"),
        line(4, "oom_split", lambda o: f"out of memory{mark[o['simulated']]}: split "
                                       f"{'yes' if o['split'] else 'NO'}, batches {o['batches']}, dep max |Δ| "
                                       f"{o['probes']['dep']['max_abs_delta']:.3g} "
                                       f"({o['probes']['dep']['cells_differ']} cells differ)"),
        line(5, "device_speed", lambda v: f"dep on the {v['device']}{mark[v['simulated']]}: {v['run_seconds']:.2f} s "
                                          f"against a bare forward of {v['bare_seconds']:.2f} s, ratio "
                                          f"{v['ratio']:.2f}"),
        line(6, "decoders", decoded),
        line(7, "half_precision", lambda h: "half precision" + mark[h["simulated"]] + ": dep on " + str(h["sentences"])
             + f" sentences, {h['labels']} labels of ≥ {h['min_count']}: " + "; ".join(
                 f"{d} max |Δ| {h[d]['max_abs_delta']:.3g}, {h[d]['cells_over_tolerance']} of {h[d]['cells']} cells "
                 f"over {h['tolerance']}, best cell moved in {len(h[d]['best_cell_moved'])}, "
                 f"{h[d]['speedup']:.2f}× float32's speed" for d in ("bfloat16", "float16")))])


def write_report(report: dict, path: Path) -> None:
    """The report as it stands, atomically, to `path` (its folder made): gpu_check.json, gpu_bench.json."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(report, indent=2) + "\n").encode("utf-8"))


def step(report: dict, key: str, out: Path, measure) -> None:
    """report[key] = measure(), or its error's last lines; the report written either way."""
    print(f"... {key}", file=sys.stderr, flush=True)
    try:
        report[key] = measure()
    except Exception:  # noqa: BLE001 - a check: record the failure, go on to the next step
        report[key] = {"error": "".join(traceback.format_exc().splitlines(keepends=True)[-12:])}
        print(report[key]["error"], file=sys.stderr, flush=True)
    write_report(report, out / "gpu_check.json")


def ewt_dev() -> str | None:
    """EWT dev beside the checkout (../shared) or inside it (./shared, where a GPU session carries it), or None."""
    found = [p for p in (ROOT.parent / "shared" / EWT_DEV, ROOT / "shared" / EWT_DEV) if p.is_file()]
    return str(found[0]) if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="the CPU rehearsal: tiny sizes, a simulated OOM")
    parser.add_argument("--out", type=Path, default=Path("gpu_check"), help="folder for gpu_check.json")
    parser.add_argument("--corpus", help="step 2's corpus (default: EWT dev under ../shared or ./shared; "
                                         "--dry-run: the bundled sample)")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: run with --dry-run for the CPU rehearsal", file=sys.stderr)
        return 2
    corpus = args.corpus if args.corpus is not None or args.dry_run else ewt_dev()
    if corpus is None and not args.dry_run:
        print(f"EWT dev not found under ../shared or ./shared ({EWT_DEV}): pass --corpus", file=sys.stderr)
        return 2
    device = "cpu" if args.dry_run else "cuda"
    shape = REHEARSAL if args.dry_run else LARGE
    report = {"dry_run": args.dry_run, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
              "torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    step(report, "cuda_tests", args.out, lambda: cuda_tests(args.dry_run))
    step(report, "cuda_vs_cpu", args.out, lambda: cuda_vs_cpu(device, args.dry_run, corpus))
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        built = {}

        def made() -> tuple[Path, Path]:
            if not built:
                built["model"] = build_bert(tmp / "large", shape, torch.device("cpu"), default_model())
                built["long"] = long_corpus(tmp / "long.conllu", shape["sentences"], shape["length"])
            return built["model"], built["long"]

        step(report, "large_model", args.out, lambda: large_model(*made(), device, shape, args.dry_run))
        step(report, "oom_split", args.out, lambda: oom_split(*made(), device, shape, args.dry_run))
        if device == "cuda":
            torch.cuda.empty_cache()
        step(report, "device_speed", args.out, lambda: device_speed(device, args.dry_run, corpus))
        step(report, "decoders", args.out, lambda: decoders(device, args.dry_run, tmp))
    step(report, "half_precision", args.out, lambda: half_precision(device, args.dry_run, corpus))
    print(table(report))
    return 0 if not any("error" in v for v in report.values() if isinstance(v, dict)) else 1


if __name__ == "__main__":
    sys.exit(main())
