"""Word pooling's sums in slot order (probes.encoding.pooling.Slots), as on CUDA, whose scatter_add_ adds in any
order: the slots of a hand-built layout, and on real data every dep and coref score the same as the CPU's segment
sums (probes.base.ordered.in_order forced on the CPU; every batch made wide enough to pool by sums); and
ordered.index_sum, index_add_'s sums by index, the same either way."""
from __future__ import annotations

import pytest
import torch

import probes
from probe_corpora import grids, probe_run_arguments, same
from probes.base import ordered
from probes.capture import maps as layer_maps
from probes.encoding import pooling
from probes.encoding.pooling import pooling_matrices, slots
from rows_alone import FLOAT32_ROUNDING

pytestmark = [pytest.mark.integration]


def test_the_slots_of_a_hand_built_layout():
    # [CLS] w1 w1 w2 w3 w3 w3 [SEP] pad: columns 0 1 1 2 3 3 3 E -1 (E = 4, the end column)
    columns = torch.tensor([[0, 1, 1, 2, 3, 3, 3, 4, -1]])
    query, key = pooling_matrices(columns, 5, "mean-sum")
    by_query, by_key = slots(query), slots(key)
    assert by_key.position.tolist() == [[[0, 0, 0], [1, 2, 0], [3, 0, 0], [4, 5, 6], [7, 0, 0]]]
    assert by_key.weight.tolist() == [[[1, 0, 0], [1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 0, 0]]]
    assert torch.equal(by_query.position, by_key.position)
    assert torch.allclose(by_query.weight, torch.tensor([[[1, 0, 0], [1 / 2, 1 / 2, 0], [1, 0, 0],
                                                          [1 / 3, 1 / 3, 1 / 3], [1, 0, 0]]]))
    first, _ = pooling_matrices(columns, 5, "first-sum")
    assert slots(first).position[0, 3].tolist() == [4] and slots(first).weight.shape == (1, 5, 1)


@pytest.mark.parametrize("name", ["dep", "coref"])
def test_scores_pooled_in_slot_order_are_the_segment_sums(name, minilm, monkeypatch, tmp_path, request):
    arguments = {**probe_run_arguments(name, tmp_path, lambda: request.getfixturevalue("shared_corpora")),
                 "limit": 40, "replicates": 0}
    arguments.pop("fit_on", None)  # dep fits nothing
    monkeypatch.setattr(pooling, "PRODUCT_WIDTH", 0)  # every batch pooled by sums
    by_scatter = probes.run([name], encoder=minilm, progress=False, **arguments)[name]
    summed, original = [], pooling.slot_sum

    def slot_sum(*args, **kwargs):
        summed.append(1)
        return original(*args, **kwargs)

    for module in (pooling, layer_maps):
        monkeypatch.setattr(module, "in_order", lambda device: True)
        monkeypatch.setattr(module, "slot_sum", slot_sum)
    in_order = probes.run([name], encoder=minilm, progress=False, **arguments)[name]
    assert summed  # the slots were read
    assert in_order.overall.count == by_scatter.overall.count > 0
    same(grids(by_scatter), grids(in_order), f"{name}: slots", atol=0, rtol=FLOAT32_ROUNDING)


@pytest.mark.parametrize("in_order", [False, True], ids=["index_add_", "index_put_"])
def test_index_sum_adds_rows_by_index(in_order, monkeypatch):
    monkeypatch.setattr(ordered, "in_order", lambda device: in_order)
    values = torch.tensor([[0.5, 1.0], [0.25, 2.0], [1.0, 4.0], [0.125, 8.0]], dtype=torch.float64)
    summed = ordered.index_sum(torch.zeros(3, 2, dtype=torch.float64), torch.tensor([2, 0, 2, 2]), values)
    assert summed.tolist() == [[0.25, 2.0], [0.0, 0.0], [1.625, 13.0]]
