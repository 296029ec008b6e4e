"""On a CUDA device (benchmarks/gpu_check.py runs this file where there is one): the maps, context vectors, head
masking and causal detectors of every encoder and decoder family equal the CPU's within float32 rounding.

Only values with no argmax behind them are compared (maps, context vectors, hidden states, mean attention): the
two devices' float32 products differ in the last bits, and an argmax over a near-tie may flip between them. The
tiny random models are built in the tests (tests/tiny_models.py, tests/causal_models.py).

PROBES_TEST_DEVICE=cpu runs the same comparisons CPU against CPU (a rehearsal of this file without a GPU)."""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil

import numpy as np
import pytest
import torch

import probes
from causal_models import CONFIGS, make_checkpoint
from probe_corpora import CORPORA, probe_run_arguments
from probes.base.defaults import bundled_corpus
from probes.corpus import read_corpus
from probes.encoding.batching import transfer
from probes.capture.masking import HeadMasker
from probes.builtin.trees import batched
from probes.builtin.trees.decoders import decode
from probes.tools.detect import detect
from probes.capture.model import Encoder

DEVICE = os.environ.get("PROBES_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else None)
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(DEVICE is None, reason="needs a CUDA device")]

ENCODERS = ["bert", "roberta", "electra", "deberta-v2", "deberta"]
WORDS = [["the", "cat", "sat", "on", "the", "mat"], ["dogs", "bark"], ["we", "went", "home", "late", "."]]
DETECTORS = ["prev_token", "duplicate_token", "induction", "sink"]
ATOL = 1e-5  # float32 maps and mean attention: the devices' products differ in the last bits


def _pair(folder) -> tuple[probes.Encoder, probes.Encoder]:
    return probes.load_encoder(str(folder)), probes.load_encoder(str(folder), device=DEVICE)


def _close(cpu: torch.Tensor, device: torch.Tensor, atol: float = ATOL) -> None:
    assert device.device.type == torch.device(DEVICE).type
    torch.testing.assert_close(device.cpu(), cpu, atol=atol, rtol=1e-4)


@pytest.mark.parametrize("family", ENCODERS)
def test_encoder_maps_and_context_vectors_equal_the_cpu(tiny_model, family):
    cpu, dev = _pair(tiny_model(family))
    assert dev.device.type == torch.device(DEVICE).type
    batch = cpu.tokenizer(WORDS, is_split_into_words=True, padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    ours, theirs = cpu.forward(ids, mask, vectors=True), dev.forward(ids, mask, vectors=True)
    assert len(theirs.attentions) == len(ours.attentions) == cpu.layers
    for a, b in zip(ours.attentions, theirs.attentions, strict=True):  # [B,H,T,T]
        _close(a, b)
    for a, b in zip(ours.context, theirs.context, strict=True):  # [B,H,T,d]
        _close(a, b, atol=1e-4)
    handed: list[tuple[int, torch.Tensor]] = []  # the runner's path: one layer at a time, stopped after the last
    dev.layerwise(ids, mask, lambda layer, a, c: handed.append((layer, a.clone())))
    assert [layer for layer, _ in handed] == list(range(cpu.layers))
    for (_, a), b in zip(handed, theirs.attentions, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


@pytest.mark.parametrize("mode", ["zero", "uniform"])
@pytest.mark.parametrize("family", ENCODERS)
def test_head_masking_equals_the_cpu(tiny_model, family, mode):
    """A [B,L,H] mask made on the CPU disables the same heads on the device: the hidden states agree."""
    cpu, dev = _pair(tiny_model(family))
    batch = cpu.tokenizer(WORDS, is_split_into_words=True, padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    disabled = torch.zeros(len(WORDS), cpu.layers, cpu.heads, dtype=torch.bool)  # [B,L,H]
    disabled[0, 0, 1] = disabled[1, 1, 2] = disabled[1, 0, 3] = True
    hidden = []
    for encoder in (cpu, dev):
        with HeadMasker(encoder.model, encoder.attention_modules, encoder.heads, encoder.head_dim, mode) as masker:
            masker.set(disabled)
            hidden.append(encoder.bare_forward(ids, mask))  # [B,T,D]
    plain = cpu.bare_forward(ids, mask)
    assert (hidden[0] - plain).abs().max() > 1e-5  # the mask changed something (tiny models attend near-uniformly)
    _close(hidden[0], hidden[1], atol=1e-4)


@pytest.fixture(scope="module")
def minilm_on_device(minilm):
    from probes.base.defaults import default_model

    return probes.load_encoder(default_model(), device=DEVICE)


def _cells(result) -> dict:
    return {**{label: (cell.count, cell.scores) for label, cell in result.labels.items()},
            "(overall)": (result.overall.count, result.overall.scores)}


def _groups() -> list[tuple[str, ...]]:
    """The probes reading the bundled sample together (pos fits on it), every other probe alone on its corpus."""
    return [tuple(n for n in probes.available() if n not in CORPORA),
            *[(n,) for n in probes.available() if n in CORPORA]]


@pytest.mark.parametrize("names", _groups(), ids=lambda names: "+".join(names) if len(names) < 3 else "bundled")
def test_every_probe_runs_on_the_device_as_on_the_cpu(names, minilm, minilm_on_device, tmp_path, request):
    """Every registered probe on its small real corpus (tests/probe_corpora.py), MiniLM on the device against the
    CPU: the same sentences, skips, labels and counts; each score within one instance of the CPU's (an argmax over
    a near-tie may flip between the devices' float32 maps: at most 1/count per cell), and most cells equal."""
    if names == ("coref",) and importlib.util.find_spec("spacy") is None:
        pytest.skip("coref's mention heads need spaCy, which this machine lacks")
    kwargs = probe_run_arguments(names[0], tmp_path, lambda: request.getfixturevalue("shared_corpora"))
    runs = [probes.run(list(names), encoder=e, progress=False, **kwargs) for e in (minilm, minilm_on_device)]
    for name in names:
        ours, theirs = runs[0][name], runs[1][name]
        assert theirs.info.settings["device"] == str(minilm_on_device.device), name
        assert (theirs.info.sentences, theirs.info.skipped) == (ours.info.sentences, ours.info.skipped), name
        cpu, device = _cells(ours), _cells(theirs)
        assert cpu.keys() == device.keys(), name
        moved = total = 0
        for label, (count, scores) in cpu.items():
            assert device[label][0] == count, (name, label)
            x, y = np.asarray(scores, dtype=float), np.asarray(device[label][1], dtype=float)
            assert np.array_equal(np.isnan(x), np.isnan(y)), (name, label)
            delta = np.abs(np.nan_to_num(x) - np.nan_to_num(y))  # [L,H]
            assert delta.max() <= 1 / max(count, 1) + 1e-4, (name, label, float(delta.max()), count)
            moved, total = moved + int((delta > 1e-4).sum()), total + delta.size
        assert moved <= 0.05 * total, (name, moved, total)


def test_views_held_on_the_device_equal_the_cpus(minilm, minilm_on_device):
    """The per-sentence views' maps stay on the device until the views are made (probes.results.examples), and pos
    scores its kept units after the pass (Probe.fit_beside): the same sentences, heads chosen where no best head
    moved, every held map within one step of 255 of the CPU's, and pos's marks for the same items."""
    from probes.base.packing import unpack

    runs = [probes.run(["dep", "pos"], encoder=e, limit=16, views=6, view_heads=[(1, 2), (4, 7)], progress=False)
            for e in (minilm, minilm_on_device)]
    for name in ("dep", "pos"):
        ours, theirs = (run[name].extra["sentence_views"] for run in runs)
        assert [s["index"] for s in ours["sentences"]] == [s["index"] for s in theirs["sentences"]] == list(range(6))
        shared = set(map(tuple, ours["heads"])) & set(map(tuple, theirs["heads"]))
        assert {(1, 2), (4, 7)} <= shared
        for a, b in zip(ours["sentences"], theirs["sentences"], strict=True):
            side = len(a["words"]) + 2
            for layer, head in shared:
                key = f"{layer}-{head}"
                x, y = (unpack(s["attention"][key], np.uint8, (side, side)).astype(int) for s in (a, b))
                assert np.abs(x - y).max() <= 1, (name, a["index"], key)
            assert a["items"] == b["items"] and a["marks"].keys() == b["marks"].keys(), (name, a["index"])


def test_views_staged_on_the_device_equal_the_views_made_layer_by_layer(minilm_on_device, monkeypatch):
    """On CUDA a batch's recorded maps are staged in float32 and their argmaxes and quantisation made at its last
    layer (probes.results.examples.staged): the views byte for byte those made layer by layer on the device."""
    from probes.results import examples

    def views():
        return probes.run(["dep", "pos"], encoder=minilm_on_device, limit=40, views=12, view_heads=[(2, 5)],
                          progress=False)

    assert examples.staged(1, minilm_on_device.device)
    staged = views()
    monkeypatch.setattr(examples, "staged", lambda size, device: False)
    each_layer = views()
    for name in ("dep", "pos"):
        assert staged[name].extra["sentence_views"] == each_layer[name].extra["sentence_views"]


def test_word_maps_pooled_on_the_device_are_the_same_on_every_run(minilm, minilm_on_device, monkeypatch):
    """Wide batches pool by sums (PRODUCT_WIDTH made 0 here: every batch), on CUDA in a fixed order (scatter_add_'s
    atomic additions for each word's first two subwords alone, the rest summed apart: pooling.Tail): two runs' word
    maps bit for bit equal, and within float32 rounding of the CPU's; the same for the coreference's few pooled rows
    (LayerMaps.predictions_at)."""
    from probes.capture.maps import LayerMaps
    from probes.encoding import pooling
    from probes.encoding.batching import Batch
    from probes.encoding.subwords import encode

    monkeypatch.setattr(pooling, "PRODUCT_WIDTH", 0)
    sentences = read_corpus([bundled_corpus()]).sentences[:24]
    items, _ = encode(minilm.tokenizer, sentences, minilm.max_length)
    batch = Batch.from_encoded([sentences[e.index] for e in items], items, minilm.tokenizer, "mean-sum")
    rows, words = torch.tensor([0, 3, 5, 5]), torch.tensor([1, 2, 1, 3])

    def pooled(encoder) -> list[tuple[torch.Tensor, torch.Tensor]]:
        made = []

        def on_layer(layer, attention, context):
            maps = LayerMaps(batch, layer, attention)
            made.append((maps.word_attention.cpu(), maps.predictions_at(rows, words).cpu()))

        encoder.layerwise(batch.input_ids.to(encoder.device), batch.attention_mask.to(encoder.device), on_layer)
        return made

    first, second, cpu = pooled(minilm_on_device), pooled(minilm_on_device), pooled(minilm)
    for (a, at_a), (b, at_b), (c, at_c) in zip(first, second, cpu, strict=True):
        assert torch.equal(a, b) and torch.equal(at_a, at_b)
        _close(c, a)
        assert (at_a == at_c).float().mean() > 0.9  # a near-tie may flip between the devices' maps


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cuda-decoders")
    return {family: make_checkpoint(family, root / family) for family in CONFIGS}


@pytest.mark.parametrize("family", list(CONFIGS))
def test_decoder_maps_equal_the_cpu(decoders, family):
    cpu, dev = _pair(decoders[family])
    words = [[f"t{i}" for i in (5, 9, 17, 5, 9, 33, 2, 40, 5, 9, 17)], [f"t{i}" for i in (8, 8, 3, 60, 12, 3, 7)]]
    batch = cpu.tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    real = mask.bool()[:, None, :, None]  # [B,1,T,1] real query rows
    for a, b in zip(cpu.forward(ids, mask).attentions, dev.forward(ids, mask).attentions, strict=True):
        _close(a * real, b * real.to(b.device))
        assert torch.triu(b[0], diagonal=1).abs().max() == 0  # causal on the device too


@pytest.mark.parametrize("family", list(CONFIGS))
def test_decoder_maps_from_sdpas_math_kernel_equal_the_cpu(decoders, family):
    """With SDPA held to its math kernel on the device (as for a float32 model with grouped-query attention on a
    GPU), the maps are that kernel's own probabilities (probes.capture.sdpa_qk.math_attention): the CPU's within
    float32 rounding, causal, padding rows 0."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cpu, dev = _pair(decoders[family])
    words = [[f"t{i}" for i in (5, 9, 17, 5, 9, 33, 2, 40, 5, 9, 17)], [f"t{i}" for i in (8, 8, 3, 60, 12, 3, 7)]]
    batch = cpu.tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    real = mask.bool()[:, None, :, None]  # [B,1,T,1] real query rows
    expected = cpu.forward(ids, mask).attentions
    with sdpa_kernel([SDPBackend.MATH]):
        got = dev.forward(ids, mask).attentions
    for a, b in zip(expected, got, strict=True):
        _close(a * real, b * real.to(b.device))
        assert torch.triu(b[0], diagonal=1).abs().max() == 0 and (b * ~real.to(b.device)).abs().max() == 0


@pytest.mark.parametrize("family", list(CONFIGS))
def test_detectors_equal_the_cpu(decoders, family):
    """The four detectors: the CPU reads entries from its flash kernel, the device computes whole maps (another
    SDPA kernel); mean attention agrees within rounding, the copying score (eigenvalues) within 1e-4."""
    runs = [detect(DETECTORS, str(decoders[family]), count=6, length=10, sequence_seed=5, replicates=20,
                   batch_size=4, device=device, progress=False) for device in ("cpu", DEVICE)]
    for name in DETECTORS:
        ours, theirs = runs[0][name], runs[1][name]
        assert ours.labels.keys() == theirs.labels.keys() and theirs.info.settings["device"] == DEVICE
        for label, cell in ours.labels.items():
            assert theirs.labels[label].count == cell.count, (name, label)
            atol = 1e-4 if label == "copying" else ATOL
            np.testing.assert_allclose(theirs.labels[label].scores, cell.scores, atol=atol, rtol=0,
                                       err_msg=f"{name} {label}")


SIX = ["dep", "pos", "trees", "mass", "entropy", "positional"]  # the encoder probes that read EWT


@contextlib.contextmanager
def sync_debug(mode: str):
    """torch.cuda.set_sync_debug_mode(mode) inside the block, the mode before it restored after (a process-wide
    switch: every host synchronisation then warns or raises). The CPU rehearsal (PROBES_TEST_DEVICE=cpu) has no
    such switch: nothing is set."""
    if torch.device(DEVICE).type != "cuda":
        yield
        return
    before = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(before)


@pytest.fixture(scope="module")
def deep_bert(minilm, tmp_path_factory) -> probes.Encoder:
    """A random BERT of 4 layers (so that two lie between the first and the last) × 4 heads, hidden 64, with the
    MiniLM tokenizer, on the device."""
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("deep-bert")
    config = BertConfig(vocab_size=len(minilm.tokenizer), hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=512)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        BertModel(config).save_pretrained(folder)
    minilm.tokenizer.save_pretrained(folder)
    return probes.load_encoder(str(folder), device=DEVICE)


def test_a_batch_goes_to_the_device_without_a_host_synchronisation():
    """Pinned memory and a non-blocking copy (probes.encoding.batching.transfer): no synchronisation, the same values."""
    ids = torch.tensor([[101, 2023, 102], [101, 102, 0]])  # [B,T]
    with sync_debug("error"):
        sent = transfer(ids, torch.device(DEVICE))
    assert sent.device.type == torch.device(DEVICE).type and sent.cpu().tolist() == ids.tolist()


@pytest.mark.parametrize("decoding", ["host", "device"])
def test_capture_and_update_never_wait_on_the_device_between_layers(deep_bert, monkeypatch, decoding):
    """dep, pos (fitted on the same sentences: its fit pass too), trees (decoding on the host or on the device: at the
    last layer), mass, entropy and positional in one run
    on the bundled sample (40 sentences, batches of 8): from the end of each batch's first layer to the start of
    its last, the model's pass, the capture and every probe's update run under set_sync_debug_mode("error"), so
    any host synchronisation raises. Allowed, under "warn": before and at the first layer (each batch's inputs and
    what the probes derive from the batch alone, made and sent to the device once: Batch.memo, pooling matrices)
    and at the last layer, the once-per-batch read that adds the batch to the probes' state."""
    layerwise = Encoder.layerwise
    modes: list[tuple[int, str]] = []  # (layer, the mode its callback ran under), every batch in order

    def strict(self, input_ids, attention_mask, on_layer, **kwargs):
        with contextlib.ExitStack() as stack:
            stack.enter_context(sync_debug("warn"))

            def checked(layer: int, attention: torch.Tensor, context: torch.Tensor | None) -> None:
                edge = layer in (0, self.layers - 1)
                modes.append((layer, "warn" if edge else "error"))
                if layer == self.layers - 1:
                    stack.enter_context(sync_debug("warn"))  # the once-per-batch read
                on_layer(layer, attention, context)
                if layer == 0:
                    stack.enter_context(sync_debug("error"))  # from here to the last layer: no synchronisation

            layerwise(self, input_ids, attention_mask, checked, **kwargs)

    monkeypatch.setattr(Encoder, "layerwise", strict)
    results = probes.run(SIX, encoder=deep_bert, limit=40, batch_size=8, fit_on="same", progress=False,
                         tree_decoding=decoding)
    assert set(results) == set(SIX) and all(r.info.sentences == 40 for r in results.values())
    # the fit pass' 5 batches, then the scoring pass' 5: layers 1 and 2 of each under "error"
    assert modes == [(layer, "error" if layer in (1, 2) else "warn") for _ in range(10) for layer in range(4)]


def test_trees_decoded_on_the_device_are_the_hosts_without_a_synchronisation():
    """--tree-decoding device: the batched decoders on the device give the compiled decoders' trees (CPU), ties
    included (attention rounded to quarters), and never wait for the host (set_sync_debug_mode("error"))."""
    generator = torch.Generator().manual_seed(0)
    attention = (torch.softmax(3 * torch.randn(300, 18, 18, generator=generator), -1) * 4).round() / 4
    lengths = torch.randint(1, 17, (300,), generator=generator)
    on_device = attention.to(DEVICE)
    with sync_debug("error"):
        heads = batched.decode(on_device, lengths)
    assert heads.device.type == torch.device(DEVICE).type
    assert torch.equal(heads.cpu(), decode(attention, lengths))


SYNC_FREE = ["dep", "pos", "ner", "con", "srl", "frames", "coref", "mass", "entropy", "seg"]  # issue 44: a group, and seg


@pytest.mark.parametrize("name", SYNC_FREE)
def test_no_probe_waits_for_the_host_in_a_middle_layer(name, tiny_model, tmp_path, request, monkeypatch):
    """Issue 44 item 6 on the device: a tiny BERT of 4 layers, every update of layers 1 and 2 (the probe's, and the
    per-sentence views') under ``torch.cuda.set_sync_debug_mode("error")``: a host synchronisation there (a read
    per layer) fails the run. tests/test_host_reads.py counts the reads on the CPU, every probe and every batch."""
    from probes.results.examples import ExampleRecorder
    from tiny_models import with_layers

    if name == "coref" and importlib.util.find_spec("spacy") is None:
        pytest.skip("coref's mention heads need spaCy, which this machine lacks")

    folder = with_layers(shutil.copytree(tiny_model("bert"), tmp_path / "bert4"), 4, 512)  # coref's windows fit
    guarded = []  # the layers updated

    def guard(cls, method):
        plain = getattr(cls, method)

        def run(self, batch, maps):
            middle = 0 < maps.layer < 3 and torch.device(DEVICE).type == "cuda"
            if middle:
                torch.cuda.set_sync_debug_mode("error")
            try:
                plain(self, batch, maps)
            finally:
                if middle:
                    torch.cuda.set_sync_debug_mode("default")
            guarded.append(maps.layer)
        monkeypatch.setattr(cls, method, run)

    cls = probes.get_probe(name)
    guard(cls, "update")
    guard(cls, "fit_update")
    guard(ExampleRecorder, "update")
    kwargs = probe_run_arguments(name, tmp_path, lambda: request.getfixturevalue("shared_corpora"))
    if name == "coref":
        kwargs.update(window=500, stride=250)
    if not cls.needs_fit:
        kwargs.pop("fit_on", None)
    result = probes.run([name], model=str(folder), device=DEVICE, batch_size=4, progress=False, **kwargs)[name]
    assert result.info.sentences > 0 and {1, 2} <= set(guarded)
