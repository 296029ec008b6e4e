"""Causal models: maps computed from each layer's queries and keys (probes.capture.sdpa_qk) against eager attention."""
from __future__ import annotations

import math

import pytest
import torch

from causal_models import ADDS_BOS, CONFIGS, make_checkpoint
from probes.capture.sdpa_qk import (AttentionEntries, allowed_keys, capturing, causal_probabilities,
                                   per_head_context)
from probes.base.errors import InputError
from probes.capture.families import family_of
from probes.capture.model import load_encoder


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("causal")
    return {family: make_checkpoint(family, root / family) for family in CONFIGS}


def _inputs(encoder):
    """Two sequences of 11 and 7 tokens, right-padded: the second row has padding."""
    words = [[f"t{i}" for i in (5, 9, 17, 5, 9, 33, 2, 40, 5, 9, 17)], [f"t{i}" for i in (8, 8, 3, 60, 12, 3, 7)]]
    enc = encoder.tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


@pytest.mark.parametrize("family", list(CONFIGS))
def test_maps_from_queries_and_keys_equal_eager_maps(family, checkpoints):
    import transformers

    encoder = load_encoder(str(checkpoints[family]))
    assert encoder.causal and encoder.family is family_of(family) and encoder.family.name == family
    assert encoder.capture == "sdpa-qk"
    ids, mask = _inputs(encoder)
    assert (ids[:, 0] == 1).all() == (family in ADDS_BOS)  # <s> where the family's tokenizer adds it
    captured = encoder.forward(ids, mask, vectors=True)
    eager = transformers.AutoModelForCausalLM.from_pretrained(checkpoints[family], attn_implementation="eager").eval()
    with torch.inference_mode():
        reference = eager.base_model(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
    real = mask.bool()[:, None, :, None]  # [B,1,T,1] real query rows
    for hooked, expected in zip(captured.attentions, reference, strict=True):
        assert hooked.shape == expected.shape == (2, 4, ids.shape[1], ids.shape[1])
        assert torch.allclose(hooked * real, expected * real, atol=2e-6, rtol=0)
        assert torch.triu(hooked[0], diagonal=1).abs().max() == 0  # causal
        assert (hooked * ~real).abs().max() == 0  # padding rows hold nothing (eager's hold some weight)
    window = CONFIGS[family][1].get("sliding_window")
    if window is not None:  # the window matters: eager's maps are zero beyond it, and so are the hook's
        last = captured.attentions[-1]
        beyond = torch.ones(ids.shape[1], ids.shape[1]).tril(-window).bool()  # i - j >= window
        assert last[..., beyond].abs().max() == 0 and (reference[-1] * real)[..., beyond].abs().max() == 0
        assert last[0, :, window, 0].sum() == 0 and last[0, :, window - 1, 0].min() > 0
    alone = encoder.forward(ids[:1], mask[:1]).attentions  # no padding: the maps skip the empty-row pass
    for hooked, expected in zip(alone, reference, strict=True):
        assert torch.allclose(hooked[0], expected[0], atol=2e-6, rtol=0)
    if family == "qwen2":  # only the second layer slides (max_window_layers 1): the first sees the whole prefix
        assert encoder.windows == [None, 4] and captured.attentions[0][0, :, -1, 0].min() > 0


@pytest.mark.parametrize("family", list(CONFIGS))
def test_the_model_outputs_are_unchanged_by_the_capture(family, checkpoints):
    encoder = load_encoder(str(checkpoints[family]))
    ids, mask = _inputs(encoder)
    plain = encoder.bare_forward(ids, mask)
    layers: list[int] = []
    with torch.inference_mode(), capturing(encoder, mask,
                                                lambda layer, a, c: layers.append(layer), stop=False):
        hooked = encoder.model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert layers == [0, 1] and torch.equal(hooked, plain)  # the same batch, the same SDPA calls


@pytest.mark.parametrize("family", list(CONFIGS))
def test_entries_equal_the_full_maps_and_the_outputs_are_unchanged(family, checkpoints):
    """full=False: where SDPA runs its CPU flash kernel (every layer here) the capture calls it itself and hands on
    AttentionEntries; the model's outputs stay those of its own SDPA call, bit for bit, and every entry, masked ones
    included, equals the full map's within float32 rounding: with padding (a mask, key heads repeated by
    transformers) and without (is_causal, grouped-query heads given to SDPA as they are), and through the windows
    of Mistral and Qwen2."""
    encoder = load_encoder(str(checkpoints[family]))
    ids, mask = _inputs(encoder)
    for rows in (slice(None), slice(0, 1)):  # padded, then the first sequence alone
        full = encoder.forward(ids[rows], mask[rows]).attentions  # L × [B,H,T,T]
        plain = encoder.bare_forward(ids[rows], mask[rows])
        entries: list[AttentionEntries] = []
        with torch.inference_mode(), capturing(encoder, mask[rows],
                                                    lambda layer, a, c: entries.append(a), stop=False, full=False):
            hooked = encoder.model.base_model(input_ids=ids[rows], attention_mask=mask[rows]).last_hidden_state
        assert torch.equal(hooked, plain)
        assert len(entries) == 2 and all(isinstance(e, AttentionEntries) for e in entries)
        b, t = ids[rows].shape
        every = torch.ones(b, t, t).nonzero(as_tuple=True)  # all B·T·T (sequence, query, key) triples
        for got, expected in zip(entries, full, strict=True):
            assert got.shape == expected.shape
            values = got.at(*every).view(b, t, t, 4).permute(0, 3, 1, 2)  # [B,H,T,T]
            assert torch.allclose(values, expected, atol=2e-6, rtol=0)
            assert values[..., torch.ones(t, t).triu(1).bool()].abs().max() == 0


@pytest.mark.parametrize("family", list(CONFIGS))
def test_where_sdpa_runs_its_math_kernel_its_own_probabilities_are_the_maps(family, checkpoints, monkeypatch):
    """With SDPA held to its math kernel (as on a GPU for float32 grouped-query attention; no logsumexp to read),
    that kernel is called directly: the model's outputs are those of its own (math) SDPA call, bit for bit, and the
    layers' full maps (full=False too) are the kernel's probabilities, not computed a second time: within float32
    rounding of the maps computed from the queries and keys, causal, padding rows 0, through the windows too."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import probes.capture.sdpa_qk as sdpa_qk

    encoder = load_encoder(str(checkpoints[family]))
    ids, mask = _inputs(encoder)
    real = mask.bool()[:, None, :, None]  # [B,1,T,1]
    for rows in (slice(None), slice(0, 1)):  # padded, then the first sequence alone (is_causal, no mask)
        expected = encoder.forward(ids[rows], mask[rows]).attentions  # computed from the queries and keys
        with sdpa_kernel([SDPBackend.MATH]), monkeypatch.context() as patched:
            plain = encoder.bare_forward(ids[rows], mask[rows])
            patched.setattr(sdpa_qk, "causal_probabilities", None)  # a second computation would fail
            for full in (True, False):
                handed: list = []
                with torch.inference_mode(), capturing(encoder, mask[rows], lambda layer, a, c: handed.append(a),
                                                       stop=False, full=full):
                    hooked = encoder.model.base_model(input_ids=ids[rows], attention_mask=mask[rows]).last_hidden_state
                assert torch.equal(hooked, plain)
                assert len(handed) == 2 and all(isinstance(a, torch.Tensor) for a in handed)
                for got, want in zip(handed, expected, strict=True):
                    assert torch.allclose(got, want, atol=2e-6, rtol=0)
                    assert torch.triu(got, diagonal=1).abs().max() == 0 and (got * ~real[rows]).abs().max() == 0


def test_the_math_kernels_probabilities_on_hand_built_queries_and_keys():
    """One head, scale 0.5, q = [[1,0],[0,1]], k = [[2 ln 2, 0],[0,0]]: causal, row 0 sees key 0 alone (1, 0); row 1
    scores (0, 0) → (1/2, 1/2). Without the causal order row 0 scores (ln 2, 0) → (2/3, 1/3). The output is SDPA's
    math kernel's, bit for bit; where SDPA would run another kernel (here, unheld: the CPU's flash), None."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from probes.capture.sdpa_qk import math_attention

    q = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]]])  # [1,1,2,2]
    k = torch.tensor([[[[2 * math.log(2), 0.0], [0.0, 0.0]]]])
    v = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    assert math_attention(q, k, v, None, 0.0, True, 0.5, False) is None
    with sdpa_kernel([SDPBackend.MATH]):
        out, probabilities = math_attention(q, k, v, None, 0.0, True, 0.5, False)
        assert torch.equal(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5))
        torch.testing.assert_close(probabilities[0, 0], torch.tensor([[1.0, 0.0], [0.5, 0.5]]))
        hidden = torch.tensor([[True, True], [True, False]])  # a boolean mask, made additive as SDPA makes it
        out, probabilities = math_attention(q, k, v, hidden, 0.0, False, 0.5, False)
        assert torch.equal(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=hidden, scale=0.5))
        torch.testing.assert_close(probabilities[0, 0], torch.tensor([[2 / 3, 1 / 3], [1.0, 0.0]]))
        assert math_attention(q.half(), k.half(), v.half(), None, 0.0, True, 0.5, False) is None  # float32 only


def test_layerwise_hands_on_layers_in_order_and_stops_after_the_last(checkpoints):
    encoder = load_encoder(str(checkpoints["llama"]))
    ids, mask = _inputs(encoder)
    calls = []
    encoder.layerwise(ids, mask, lambda layer, a, c: calls.append((layer, tuple(a.shape), tuple(c.shape))),
                      vectors=True)
    t = ids.shape[1]
    assert calls == [(0, (2, 4, t, t), (2, 4, t, 8)), (1, (2, 4, t, t), (2, 4, t, 8))]
    with pytest.raises(InputError, match="decoder-only model: weights 'norm'"):
        encoder.layerwise(ids, mask, lambda *a: None, weights="norm")


def test_hand_built_probabilities_grouped_query_heads_and_window():
    """Two query heads share one key head; scores worked out by hand."""
    query = torch.zeros(1, 2, 3, 1)
    query[0, 1, :, 0] = 1.0  # head 1: score of key j = k_j; head 0: all scores 0
    key = torch.tensor([0.0, math.log(2.0), math.log(3.0)]).view(1, 1, 3, 1)  # [B,K=1,T,d=1]
    mask = torch.ones(1, 3, dtype=torch.long)
    p = causal_probabilities(query, key, allowed_keys(mask, None), 1.0)
    assert torch.allclose(p[0, 0], torch.tensor([[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]]))
    assert torch.allclose(p[0, 1], torch.tensor([[1, 0, 0], [1 / 3, 2 / 3, 0], [1 / 6, 2 / 6, 3 / 6]]))
    windowed = causal_probabilities(query, key, allowed_keys(mask, 2), 1.0)  # row 2 sees keys 1, 2 only
    assert torch.allclose(windowed[0, 1, 2], torch.tensor([0, 2 / 5, 3 / 5]))
    padded = allowed_keys(torch.tensor([[1, 1, 0]]), None)[0, 0]
    assert padded.tolist() == [[True, False, False], [True, True, False], [False, False, False]]
    value = torch.tensor([1.0, 2.0, 4.0]).view(1, 1, 3, 1)
    context = per_head_context(p, value)  # [1,2,3,1]: Σ_j p_ij v_j for both heads from the one value head
    assert torch.allclose(context[0, 1, :, 0], torch.tensor([1.0, 5 / 3, 17 / 6]))


def test_an_encoder_decoder_is_refused_naming_its_family(tmp_path):
    import transformers

    from causal_models import tokenizer

    config = transformers.T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2,
                                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    transformers.T5Model(config).save_pretrained(tmp_path)
    tokenizer(bos=False).save_pretrained(tmp_path)
    with pytest.raises(InputError) as refused:
        load_encoder(str(tmp_path))
    assert str(refused.value) == (f"model {str(tmp_path)!r} (T5Model, family t5) is an encoder-decoder; the probes read "
                                  "an encoder's self-attention (BERT, RoBERTa, ELECTRA, DeBERTa, ...) or a decoder-only "
                                  "model's (gpt2, gpt_neox, llama, qwen2, mistral)")


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_head_ablation_refuses_decoder_families(family, checkpoints, tmp_path):
    """Head masking rewrites an attention module's per-head context before W_O; a decoder family's module returns
    its output after W_O, so masking there would silently disable parts of the model width, not heads."""
    from probes.tools.ablation import ablate

    corpus = tmp_path / "seqs.ids"
    corpus.write_text("# two sequences\n5 9 17 5 9\n8 8 3 60\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"the {family} family's attention modules \(decoder-only\) do not return"):
        ablate("prev_token", model=str(checkpoints[family]), corpus=[corpus], format="token_ids", masks=["0:1"],
               progress=False)
