"""The library leaves its host process as it found it (issue 43 item 1): importing probes and calling probes.run,
probes.ablate, probes.run_models and the decoders' detect changes nothing outside the objects the calls make (not
glibc's allocator, not the garbage collector, not transformers' attention registry, not torch's global modes, not
the forward or the hooks of a module the caller can reach, not a model kept loaded after the call), and two calls
of each in two threads give the numbers of the two calls one after the other."""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Callable

import pytest
from causal_models import make_checkpoint
from tiny_models import build_tiny_model

import probes
from probes.tools.detect import detect
from probes.base.defaults import bundled_corpus
from probes.tools.studies import units

ROOT = Path(__file__).resolve().parents[1]

# argv[1]: "fresh" (torch and transformers only) or "run" (probes imported; dep run on a loaded MiniLM, an ablation
# and run_models on the tiny BERT of argv[2], the detectors on the tiny GPT-2 of argv[3], loaded by the caller);
# prints the process's state as JSON
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
    probes.ablate("dep", model=sys.argv[2], masks=["0:1"], mode="uniform", limit=6, progress=False)
    probes.run_models("dep", [sys.argv[2]], limit=6, replicates=0, progress=False)
    from probes.tools.detect import detect
    decoder = probes.load_encoder(sys.argv[3])
    modules += list(decoder.model.modules())
    detect(encoder=decoder, count=4, length=6, replicates=0)


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


def _state(mode: str, *models: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", STATE, mode, *map(str, models)], capture_output=True, text=True,
                          check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                               "TOKENIZERS_PARALLELISM": "false"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_run_leaves_the_process_as_a_fresh_interpreter_has_it(tiny_model, tmp_path):
    fresh, after = _state("fresh"), _state("run", tiny_model("bert"), make_checkpoint("gpt2", tmp_path / "gpt2"))
    assert after == fresh
    assert after["allocator_calls"] == []  # no mallopt, malloc_trim, ... looked up through ctypes
    assert fresh["patched"] == [] and fresh["gc"][0] and fresh["gc"][2] == 0
    assert "eager" not in fresh["attention"] and fresh["attention_local"] == []


def _numbers(result) -> dict:
    """A result's JSON (a ProbeResult's or an AblationResult's) without its provenance (the call's timings and host)."""
    data = result.to_json()
    data.pop("provenance")
    return json.loads(json.dumps(data))


def _in_turn_and_together(calls: list[Callable[[], object]]) -> tuple[list, list]:
    """What the two calls give one after the other, and what they give run at once in two threads."""
    in_turn = [call() for call in calls]
    together: list = [None, None]
    errors: list = []

    def worker(i: int) -> None:
        try:
            together[i] = calls[i]()
        except BaseException as e:  # noqa: BLE001 - reported below, with the thread's result
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return in_turn, together


@pytest.mark.parametrize("shared", [True, False], ids=["one-encoder", "two-encoders"])
def test_two_runs_in_two_threads_give_the_numbers_of_two_runs_in_turn(shared, minilm):
    encoders = [minilm, minilm if shared else probes.load_encoder()]
    kinds = [dict(limit=30), dict(limit=30, weights="norm")]  # two different runs, at once
    in_turn, together = _in_turn_and_together([
        lambda e=e, k=k: _numbers(probes.run("dep", encoder=e, replicates=0, views=0, progress=False, **k)["dep"])
        for e, k in zip(encoders, kinds)])
    assert together == in_turn
    assert in_turn[0]["overall"] != in_turn[1]["overall"]  # two different runs, not one run twice


def test_two_ablations_in_two_threads_give_the_numbers_of_two_ablations_in_turn(tiny_model):
    model = str(tiny_model("bert"))  # one checkpoint: each ablation loads and masks its own copy
    kinds = [dict(masks=["0:1", "1:*"]), dict(masks=["1:0"], mode="uniform")]
    in_turn, together = _in_turn_and_together([
        lambda k=k: _numbers(probes.ablate("dep", model=model, corpus=bundled_corpus(), limit=20, progress=False, **k))
        for k in kinds])
    assert together == in_turn
    assert [len(r["masks"]) for r in in_turn] == [3, 2]  # the baseline and each mask
    assert in_turn[0]["masks"][1]["grid"] != in_turn[0]["masks"][0]["grid"]  # a mask changed the scores


def test_two_studies_of_models_in_two_threads_give_the_numbers_of_two_in_turn(tmp_path):
    one, two = (str(build_tiny_model("bert", tmp_path / f"bert-{seed}", seed=seed)) for seed in (1, 2))

    def study(models: list[str]) -> dict:
        results = probes.run_models("dep", models, limit=20, replicates=0, progress=False, plots=False)
        return {folder: _numbers(by_probe["dep"]) for folder, by_probe in results.items()}

    in_turn, together = _in_turn_and_together([lambda: study([one, two]), lambda: study([two, one])])
    assert together == in_turn
    assert [list(r) for r in in_turn] == [["bert-1", "bert-2"], ["bert-2", "bert-1"]]
    assert in_turn[0]["bert-1"] == in_turn[1]["bert-1"]  # one model, the same numbers in either study
    assert in_turn[0]["bert-1"]["overall"] != in_turn[0]["bert-2"]["overall"]


def test_run_models_keeps_no_model_loaded_once_it_returns(tiny_model, monkeypatch):
    """The models a study loads in this process go with the study: none is kept for a later call."""
    loaded: list = []
    load = units.load_encoder
    monkeypatch.setattr(units, "load_encoder", lambda *a, **k: loaded.append(weakref.ref(e := load(*a, **k))) or e)
    probes.run_models("dep", [str(tiny_model("bert"))], limit=5, replicates=0, progress=False, plots=False)
    gc.collect()
    assert len(loaded) == 1 and loaded[0]() is None


def test_two_detections_in_two_threads_give_the_numbers_of_two_in_turn(tmp_path):
    decoder = probes.load_encoder(str(make_checkpoint("gpt2", tmp_path / "gpt2")))
    kinds = [dict(sequence_seed=1), dict(sequence_seed=2, length=8)]
    in_turn, together = _in_turn_and_together([
        lambda k=k: {name: _numbers(r) for name, r in detect(encoder=decoder, count=6, replicates=0, **k).items()}
        for k in kinds])
    assert together == in_turn
    assert sorted(in_turn[0]) == ["duplicate_token", "induction", "prev_token", "sink"]
    assert in_turn[0]["induction"]["overall"] != in_turn[1]["induction"]["overall"]
