"""Issue 11's acceptance: peak memory flat in corpus size. Whole processes of `probes run dep --no-plots` on EWT
dev (2,001 sentences), on EWT dev repeated twice (4,002 sentences) and ten times (20,010 sentences): the peaks of
dev×2 and dev×10 (resident set, of a fresh process started by an intermediate one,
resource.getrusage(RUSAGE_CHILDREN).ru_maxrss) must differ by less than 50 MB, and dev×10 must score what dev
scores (each sentence counted ten times: every count ×10, every score within 1e-6).

The corpus is read, filtered and tokenised CHUNK_SENTENCES (4,096) sentences at a time (probes.running.chunks): dev is
half a chunk, dev×2 one nearly full chunk, dev×10 five chunks. A chunk's sentences are held while it is scored,
so a fuller chunk peaks higher whatever the corpus' size: the flatness in corpus size is dev×2 against dev×10
(dev against dev×10 adds the difference between half a chunk and a full one). The figures measured with it are in
docs/benchmarks.md.

    pytest benchmarks/test_corpus_memory.py --benchmark-enable -s      (minutes: three whole runs over up to 20,010 sentences)

CORPUS_MEMORY_ROOT=/path/to/another/checkout measures that checkout's code instead (e.g. the code before
chunked reading, for the time ratio). CORPUS_MEMORY_MODEL=tiny runs a random 2-layer BERT (hidden 64, 4 heads)
with MiniLM's tokenizer instead of MiniLM: the forward passes cost next to nothing, and what grows with the
corpus (sentences, subwords, their sorting) is the same as with MiniLM, so the difference of the peaks is a
fast proxy on a busy machine (the peaks themselves are lower).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from probes.running.chunks import CHUNK_SENTENCES

ROOT = Path(os.environ.get("CORPUS_MEMORY_ROOT") or Path(__file__).resolve().parents[1])
MODEL = os.environ.get("CORPUS_MEMORY_MODEL", "minilm")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
COPIES = 10
DEV_SENTENCES = 2001  # EWT dev
FLAT_MB = 50

# The intermediate process: runs its arguments as a child, prints {"peak_mb", "seconds"} of that child.
MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - start}))
"""


def _tiny_bert(out: Path) -> Path:
    """A random 2-layer BERT (hidden 64, 4 heads) with MiniLM's tokenizer files."""
    import shutil

    import torch
    import transformers

    from probes.base.defaults import default_model

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=transformers.AutoTokenizer.from_pretrained(default_model()).vocab_size,
                                     hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=128,
                                     max_position_embeddings=512)
    transformers.BertModel(config).save_pretrained(out)
    for name in TOKENIZER_FILES:
        shutil.copy(Path(default_model()) / name, out / name)
    return out


def _run_dep(corpus: Path, out: Path, model: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "probes", "run", "dep", "--no-plots", "--quiet", "--corpus", str(corpus),
               "--out", str(out), *model]
    done = subprocess.run([sys.executable, "-c", MEASURE, *command], check=True, env=env, capture_output=True,
                          text=True, cwd=ROOT)
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "result": json.loads((out / "dep.json").read_text())}


def _labels(result: dict) -> dict[str, tuple[int, np.ndarray]]:
    """label -> (count, scores [L,H]) of a dep.json, "overall" included."""
    labels = {name: (v["count"], np.array(v["scores"], dtype=float)) for name, v in result["labels"].items()}
    labels["overall"] = (result["overall"]["count"], np.array(result["overall"]["scores"], dtype=float))
    return labels


def test_peak_memory_flat_in_corpus_size(benchmark, shared_corpora, tmp_path):
    dev = shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu"
    assert 2 * DEV_SENTENCES <= CHUNK_SENTENCES < COPIES * DEV_SENTENCES  # dev×2 one chunk, dev×10 several
    one_chunk = tmp_path / "dev2.conllu"
    one_chunk.write_bytes(dev.read_bytes() * 2)
    repeated = tmp_path / "dev10.conllu"
    repeated.write_bytes(dev.read_bytes() * COPIES)
    model = ["--model", str(_tiny_bert(tmp_path / "tiny"))] if MODEL == "tiny" else []

    def measure_runs() -> dict:
        return {"dev": _run_dep(dev, tmp_path / "out-dev", model),
                "dev2": _run_dep(one_chunk, tmp_path / "out-dev2", model),
                "dev10": _run_dep(repeated, tmp_path / "out-dev10", model)}

    m = benchmark.pedantic(measure_runs, rounds=1, iterations=1)
    one, ten = m["dev"]["result"], m["dev10"]["result"]
    assert ten["sentences"] == COPIES * one["sentences"] == COPIES * DEV_SENTENCES
    small, large = _labels(one), _labels(ten)
    assert small.keys() == large.keys()
    for name, (count, scores) in small.items():
        assert large[name][0] == COPIES * count, name
        np.testing.assert_allclose(large[name][1], scores, rtol=0, atol=1e-6, equal_nan=True, err_msg=name)
    facts = {"root": str(ROOT), "model": MODEL, "dev_peak_mb": round(m["dev"]["peak_mb"]),
             "dev2_peak_mb": round(m["dev2"]["peak_mb"]), "dev10_peak_mb": round(m["dev10"]["peak_mb"]),
             "difference_mb": round(m["dev10"]["peak_mb"] - m["dev2"]["peak_mb"]),
             "difference_to_dev_mb": round(m["dev10"]["peak_mb"] - m["dev"]["peak_mb"]),
             "dev_s": round(m["dev"]["seconds"], 1), "dev2_s": round(m["dev2"]["seconds"], 1),
             "dev10_s": round(m["dev10"]["seconds"], 1),
             "load_average": os.getloadavg()[0]}
    benchmark.extra_info.update(facts)
    print("\n" + json.dumps(facts, indent=1))
    if ROOT == Path(__file__).resolve().parents[1]:
        assert m["dev10"]["peak_mb"] - m["dev2"]["peak_mb"] < FLAT_MB, facts
