"""Per-head context vectors captured by Encoder.forward(vectors=True), checked against a recomputation
by hand from each layer's own weights, on a tiny random model of every family.

For layer l with input X (recorded from a separate, uncaptured run of the same model):
    BERT, RoBERTa, ELECTRA:  Q = X W_q + b_q, K = X W_k + b_k, V = X W_v + b_v, per head h
                             P_h = softmax(Q_h K_hᵀ / √d + mask), context_h = P_h V_h
    DeBERTa v1, v2:          the scores add disentangled relative-position terms, so P_h is the
                             captured probability map (checked to be a distribution over the real
                             tokens) and context_h = P_h V_h with V from value_proj (v2) or the
                             value third of each head's slice of in_proj plus v_bias (v1).
Because X comes from the uncaptured run, a capture that changed any layer's output (e.g. by
replacing the wrong module, as one published implementation did for non-BERT families) makes the
next layer's captured vectors disagree with the recomputation, and the final hidden states differ
from the uncaptured run's; test_a_corrupting_capture_is_caught shows both checks fire.
"""
from __future__ import annotations

import math

import pytest
import torch

from probes.capture.model import load_encoder

pytestmark = pytest.mark.integration
MARKS = {"bert": pytest.mark.bert, "roberta": pytest.mark.roberta, "electra": pytest.mark.electra,
         "deberta-v2": pytest.mark.deberta, "deberta": pytest.mark.deberta}


def families(*names):
    return [pytest.param(name, marks=MARKS[name]) for name in names]


SENTENCES = [["The", "cat", "sat", "."], ["Mr.", "Smith", "bought", "cheapsite.com", "for", "1.5", "million", "."]]
TOLERANCE = dict(rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def encoders(tiny_model):
    cache = {}

    def get(family):
        if family not in cache:
            cache[family] = load_encoder(str(tiny_model(family)))
        return cache[family]

    return get


def _inputs(encoder):
    enc = encoder.tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    assert enc["attention_mask"][0].sum() < enc["attention_mask"].shape[1]  # the first sentence is padded
    return enc["input_ids"], enc["attention_mask"]


def _self_attention(model) -> list[torch.nn.Module]:
    """The self-attention module of every layer, found by the model's own layout (not by probes.capture.model)."""
    return [layer.attention.self for layer in model.encoder.layer]


def _uncaptured(model, ids, mask):
    """Layer inputs (a read-only pre-hook) and final hidden states of a run without any capture."""
    inputs = []

    def record(_module, args, kwargs):
        inputs.append((args[0] if args else kwargs["hidden_states"]).detach().clone())

    hooks = [m.register_forward_pre_hook(record, with_kwargs=True) for m in _self_attention(model)]
    try:
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask)
    finally:
        for h in hooks:
            h.remove()
    with torch.inference_mode():  # and once more with no hook at all
        final = model(input_ids=ids, attention_mask=mask).last_hidden_state
    return inputs, final


def _captured(encoder, ids, mask):
    """Encoder.forward(vectors=True), plus the final hidden states of that same forward pass."""
    out = {}

    def record(_module, _args, output):  # returns None: leaves the output as it is
        out["final"] = output.last_hidden_state.clone()

    hook = encoder.model.register_forward_hook(record)
    try:
        capture = encoder.forward(ids, mask, vectors=True)
    finally:
        hook.remove()
    return capture, out["final"]


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[B,T,H*d] → [B,H,T,d]."""
    b, t, _ = x.shape
    return x.view(b, t, heads, -1).transpose(1, 2)


def _values(module, x: torch.Tensor, heads: int) -> torch.Tensor:
    """V [B,H,T,d] computed by hand from the layer's own weights."""
    if hasattr(module, "value"):  # BERT, RoBERTa, ELECTRA
        return _heads(x @ module.value.weight.T + module.value.bias, heads)
    if hasattr(module, "value_proj"):  # DeBERTa v2
        return _heads(x @ module.value_proj.weight.T + module.value_proj.bias, heads)
    # DeBERTa v1: in_proj packs [q_h | k_h | v_h] per head; V_h is the last third of head h's slice
    qkv = _heads(x @ module.in_proj.weight.T, heads)  # [B,H,T,3d]
    d = qkv.shape[-1] // 3
    return qkv[..., 2 * d:] + module.v_bias.view(heads, d)[None, :, None, :]


def _probabilities(module, x: torch.Tensor, mask: torch.Tensor, heads: int) -> torch.Tensor:
    """P = softmax(QKᵀ/√d + mask) [B,H,T,T] by hand (BERT, RoBERTa, ELECTRA)."""
    q = _heads(x @ module.query.weight.T + module.query.bias, heads)
    k = _heads(x @ module.key.weight.T + module.key.bias, heads)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return scores.masked_fill(mask[:, None, None, :] == 0, float("-inf")).softmax(-1)


@torch.inference_mode()
def capture_errors(encoder, ids, mask) -> dict[str, float]:
    """Largest differences between the captured vectors (and probabilities) and the recomputation, per check."""
    model, heads = encoder.model, encoder.heads
    inputs, final_plain = _uncaptured(model, ids, mask)
    capture, final_captured = _captured(encoder, ids, mask)
    real = mask.bool()[:, None, :, None]  # [B,1,T,1] real query positions
    errors = {"final_states": float((final_plain - final_captured).abs().max()),
              "final_states_identical": float(not torch.equal(final_plain, final_captured))}
    for layer, (module, x) in enumerate(zip(_self_attention(model), inputs)):
        probs = capture.attentions[layer]
        if hasattr(module, "query"):
            by_hand = _probabilities(module, x, mask, heads)
            errors[f"probabilities_{layer}"] = float(((by_hand - probs) * real).abs().max())
        else:  # DeBERTa: rows are distributions over the real tokens, none on padding
            rows = probs * real
            errors[f"row_sums_{layer}"] = float((rows.sum(-1) - real[..., 0].float()).abs().max())
            errors[f"padding_mass_{layer}"] = float((rows * (mask[:, None, None, :] == 0)).abs().max())
        context = probs @ _values(module, x, heads)  # [B,H,T,d]
        errors[f"context_{layer}"] = float(((context - capture.context[layer]) * real).abs().max())
    return errors


@pytest.mark.parametrize("family", families("bert", "roberta", "electra", "deberta-v2", "deberta"))
def test_captured_vectors_match_a_recomputation_by_hand(encoders, family):
    encoder = encoders(family)
    ids, mask = _inputs(encoder)
    # the hooked modules are exactly each layer's self-attention, in layer order
    assert [id(m) for m in encoder.attention_modules] == [id(m) for m in _self_attention(encoder.model)]
    capture = encoder.forward(ids, mask, vectors=True)
    assert len(capture.context) == encoder.layers == 2
    assert capture.context[0].shape == (2, encoder.heads, ids.shape[1], encoder.head_dim) == (2, 4, ids.shape[1], 8)
    errors = capture_errors(encoder, ids, mask)
    assert errors["final_states_identical"] == 0.0, "capture changed the model's final hidden states"
    for name, error in errors.items():
        assert error < 2e-6, f"{family}: {name} differs by {error}"
    assert capture.context[1].abs().max() > 1e-3  # the vectors compared are not all zero


@pytest.mark.parametrize("family", families("roberta", "deberta-v2"))
def test_a_corrupting_capture_is_caught(encoders, family):
    """A capture that alters layer 0's output (here: doubles it, as a wrongly replaced module would change it)
    is caught twice: the final hidden states change, and layer 1's vectors disagree with the recomputation."""
    encoder = encoders(family)
    ids, mask = _inputs(encoder)
    module = _self_attention(encoder.model)[0]
    original = encoder.forward

    def corrupted_forward(*args, **kwargs):
        hook = module.register_forward_hook(lambda _m, _a, out: (out[0] * 2.0, *out[1:]))
        try:
            return original(*args, **kwargs)
        finally:
            hook.remove()

    encoder.forward = corrupted_forward
    try:
        errors = capture_errors(encoder, ids, mask)
    finally:
        del encoder.forward
    assert errors["final_states_identical"] == 1.0
    assert errors["context_1"] > 1e-4  # layer 1 was fed corrupted states


@pytest.mark.parametrize("family", families("bert", "deberta-v2"))
def test_padding_does_not_change_a_sentences_vectors(encoders, family):
    """The short sentence alone and padded in a batch with a longer one: same vectors on its tokens."""
    encoder = encoders(family)
    ids, mask = _inputs(encoder)
    n = int(mask[0].sum())
    batched = encoder.forward(ids, mask, vectors=True)
    alone = encoder.forward(ids[:1, :n], mask[:1, :n], vectors=True)
    for layer in range(encoder.layers):
        torch.testing.assert_close(batched.context[layer][:1, :, :n], alone.context[layer], **TOLERANCE)
