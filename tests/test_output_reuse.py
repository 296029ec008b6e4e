"""probes.reuse: the capture pass's linear layers and GELUs write large outputs into buffers reused within the pass,
bit for bit what the modules' own code gives; a buffer something still holds is never handed out again."""
from __future__ import annotations

import pytest
import torch
from transformers.activations import GELUActivation

import probes
from probes import reuse
from probes.allocator import LARGE_BLOCK
from probes.batching import Batch, length_sorted_batches
from probes.corpus import read_corpus
from probes.defaults import bundled_corpus
from probes.encoding import encode
from probes.reuse import OutputPool, reused_output_memory

FLOATS = LARGE_BLOCK // 4  # float32 elements in one large block


def test_a_held_buffer_is_not_handed_out_until_let_go():
    pool = OutputPool(budget=8 * LARGE_BLOCK)
    first = pool.take((2, FLOATS // 2), torch.float32)
    pointer = first.data_ptr()
    view = first.t()  # another tensor on the same memory
    del first
    second = pool.take((FLOATS,), torch.float32)
    assert second.data_ptr() != pointer and pool.bytes == 2 * LARGE_BLOCK  # the view still holds the first
    del view
    third = pool.take((FLOATS // 4, 4), torch.float32)
    assert third.data_ptr() == pointer and third.shape == (FLOATS // 4, 4) and pool.bytes == 2 * LARGE_BLOCK


def test_smallest_free_buffer_that_holds_the_output_and_the_budget():
    f32 = torch.float32
    pool = OutputPool(budget=12 * LARGE_BLOCK)  # buffers of up to 3 blocks, 12 in all
    big, small = pool.take((2 * FLOATS,), f32), pool.take((FLOATS,), f32)
    pointers = [big.data_ptr(), small.data_ptr()]
    del big, small
    assert pool.take((FLOATS // 2,), f32).data_ptr() == pointers[1]  # the smaller one that holds it
    held = [pool.take((FLOATS,), f32), pool.take((FLOATS,), f32)]  # the small one, then the big one
    assert [t.data_ptr() for t in held] == pointers[::-1]
    too_big = pool.take((4 * FLOATS,), f32)  # over a quarter of the budget: a tensor of its own
    assert too_big.shape == (4 * FLOATS,) and pool.bytes == 3 * LARGE_BLOCK
    held += [pool.take((3 * FLOATS,), f32) for _ in range(4)]  # 3 + 9 = 12 blocks kept, the fourth one of its own
    assert pool.bytes == 12 * LARGE_BLOCK and len({t.data_ptr() for t in held}) == 6
    assert pool.take((FLOATS,), torch.float64).dtype == torch.float64 and pool.bytes == 12 * LARGE_BLOCK


def _stack(hidden: int) -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), GELUActivation(),
                               torch.nn.Linear(4 * hidden, hidden), torch.nn.GELU(approximate="tanh"),
                               torch.nn.Linear(hidden, hidden, bias=False)).eval()


@pytest.mark.parametrize("shape", [(4, 300, 256), (1200, 256)], ids=["3-d", "2-d"])
def test_pooled_forwards_equal_the_modules_own_bit_for_bit(shape):
    model = _stack(256)
    x = torch.randn(shape)
    with torch.inference_mode():
        expected = [x]
        for module in model:
            expected.append(module(expected[-1]))
        with reused_output_memory(model) as pool:
            got = [x]
            for module in model:
                got.append(module(got[-1]))
            kept = pool.bytes
    assert all(torch.equal(a, b) for a, b in zip(expected, got))
    # four large outputs, each in a buffer of its own (all are held, in `got`); the last Linear has no bias: its own code
    assert kept == (2 * 1200 * 1024 + 2 * 1200 * 256) * 4
    assert all("forward" not in vars(m) for m in model)  # put back


def test_what_stays_on_the_modules_own_code():
    class Scaled(torch.nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    model = torch.nn.Sequential(torch.nn.Linear(256, 256), Scaled(256, 256), torch.nn.Linear(256, 256)).eval()
    own = model[2].forward = lambda x: x + 1  # replaced by other code: left alone, and left in place
    x = torch.randn(2000, 256)
    with torch.inference_mode(), reused_output_memory(model) as pool:
        assert "forward" in vars(model[0]) and "forward" not in vars(model[1])
        assert model[2].forward is own
        small = model[0](x[:10])  # 10 rows: 10 KB, not pooled
        strided = model[0](x.t().contiguous().t())  # not contiguous
        assert pool.bytes == 0
        assert torch.equal(small, torch.nn.functional.linear(x[:10], model[0].weight, model[0].bias))
        assert torch.equal(strided, torch.nn.functional.linear(x, model[0].weight, model[0].bias))
        model[0](x)
        assert pool.bytes == 2000 * 256 * 4
    assert "forward" not in vars(model[0]) and model[2].forward is own
    with torch.no_grad(), reused_output_memory(model) as pool:  # gradients off: pooled
        model[0](x)
        assert pool.bytes == 2000 * 256 * 4
    with reused_output_memory(model) as pool:  # gradients on (the weights want them): the module's own code
        out = model[0](x)
        assert out.requires_grad and pool.bytes == 0


def test_forwards_come_back_after_an_error():
    model = _stack(64)
    with pytest.raises(RuntimeError, match="stop"):
        with reused_output_memory(model):
            raise RuntimeError("stop")
    assert all("forward" not in vars(m) for m in model)


def _batch(encoder, limit: int, max_words: int) -> Batch:
    sentences = [s for s in read_corpus([bundled_corpus()]).sentences if 3 <= len(s) <= max_words][:limit]
    items, _ = encode(encoder.tokenizer, sentences, encoder.max_length)
    chunk = length_sorted_batches(items, limit)[0]
    return Batch.from_encoded([sentences[e.index] for e in chunk], chunk, encoder.tokenizer, "mean-sum")


def _pooled_and_plain(encoder, batch: Batch, monkeypatch) -> tuple[list, list, list]:
    """Every layer's maps and context with the pool (layer by layer, counting its outputs) and from the model's own
    code (capture "outputs", every layer's maps kept)."""
    taken = []  # per pooled output: the pool buffer it went into (its address), or None
    take = OutputPool.take

    def counting(self, shape, dtype):
        out = take(self, shape, dtype)
        taken.append(out.data_ptr() if any(out.data_ptr() == b.data_ptr() for b in self._buffers) else None)
        return out

    monkeypatch.setattr(OutputPool, "take", counting)
    seen = []
    encoder.layerwise(batch.input_ids, batch.attention_mask,
                      lambda layer, a, c: seen.append((a.clone(), c.clone())), vectors=True)
    whole = encoder.forward(batch.input_ids, batch.attention_mask, vectors=True)
    return seen, list(zip(whole.attentions, whole.context)), taken


def test_real_minilm_maps_equal_the_plain_pass_bit_for_bit_and_buffers_are_reused(minilm, monkeypatch):
    batch = _batch(minilm, 32, 40)
    rows = batch.input_ids.numel()
    assert rows * 384 * 4 >= LARGE_BLOCK  # the projections' outputs are large: pooled
    seen, plain, taken = _pooled_and_plain(minilm, batch, monkeypatch)
    assert len(seen) == minilm.layers == 6
    assert all(torch.equal(a, b) and torch.equal(c, d) for (a, c), (b, d) in zip(seen, plain))
    # per layer: q, k, v, the output and both feed-forward projections and the GELU (7), and in the attention
    # (probes.eager) copies of q, kᵀ and v as bmm's operands, the context and its [B,T,H,d] copy (5); the last layer
    # ends at its maps (3 + 5)
    assert len(taken) == 5 * (7 + 5) + 3 + 5
    # every one in a pool buffer, and those few buffers reused layer after layer
    assert None not in taken and len(set(taken)) <= 8


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "deberta-v2", "deberta"])
def test_every_family_bit_for_bit_with_every_output_pooled(family, tiny_model, monkeypatch):
    encoder = probes.load_encoder(str(tiny_model(family)))
    monkeypatch.setattr(reuse, "LARGE_BLOCK", 1)  # tiny outputs: pool them all
    seen, plain, taken = _pooled_and_plain(encoder, _batch(encoder, 12, 12), monkeypatch)
    assert len(seen) == encoder.layers and sum(t is not None for t in taken) >= 3 * encoder.layers
    assert all(torch.equal(a, b) and torch.equal(c, d) for (a, c), (b, d) in zip(seen, plain))
