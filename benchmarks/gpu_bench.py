"""The GPU benchmark (issue 44 item 7): one call that measures the GPU path against the bare SDPA pass, with a CPU
rehearsal.

    python benchmarks/gpu_bench.py [--dry-run] [--out DIR] [--repeats N] [--only STEP,...] [--skip NAME,...]
                                   [--corpus FILE] [--tokenizer DIR]

Randomly initialised models (seed 0) of BERT-base shape (12 layers × 12 heads, hidden 768) and BERT-large shape
(24 × 16, hidden 1024) with the packaged MiniLM's tokenizer, on UD English EWT dev (--dry-run: 2 and 3 layers × 4
heads, hidden 64 and 128, on the bundled sample's first 24 sentences), and a Llama-shaped decoder. Every time is
the best of --repeats after a warm-up (a run's warm-up: its first WARM_UP sentences), every ratio is to a bare pass
measured in the same process: the plain model loaded with SDPA attention (transformers' ``attn_implementation=
"sdpa"``, no capture, no probe) over the same sentences, tokenised and length-sorted as a run does
(benchmarks.harness.bare_forward_over).

Steps (each a key of the report; inside one, each measurement its own key):
 1. bert_base, 2. bert_large: each shape on EWT dev:
    bare_batch32 (the bare pass at batch 32), dep (``probes run dep``, default settings), dep_no_intervals
    (replicates=0, views=0), six (dep pos trees mass entropy positional in one run: the encoder probes that read
    EWT dev), bare_budget (the bare pass at dep's own token budget, no sentence cap), curve (the bare pass over
    token budgets, no sentence cap: seconds and sentences/s at each, the best, and the smallest budget within 10%
    of the best, against which probes.encoding.batching.DEVICE_TOKENS is checked), dep_batch32 (dep with
    batch_size=32: the sentence cap that the CPU's default keeps), alone (each of the six probes in a run of its
    own: which one costs the six-probe run its time; and trees_on_device, trees with ``tree_decoding="device"``),
    six_trees_on_device (the six-probe run with trees decoded on the device: issue 44 item 1's "measure which is
    faster"), dep_sdpa_qk and six_sdpa_qk (dep and the six probes with capture sdpa-qk: the model run by SDPA, the
    maps computed from its queries and keys, against the default eager hooks: issue 44 item 4), phases (bert_base
    only: where dep's, trees' (both ways) and the six probes' time goes, and the top operations under
    torch.profiler: benchmarks/gpu_phases.py), and summary (every run's time over the bare pass at batch 32 and over
    the best bare pass).
 3. large_512: the BERT-large shape on sentences of 512 subwords (LONG_512), batch 32: dep's sentences/s against
    the bare pass's.
 4. decoder: a Llama-shaped decoder (16 layers × 32 heads, 8 KV heads, width 2048; --dry-run: 2 × 4, 2 KV heads,
    width 64): the four causal detectors (prev_token, duplicate_token, induction, sink) on repeated random tokens
    at contexts of 1,024 and 4,096 tokens (--dry-run: 64 and 128), against the bare SDPA pass over the same
    sequences in the batches the run made.
 5. dtype: bfloat16 against float32 on step 3's sentences: the bare pass in each, and dep in each where the run
    has a ``dtype`` setting (probes.settings.run_settings.RunSettings; recorded "not available" where it has none).
 6. acceptance: issue 44's thresholds against the figures above (a figure not measured: met is null).

Every measurement records its peak memory: the device's (torch.cuda.max_memory_allocated) on CUDA, the process'
peak resident memory on the CPU. A failed measurement records its error's last lines and the next one still runs;
the report (DIR/gpu_bench.json) is written after every measurement, so a run cut short keeps what it measured. The
table on stdout is printed from the report.

--dry-run's figures are a rehearsal of the code, not benchmark figures. Without a CUDA device and without --dry-run
it exits 2 with one line.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

import probes
from benchmarks import gpu_phases
from benchmarks.gpu_check import (EWT_DEV, batches_seen, build_bert, ewt_dev, long_corpus, save_random,
                                   write_report)
from benchmarks.harness import PeakRSS, bare_forward_over
from probes.encoding.batching import DEVICE_TOKENS
from probes.tools.detect import DETECTORS, detect
from probes.encoding.sequences import repeated_random_tokens
from probes.corpus import read_corpus
from probes.base.defaults import bundled_corpus, default_model
from probes.base.errors import InputError
from probes.settings.run_settings import RunSettings

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("bert_base", "bert_large", "large_512", "decoder", "dtype")  # --only's names, in the order they run
SIX = ["dep", "pos", "trees", "mass", "entropy", "positional"]  # the encoder probes that read EWT dev
SHAPES = {"bert_base": {"layers": 12, "heads": 12, "hidden": 768, "length": 512},
          "bert_large": {"layers": 24, "heads": 16, "hidden": 1024, "length": 512}}
SHAPES_REHEARSAL = {"bert_base": {"layers": 2, "heads": 4, "hidden": 64, "length": 512},
                    "bert_large": {"layers": 3, "heads": 4, "hidden": 128, "length": 512}}
BUDGETS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]  # the curve's token budgets (DEVICE_TOKENS added)
BUDGETS_REHEARSAL = [128, 256, 512, 1024]
WITHIN = 0.10  # the curve's knee: the smallest budget whose throughput is within this share of the best
LONG_512 = {"length": 512, "sentences": 256, "batch_size": 32}
LONG_REHEARSAL = {"length": 64, "sentences": 12, "batch_size": 4}
DECODER = {"layers": 16, "heads": 32, "kv_heads": 8, "hidden": 2048, "intermediate": 8192, "vocab": 4096,
           "contexts": {1024: 64, 4096: 16}}  # context -> sequences (each `context` // 2 random tokens, repeated)
DECODER_REHEARSAL = {"layers": 2, "heads": 4, "kv_heads": 2, "hidden": 64, "intermediate": 128, "vocab": 256,
                     "contexts": {64: 6, 128: 4}}
WARM_UP = 64  # sentences (--dry-run: 4) of a run's warm-up: kernels, caches, numba's compiled trees
LIMIT_REHEARSAL = 24  # sentences of the bundled sample under --dry-run
ACCEPTANCE = {"dep_over_best_bare": 1.5, "six_over_best_bare": 3.0, "large_512_share_of_bare": 0.5,
              "decoder_4k_over_bare": 1.2, "bf16_dep_speedup": 5.0}  # issue 44's thresholds (≤, ≤, ≥, ≤, ≥)


@dataclasses.dataclass
class Bench:
    """What every step reads: the device, the sizes (full or rehearsal), the corpus and the repeats."""

    device: torch.device
    dry_run: bool
    corpus: str
    limit: int | None
    repeats: int
    tmp: Path
    tokenizer: str  # the folder whose tokenizer the random encoders use
    skip: frozenset[str] = frozenset()  # measurements of steps 1 and 2 left out (--skip)

    @property
    def warm_up(self) -> int:
        return 4 if self.dry_run else WARM_UP

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


class Bare:
    """The plain model of a checkpoint loaded with SDPA attention (transformers' AutoModel: the body, no head), in
    `dtype`, with the run's tokenizer and length limit: what benchmarks.harness.bare_forward_over runs."""

    def __init__(self, folder: Path, encoder: probes.Encoder, dtype: torch.dtype = torch.float32):
        from transformers import AutoModel

        self.tokenizer, self.max_length, self.device = encoder.tokenizer, encoder.max_length, encoder.device
        self.model = AutoModel.from_pretrained(folder, attn_implementation="sdpa", dtype=dtype).to(self.device).eval()

    @torch.inference_mode()
    def bare_forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids.to(self.device),
                          attention_mask=attention_mask.to(self.device)).last_hidden_state  # [B,T,D]


@contextlib.contextmanager
def peak_memory(device: torch.device):
    """Yields a dict that, after the block, holds the block's peak memory: the device's allocated bytes on CUDA
    (torch.cuda.max_memory_allocated), else the process' resident bytes (benchmarks.harness.PeakRSS)."""
    peak: dict[str, Any] = {}
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        yield peak
        torch.cuda.synchronize(device)
        peak.update(kind="cuda max_memory_allocated", bytes=int(torch.cuda.max_memory_allocated(device)))
    else:
        with PeakRSS() as rss:
            yield peak
        peak.update(kind="process peak RSS", bytes=int(rss.peak))


def timed(bench: Bench, call: Callable[[], Any], warm: Callable[[], Any] | None = None) -> tuple[dict, Any]:
    """`warm()` (default: `call()`) once, then `call()` best of bench.repeats, synchronised; the record (seconds, every
    repeat's seconds, peak memory) and the last call's value."""
    (warm or call)()
    bench.sync()
    seconds, value = [], None
    with peak_memory(bench.device) as peak:
        for _ in range(bench.repeats):
            start = time.perf_counter()
            value = call()
            bench.sync()
            seconds.append(time.perf_counter() - start)
    return {"seconds": min(seconds), "all_seconds": seconds, "peak_memory": peak}, value


def bare_record(bench: Bench, bare: Bare, sentences: list, **batching) -> dict:
    """The bare pass over `sentences` (batch_size / max_tokens as a run cuts them): best of bench.repeats after a
    warm-up pass, sentences per second."""
    bare_forward_over(bare, sentences, repeats=1, **batching)  # warm-up
    with peak_memory(bench.device) as peak:
        seconds = bare_forward_over(bare, sentences, repeats=bench.repeats, **batching)
    return {"seconds": seconds, "sentences": len(sentences), "sentences_per_second": len(sentences) / seconds,
            "peak_memory": peak, **batching}


def run_record(bench: Bench, names: list[str], encoder: probes.Encoder | None, corpus: str, limit: int | None,
               **settings) -> dict:
    """probes.run(names) on `corpus`, best of bench.repeats after a warm-up on its first sentences: the time, the
    sentences scored and sentences/s, the token budget and batch size the run recorded."""
    kwargs = dict(corpus=corpus, encoder=encoder, progress=False, **settings)
    record, results = timed(bench, lambda: probes.run(names, limit=limit, **kwargs),
                            warm=lambda: probes.run(names, limit=bench.warm_up, **kwargs))
    info = results[names[0]].info
    return {**record, "probes": names, "sentences": info.sentences,
            "sentences_per_second": info.sentences / record["seconds"], "max_tokens": info.settings["max_tokens"],
            "batch_size": info.settings["batch_size"], "settings": dict(settings),
            "capture": None if encoder is None else encoder.capture}


def build_decoder(out: Path, shape: dict, device: torch.device) -> Path:
    """A Llama of `shape` (random init, seed 0, made on `device`) with a word-level tokenizer over t1..t{vocab - 1}
    (id 0 the end of sequence, no start token: a sequence of T tokens is T positions) in `out`."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    positions = max(shape["contexts"])
    vocabulary = {"<|endoftext|>": 0, **{f"t{i}": i for i in range(1, shape["vocab"])}}
    backend = Tokenizer(models.WordLevel(vocabulary, unk_token="<|endoftext|>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>",
                                        unk_token="<|endoftext|>", pad_token="<|endoftext|>",
                                        model_max_length=positions)
    config = LlamaConfig(vocab_size=shape["vocab"], hidden_size=shape["hidden"],
                         intermediate_size=shape["intermediate"], num_hidden_layers=shape["layers"],
                         num_attention_heads=shape["heads"], num_key_value_heads=shape["kv_heads"],
                         max_position_embeddings=positions,
                         bos_token_id=None, eos_token_id=0, pad_token_id=0, tie_word_embeddings=True)
    return save_random(LlamaForCausalLM, config, tokenizer, out, device)


def sdpa_kernel_chosen(shape: dict, device: torch.device) -> dict:
    """The kernel SDPA picks on `device` for the decoder's float32 attention at each context, as transformers calls it
    on a batch without padding (is_causal, the key heads grouped: enable_gqa): the math kernel's probabilities are
    the maps themselves (probes.capture.sdpa_qk), another kernel's maps are computed beside it."""
    from torch.nn.attention import SDPBackend

    names = {b.value: b.name for b in SDPBackend.__members__.values()}
    d = shape["hidden"] // shape["heads"]
    chosen = {}
    for context in shape["contexts"]:
        query = torch.empty(1, shape["heads"], context, d, device=device)  # [1,H,T,d]
        key = torch.empty(1, shape["kv_heads"], context, d, device=device)  # [1,K,T,d]
        chosen[str(context)] = names[torch._fused_sdp_choice(query, key, key, None, 0.0, True, enable_gqa=True)]
    return chosen


def measure(report: dict, path: tuple[str, ...], out: Path, what: Callable[[], Any],
            file: str = "gpu_bench.json") -> Any:
    """report[path...] = what(), or its error's last lines; the report written either way (out / file). Returns the
    record (None where it failed)."""
    owner = report
    for key in path[:-1]:
        owner = owner.setdefault(key, {})
    print(f"... {'/'.join(path)}", file=sys.stderr, flush=True)
    try:
        owner[path[-1]] = what()
    except Exception:  # noqa: BLE001 - a benchmark: record the failure, go on to the next measurement
        owner[path[-1]] = {"error": "".join(traceback.format_exc().splitlines(keepends=True)[-12:])}
        print(owner[path[-1]]["error"], file=sys.stderr, flush=True)
    write_report(report, out / file)
    return None if "error" in owner[path[-1]] else owner[path[-1]]


def seconds_of(step: dict, key: str) -> float | None:
    record = step.get(key)
    return None if not isinstance(record, dict) or "seconds" not in record else record["seconds"]


def curve(bench: Bench, bare: Bare, sentences: list) -> dict:
    """The bare pass over token budgets (no sentence cap): each budget's seconds and sentences/s; the best, the
    knee (the smallest budget within WITHIN of the best) and whether DEVICE_TOKENS is within WITHIN of the best."""
    budgets = sorted(set(BUDGETS_REHEARSAL if bench.dry_run else BUDGETS) | {DEVICE_TOKENS})
    points = []
    for budget in budgets:
        record = bare_record(bench, bare, sentences, batch_size=None, max_tokens=budget)
        points.append({"max_tokens": budget, "seconds": record["seconds"],
                       "sentences_per_second": record["sentences_per_second"], "peak_memory": record["peak_memory"]})
    best = max(points, key=lambda p: p["sentences_per_second"])
    near = [p for p in points if p["sentences_per_second"] >= (1 - WITHIN) * best["sentences_per_second"]]
    ours = next(p for p in points if p["max_tokens"] == DEVICE_TOKENS)
    return {"points": points, "best": best, "knee": near[0]["max_tokens"], "within": WITHIN,
            "device_tokens": DEVICE_TOKENS, "device_tokens_within": ours in near}


def encoder_shape(bench: Bench, report: dict, key: str, shape: dict, out: Path) -> tuple[Path, probes.Encoder] | None:
    """Step 1 or 2: the shape `key` on EWT dev (see the module docstring); returns its checkpoint and encoder."""
    made: dict[str, Any] = {}

    def take(path: tuple[str, ...], what: Callable[[], Any]) -> Any:  # measure(), unless --skip names path[1]
        return None if path[1] in bench.skip else measure(report, path, out, what)

    def model() -> dict:
        start = time.perf_counter()
        made["folder"] = build_bert(bench.tmp / key, shape, bench.device, bench.tokenizer)
        made["encoder"] = probes.load_encoder(str(made["folder"]), device=str(bench.device))
        made["bare"] = Bare(made["folder"], made["encoder"])
        sentences = read_corpus([bench.corpus]).sentences
        made["sentences"] = sentences[:bench.limit] if bench.limit else sentences
        return {**shape, "seconds_to_build": time.perf_counter() - start, "corpus": bench.corpus,
                "sentences": len(made["sentences"])}

    if take((key, "model"), model) is None:
        return None
    encoder, bare, sentences = made["encoder"], made["bare"], made["sentences"]
    corpus, limit = bench.corpus, bench.limit
    take((key, "bare_batch32"), lambda: bare_record(bench, bare, sentences, batch_size=32))
    dep = take((key, "dep"), lambda: run_record(bench, ["dep"], encoder, corpus, limit))
    take((key, "dep_no_intervals"), lambda: run_record(bench, ["dep"], encoder, corpus, limit, replicates=0, views=0))
    take((key, "six"), lambda: run_record(bench, SIX, encoder, corpus, limit))
    take((key, "six_trees_on_device"), lambda: run_record(bench, SIX, encoder, corpus, limit, tree_decoding="device"))
    sdpa: dict[str, probes.Encoder] = {}  # the same checkpoint loaded for capture sdpa-qk (SDPA runs the model)

    def sdpa_qk() -> probes.Encoder:
        if "encoder" not in sdpa:
            sdpa["encoder"] = probes.load_encoder(str(made["folder"]), device=str(bench.device), capture="sdpa-qk")
        return sdpa["encoder"]

    take((key, "dep_sdpa_qk"), lambda: run_record(bench, ["dep"], sdpa_qk(), corpus, limit))
    take((key, "six_sdpa_qk"), lambda: run_record(bench, SIX, sdpa_qk(), corpus, limit))
    sdpa.clear()
    if key == "bert_base":
        take((key, "phases"), lambda: gpu_phases.measured({"float32": encoder}, corpus, limit, bench.device,
                                                          bench.sync))
    if dep is not None:
        take((key, "bare_budget"),
             lambda: bare_record(bench, bare, sentences, batch_size=None, max_tokens=dep["max_tokens"]))
    take((key, "curve"), lambda: curve(bench, bare, sentences))
    take((key, "dep_batch32"), lambda: run_record(bench, ["dep"], encoder, corpus, limit, batch_size=32))
    for name in SIX:
        take((key, "alone", name), lambda: run_record(bench, [name], encoder, corpus, limit))
    take((key, "alone", "trees_on_device"),
         lambda: run_record(bench, ["trees"], encoder, corpus, limit, tree_decoding="device"))
    take((key, "summary"), lambda: summary(report[key]))
    return made["folder"], encoder


def summary(step: dict) -> dict:
    """Each run's seconds over the bare pass at batch 32 and over the best bare pass (batch 32, the run's budget
    or the curve's best)."""
    bare32 = seconds_of(step, "bare_batch32")
    bares = [s for s in (bare32, seconds_of(step, "bare_budget")) if s is not None]
    if isinstance(step.get("curve"), dict) and "best" in step["curve"]:
        bares.append(step["curve"]["best"]["seconds"])
    best = min(bares, default=None)
    ratios = {}
    for run in ("dep", "dep_no_intervals", "six", "six_trees_on_device", "dep_sdpa_qk", "six_sdpa_qk", "dep_batch32"):
        seconds = seconds_of(step, run)
        if seconds is not None:
            ratios[run] = {"over_bare_batch32": None if bare32 is None else seconds / bare32,
                           "over_best_bare": None if best is None else seconds / best}
    return {"bare_batch32_seconds": bare32, "best_bare_seconds": best, "ratios": ratios}


def large_512(bench: Bench, folder: Path, encoder: probes.Encoder, long: dict) -> dict:
    """Step 3: dep at batch `long`["batch_size"] on sentences of `long`["length"] subwords, against the bare pass."""
    corpus = long_corpus(bench.tmp / "long.conllu", long["sentences"], long["length"])
    sentences = read_corpus([str(corpus)]).sentences
    bare = bare_record(bench, Bare(folder, encoder), sentences, batch_size=long["batch_size"])
    dep = run_record(bench, ["dep"], encoder, str(corpus), None, batch_size=long["batch_size"])
    return {**long, "dep": dep, "bare": bare,
            "share_of_bare": dep["sentences_per_second"] / bare["sentences_per_second"]}


def decoder(bench: Bench, report: dict, out: Path) -> None:
    """Step 4: the Llama-shaped decoder's detectors at each context against the bare SDPA pass (same batches)."""
    shape = DECODER_REHEARSAL if bench.dry_run else DECODER
    made: dict[str, Any] = {}

    def model() -> dict:
        start = time.perf_counter()
        made["folder"] = build_decoder(bench.tmp / "decoder", shape, bench.device)
        made["encoder"] = probes.load_encoder(str(made["folder"]), device=str(bench.device))
        made["bare"] = Bare(made["folder"], made["encoder"])
        return {**{k: v for k, v in shape.items() if k != "contexts"}, "seconds_to_build": time.perf_counter() - start,
                "capture": made["encoder"].capture, "sdpa_kernel": sdpa_kernel_chosen(shape, bench.device)}

    if measure(report, ("decoder", "model"), out, model) is None:
        return
    encoder, bare = made["encoder"], made["bare"]
    for context, count in shape["contexts"].items():
        length = context // 2

        def at_context() -> dict:
            args = dict(encoder=encoder, length=length, sequence_seed=0, progress=False)
            with batches_seen() as rows:  # the warm-up's 2 sequences, then each timed run's batches
                record, results = timed(bench, lambda: detect(list(DETECTORS), count=count, **args),
                                        warm=lambda: detect(list(DETECTORS), count=2, **args))
            timed_rows = rows[int(np.searchsorted(np.cumsum(rows), 2)) + 1:]
            batches = timed_rows[:len(timed_rows) // bench.repeats]  # one timed run's
            assert sum(batches) == count, (rows, count)
            sequences = torch.as_tensor(repeated_random_tokens(encoder.tokenizer, count, length, 0))  # [count,T]
            cuts = np.cumsum([0, *batches])

            def bare_pass() -> None:
                for a, b in zip(cuts[:-1], cuts[1:]):
                    ids = sequences[a:b]  # [rows,T]
                    bare.bare_forward(ids, torch.ones_like(ids))

            bare_record, _ = timed(bench, bare_pass)
            info = next(iter(results.values())).info
            return {"context": context, "sequences": count, "batches": batches, "detectors": record,
                    "bare": bare_record, "over_bare": record["seconds"] / bare_record["seconds"],
                    "max_tokens": info.settings["max_tokens"], "sequences_per_second": count / record["seconds"]}

        measure(report, ("decoder", f"context_{context}"), out, at_context)


def dtype_available() -> dict:
    """Whether the run has a ``dtype`` setting (RunSettings' field) and load_encoder a ``dtype`` argument."""
    return {"setting": "dtype" in {f.name for f in dataclasses.fields(RunSettings)},
            "load_encoder": "dtype" in inspect.signature(probes.load_encoder).parameters}


def dtypes(bench: Bench, folder: Path, encoder: probes.Encoder, long: dict) -> dict:
    """Step 5: bfloat16 against float32 on step 3's sentences: the bare pass in each, and dep in each where the run
    has a dtype setting (with an encoder loaded in that dtype where load_encoder takes one; else the run loads the
    model itself, and its time includes the loading: "dep_includes_loading")."""
    available = dtype_available()
    corpus = bench.tmp / "long.conllu"
    if not corpus.is_file():
        long_corpus(corpus, long["sentences"], long["length"])
    sentences = read_corpus([str(corpus)]).sentences
    report: dict[str, Any] = {"available": available, **long,
                              "dep_includes_loading": available["setting"] and not available["load_encoder"]}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        report[name] = {"bare": bare_record(bench, Bare(folder, encoder, dtype), sentences,
                                            batch_size=long["batch_size"])}
        if not available["setting"]:
            report[name]["dep"] = "not available: probes.settings.run_settings.RunSettings has no dtype setting"
            continue
        if available["load_encoder"]:
            loaded = probes.load_encoder(str(folder), device=str(bench.device), dtype=name)
            report[name]["dep"] = run_record(bench, ["dep"], loaded, str(corpus), None,
                                             batch_size=long["batch_size"], dtype=name)
            del loaded
        else:
            report[name]["dep"] = run_record(bench, ["dep"], None, str(corpus), None, model=str(folder),
                                             device=str(bench.device), batch_size=long["batch_size"], dtype=name)
    report["bare_speedup"] = report["float32"]["bare"]["seconds"] / report["bfloat16"]["bare"]["seconds"]
    deps = [report[n]["dep"] for n in ("float32", "bfloat16")]
    report["dep_speedup"] = deps[0]["seconds"] / deps[1]["seconds"] if all(isinstance(d, dict) for d in deps) else None
    return report


def acceptance(report: dict) -> dict:
    """Issue 44's thresholds against the report's figures: each figure, its limit and whether it is met (None where
    the figure was not measured)."""
    def ratio(shape: str, run: str) -> float | None:
        try:
            return report[shape]["summary"]["ratios"][run]["over_best_bare"]
        except (KeyError, TypeError):
            return None

    def get(*path: str) -> float | None:
        value: Any = report
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value if isinstance(value, (int, float)) else None

    contexts = [k for k in report.get("decoder", {}) if k.startswith("context_")]
    decoder_4k = get("decoder", max(contexts, key=lambda k: int(k.split("_")[1])), "over_bare") if contexts else None
    figures = {"dep_over_best_bare/bert_base": (ratio("bert_base", "dep"), "dep_over_best_bare", "<="),
               "dep_over_best_bare/bert_large": (ratio("bert_large", "dep"), "dep_over_best_bare", "<="),
               "six_over_best_bare/bert_base": (ratio("bert_base", "six"), "six_over_best_bare", "<="),
               "six_over_best_bare/bert_large": (ratio("bert_large", "six"), "six_over_best_bare", "<="),
               "large_512_share_of_bare": (get("large_512", "share_of_bare"), "large_512_share_of_bare", ">="),
               "decoder_4k_over_bare": (decoder_4k, "decoder_4k_over_bare", "<="),
               "bf16_dep_speedup": (get("dtype", "dep_speedup"), "bf16_dep_speedup", ">=")}
    checks = {}
    for name, (value, limit_key, sense) in figures.items():
        limit = ACCEPTANCE[limit_key]
        met = None if value is None else (value <= limit if sense == "<=" else value >= limit)
        checks[name] = {"value": value, "limit": limit, "sense": sense, "met": met}
    return checks


def table(report: dict) -> str:
    """The report's figures as the issue's table and a line per further step (a failed measurement: its error's
    last line)."""
    def cell(step: dict, key: str, best: float | None) -> str:
        record = step.get(key)
        if record is None:
            return "not run"
        if "error" in record:
            return "FAILED " + record["error"].strip().splitlines()[-1][:60]
        seconds = record["seconds"]
        return f"{seconds:.3g}" + ("" if best is None or key.startswith("bare") else f" ({seconds / best:.2f}×)")

    rehearsal = " (dry run: a rehearsal, not benchmark figures)" if report["dry_run"] else ""
    lines = [f"device: {report['device']}{rehearsal}, torch {report['torch']}, best of {report['repeats']}; seconds, "
             "(×) a run's time over the best bare SDPA pass of its shape",
             "| model | bare SDPA, batch 32 | bare SDPA, run's budget | bare SDPA, best (budget) | probes run dep | "
             "dep, replicates=0 views=0 | six probes, one run | dep, batch_size=32 |",
             "|---|---|---|---|---|---|---|---|"]
    for key in SHAPES:
        step = report.get(key)
        if step is None:
            lines.append(f"| {key} | not run |")
            continue
        if "error" in step.get("model", {}):
            lines.append(f"| {key} | FAILED {step['model']['error'].strip().splitlines()[-1]} |")
            continue
        best = step.get("summary", {}).get("best_bare_seconds") if isinstance(step.get("summary"), dict) else None
        knee = step.get("curve", {})
        best_cell = (f"{knee['best']['seconds']:.3g} ({knee['best']['max_tokens']})" if "best" in knee
                     else cell(step, "curve", None))
        cells = [cell(step, "bare_batch32", best), cell(step, "bare_budget", best), best_cell,
                 *(cell(step, run, best) for run in ("dep", "dep_no_intervals", "six", "dep_batch32"))]
        lines.append(f"| {key} | {' | '.join(cells)} |")
        alone = step.get("alone", {})
        if alone:
            names = [name for name in [*SIX, "trees_on_device"] if name in alone]
            lines.append("    alone: " + ", ".join(f"{name} {cell(alone, name, best)}" for name in names))
        if "six_trees_on_device" in step:
            lines.append(f"    six probes, trees decoded on the device: {cell(step, 'six_trees_on_device', best)}")
        if "dep_sdpa_qk" in step:
            lines.append(f"    capture sdpa-qk (the maps from SDPA's queries and keys): dep "
                         f"{cell(step, 'dep_sdpa_qk', best)}, six probes {cell(step, 'six_sdpa_qk', best)}")
        lines.extend(phase_lines(step.get("phases")))
        if "knee" in knee:
            within = "yes" if knee["device_tokens_within"] else "NO"
            lines.append(f"    curve: smallest budget within {knee['within']:.0%} of the best: {knee['knee']}; "
                         f"DEVICE_TOKENS {knee['device_tokens']} within: {within}")
    long = report.get("large_512")
    if long is not None:
        lines.append("large_512: FAILED " + long["error"].strip().splitlines()[-1] if "error" in long else
                     f"large_512: BERT-large shape at {long['length']} subwords, batch {long['batch_size']}: dep "
                     f"{long['dep']['sentences_per_second']:.3g} sentences/s, bare SDPA "
                     f"{long['bare']['sentences_per_second']:.3g}/s ({long['share_of_bare']:.2f} of it)")
    contexts = [k for k in report.get("decoder", {}) if k.startswith("context_")]
    for key in sorted(contexts, key=lambda k: int(k.split("_")[1])):
        record = report["decoder"][key]
        lines.append(f"decoder {key}: FAILED " + record["error"].strip().splitlines()[-1] if "error" in record else
                     f"decoder at {record['context']} tokens: detectors {record['detectors']['seconds']:.3g} s, bare "
                     f"SDPA {record['bare']['seconds']:.3g} s ({record['over_bare']:.2f}×), "
                     f"{record['sequences_per_second']:.3g} sequences/s, SDPA's kernel "
                     f"{report['decoder'].get('model', {}).get('sdpa_kernel', {}).get(str(record['context']))}")
    if "error" in report.get("decoder", {}).get("model", {}):
        lines.append("decoder: FAILED " + report["decoder"]["model"]["error"].strip().splitlines()[-1])
    dtype = report.get("dtype")
    if dtype is not None:
        if "error" in dtype:
            lines.append("dtype: FAILED " + dtype["error"].strip().splitlines()[-1])
        else:
            dep = ("dep: not available (no dtype setting)" if dtype["dep_speedup"] is None
                   else f"dep {dtype['dep_speedup']:.2f}× faster")
            lines.append(f"dtype: bfloat16 against float32: bare SDPA {dtype['bare_speedup']:.2f}× faster; {dep}")
    for name, check in report.get("acceptance", {}).items():
        value = "not measured" if check["value"] is None else f"{check['value']:.3g}"
        met = {None: "-", True: "met", False: "NOT met"}[check["met"]]
        lines.append(f"acceptance {name}: {value} {check['sense']} {check['limit']}: {met}")
    return "\n".join(lines)


def phase_lines(phases: dict | None) -> list[str]:
    """A line per run of the phases step (benchmarks/gpu_phases.py): its seconds cut into phases, trees' parts."""
    if phases is None:
        return []
    if "error" in phases:
        return ["    phases: FAILED " + phases["error"].strip().splitlines()[-1]]
    lines = []
    for name, record in phases.items():
        p = record["phases"]
        parts = ", ".join(f"{part} {p[part]['seconds']:.3g}" for part in
                          ("ensemble", "decode_host", "decode_device", "waiting") if p[part]["calls"])
        rest = ", ".join(f"{part} {p[part]['seconds']:.3g}" for part in
                         ("reading", "preparing", "moving", "computing", "attaching") if p[part]["calls"])
        lines.append(f"    phases {name}: {p['seconds']:.3g} s = fit pass {p['fit_pass']['seconds']:.3g} + scoring "
                     f"pass {p['scoring_pass']['seconds']:.3g} + rest {p['rest']:.3g} ({rest})"
                     + (f"; trees: {parts}" if parts else "")
                     + f"; {p['faults']} page faults, gc {p['gc']['seconds']:.3g} s "
                       f"({'/'.join(map(str, p['gc']['collections']))} collections by generation)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="the CPU rehearsal at tiny sizes (not benchmark figures)")
    parser.add_argument("--out", type=Path, default=Path("gpu_bench"), help="folder for gpu_bench.json")
    parser.add_argument("--corpus", help="the encoders' corpus (default: EWT dev under ../shared or ./shared; "
                                         "--dry-run: the bundled sample's first 24 sentences)")
    parser.add_argument("--tokenizer", help="a folder whose tokenizer the random encoders use (default: the packaged "
                                            "MiniLM's; its tokenizer files alone suffice, no weights)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats after the warm-up, the best kept "
                                                                  "(default 2; --dry-run: 1)")
    parser.add_argument("--only", help=f"comma-separated steps to run, of {', '.join(STEPS)} (default: all)")
    parser.add_argument("--skip", default="", help="comma-separated measurements of steps 1 and 2 to leave out, "
                                                   "e.g. alone,curve (default: none)")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: run with --dry-run for the CPU rehearsal", file=sys.stderr)
        return 2
    only = STEPS if args.only is None else tuple(s.strip() for s in args.only.split(","))
    if not set(only) <= set(STEPS):
        print(f"--only: unknown step(s) {', '.join(sorted(set(only) - set(STEPS)))}; steps: {', '.join(STEPS)}",
              file=sys.stderr)
        return 2
    corpus = args.corpus if args.corpus is not None or args.dry_run else ewt_dev()
    if corpus is None and not args.dry_run:
        print(f"EWT dev not found under ../shared or ./shared ({EWT_DEV}): pass --corpus", file=sys.stderr)
        return 2
    try:
        tokenizer = args.tokenizer or default_model()
    except InputError as e:
        print(f"{e} (or pass --tokenizer DIR: a folder with MiniLM's tokenizer files)", file=sys.stderr)
        return 2
    device = torch.device("cpu" if args.dry_run else "cuda")
    repeats = args.repeats or (1 if args.dry_run else 2)
    from transformers import __version__ as transformers_version

    report: dict[str, Any] = {
        "dry_run": args.dry_run, "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "transformers": transformers_version, "torch_threads": torch.get_num_threads(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),  # "highest": no TF32
        "repeats": repeats, "corpus": corpus or bundled_corpus(), "limit": LIMIT_REHEARSAL if args.dry_run else None,
        "dtype_available": dtype_available(), "device_tokens": DEVICE_TOKENS, "steps": list(only),
        "skipped": sorted(filter(None, (s.strip() for s in args.skip.split(","))))}
    write_report(report, args.out / "gpu_bench.json")
    long = LONG_REHEARSAL if args.dry_run else LONG_512
    shapes = SHAPES_REHEARSAL if args.dry_run else SHAPES
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as folder:
        bench = Bench(device, args.dry_run, report["corpus"], report["limit"], repeats, Path(folder), tokenizer,
                      frozenset(filter(None, (s.strip() for s in args.skip.split(",")))))
        made: dict[str, tuple[Path, probes.Encoder] | None] = {}
        for key in ("bert_base", "bert_large"):
            if key in only:
                made[key] = encoder_shape(bench, report, key, shapes[key], args.out)
            if device.type == "cuda":
                torch.cuda.empty_cache()

        def large() -> tuple[Path, probes.Encoder]:  # the BERT-large checkpoint of step 2, or built here
            if made.get("bert_large") is None:
                built = build_bert(bench.tmp / "bert_large_512", shapes["bert_large"], device, bench.tokenizer)
                made["bert_large"] = built, probes.load_encoder(str(built), device=str(device))
            return made["bert_large"]

        if "large_512" in only:
            measure(report, ("large_512",), args.out, lambda: large_512(bench, *large(), long))
        if "dtype" in only:
            measure(report, ("dtype",), args.out, lambda: dtypes(bench, *large(), long))
        made.clear()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if "decoder" in only:
            decoder(bench, report, args.out)
    measure(report, ("acceptance",), args.out, lambda: acceptance(report))
    print(table(report))
    failed = [k for k, v in report.items() if isinstance(v, dict) and ("error" in v or any(
        isinstance(x, dict) and "error" in x for x in v.values()))]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
