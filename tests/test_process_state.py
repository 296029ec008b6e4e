"""The library leaves its host process as it found it (issue 43 item 1): importing probes and running dep changes
nothing outside the objects the run makes (not glibc's allocator, not the garbage collector, not transformers'
attention registry, not torch's global modes, not the forward or the hooks of a module the caller can reach), and
two runs in two threads give the numbers of two runs one after the other."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import probes

ROOT = Path(__file__).resolve().parents[1]

# argv[1]: "fresh" (torch and transformers only) or "run" (probes imported, dep run on a loaded MiniLM); prints the
# process's state as JSON
STATE = """
import ctypes, gc, json, sys

called = []  # the C functions looked up through ctypes (mallopt, malloc_trim, ...): what the library may call
look_up = ctypes.CDLL.__getattr__
ctypes.CDLL.__getattr__ = lambda library, name: called.append(name) or look_up(library, name)
import torch
import transformers
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface
from torch.overrides import _get_current_function_mode_stack

torch.manual_seed(0)
own = transformers.BertModel(transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                     intermediate_size=64)).eval()  # the caller's own model
modules = list(own.modules())
if sys.argv[1] == "run":
    import probes
    encoder = probes.load_encoder()
    modules += list(encoder.model.modules())
    probes.run("dep", encoder=encoder, limit=12, replicates=0, views=0, progress=False)


def name(f):
    return f"{f.__module__}.{f.__qualname__}"


def patched(m) -> bool:  # a forward set on the module, or a hook on it that is not transformers' own output recorder
    hooks = [*m._forward_hooks.values(), *m._forward_pre_hooks.values()]
    return "forward" in vars(m) or any(not getattr(h, "__module__", "").startswith("transformers.") for h in hooks)


print(json.dumps({
    "gc": [gc.isenabled(), list(gc.get_threshold()), gc.get_freeze_count()],
    "attention": {k: name(v) for k, v in ALL_ATTENTION_FUNCTIONS.items()},
    "attention_local": sorted(ALL_ATTENTION_FUNCTIONS._local_mapping),
    "attention_global": {k: name(v) for k, v in AttentionInterface._global_mapping.items()},
    "torch": [torch.is_grad_enabled(), torch.is_inference_mode_enabled(), str(torch.get_default_dtype()),
              len(_get_current_function_mode_stack())],
    "patched": [type(m).__name__ for m in modules if patched(m)],
    "allocator_calls": sorted({n for n in called if n.startswith("mal")}),
}))
"""


def _state(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", STATE, mode], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                               "TOKENIZERS_PARALLELISM": "false"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_run_leaves_the_process_as_a_fresh_interpreter_has_it():
    fresh, after = _state("fresh"), _state("run")
    assert after == fresh
    assert after["allocator_calls"] == []  # no mallopt, malloc_trim, ... looked up through ctypes
    assert fresh["patched"] == [] and fresh["gc"][0] and fresh["gc"][2] == 0
    assert "eager" not in fresh["attention"] and fresh["attention_local"] == []


def _numbers(result) -> dict:
    data = result.to_json()
    data.pop("provenance")  # the run's own timings and host
    return json.loads(json.dumps(data))


@pytest.mark.parametrize("shared", [True, False], ids=["one-encoder", "two-encoders"])
def test_two_runs_in_two_threads_give_the_numbers_of_two_runs_in_turn(shared, minilm):
    encoders = [minilm, minilm if shared else probes.load_encoder()]
    kinds = [dict(limit=30), dict(limit=30, weights="norm")]  # two different runs, at once

    def run(encoder, kind):
        return _numbers(probes.run("dep", encoder=encoder, replicates=0, views=0, progress=False, **kind)["dep"])

    in_turn = [run(e, k) for e, k in zip(encoders, kinds)]
    together: list = [None, None]
    errors: list = []

    def worker(i: int) -> None:
        try:
            together[i] = run(encoders[i], kinds[i])
        except BaseException as e:  # noqa: BLE001 - reported below, with the thread's result
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert together == in_turn
    assert in_turn[0]["overall"] != in_turn[1]["overall"]  # two different runs, not one run twice
