"""Head masking on tiny BERT, RoBERTa, ELECTRA, DeBERTa-v2 and DeBERTa: each mode does exactly what it says.

The tiny random models attend almost uniformly (weights drawn with std 0.02), which would make
"uniform" indistinguishable from "as computed"; every query and key projection is scaled by 25
and every value projection by 5 first, so attention is peaked and disabling a head visibly
changes the output (asserted).

Checks, per family:
- an empty mask (and no mask) leaves attentions, context vectors and hidden states bit for bit;
- zero: the disabled head's context slice is exactly 0 and the other heads of that layer are
  untouched; the whole model equals a copy whose output projection W_O has that head's input
  columns zeroed (the head then contributes nothing), row by row with a different mask per row;
- uniform: the disabled head's context is, at every position, the mean over the row's real
  tokens of its value vectors computed by hand from the layer input (v = W_V x + b_V); its
  reported attention is 1/n on the n real tokens; the whole model equals a copy whose query and
  key projections for that head are zeroed (all its scores 0, so softmax over the real tokens is
  exactly 1/n), row by row.
"""
from __future__ import annotations

import copy

import pytest
import torch

import probes
from probes.capture.masking import HeadMasker
from probes.capture.model import self_attention_modules

FAMILIES = [pytest.param("bert", marks=pytest.mark.bert), pytest.param("roberta", marks=pytest.mark.roberta),
            pytest.param("electra", marks=pytest.mark.electra),
            pytest.param("deberta-v2", marks=pytest.mark.deberta), pytest.param("deberta", marks=pytest.mark.deberta)]
pytestmark = pytest.mark.integration

WORDS = [["the", "cat", "sat", "on", "the", "mat"], ["dogs", "bark"], ["we", "went", "home", "late"]]
# Row b of the batch runs with ROW_HEADS[b] disabled: (layer, head) pairs of the 2-layer, 4-head models.
ROW_HEADS = [[(0, 1)], [(1, 2), (0, 3)], []]


def _sharpen(model: torch.nn.Module) -> None:
    """Scale query and key projections by 25, value projections by 5 (in place): peaked attention, heads that matter."""
    with torch.no_grad():
        for sa in self_attention_modules(model):
            if hasattr(sa, "in_proj"):  # DeBERTa v1: in_proj rows per head are [q | k | v]
                h = sa.num_attention_heads
                w = sa.in_proj.weight.view(h, 3, -1, sa.in_proj.weight.shape[1])
                w[:, :2] *= 25
                w[:, 2] *= 5
                sa.q_bias *= 25
                sa.v_bias *= 5
                continue
            for name, factor in (("query", 25), ("key", 25), ("value", 5), ("query_proj", 25), ("key_proj", 25),
                                 ("value_proj", 5)):
                if hasattr(sa, name):
                    getattr(sa, name).weight.mul_(factor)
                    getattr(sa, name).bias.mul_(factor)


@pytest.fixture(scope="module")
def loaded(tiny_model):
    cache = {}

    def get(family):
        if family not in cache:
            enc = probes.load_encoder(str(tiny_model(family)))
            _sharpen(enc.model)
            batch = enc.tokenizer(WORDS, is_split_into_words=True, padding=True, return_tensors="pt")
            cache[family] = enc, batch["input_ids"], batch["attention_mask"]
        return cache[family]

    return get


def _row_masks(enc) -> torch.Tensor:
    mask = torch.zeros(len(WORDS), enc.layers, enc.heads, dtype=torch.bool)  # [B,L,H]
    for row, heads in enumerate(ROW_HEADS):
        for layer, head in heads:
            mask[row, layer, head] = True
    return mask


def _hidden(model, ids, attention_mask) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=ids, attention_mask=attention_mask).last_hidden_state  # [B,T,D]


def _surgery(model, heads: list[tuple[int, int]], mode: str, head_dim: int) -> torch.nn.Module:
    """A copy of the model with the heads removed by editing weights (see the module docstring)."""
    edited = copy.deepcopy(model)
    modules = self_attention_modules(edited)
    parents = {id(m.self): m for m in edited.modules() if hasattr(m, "self") and hasattr(m, "output")}
    with torch.no_grad():
        for layer, head in heads:
            sa = modules[layer]
            cols = slice(head * head_dim, (head + 1) * head_dim)
            if mode == "zero":
                parents[id(sa)].output.dense.weight[:, cols] = 0
            elif hasattr(sa, "in_proj"):
                w = sa.in_proj.weight.view(sa.num_attention_heads, 3, head_dim, -1)
                w[head, :2] = 0
                sa.q_bias[cols] = 0
            else:
                for name in ("query", "key", "query_proj", "key_proj"):
                    if hasattr(sa, name):
                        getattr(sa, name).weight[cols] = 0
                        getattr(sa, name).bias[cols] = 0
    return edited


def _layer_input(enc, ids, attention_mask, layer: int) -> torch.Tensor:
    """The hidden states [B,T,D] entering the self-attention module of `layer`."""
    seen = []
    handle = enc.attention_modules[layer].register_forward_pre_hook(
        lambda m, args, kwargs: seen.append(args[0] if args else kwargs["hidden_states"]), with_kwargs=True)
    try:
        _hidden(enc.model, ids, attention_mask)
    finally:
        handle.remove()
    return seen[0]


def _values_by_hand(sa, x: torch.Tensor, heads: int, head_dim: int) -> torch.Tensor:
    """v = W_V x + b_V per head: [B,T,H,d], from the module's weights."""
    with torch.no_grad():
        return _values(sa, x, heads, head_dim)


def _values(sa, x, heads, head_dim):
    if hasattr(sa, "in_proj"):
        w = sa.in_proj.weight.view(heads, 3, head_dim, -1)[:, 2]  # [H,d,D]
        return torch.einsum("btD,hdD->bthd", x, w) + sa.v_bias.view(heads, head_dim)
    proj = sa.value if hasattr(sa, "value") else sa.value_proj
    return (x @ proj.weight.T + proj.bias).view(*x.shape[:2], heads, head_dim)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("mode", ["zero", "uniform"])
def test_empty_mask_changes_nothing(loaded, family, mode):
    enc, ids, am = loaded(family)
    plain = enc.forward(ids, am, vectors=True)
    plain_hidden = _hidden(enc.model, ids, am)
    with HeadMasker(enc.model, enc.attention_modules, enc.heads, enc.head_dim, mode) as masker:
        for mask in (torch.zeros(len(WORDS), enc.layers, enc.heads, dtype=torch.bool), None):
            masker.set(mask)
            masked = enc.forward(ids, am, vectors=True)
            assert all(torch.equal(a, b) for a, b in zip(plain.attentions, masked.attentions))
            assert all(torch.equal(a, b) for a, b in zip(plain.context, masked.context))
            assert torch.equal(plain_hidden, _hidden(enc.model, ids, am))


@pytest.mark.parametrize("family", FAMILIES)
def test_zero_mode(loaded, family):
    enc, ids, am = loaded(family)
    mask = _row_masks(enc)
    plain = enc.forward(ids, am, vectors=True)
    with HeadMasker(enc.model, enc.attention_modules, enc.heads, enc.head_dim, "zero") as masker:
        masker.set(mask)
        masked = enc.forward(ids, am, vectors=True)
        hidden = _hidden(enc.model, ids, am)
    # Layer 0 sees the same input either way: head 1 of row 0 and head 3 of row 1 are 0, the rest untouched.
    ctx, ref = masked.context[0], plain.context[0]  # [B,H,T,d]
    assert torch.count_nonzero(ctx[0, 1]) == 0 and torch.count_nonzero(ctx[1, 3]) == 0
    keep = ~mask[:, 0]  # [B,H]
    assert torch.equal(ctx[keep], ref[keep])
    assert torch.equal(masked.attentions[0], plain.attentions[0])  # zero mode leaves the map as computed
    for row, heads in enumerate(ROW_HEADS[:2]):
        expected = _hidden(_surgery(enc.model, heads, "zero", enc.head_dim), ids, am)
        torch.testing.assert_close(hidden[row], expected[row], rtol=1e-5, atol=1e-5)
    plain_hidden = _hidden(enc.model, ids, am)
    assert torch.equal(hidden[2], plain_hidden[2])  # the row with nothing disabled is bit-identical
    assert (hidden[0] - plain_hidden[0]).abs().max() > 1e-3  # and disabling changes the output (100× the tolerance)


@pytest.mark.parametrize("family", FAMILIES)
def test_uniform_mode(loaded, family):
    enc, ids, am = loaded(family)
    mask = _row_masks(enc)
    real = am.bool()  # [B,T]
    n = am.sum(1)  # [B] real tokens per row
    x0 = _layer_input(enc, ids, am, 0)
    with HeadMasker(enc.model, enc.attention_modules, enc.heads, enc.head_dim, "uniform") as masker:
        masker.set(mask)
        masked = enc.forward(ids, am, vectors=True)
        hidden = _hidden(enc.model, ids, am)
    v = _values_by_hand(enc.attention_modules[0], x0, enc.heads, enc.head_dim)  # [B,T,H,d]
    for row, head in [(0, 1), (1, 3)]:  # the layer-0 heads disabled in rows 0 and 1
        mean_v = v[row, real[row], head].sum(0) / n[row]  # [d]: (1/n) Σ over real tokens
        got = masked.context[0][row, head]  # [T,d], every position
        torch.testing.assert_close(got, mean_v.expand_as(got), rtol=1e-5, atol=1e-6)
        expected_map = real[row].float().expand(real.shape[1], -1) / n[row]  # [T,T] 1/n on real keys
        torch.testing.assert_close(masked.attentions[0][row, head], expected_map, rtol=0, atol=1e-7)
    plain_hidden = _hidden(enc.model, ids, am)
    for row, heads in enumerate(ROW_HEADS[:2]):
        # Real positions only: DeBERTa masks every key of a padding query row, so there the edited copy attends
        # 1/T to all positions, while a disabled head attends 1/n to the real tokens at every position.
        expected = _hidden(_surgery(enc.model, heads, "uniform", enc.head_dim), ids, am)
        torch.testing.assert_close(hidden[row][real[row]], expected[row][real[row]], rtol=1e-4, atol=1e-4)
    assert torch.equal(hidden[2], plain_hidden[2])
    assert (hidden[0] - plain_hidden[0]).abs().max() > 1e-3


@pytest.mark.parametrize("family", FAMILIES)
def test_one_mask_for_every_row(loaded, family):
    """An [L,H] mask applies to each row: same result as the [B,L,H] mask that repeats it."""
    enc, ids, am = loaded(family)
    mask = torch.zeros(enc.layers, enc.heads, dtype=torch.bool)
    mask[1, 0] = mask[0, 2] = True
    out = {}
    for mode in ("zero", "uniform"):
        with HeadMasker(enc.model, enc.attention_modules, enc.heads, enc.head_dim, mode) as masker:
            masker.set(mask)
            shared = _hidden(enc.model, ids, am)
            masker.set(mask.expand(len(WORDS), -1, -1))
            out[mode] = shared, _hidden(enc.model, ids, am)
        assert torch.equal(*out[mode])
    assert not torch.equal(out["zero"][0], out["uniform"][0])


def test_hooks_removed_on_exit(loaded):
    enc, ids, am = loaded("bert")
    plain = _hidden(enc.model, ids, am)
    with HeadMasker(enc.model, enc.attention_modules, enc.heads, enc.head_dim, "uniform") as masker:
        masker.set(torch.ones(enc.layers, enc.heads, dtype=torch.bool))
        assert not torch.equal(_hidden(enc.model, ids, am), plain)
    assert torch.equal(_hidden(enc.model, ids, am), plain)


def test_bad_mask_shape(loaded):
    enc, ids, am = loaded("bert")
    with HeadMasker(enc.model, enc.attention_modules, enc.heads, enc.head_dim, "zero") as masker:
        with pytest.raises(ValueError, match="does not fit a model with 2 layers × 4 heads"):
            masker.set(torch.zeros(3, 5, dtype=torch.bool))
        masker.set(torch.ones(5, enc.layers, enc.heads, dtype=torch.bool))  # 5 rows, the batch has 3
        with pytest.raises(ValueError, match="head mask has 5 rows but layer 0 ran on a batch of 3"):
            _hidden(enc.model, ids, am)
