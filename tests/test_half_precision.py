"""Half precision (issue 44 item 5): ``--dtype bfloat16|float16`` runs the model's weights and pass in that dtype;
the maps, context vectors and entries the probes read are float32, computed from the half-precision queries and
keys (capture "sdpa-qk") where the family runs SDPA, upcast from the model's own where it cannot (DeBERTa); the
results record the dtype and the table's header names it. On MiniLM, bf16 dep scores are within 0.01 of float32's on
every cell with at least 50 instances (EWT dev, the shared corpora)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import probes
from causal_models import make_checkpoint
from probes.base.errors import InputError
from probes.capture.model import load_encoder
from probes.settings.run_settings import RunSettings
from probes.tools.show import format_table

HALF = ("bfloat16", "float16")
# the largest |half - float32| of a tiny random model's maps and context vectors allowed (measured: bf16 maps 7e-5,
# context 1.4e-3; fp16 maps 7e-6, context 1.6e-4, on tests/tiny_models.py's BERT and DeBERTa v2 and
# tests/causal_models.py's GPT-2 and Llama)
MAPS_WITHIN = {"bfloat16": 1e-3, "float16": 1e-4}
CONTEXT_WITHIN = {"bfloat16": 5e-3, "float16": 1e-3}
WORDS = [["the", "heads", "attend", "to", "words"], ["a", "pass"]]


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("half_decoders")
    return {family: make_checkpoint(family, root / family) for family in ("gpt2", "llama")}


def _pass(encoder, vectors=True):
    enc = encoder.tokenizer(WORDS, is_split_into_words=True, padding=True, return_tensors="pt")
    return encoder.forward(enc["input_ids"], enc["attention_mask"], vectors=vectors)


def _largest(half, reference) -> float:
    return max(float((a - b).abs().max()) for a, b in zip(half, reference, strict=True))


def _half_rounded(maps, dtype: str) -> bool:
    """Whether every value of `maps` is a value of `dtype` (what an upcast of the model's own maps gives)."""
    return all(torch.equal(a, a.to(getattr(torch, dtype)).float()) for a in maps)


@pytest.mark.parametrize("dtype", HALF)
def test_a_tiny_bert_in_half_precision_gives_float32_maps_from_its_queries_and_keys(dtype, tiny_model):
    path = str(tiny_model("bert"))
    reference = _pass(load_encoder(path, capture="outputs"))
    encoder = load_encoder(path, dtype=dtype)
    assert encoder.dtype == dtype and encoder.capture == "sdpa-qk"
    assert {p.dtype for p in encoder.model.parameters()} == {getattr(torch, dtype)}
    got = _pass(encoder)
    assert {a.dtype for a in got.attentions} == {c.dtype for c in got.context} == {torch.float32}
    assert _largest(got.attentions, reference.attentions) <= MAPS_WITHIN[dtype]
    assert _largest(got.context, reference.context) <= CONTEXT_WITHIN[dtype]
    assert not _half_rounded(got.attentions, dtype)  # computed in float32, not the half-precision softmax upcast


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_tiny_decoder_in_half_precision_gives_float32_maps_and_entries(family, dtype, decoders):
    reference = _pass(load_encoder(str(decoders[family])))
    encoder = load_encoder(str(decoders[family]), dtype=dtype)
    assert encoder.capture == "sdpa-qk" and encoder.model.dtype == getattr(torch, dtype)
    got = _pass(encoder)
    assert {a.dtype for a in got.attentions} == {c.dtype for c in got.context} == {torch.float32}
    assert _largest(got.attentions, reference.attentions) <= MAPS_WITHIN[dtype]
    assert _largest(got.context, reference.context) <= CONTEXT_WITHIN[dtype]
    assert not _half_rounded(got.attentions, dtype)
    enc = encoder.tokenizer(WORDS, is_split_into_words=True, padding=True, return_tensors="pt")
    entries = []  # the detectors' path: entries computed from the half-precision q, k and SDPA's logsumexp
    encoder.layerwise(enc["input_ids"], enc["attention_mask"], lambda layer, a, c: entries.append(a), full=False)
    b, i, j = torch.tensor([0, 0, 1]), torch.tensor([1, 4, 1]), torch.tensor([0, 2, 1])
    for layer, found in enumerate(entries):
        at = found.at(b, i, j) if not isinstance(found, torch.Tensor) else found[b, :, i, j]
        assert at.dtype == torch.float32
        assert float((at - reference.attentions[layer][b, :, i, j]).abs().max()) <= MAPS_WITHIN[dtype]


def test_deberta_in_half_precision_is_read_with_hooks_its_maps_upcast(tiny_model):
    """DeBERTa's attention never runs SDPA: its own bf16 maps and context are handed on as float32 (docs/gpu.md)."""
    path = str(tiny_model("deberta-v2"))
    reference = _pass(load_encoder(path, capture="outputs"))
    encoder = load_encoder(path, dtype="bfloat16")
    assert encoder.capture == "hooks" and encoder.model.dtype == torch.bfloat16
    got = _pass(encoder)
    assert {a.dtype for a in got.attentions} == {c.dtype for c in got.context} == {torch.float32}
    assert _half_rounded(got.attentions, "bfloat16")  # the model's own bf16 softmax
    assert _largest(got.attentions, reference.attentions) <= MAPS_WITHIN["bfloat16"]


@pytest.mark.parametrize("capture", ["hooks", "outputs"])
def test_an_eager_capture_in_half_precision_is_refused_where_the_model_runs_sdpa(capture, tiny_model):
    with pytest.raises(InputError, match=f"capture '{capture}' in bfloat16 would hand on the model's own bfloat16 "
                                         "maps; .* use capture \"sdpa-qk\""):
        load_encoder(str(tiny_model("bert")), dtype="bfloat16", capture=capture)


def test_norm_weights_in_half_precision_are_float32_rows_that_sum_to_one(tiny_model):
    path = str(tiny_model("bert"))
    reference = load_encoder(path, capture="sdpa-qk")
    encoder = load_encoder(path, dtype="bfloat16")
    enc = encoder.tokenizer(WORDS, is_split_into_words=True, padding=True, return_tensors="pt")
    got, expected = (e.forward(enc["input_ids"], enc["attention_mask"], weights="norm").attentions
                     for e in (encoder, reference))
    assert {a.dtype for a in got} == {torch.float32}
    real = enc["attention_mask"].bool()
    for a in got:
        assert torch.allclose(a.sum(-1)[real[:, None, :].expand(-1, a.shape[1], -1)], torch.tensor(1.0), atol=1e-6)
    assert _largest(got, expected) <= 1e-2  # the value vectors' norms come from half-precision products


def test_a_run_records_its_dtype_and_the_header_names_a_half_one(tiny_model, tmp_path):
    corpus = None  # the bundled EWT sample
    path = str(tiny_model("bert"))
    half = probes.run("dep", model=path, corpus=corpus, dtype="bfloat16", replicates=0, views=0, limit=8,
                      progress=False)["dep"]
    full = probes.run("dep", model=path, corpus=corpus, replicates=0, views=0, limit=8, progress=False)["dep"]
    assert half.info.settings["dtype"] == "bfloat16" and full.info.settings["dtype"] == "float32"
    half.save(tmp_path)
    assert json.loads((tmp_path / "dep.json").read_text())["settings"]["dtype"] == "bfloat16"
    assert format_table(half).splitlines()[0].endswith(" · model run in bfloat16, maps in float32")
    assert "float32" not in format_table(full).splitlines()[0]
    assert np.abs(half.overall.scores - full.overall.scores).max() <= 0.05  # 8 sentences: a few arcs may move


def test_a_loaded_encoder_in_another_dtype_is_refused(tiny_model):
    encoder = load_encoder(str(tiny_model("bert")))
    with pytest.raises(InputError, match="was loaded in float32, and dtype 'bfloat16' was asked for"):
        probes.run("dep", encoder=encoder, dtype="bfloat16", limit=2,
                   progress=False)


def test_a_dtype_not_in_the_choices_is_refused():
    with pytest.raises(InputError, match="unknown dtype 'bf16'; choose one of float32, bfloat16, float16"):
        RunSettings(dtype="bf16")
    with pytest.raises(InputError, match="unknown dtype 'half'"):
        load_encoder("no-such-model", dtype="half")


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.integration
def test_minilm_bf16_dep_is_within_0_01_of_float32_on_every_cell_of_ewt_dev(minilm, shared_corpora):
    corpus = shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu"
    half = load_encoder(dtype="bfloat16")
    results = [probes.run("dep", encoder=e, corpus=corpus, replicates=0, views=0, progress=False)["dep"]
               for e in (minilm, half)]
    full, bf16 = results
    assert bf16.info.settings["dtype"] == "bfloat16" and full.info.sentences == bf16.info.sentences == 2001
    cells = [("overall", full.overall, bf16.overall)] + [
        (name, scores, bf16.labels[name]) for name, scores in full.labels.items() if scores.count >= 50]
    assert len(cells) > 20
    for name, a, b in cells:
        assert a.count == b.count, name
        assert np.abs(a.scores - b.scores).max() <= 0.01, name
