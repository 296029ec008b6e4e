"""Issue 17's acceptance: a BERT-large-shaped random encoder (16 heads, hidden 1024; 24 and 12 layers) on long
sentences, whole processes. Peak memory of `probes run dep mass entropy` against the bare SDPA forward pass
without maps plus 4 layers' maps; its time against the bare eager forward pass WITH attentions over the same
batches; its peak at 12 vs 24 layers (flat in depth), raw and as what the run adds over the bare SDPA pass of
the same depth (the weights, 50 MB a layer here, grow with depth in both).

The bare passes run twice: as they are, and with glibc's mmap threshold fixed at LARGE_BLOCK (MALLOC_MMAP_THRESHOLD_,
what probes once set inside a run), so that the time ratio is reported against both.

Every measurement is a fresh process started by an intermediate one that reports its child's peak RSS
(resource.getrusage(RUSAGE_CHILDREN).ru_maxrss) and wall time. The corpus: SENTENCES sentences of
400-510 MiniLM subwords made of consecutive real EWT dev words, each word's head the previous word (the
first the root), so dep has arcs to score.

Run: pytest benchmarks/test_large_models.py --benchmark-enable -s   (a few minutes on 2 cores)
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import probes
from probes.corpus import read_corpus
from probes.base.defaults import default_model

SENTENCES = 16
HEADS, HIDDEN = 16, 1024
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
ROOT = Path(__file__).resolve().parents[1]

# The intermediate process: runs its arguments as a child, prints {"peak_mb", "seconds"} of that child.
MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - start}))
"""
# The bare forward passes over the run's own batches: eager with attentions, or SDPA without maps.
BARE = """
import sys, torch, transformers
from probes.encoding.batching import length_sorted_batches
from probes.corpus import read_corpus
from probes.encoding.subwords import encode
folder, corpus, implementation = sys.argv[1:4]
tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
model = transformers.AutoModel.from_pretrained(folder, attn_implementation=implementation).eval()
sentences = read_corpus([corpus]).sentences
encoded, _ = encode(tokenizer, sentences, 512)
with torch.inference_mode():
    for items in length_sorted_batches(encoded, 32):
        padded = tokenizer.pad({"input_ids": [e.input_ids for e in items]}, return_tensors="pt")
        model(**padded, output_attentions=implementation == "eager")
"""


def _long_corpus(out: Path) -> Path:
    """SENTENCES sentences of 400-510 subwords from consecutive EWT dev words; heads: the previous word."""
    ewt = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "ud-english-ewt" / "en_ewt-ud-dev.conllu"
    if not ewt.is_file():
        pytest.skip(f"EWT dev not found at {ewt}")
    words = [w for s in read_corpus([str(ewt)]).sentences for w in s.words]
    tokenizer = probes.load_encoder(default_model()).tokenizer
    pieces = [len(p) for p in tokenizer(words, add_special_tokens=False)["input_ids"]]
    blocks, start = [], 0
    for i in range(SENTENCES):
        target, end, size = 400 + (i * 37) % 100, start, 2  # 2: [CLS] and [SEP]
        while size + pieces[end] <= target:
            size, end = size + pieces[end], end + 1
        rows = [f"{k + 1}\t{w}\t_\tX\t_\t_\t{k}\t{'root' if k == 0 else 'dep'}\t_\t_"
                for k, w in enumerate(words[start:end])]
        blocks.append(f"# sent_id = long-{i}\n" + "\n".join(rows))
        start = end
    out.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return out


def _random_bert(out: Path, layers: int) -> Path:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(hidden_size=HIDDEN, num_attention_heads=HEADS, num_hidden_layers=layers,
                                     intermediate_size=4 * HIDDEN, max_position_embeddings=512)
    transformers.BertModel(config).save_pretrained(out)
    for name in TOKENIZER_FILES:
        shutil.copy(Path(default_model()) / name, out / name)
    return out


LARGE_BLOCK = 1 << 20  # bytes: glibc maps blocks of at least this size alone when the threshold is fixed
MMAP_THRESHOLD = {"MALLOC_MMAP_THRESHOLD_": str(LARGE_BLOCK)}  # glibc's fixed mmap threshold


def _measure(*command: str, env: dict | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", **(env or {})}
    done = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, *command], check=True, env=env,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _probes_run(folder: Path, corpus: Path) -> dict:
    return _measure("-m", "probes", "run", "dep", "mass", "entropy", "--no-plots", "--quiet", "--model", str(folder),
                    "--corpus", str(corpus))


def test_large_model_memory_and_time(benchmark, tmp_path):
    corpus = _long_corpus(tmp_path / "long.conllu")
    deep = _random_bert(tmp_path / "bert-24", 24)
    shallow = _random_bert(tmp_path / "bert-12", 12)
    lengths = [len(ids) for ids in probes.load_encoder(str(deep)).tokenizer(
        [s.words for s in read_corpus([str(corpus)]).sentences], is_split_into_words=True)["input_ids"]]
    assert len(lengths) == SENTENCES and all(400 <= n <= 510 for n in lengths)

    def measure_all() -> dict:
        bare = {f"{kind}_24{tuned}": _measure("-c", BARE, str(deep), str(corpus), kind, env=env)
                for kind in ("eager", "sdpa") for tuned, env in (("", None), ("_mmap", MMAP_THRESHOLD))}
        return {"run_24": _probes_run(deep, corpus), **bare, "run_12": _probes_run(shallow, corpus),
                "sdpa_12": _measure("-c", BARE, str(shallow), str(corpus), "sdpa")}

    m = benchmark.pedantic(measure_all, rounds=1, iterations=1)
    one_layer_mb = SENTENCES * HEADS * max(lengths) ** 2 * 4 / 2**20  # [B,H,T,T] float32, one batch
    target_mb = m["sdpa_24"]["peak_mb"] + 4 * one_layer_mb
    facts = {"one_layer_maps_mb": round(one_layer_mb), "run_peak_mb": round(m["run_24"]["peak_mb"]),
             "sdpa_peak_mb": round(m["sdpa_24"]["peak_mb"]), "eager_peak_mb": round(m["eager_24"]["peak_mb"]),
             "target_mb": round(target_mb), "peak_ratio_to_target": round(m["run_24"]["peak_mb"] / target_mb, 3),
             "peak_ratio_to_sdpa": round(m["run_24"]["peak_mb"] / m["sdpa_24"]["peak_mb"], 3),
             "time_ratio_to_eager": round(m["run_24"]["seconds"] / m["eager_24"]["seconds"], 3),
             "time_ratio_to_eager_mmap": round(m["run_24"]["seconds"] / m["eager_24_mmap"]["seconds"], 3),
             "run_s": round(m["run_24"]["seconds"], 1), "eager_s": round(m["eager_24"]["seconds"], 1),
             "eager_mmap_s": round(m["eager_24_mmap"]["seconds"], 1), "eager_mmap_peak_mb": round(m["eager_24_mmap"]["peak_mb"]),
             "sdpa_s": round(m["sdpa_24"]["seconds"], 1), "sdpa_mmap_s": round(m["sdpa_24_mmap"]["seconds"], 1),
             "sdpa_mmap_peak_mb": round(m["sdpa_24_mmap"]["peak_mb"]),
             "peak_ratio_to_target_mmap": round(m["run_24"]["peak_mb"] / (m["sdpa_24_mmap"]["peak_mb"] + 4 * one_layer_mb), 3),
             "run_12_peak_mb": round(m["run_12"]["peak_mb"]),
             "depth_ratio_24_to_12": round(m["run_24"]["peak_mb"] / m["run_12"]["peak_mb"], 3),
             # the weights grow with depth (50 MB a layer here) in the bare pass too: what the run adds over it
             "sdpa_12_peak_mb": round(m["sdpa_12"]["peak_mb"]),
             "added_over_sdpa_24_mb": round(m["run_24"]["peak_mb"] - m["sdpa_24"]["peak_mb"]),
             "added_over_sdpa_12_mb": round(m["run_12"]["peak_mb"] - m["sdpa_12"]["peak_mb"]),
             "depth_ratio_added_24_to_12": round((m["run_24"]["peak_mb"] - m["sdpa_24"]["peak_mb"])
                                                 / (m["run_12"]["peak_mb"] - m["sdpa_12"]["peak_mb"]), 3),
             "load_average": os.getloadavg()[0]}
    benchmark.extra_info.update(facts)
    print("\n" + json.dumps(facts, indent=1))
