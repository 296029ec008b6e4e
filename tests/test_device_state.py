"""Issue 44 item 1: a probe's state follows the run to its device (Probe.to), gold counts stay on the host.

The device here is torch's "meta" device (shapes without values: where a tensor is, not what it holds), so that
the CPU alone shows where every piece of state goes; tests/test_cuda.py runs the probes on a real device."""
from __future__ import annotations

import torch

from probes.builtin.dep import DependencyProbe
from probes.builtin.frames import FrameElementProbe
from probes.builtin.pos import PosProbe
from probes.scoring.probe import LabelSums, Probe

META = torch.device("meta")


class _Batch:
    """What Probe.batch_buffer needs of a batch: its memo."""

    def memo(self, key, make):
        return make()


def test_dep_state_moves_but_its_gold_counts_stay_on_the_host():
    probe = DependencyProbe(2, 3, replicates=4).to(META)
    assert probe.device == META
    assert probe.hits.sums.device == META and probe.hits.replicas.device == META  # scored from the maps
    for gold in (probe.arcs, probe.left_arcs, probe.baseline_hits):  # the sentences' alone (host=True)
        assert gold.sums.device.type == "cpu" and gold.replicas.device.type == "cpu"
    assert probe.hits.ids(["nsubj", "obj", "nsubj"]).device == META  # the label look-up's ids go to the sums
    assert probe.hits.ids(["nsubj", "obj", "nsubj"]).shape == (3,) and probe.hits.names == ["nsubj", "obj"]
    probe.reset()  # back to the initial state, where it was
    assert probe.hits.sums.device == META and probe.arcs.sums.device.type == "cpu" and not probe.hits.names
    assert probe.hits.sums.shape == (0, 3, 2, 3) and probe.hits.replicas.shape == (0, 4, 2, 3)
    assert probe.batch_buffer(_Batch(), "right", (5, 3, 2, 3), torch.bool).device == META  # a batch's hits


def test_a_state_dict_loads_onto_the_state_s_device():
    cpu = FrameElementProbe(2, 3, replicates=2)
    cpu.replicate_sums += 1.5
    cpu.removed += torch.tensor([1, 0, 0, 2, 0, 0])
    moved = FrameElementProbe(2, 3, replicates=2).to(META)
    moved.load_state_dict(cpu.state_dict())
    assert moved.replicate_sums.device == META and moved.replicate_sums.shape == (2, 2, 3)
    assert moved.removed.device.type == "cpu" and moved.removed.tolist() == [1, 0, 0, 2, 0, 0]  # host=True
    assert moved.state_dict()["replicate_sums"].device == META


def test_centroids_follow_their_probe():
    probe = PosProbe(2, 3).to(META)
    probe.centroids.add(["NOUN", "VERB"], torch.zeros(2, 3, 4, device=META), 0)
    assert probe.centroids.sums.sums.device == META and probe.centroids.counts.sums.device == META
    assert probe.centroids.index(["VERB", "X"]).device == META
    assert probe.units.sums.device.type == "cpu"  # gold counts


class HostProbe(Probe):
    """A probe that keeps its state on the CPU (no state_on_device): its update adds host tensors."""

    name = "host-test"

    def __init__(self, layers, heads, **options):
        super().__init__(layers, heads, **options)
        self.add_state("counts", torch.zeros(layers, dtype=torch.int64))
        self.add_state("table", LabelSums((heads,)))

    def update(self, batch, maps):
        pass

    def compute(self, info):
        pass


def test_a_probe_that_does_not_ask_keeps_its_state_on_the_cpu():
    probe = HostProbe(2, 3).to(META)
    assert probe.device.type == "cpu" and probe.counts.device.type == "cpu" and probe.table.sums.device.type == "cpu"


def test_label_sums_add_values_from_another_device_in_float64():
    table = LabelSums((2,))
    table.add(table.ids(["a", "b", "a"]), torch.tensor([[1.0, 2.0], [3.0, 4.0], [0.25, 0.5]], dtype=torch.float32))
    assert table["a"].tolist() == [1.25, 2.5] and table["b"].tolist() == [3.0, 4.0]
    assert table.to(META).sums.device == META and table.ids(["b"]).device == META
