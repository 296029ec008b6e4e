"""Capture backends (probes.capture, issue 43 item 2): every backend against "outputs" (transformers' own
output_attentions, the reference) on every encoder family of tests/tiny_models.py and every decoder family of
tests/causal_models.py; a backend that cannot read a family says so; what a backend copies of transformers is
pinned; transformers' attention registry is the same during a pass as before it."""
from __future__ import annotations

import hashlib
import importlib
import inspect

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from causal_models import CONFIGS, make_checkpoint
from probes.capture import CAPTURES, backend_named
from probes.capture.sdpa_qk import COPIED, encoder_probabilities
from probes.base.errors import InputError
from probes.capture.model import load_encoder

ENCODERS = ("bert", "roberta", "electra", "deberta-v2", "deberta")
SDPA_ROUNDING = 2e-6  # SDPA's hidden states against eager's, a few layers in: float32 rounding


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoders")
    return {family: make_checkpoint(family, root / family) for family in CONFIGS}


def _batch(encoder, words):
    enc = encoder.tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


def _passes(encoder, ids, mask, vectors):
    """Each layer's (maps, context) of one layerwise pass; the registry checked inside every callback."""
    got = []

    def keep(layer, attention, context):
        assert ALL_ATTENTION_FUNCTIONS._local_mapping == {} and ALL_ATTENTION_FUNCTIONS["sdpa"] is sdpa_attention_forward
        got.append((attention.clone(), None if context is None else context.clone()))

    encoder.layerwise(ids, mask, keep, vectors=vectors)
    return got


@pytest.mark.parametrize("capture", CAPTURES)
@pytest.mark.parametrize("family", ENCODERS)
def test_every_backend_gives_the_reference_maps_on_every_encoder_family(family, capture, tiny_model):
    path = str(tiny_model(family))
    reference = load_encoder(path, capture="outputs")
    if capture == "sdpa-qk" and family.startswith("deberta"):  # DeBERTa's attention never runs SDPA
        with pytest.raises(InputError, match="sdpa-qk"):
            load_encoder(path, capture=capture)
        return
    encoder = load_encoder(path, capture=capture)
    assert encoder.capture == capture and encoder.model.config._attn_implementation == backend_named(capture).implementation
    ids, mask = _batch(encoder, [["the", "heads", "attend", "to", "words"], ["a", "pass"]])
    expected = _passes(reference, ids, mask, vectors=True)
    got = _passes(encoder, ids, mask, vectors=True)
    assert len(got) == len(expected) == encoder.layers
    for (a, c), (ref_a, ref_c) in zip(got, expected, strict=True):
        if capture == "sdpa-qk":  # the model's own pass is SDPA's, rounded otherwise than eager's
            torch.testing.assert_close(a, ref_a, atol=SDPA_ROUNDING, rtol=0)
            torch.testing.assert_close(c, ref_c, atol=SDPA_ROUNDING, rtol=0)
        else:  # transformers' own eager maps, bit for bit
            assert torch.equal(a, ref_a) and torch.equal(c, ref_c)


@pytest.mark.parametrize("capture", CAPTURES)
@pytest.mark.parametrize("family", list(CONFIGS))
def test_every_backend_gives_the_reference_maps_on_every_decoder_family(family, capture, decoders):
    reference = load_encoder(str(decoders[family]), capture="outputs")
    encoder = load_encoder(str(decoders[family]), capture=capture)
    words = [[f"t{i}" for i in (5, 9, 17, 5, 9, 33, 2, 40)], [f"t{i}" for i in (8, 8, 3, 60)]]
    ids, mask = _batch(encoder, words)
    real = mask.bool()[:, None, :, None]  # [B,1,T,1]: padding rows differ (eager's hold weight, sdpa-qk's are 0)
    expected = _passes(reference, ids, mask, vectors=False)
    got = _passes(encoder, ids, mask, vectors=False)
    assert len(got) == len(expected) == encoder.layers
    for (a, _), (ref_a, _) in zip(got, expected, strict=True):
        torch.testing.assert_close(a * real, ref_a * real, atol=SDPA_ROUNDING if capture == "sdpa-qk" else 0, rtol=0)
    if capture != "sdpa-qk":  # a decoder's attention output is past W_O: its per-head vectors are read beside SDPA
        with pytest.raises(InputError, match="sdpa-qk"):
            encoder.layerwise(ids, mask, lambda *_: None, vectors=True)


@pytest.mark.parametrize("family", ["bert", "roberta", "electra"])
def test_an_encoder_whose_sdpa_runs_its_math_kernel_hands_on_that_kernels_probabilities(family, tiny_model,
                                                                                         monkeypatch):
    """With SDPA held to its math kernel, "sdpa-qk" takes the maps from that kernel's own softmax (not computed a
    second time): the reference maps within float32 rounding, padding keys 0."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import probes.capture.sdpa_qk as sdpa_qk

    path = str(tiny_model(family))
    encoder = load_encoder(path, capture="sdpa-qk")
    ids, mask = _batch(encoder, [["the", "heads", "attend", "to", "words"], ["a", "pass"]])
    expected = _passes(load_encoder(path, capture="outputs"), ids, mask, vectors=True)
    monkeypatch.setattr(sdpa_qk, "encoder_probabilities", None)  # a second computation would fail
    with sdpa_kernel([SDPBackend.MATH]):
        got = _passes(encoder, ids, mask, vectors=True)
    for (a, c), (ref_a, ref_c) in zip(got, expected, strict=True):
        torch.testing.assert_close(a, ref_a, atol=SDPA_ROUNDING, rtol=0)
        torch.testing.assert_close(c, ref_c, atol=SDPA_ROUNDING, rtol=0)
        assert (a * ~mask.bool()[:, None, None, :]).abs().max() == 0


def test_an_eager_model_refuses_the_sdpa_backend_and_keeps_its_own(tiny_model):
    encoder = load_encoder(str(tiny_model("bert")))
    assert encoder.capture == "hooks" and encoder.with_capture("outputs").model is encoder.model
    with pytest.raises(InputError, match="load it with capture='sdpa-qk'"):
        encoder.with_capture("sdpa-qk")
    with pytest.raises(InputError, match="unknown capture 'flash'"):
        load_encoder(str(tiny_model("bert")), capture="flash")


def test_the_encoder_maps_are_eager_attentions_steps_on_hand_built_queries_and_keys():
    """softmax(q·kᵀ·scaling + mask) on one head: q = [[1,0],[0,1]], k = [[ln 2/0.5, 0],[0, 0]], scaling 0.5: row 0
    scores (ln 2, 0) → (2/3, 1/3); row 1 (0, 0) → (1/2, 1/2); a boolean mask that hides key 1 → (1, 0) in both
    rows; an additive one that adds ln 2 to key 1 → row 1 (1/3, 2/3)."""
    q = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]]])  # [1,1,2,2]
    k = torch.tensor([[[[2 * torch.log(torch.tensor(2.0)).item(), 0.0], [0.0, 0.0]]]])
    torch.testing.assert_close(encoder_probabilities(q, k, None, 0.5)[0, 0], torch.tensor([[2 / 3, 1 / 3], [0.5, 0.5]]))
    hidden = torch.tensor([True, False])[None, None, None, :]  # [1,1,1,2]
    assert torch.equal(encoder_probabilities(q, k, hidden, 0.5)[0, 0], torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    added = torch.tensor([0.0, torch.log(torch.tensor(2.0)).item()])[None, None, None, :]
    torch.testing.assert_close(encoder_probabilities(q, k, added, 0.5)[0, 0, 1], torch.tensor([1 / 3, 2 / 3]))


@pytest.mark.parametrize("name", list(COPIED))
def test_what_a_backend_copies_of_transformers_is_the_code_it_was_written_against(name):
    module, _, function = name.rpartition(".")
    source = inspect.getsource(getattr(importlib.import_module(module), function))
    assert hashlib.sha256(source.encode()).hexdigest() == COPIED[name], (
        f"{name} changed in this transformers: check what probes.capture.sdpa_qk copies of it, then update COPIED")
