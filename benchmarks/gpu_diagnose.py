"""A GPU session's short first call (issue 44): where the BERT-base-shaped runs spend their time, before any change
is measured with benchmarks/gpu_bench.py.

    python benchmarks/gpu_diagnose.py [--dry-run] [--out DIR] [--corpus FILE] [--tokenizer DIR]

The random BERT-base shape of gpu_bench (--dry-run: its rehearsal shape on the bundled sample's first 24 sentences)
loaded three ways: float32 with the default capture, float32 with capture sdpa-qk, and bfloat16. The bare SDPA pass
in float32 and in bfloat16 at the run's token budget (no sentence cap); then every run of benchmarks/gpu_phases.py's
RUNS (ORDER), each once to warm up and once timed in phases, and those of its PROFILED under torch.profiler (the dep runs'
Chrome traces written beside the report). After LONG_AFTER's, the BERT-large shape on gpu_bench's sentences of 512
subwords (LONG_512; --dry-run: LONG_REHEARSAL) at its batch size: the bare SDPA pass, then dep timed in phases and
profiled (issue 44's 512-subword figure: which operations take the device's time on maps of 512 × 512).
First of all, the word pooling of wide batches both ways (``pooling_orders``): scatter_add_ alone and the fixed
order probes makes on CUDA (each word's subwords past its second summed apart: probes.encoding.pooling.Tail), each
timed and run twice, and whether the two runs' word maps are bit for bit equal. Report: DIR/gpu_diagnose.json, written after every measurement.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

import probes
from benchmarks import gpu_phases
from benchmarks.gpu_bench import (LIMIT_REHEARSAL, LONG_512, LONG_REHEARSAL, SHAPES, SHAPES_REHEARSAL, Bare, Bench,
                                  bare_record, measure)
from benchmarks.gpu_check import build_bert, ewt_dev, long_corpus, write_report
from probes.base.defaults import bundled_corpus, default_model
from probes.corpus import read_corpus
from probes.encoding.batching import DEVICE_TOKENS
from probes.encoding.pooling import pool_attention

REPORT = "gpu_diagnose.json"
ORDER = ["dep", "dep_bfloat16", "six", "trees_on_device", "trees", "dep_sdpa_qk", "six_bfloat16", "pos"]  # gpu_phases.RUNS,
# the most wanted first (a call cut short keeps those measured)
LONG_AFTER = "dep_bfloat16"  # the run of ORDER after which the 512-subword step comes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="the CPU rehearsal at tiny sizes (not figures)")
    parser.add_argument("--out", type=Path, default=Path("gpu_diagnose"), help="folder for gpu_diagnose.json")
    parser.add_argument("--corpus", help="default: EWT dev under ../shared or ./shared; --dry-run: the bundled sample")
    parser.add_argument("--tokenizer", help="a folder with MiniLM's tokenizer files (default: the packaged MiniLM)")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: run with --dry-run for the CPU rehearsal", file=sys.stderr)
        return 2
    corpus = args.corpus or (bundled_corpus() if args.dry_run else ewt_dev())
    if corpus is None:
        print("EWT dev not found under ../shared or ./shared: pass --corpus", file=sys.stderr)
        return 2
    device = torch.device("cpu" if args.dry_run else "cuda")
    limit = LIMIT_REHEARSAL if args.dry_run else None
    shape = (SHAPES_REHEARSAL if args.dry_run else SHAPES)["bert_base"]
    report: dict[str, Any] = {"dry_run": args.dry_run, "device": torch.cuda.get_device_name() if device.type == "cuda"
                              else "cpu", "torch": torch.__version__, "corpus": corpus, "limit": limit,
                              "shape": shape, "device_tokens": DEVICE_TOKENS}
    write_report(report, args.out / REPORT)
    with tempfile.TemporaryDirectory(prefix="gpu-diagnose-") as folder:
        bench = Bench(device, args.dry_run, corpus, limit, 2, Path(folder), args.tokenizer or default_model())
        built = build_bert(bench.tmp / "bert_base", shape, device, bench.tokenizer)
        encoders = {"float32": probes.load_encoder(str(built), device=str(device)),
                    "sdpa-qk": probes.load_encoder(str(built), device=str(device), capture="sdpa-qk"),
                    "bfloat16": probes.load_encoder(str(built), device=str(device), dtype="bfloat16")}
        sentences = read_corpus([corpus]).sentences[:limit]
        measure(report, ("pooling",), args.out, lambda: pooling_orders(
            bench, encoders["float32"], sentences, LONG_REHEARSAL if args.dry_run else LONG_512), REPORT)
        for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
            measure(report, ("bare", name), args.out,
                    lambda dtype=dtype: bare_record(bench, Bare(built, encoders["float32"], dtype), sentences,
                                                    batch_size=None, max_tokens=DEVICE_TOKENS), REPORT)
        for name in ORDER:
            measure(report, ("phases", name), args.out,
                    lambda name=name: gpu_phases.measured(encoders, corpus, limit, device, bench.sync, warm=True,
                                                          traces=args.out, names=[name])[name], REPORT)
            if name == LONG_AFTER:
                shape = (SHAPES_REHEARSAL if args.dry_run else SHAPES)["bert_large"]
                measure(report, ("large_512",), args.out, lambda: long_phases(
                    bench, shape, LONG_REHEARSAL if args.dry_run else LONG_512), REPORT)
    for name, record in (report.get("phases") or {}).items():
        if isinstance(record, dict) and "phases" in record:
            p = record["phases"]
            print(f"{name:16} {p['seconds']:7.3f} s = fit {p['fit_pass']['seconds']:.3f} + scoring "
                  f"{p['scoring_pass']['seconds']:.3f} + rest {p['rest']:.3f} ("
                  + ", ".join(f"{part} {p[part]['seconds']:.3f}" for part in gpu_phases.PARTS[2:] if p[part]["calls"])
                  + f"); {p['faults']} page faults, gc {p['gc']['seconds']:.3f} s")
            print(" " * 17 + "updates on the model's thread: "
                  + ", ".join(f"{probe} {u['seconds']:.3f}" for probe, u in p["updates"].items()))
    print({k: round(v["seconds"], 4) for k, v in report.get("bare", {}).items() if "seconds" in v})
    for name, entry in (report.get("pooling") or {}).items():
        if isinstance(entry, dict) and "largest_difference" in entry:
            print(f"pooling {name}: {entry['sentences']} × {entry['length']} subwords, {entry['words']} words, K "
                  f"{entry['most_subwords']}, tail {entry['tail_subwords']}: "
                  + ", ".join(f"{way} {entry[way]['seconds'] * 1e3:.2f} ms (same twice: {entry[way]['same_twice']})"
                              for way in ("scatter_add", "tails"))
                  + f"; largest difference {entry['largest_difference']:.2e}")
    long = report.get("large_512")
    if isinstance(long, dict) and "phases" in long:
        print(f"large_512: bare {long['bare']['sentences_per_second']:.1f} sentences/s, dep "
              f"{long['sentences'] / long['phases']['seconds']:.1f}/s (scoring pass "
              f"{long['phases']['scoring_pass']['seconds']:.3f} s of {long['phases']['seconds']:.3f})")
    return 0 if all("error" not in v for v in report.values() if isinstance(v, dict)) else 1


def pooling_orders(bench: Bench, encoder: probes.Encoder, sentences: list, long: dict) -> dict:
    """Word pooling (probes.encoding.pooling.pool_attention, mean-sum) of two wide batches, random maps of
    encoder's heads: the widest `sentences` fill at DEVICE_TOKENS, and `long`["batch_size"] sentences of
    `long`["length"] one-subword words. For each, by scatter_add_ alone (the CPU's way) and with each word's subwords
    past its second summed apart (CUDA's: pooling.Tail): seconds (best of 5 after a warm-up, synchronised), K (the
    most subwords a word has), the tail's subwords (the most a sentence has) and the host's seconds to make the key
    side's Segments with it, whether two runs' word maps are bit for bit the same, and the largest difference between
    the two ways."""
    from unittest import mock

    from probes.encoding import pooling
    from probes.encoding.batching import Batch
    from probes.encoding.subwords import encode

    items, _ = encode(encoder.tokenizer, sentences, encoder.max_length)
    items.sort(key=lambda e: len(e.input_ids))  # length-sorted, as a run cuts its batches
    widest = items[-max(1, DEVICE_TOKENS // len(items[-1].input_ids)):]  # the last batch at the budget
    corpus = long_corpus(bench.tmp / "pooling.conllu", long["batch_size"], long["length"])
    made = read_corpus([str(corpus)]).sentences
    long_items, _ = encode(encoder.tokenizer, made, encoder.max_length)
    batches = {"widest": Batch.from_encoded([sentences[e.index] for e in widest], widest, encoder.tokenizer,
                                            "mean-sum"),
               "long": Batch.from_encoded([made[e.index] for e in long_items], long_items, encoder.tokenizer,
                                          "mean-sum")}
    generator = torch.Generator(device=bench.device).manual_seed(0)
    record = {}
    for name, batch in batches.items():
        mask = batch.attention_mask.to(bench.device).bool()  # [B,T]
        b, t = mask.shape
        logits = torch.randn(b, encoder.heads, t, t, generator=generator, device=bench.device)
        attention = logits.masked_fill(~mask[:, None, None, :], float("-inf")).softmax(-1)  # [B,H,T,T]
        query, key = batch.pooling(bench.device)
        host = key.cpu()
        start = time.perf_counter()
        tail = pooling.segments(host, ordered=True).tail
        entry = {"sentences": b, "length": t, "words": query.shape[1], "most_subwords": int((host != 0).sum(-1).max()),
                 "tail_subwords": 0 if tail is None else int(tail.position.shape[1]),
                 "segments_seconds": time.perf_counter() - start}  # the key side's Segments, made on the host
        pooled = {}
        for way, ordered in (("scatter_add", False), ("tails", True)):
            given = tuple(pooling.segments(p.cpu(), ordered).to(bench.device) for p in (query, key))
            with mock.patch.object(pooling, "in_order", lambda device, ordered=ordered: ordered), \
                    mock.patch.object(pooling, "PRODUCT_WIDTH", 0):  # sums, whatever the width
                pool = partial(pool_attention, attention, query, key, segmented=lambda given=given: given)
                pooled[way] = pool()
                bench.sync()
                seconds = []
                for _ in range(5):
                    start = time.perf_counter()
                    again = pool()
                    bench.sync()
                    seconds.append(time.perf_counter() - start)
                entry[way] = {"seconds": min(seconds), "same_twice": bool(torch.equal(pooled[way], again))}
        entry["largest_difference"] = float((pooled["scatter_add"] - pooled["tails"]).abs().max())
        record[name] = entry
    return record


def long_phases(bench: Bench, shape: dict, long: dict) -> dict:
    """The BERT-large shape on `long`["sentences"] sentences of `long`["length"] subwords at batch `long`["batch_size"]:
    the bare SDPA pass (sentences/s), dep timed in phases (gpu_phases.phases) and dep under torch.profiler."""
    built = build_bert(bench.tmp / "bert_large", shape, bench.device, bench.tokenizer)
    encoder = probes.load_encoder(str(built), device=str(bench.device))
    corpus = long_corpus(bench.tmp / "long.conllu", long["sentences"], long["length"])
    bare = bare_record(bench, Bare(built, encoder), read_corpus([str(corpus)]).sentences, batch_size=long["batch_size"])

    def run():
        return probes.run(["dep"], corpus=str(corpus), encoder=encoder, batch_size=long["batch_size"], progress=False)

    run()  # warm
    return {**long, "bare": bare, "phases": gpu_phases.phases(run, bench.sync),
            "profile": gpu_phases.top_operations(run, bench.sync, bench.device)}


if __name__ == "__main__":
    sys.exit(main())
