"""Issue 44 item 6: no probe makes the device wait for the host layer by layer.

Every registered probe runs on its small real corpus (tests/probe_corpora.py) with a tiny model of 2 and of 4 layers
(the causal detectors on a tiny Llama-shaped decoder, tests/causal_models.py; every other probe on a tiny BERT),
and every call that on CUDA reads device values to the host (tests/host_reads.py: ``.item()``, ``.cpu()``,
``.tolist()``, ``.numpy()``, ``bool(tensor)``, ``nonzero``, boolean indexing, ...) is counted within each batch the
runner feeds (``probes.running.runner.Feed.batch``: the batch's inputs, the capture, every probe's ``update`` at every
layer, the per-sentence views). The counts run on the CPU, where a read costs nothing, so that CI sees the calls a
GPU run makes.

Asserted per batch: the same reads with 4 layers as with 2 (none per layer), and at most BOUND:

    RUNNER_READS  4   the runner's own: the batch's width (its words, on the host), transformers' check of the
                      attention mask, and the per-sentence views' one copy of their recorded rows' argmaxes and
                      maps (probes.results.examples: ``.cpu()`` then ``.numpy()``, counted as two)
    VIEW_READS    2   a probe's marks of its per-sentence view, one copy (``.cpu()``, ``.numpy()``)
    LAYOUT_READS  3   reads of the batch's layout, once per batch: the pooling's two checks of its subword
                      weights (probes.encoding.pooling.segments, for wide batches and coref's anaphors) and coref's
                      subword rows of its anaphors (a nonzero), all on the host (the layout is host data: on CUDA
                      they read no device value)

The causal detectors may add DETECTOR_READS: their token-pair targets, built once per batch from the batch's ids,
which are on the host (probes.builtin.causal.token_pairs: nonzero, boolean indexing, repeat_interleave, the
largest id), before they are sent to the device.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import probes
from causal_models import make_checkpoint
from host_reads import HostReads
from probe_corpora import probe_run_arguments
from probes.running.runner import Feed
from tiny_models import build_tiny_model, with_layers

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings(
    "ignore::probes.encoding.subwords.UnknownTokensWarning")]  # the decoder's word-level test vocabulary

LAYERS = (2, 4)
RUNNER_READS, VIEW_READS, LAYOUT_READS = 4, 2, 3
BOUND = RUNNER_READS + VIEW_READS + LAYOUT_READS
DETECTOR_READS = 6
DECODER_DETECTORS = ("duplicate_token", "induction", "prev_token", "sink")
POSITIONS = 512  # coref's windows of LitBank (WINDOW subwords through the tiny BERT's vocabulary) fit
WINDOW = {"window": 500, "stride": 250}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[tuple[str, int], Path]:
    """("bert" | "llama", layers) -> a tiny checkpoint of that many layers."""
    root = tmp_path_factory.mktemp("host_reads")
    built = {}
    for layers in LAYERS:
        built["bert", layers] = with_layers(build_tiny_model("bert", root / f"bert{layers}"), layers, POSITIONS)
        built["llama", layers] = with_layers(make_checkpoint("llama", root / f"llama{layers}"), layers, POSITIONS,
                                             causal=True)
    return built


def reads_per_batch(name: str, model: Path, tmp: Path, shared, monkeypatch, **settings) -> list[Counter]:
    """The host reads of each batch the run of probe `name` feeds (with these run settings), by probes source line
    (tests/host_reads.py)."""
    counted: list[Counter] = []
    feed = Feed.batch

    def batch(self, probes_, method, sentences, items, *built):
        with HostReads() as reads:
            feed(self, probes_, method, sentences, items, *built)
        counted.append(reads.sites)

    arguments = probe_run_arguments(name, tmp, shared)
    if name == "coref":
        arguments.update(WINDOW)
    if not probes.get_probe(name).needs_fit:
        arguments.pop("fit_on", None)
    arguments.setdefault("allow_unknown", True)  # the decoder's vocabulary reads the corpora's words as unknown
    with monkeypatch.context() as patched:
        patched.setattr(Feed, "batch", batch)
        probes.run([name], model=str(model), batch_size=4, progress=False, **arguments, **settings)
    return counted


@pytest.mark.parametrize("name", sorted(probes.available()))
def test_host_reads_per_batch_do_not_grow_with_the_layers(name, models, tmp_path, request, monkeypatch):
    family = "llama" if name in DECODER_DETECTORS else "bert"
    shared = lambda: request.getfixturevalue("shared_corpora")  # noqa: E731
    counts = {}
    for layers in LAYERS:
        (tmp_path / str(layers)).mkdir()
        counts[layers] = reads_per_batch(name, models[family, layers], tmp_path / str(layers), shared, monkeypatch)
    few, many = counts.values()
    assert len(few) == len(many) >= 1  # the same batches
    assert few == many, f"{name}: reads that grow with the layers: {[m - f for f, m in zip(few, many)]}"
    totals = [sum(c.values()) for c in many]
    bound = BOUND + (DETECTOR_READS if name in DECODER_DETECTORS else 0)
    assert max(totals) <= bound, f"{name}: {max(totals)} host reads in a batch: {many[totals.index(max(totals))]}"


@pytest.mark.parametrize("family, settings", [("bert", {"capture": "outputs"}), ("bert", {"weights": "norm"}),
                                               ("llama", {"capture": "sdpa-qk"}), ("llama", {"capture": "hooks"})],
                         ids=["outputs", "norm-weights", "decoder-sdpa-qk", "decoder-hooks"])
def test_every_capture_reads_the_same_per_batch_whatever_the_layers(family, settings, models, tmp_path, monkeypatch):
    """dep through the other capture backends (probes.capture.backend), the norm-based maps and a decoder's capture
    beside SDPA: the same bound, nothing per layer."""
    few, many = (reads_per_batch("dep", models[family, layers], tmp_path, None, monkeypatch, **settings)
                 for layers in LAYERS)
    assert few == many and max(sum(c.values()) for c in many) <= BOUND, many


def test_the_count_sees_a_read_per_layer(models, tmp_path, monkeypatch):
    """The test's own check: a probe that reads a value back at every layer is counted once a layer (2 more reads a
    batch with 4 layers than with 2)."""
    from probes.builtin.dep import DependencyProbe

    update = DependencyProbe.update

    def reading(self, batch, maps):
        update(self, batch, maps)
        maps.predictions.sum().item()

    monkeypatch.setattr(DependencyProbe, "update", reading)
    few, many = (reads_per_batch("dep", models["bert", layers], tmp_path, None, monkeypatch) for layers in LAYERS)
    assert [sum((m - f).values()) for f, m in zip(few, many)] == [2] * len(few)
