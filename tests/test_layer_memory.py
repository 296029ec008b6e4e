"""What one layer's work holds beside its map (issue 43's memory line: a long-input run peaks at about the bare SDPA
pass plus a few layers' maps): dep, entropy and the per-sentence views of a batch of long sentences make the
word-level map once, and no other tensor larger than an eighth of the layer's map (no copy of the word-level map
for the views, no second [B,H,T,T] for entropy, no [B,H,T,C] key-side sums or [B·H,C,T] pooling matrices for the
whole batch at once); what they compute is the same as from whole-batch tensors."""
from __future__ import annotations

import math

import numpy as np

import pytest
import torch
from helpers import E, batch, sentence
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from probes.builtin.analyses.entropy import EntropyAnalysis
from probes.builtin.dep import DependencyProbe
from probes.results import examples
from probes.results.examples import ExampleRecorder
from probes.capture.maps import LayerMaps
from probes.encoding import pooling
from probes.encoding.pooling import PART_BYTES, PARTS, at_once
from probes.capture import maps as layer_maps

SENTENCES, HEADS, WORDS = 8, 2, 70  # 70 words of 2 subwords each: C = 72 columns (wider than PRODUCT_WIDTH), T = 142


class Made(TorchDispatchMode):
    """The element count of every tensor an aten operation makes anew (not views, not in-place or out= results)."""

    def __init__(self):
        super().__init__()
        self.sizes: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if all(r.alias_info is None for r in func._schema.returns):
            self.sizes += [t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        return out


def _long_batch():
    """SENTENCES sentences of WORDS two-subword words, each word's head the previous word, random maps."""
    words = [f"w{i}" for i in range(WORDS)]
    sentences = [sentence(words, head=list(range(WORDS)), deprel=["dep"] * WORDS) for _ in range(SENTENCES)]
    columns = [[0, *[c for w in range(1, WORDS + 1) for c in (w, w)], E]] * SENTENCES
    t = len(columns[0])
    generator = torch.Generator().manual_seed(0)
    heads = [[torch.randn(t, t, generator=generator).softmax(-1) for _ in range(HEADS)] for _ in range(SENTENCES)]
    return batch(sentences, columns, heads)


@pytest.mark.parametrize("held_share", [0, examples.HELD_SHARE])
def test_a_layer_of_long_sentences_holds_its_word_map_and_no_other_tensor_over_an_eighth_of_its_map(
        tmp_path, monkeypatch, held_share):
    """With the views' maps written layer by layer (held_share 0, as past the budget), nothing but the word map
    is larger than an eighth of the map; held on the device until the views are made, they add their own
    [R,L,H,C,C] uint8 buffer, a quarter of the word map's bytes a layer (within examples.held_budget), and nothing
    more at the last layer (only the predictions leave for the host)."""
    monkeypatch.setattr(examples, "HELD_SHARE", held_share)
    hand = _long_batch()
    attention = hand.attentions[0]  # [B,H,T,T]
    hand.batch.segments(attention.device)  # the batch's pooling, made once for all its layers
    probes = [DependencyProbe(1, HEADS), EntropyAnalysis(1, HEADS), ExampleRecorder(1, HEADS, sentences=SENTENCES)]
    maps = LayerMaps(hand.batch, 0, attention)
    with Made() as made:
        for p in probes:
            p.update(hand.batch, maps)
    words = SENTENCES * HEADS * (WORDS + 3) * (WORDS + 2)  # [B,H,C+1,C]: the word map and its dropped word's row
    held = SENTENCES * 1 * HEADS * (WORDS + 2) * (WORDS + 2)  # [R,L,H,C,C] uint8 where held
    sizes = sorted(made.sizes)
    if held_share:  # the held maps
        sizes.remove(held)
    assert sizes[-1] == words and sizes.count(words) == 1
    assert sizes[-2] <= attention.numel() / PARTS


def test_the_entropy_of_a_layer_is_that_of_its_whole_map_and_ln_n_for_a_uniform_row():
    hand = _long_batch()
    a = hand.attentions[0]
    a[0, 0, 5] = 0
    a[0, 0, 5, :4] = 0.25  # uniform over 4 keys: ln 4
    a[1, 1, 7] = 0
    a[1, 1, 7, 3] = 1.0  # all on one key: 0
    entropy = LayerMaps(hand.batch, 0, a).entropy  # [B,H,T]
    assert torch.equal(entropy, -(a.clamp(min=1e-30).log() * a).sum(-1))  # made 1/PARTS of the sentences at a time
    assert entropy[0, 0, 5].item() == pytest.approx(math.log(4), rel=1e-6)
    assert entropy[1, 1, 7].item() == 0.0


def test_the_views_of_a_pooled_layer_are_views_of_its_word_map():
    hand = _long_batch()
    maps = LayerMaps(hand.batch, 0, hand.attentions[0])
    words = maps.word_attention
    some = maps.word_attention_of([2, 3])  # consecutive rows: a view, not a copy
    assert torch.equal(some, words[2:4]) and some.untyped_storage().data_ptr() == words.untyped_storage().data_ptr()
    assert torch.equal(maps.word_attention_of([3, 1]), words[[3, 1]])


def test_on_cuda_a_temporary_is_made_whole_up_to_part_bytes():
    """On the CPU a layer-sized temporary is made for 1/PARTS of the sentences at a time (the step given); on CUDA for
    as many as PART_BYTES hold where that is more (fewer parts, fewer launches), never fewer than the CPU's."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")  # a device object only: nothing runs there
    row = 16 * 512 * 513 * 4  # a sentence of 512 subwords' key-side sums, 16 heads, float32: 16.8 MB
    assert at_once(2, row, cpu) == 2 and at_once(0, row, cpu) == 1
    assert at_once(2, row, cuda) == PART_BYTES // row == 15  # 16 sentences in two parts instead of eight
    assert at_once(40, row, cuda) == 40 and at_once(1, 2 * PART_BYTES, cuda) == 1


def test_temporaries_made_whole_as_on_cuda_change_no_value(monkeypatch):
    """The word map, the entropy and the views' maps of a layer are the same whether their temporaries are made an
    eighth of the sentences at a time (the CPU) or for the whole batch at once (CUDA under PART_BYTES)."""
    def made(whole: bool):
        if whole:
            everything = lambda step, row_bytes, device: 1 << 30  # noqa: E731
            for module in (pooling, layer_maps, examples):
                monkeypatch.setattr(module, "at_once", everything)
        hand = _long_batch()
        maps = LayerMaps(hand.batch, 0, hand.attentions[0])
        recorder = ExampleRecorder(1, HEADS, sentences=SENTENCES)
        recorder.update(hand.batch, maps)
        return maps.word_attention, maps.entropy, recorder
    words, entropy, eighths = made(False)
    whole_words, whole_entropy, whole = made(True)
    assert torch.equal(words, whole_words) and torch.equal(entropy, whole_entropy)
    eighths.settle()
    whole.settle()
    for index in range(SENTENCES):
        assert np.array_equal(eighths.kept[index]["predictions"], whole.kept[index]["predictions"])
        assert eighths.maps(index, [(0, 0), (0, 1)])[1].tolist() == whole.maps(index, [(0, 0), (0, 1)])[1].tolist()
