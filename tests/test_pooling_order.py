"""Word pooling's sums in a fixed order, as on CUDA, whose scatter_add_ adds in any order: each word's subwords past
its second are kept apart (probes.encoding.pooling.Tail) and summed by a product. The tail of a hand-built layout;
the CPU's own sums, bit for bit, for every word of at most three subwords, and within float32 rounding for longer
ones; on real data every dep and coref score the same as the CPU's segment sums (probes.base.ordered.in_order forced
on the CPU; every batch made wide enough to pool by sums); and ordered.index_sum, index_add_'s sums by index, the
same either way."""
from __future__ import annotations

import pytest
import torch

import probes
from probe_corpora import grids, probe_run_arguments, same
from probes.base import ordered
from probes.capture import maps as layer_maps
from probes.encoding import batching, pooling
from probes.encoding.pooling import pool_attention, pooling_matrices, segments
from rows_alone import FLOAT32_ROUNDING

pytestmark = [pytest.mark.integration]

# two sentences, C = 6 columns (E = 5, the end column), -1 padding:
#   [CLS] w1 w1 w2 w3 w3 w3 w3 [SEP]          w3: four subwords, two in the tail
#   [CLS] w1 w1 w1 w2 w3 w3 w3 w4 w4 w4 w4 [SEP]  w1, w3: three; w4: four
COLUMNS = torch.tensor([[0, 1, 1, 2, 3, 3, 3, 3, 5, -1, -1, -1, -1],
                        [0, 1, 1, 1, 2, 3, 3, 3, 4, 4, 4, 4, 5]])
WIDTH = 6


def test_the_tail_of_a_hand_built_layout():
    query, key = pooling_matrices(COLUMNS, WIDTH, "mean-sum")
    by_key = segments(key, ordered=True)
    dropped = WIDTH  # the extra column a subword left out of the scatter goes to
    assert by_key.word.tolist() == [[0, 1, 1, 2, 3, 3, 6, 6, 5, 6, 6, 6, 6],
                                    [0, 1, 1, 6, 2, 3, 3, 6, 4, 4, 6, 6, 5]]
    assert by_key.tail.position.tolist() == [[6, 7, 0, 0], [3, 7, 10, 11]]  # [B,E]: E = 4, the second sentence's
    assert by_key.tail.word.tolist() == [[3, dropped, dropped], [1, 3, 4]]  # [B,M]
    assert by_key.tail.weight.tolist() == [[[1, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]],
                                           [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]]]  # [B,E,M]
    by_query = segments(query, ordered=True)
    assert torch.equal(by_query.tail.position, by_key.tail.position)
    assert torch.allclose(by_query.tail.weight[0, :, 0], torch.tensor([1 / 4, 1 / 4, 0, 0]))
    assert torch.allclose(by_query.tail.weight[1].sum(0), torch.tensor([1 / 3, 1 / 3, 2 / 4]))
    assert segments(key).tail is None and torch.equal(segments(key).word[1, :4], torch.tensor([0, 1, 1, 1]))
    first, _ = pooling_matrices(COLUMNS, WIDTH, "first-sum")
    assert segments(first, ordered=True).tail is None  # one subword a word: nothing past the second
    two = pooling_matrices(COLUMNS[:1, :6], WIDTH, "mean-sum")[1]  # [CLS] w1 w1 w2 w3 w3: at most two a word
    assert segments(two, ordered=True).tail is None and torch.equal(segments(two, ordered=True).word, segments(two).word)


def _pooled(attention: torch.Tensor, rule: str, ordered_: bool) -> torch.Tensor:
    query, key = pooling_matrices(COLUMNS, WIDTH, rule)
    return pool_attention(attention, query, key,
                          segmented=lambda: (segments(query, ordered_), segments(key, ordered_)))


@pytest.mark.parametrize("rule", ["mean-sum", "mean-mean", "last-sum"])
def test_sums_with_a_tail_are_the_cpus_for_words_of_up_to_three_subwords(rule, monkeypatch):
    """(a + b) + c is the CPU's order (index order) for a word of three subwords, whatever product sums its tail
    (one value); a fourth subword may round apart. Exact inputs (multiples of 1/64) add exactly in any order."""
    monkeypatch.setattr(pooling, "PRODUCT_WIDTH", 0)
    generator = torch.Generator().manual_seed(1)
    t = COLUMNS.shape[1]
    padding = (COLUMNS < 0)[:, None, None, :]
    attention = torch.rand(2, 3, t, t, generator=generator).masked_fill(padding, 0)  # [B,H,T,T]
    monkeypatch.setattr(pooling, "in_order", lambda device: False)
    by_scatter = _pooled(attention, rule, False)
    monkeypatch.setattr(pooling, "in_order", lambda device: True)
    with_tail = _pooled(attention, rule, True)
    for sentence, longest in ((0, 3), (1, 4)):  # each sentence's word of four subwords: left out
        kept = [c for c in range(WIDTH) if c != longest]
        assert torch.equal(with_tail[sentence][:, kept][:, :, kept], by_scatter[sentence][:, kept][:, :, kept])
    torch.testing.assert_close(with_tail, by_scatter, rtol=FLOAT32_ROUNDING, atol=0)
    if rule.endswith("-sum"):  # sums of ≤ 4 multiples of 1/64, weights 1/4 or in the CPU's order: exact
        exact = (torch.randint(0, 64, attention.shape, generator=generator) / 64).masked_fill(padding, 0)
        assert torch.equal(_pooled(exact, rule, True), _pooled(exact, rule, False))


@pytest.mark.parametrize("name", ["dep", "coref"])
def test_scores_pooled_with_tails_are_the_segment_sums(name, minilm, monkeypatch, tmp_path, request):
    arguments = {**probe_run_arguments(name, tmp_path, lambda: request.getfixturevalue("shared_corpora")),
                 "limit": 40, "replicates": 0}
    arguments.pop("fit_on", None)  # dep fits nothing
    monkeypatch.setattr(pooling, "PRODUCT_WIDTH", 0)  # every batch pooled by sums
    by_scatter = probes.run([name], encoder=minilm, progress=False, **arguments)[name]
    tails, original = [], pooling._tail_sum

    def tail_sum(*args, **kwargs):
        tails.append(1)
        return original(*args, **kwargs)

    for module in (pooling, layer_maps, batching):
        monkeypatch.setattr(module, "in_order", lambda device: True)
    monkeypatch.setattr(pooling, "_tail_sum", tail_sum)
    in_order = probes.run([name], encoder=minilm, progress=False, **arguments)[name]
    assert tails  # words of three subwords or more were summed apart
    assert in_order.overall.count == by_scatter.overall.count > 0
    same(grids(by_scatter), grids(in_order), f"{name}: tails", atol=0, rtol=FLOAT32_ROUNDING)


@pytest.mark.parametrize("in_order", [False, True], ids=["index_add_", "index_put_"])
def test_index_sum_adds_rows_by_index(in_order, monkeypatch):
    monkeypatch.setattr(ordered, "in_order", lambda device: in_order)
    values = torch.tensor([[0.5, 1.0], [0.25, 2.0], [1.0, 4.0], [0.125, 8.0]], dtype=torch.float64)
    summed = ordered.index_sum(torch.zeros(3, 2, dtype=torch.float64), torch.tensor([2, 0, 2, 2]), values)
    assert summed.tolist() == [[0.25, 2.0], [0.0, 0.0], [1.625, 13.0]]


def test_a_batch_made_ready_holds_its_segments_for_the_model(minilm, monkeypatch):
    """Batch.ready (the runner's batch builder, ahead of the model) makes a wide batch's Segments on the host for an
    accelerator, with their tails where the device sums in order: the layers' pooling then makes none of its own. On
    the CPU it makes nothing (work beside the model's threads slows the pass there)."""
    from probes.corpus import read_corpus
    from probes.base.defaults import bundled_corpus
    from probes.encoding.batching import Batch
    from probes.encoding.subwords import encode

    monkeypatch.setattr(pooling, "PRODUCT_WIDTH", 0)  # every batch pooled by sums
    monkeypatch.setattr(batching, "in_order", lambda device: True)
    sentences = read_corpus([bundled_corpus()]).sentences[:24]
    items, _ = encode(minilm.tokenizer, sentences, minilm.max_length)
    batch = Batch.from_encoded([sentences[e.index] for e in items], items, minilm.tokenizer, "mean-sum")
    made, original = [], batching.segments
    monkeypatch.setattr(batching, "segments", lambda *args: made.append(1) or original(*args))
    assert batch.ready(torch.device("cpu")) is batch and made == []  # on the CPU nothing ahead
    assert batch.ready(torch.device("meta")) is batch and made == [1, 1]  # an accelerator's: query's and key's
    by_query, by_key = batch.segments(torch.device("cpu"))  # in_order made True: the ones made ahead
    assert made == [1, 1] and by_key.tail is not None  # none made again; the sample has words of 3+ subwords
    assert torch.equal(by_key.word, segments(batch.pooling(torch.device("cpu"))[1], True).word)
