"""probes.eager: the layer-by-layer capture computes BERT's eager attention in one reused buffer, bit for bit
what transformers' own eager code gives (capture "outputs" runs that code, every layer's maps kept)."""
from __future__ import annotations

import pytest
import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert import modeling_bert

import probes
from probes.batching import Batch, length_sorted_batches
from probes.corpus import read_corpus
from probes.defaults import bundled_corpus
from probes import eager, reuse
from probes.eager import reused_attention_memory, reused_eager_attention
from probes.encoding import encode
from probes.reuse import OutputPool

REUSING = ("bert", "roberta", "electra")  # families whose eager attention is BERT's code


def _layers(encoder, limit: int, max_words: int):
    """Every layer's maps [B,H,T,T] and context [B,H,T,d], layer by layer and all at once, on one padded batch."""
    sentences = [s for s in read_corpus([bundled_corpus()]).sentences if 3 <= len(s) <= max_words][:limit]
    items, _ = encode(encoder.tokenizer, sentences, encoder.max_length)
    chunk = length_sorted_batches(items, limit)[0]
    batch = Batch.from_encoded([sentences[e.index] for e in chunk], chunk, encoder.tokenizer, "mean-sum")
    assert len(set(batch.attention_mask.sum(1).tolist())) > 3  # padding in play
    seen = []
    encoder.layerwise(batch.input_ids, batch.attention_mask,
                      lambda layer, a, c: seen.append((a.clone(), c.clone(), a.data_ptr())), vectors=True)
    return seen, encoder.forward(batch.input_ids, batch.attention_mask, vectors=True)


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "deberta-v2", "deberta"])
def test_layer_by_layer_maps_equal_the_eager_codes_bit_for_bit(family, tiny_model, monkeypatch):
    encoder = probes.load_encoder(str(tiny_model(family)))
    calls = []

    def spy(module, *args, **kwargs):
        calls.append(type(module).__name__)
        return reused_eager_attention(module, *args, **kwargs)

    monkeypatch.setattr(eager, "reused_eager_attention", spy)
    seen, whole = _layers(encoder, 12, 12)
    assert len(seen) == encoder.layers
    for (attention, context, _), kept, kept_context in zip(seen, whole.attentions, whole.context):
        assert torch.equal(attention, kept) and torch.equal(context, kept_context)
    # the BERT-like families go through the reusing function, once a layer, all into one buffer; DeBERTa
    # computes its own maps (it bypasses transformers' attention interface)
    assert len(calls) == (encoder.layers if family in REUSING else 0)
    if family in REUSING:
        assert len({ptr for *_, ptr in seen}) == 1
    assert "eager" not in ALL_ATTENTION_FUNCTIONS._local_mapping  # put back after the pass


def test_real_minilm_layers_equal_bit_for_bit(minilm):
    seen, whole = _layers(minilm, 32, 40)
    for (attention, context, _), kept, kept_context in zip(seen, whole.attentions, whole.context):
        assert torch.equal(attention, kept) and torch.equal(context, kept_context)


def test_direct_call_matches_bert_eager_with_a_mask_and_in_training_falls_back():
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 4, 29, 8) for _ in range(3))
    mask = torch.zeros(3, 1, 1, 29)
    mask[1, ..., 20:] = torch.finfo(torch.float32).min  # padding of sentence 1
    module = torch.nn.Module().eval()
    module.__class__ = type("BertSelfAttention", (torch.nn.Module,), {"__module__": modeling_bert.__name__})
    expected = modeling_bert.eager_attention_forward(module, q, k, v, mask, scaling=0.3)
    with reused_attention_memory():
        got = reused_eager_attention(module, q, k, v, mask, scaling=0.3)
        assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
        module.train()
        torch.manual_seed(1)
        dropped = reused_eager_attention(module, q, k, v, mask, scaling=0.3, dropout=0.5)
        torch.manual_seed(1)
        reference = modeling_bert.eager_attention_forward(module, q, k, v, mask, scaling=0.3, dropout=0.5)
        assert torch.equal(dropped[1], reference[1])  # training: the family's own code, dropout and all


@pytest.mark.parametrize("layout", ["heads-of-rows", "contiguous"])
def test_with_a_pool_the_products_go_to_its_buffers_bit_for_bit(layout, monkeypatch):
    """With the pass's OutputPool (probes.reuse), matmul's steps are taken here: q, kᵀ and v copied into pool buffers
    where no [B*H,.,.] view of them exists (BERT's q, k, v are [B,T,H,d] seen as [B,H,T,d]), bmm into the
    probabilities' buffer, the context into the pool and its [B,T,H,d] copy too; the values are BERT's."""
    monkeypatch.setattr(reuse, "LARGE_BLOCK", 1)  # tiny tensors: pool them all
    torch.manual_seed(0)
    if layout == "heads-of-rows":
        q, k, v = (torch.randn(3, 29, 4, 8).transpose(1, 2) for _ in range(3))  # [B,H,T,d] views of [B,T,H,d]
    else:
        q, k, v = (torch.randn(3, 4, 29, 8) for _ in range(3))
    mask = torch.zeros(3, 1, 1, 29)
    mask[1, ..., 20:] = torch.finfo(torch.float32).min
    module = torch.nn.Module().eval()
    module.__class__ = type("BertSelfAttention", (torch.nn.Module,), {"__module__": modeling_bert.__name__})
    expected = modeling_bert.eager_attention_forward(module, q, k, v, mask, scaling=0.3)
    pool = OutputPool()
    taken = []
    take = pool.take
    pool.take = lambda shape, dtype: taken.append(shape) or take(shape, dtype)
    with torch.inference_mode(), reused_attention_memory(pool):
        got = reused_eager_attention(module, q, k, v, mask, scaling=0.3)
        assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
        assert got[0].is_contiguous() and got[0].shape == (3, 29, 4, 8)
        # copies of q, kᵀ and v where no [B*H,.,.] view of them exists, the context, its [B,T,H,d] copy
        d = (3, 4, 29, 8)
        assert taken == ([d, (3, 4, 8, 29), d, d, (3, 29, 4, 8)] if layout == "heads-of-rows"
                         else [d, (3, 29, 4, 8)])  # kᵀ of a contiguous k is a view: no copy
        # two buffers: a copy let go once its product is made is the next one's buffer
        assert len(pool._buffers) == 2 and got[0].data_ptr() in {b.data_ptr() for b in pool._buffers}
        again = reused_eager_attention(module, q, k, v, mask, scaling=0.3)
        # the buffer `got` holds is not handed out again: a third one; `got` keeps its values
        assert torch.equal(again[0], expected[0]) and torch.equal(got[0], expected[0])
        assert again[0].data_ptr() != got[0].data_ptr() and len(pool._buffers) == 3
    assert not eager._pools  # let go after the pass
