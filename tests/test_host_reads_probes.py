"""Issue 44 item 1, for trees, seg, the causal detectors, positional, patterns, rare, head_distance, word_order,
term_matching and the clustering probes (pos): in a probe's per-batch work (capture + update, ``Feed.batch``) the
host reads made at the lines of the probe's own files (tests/host_reads.py) are the same with a model of 2 layers
and of 4, and a few per batch: none per layer. (The shared path's own reads, pooling, bootstrap, examples, are
counted by tests/test_host_reads.py.) The count is of the thread that runs the model: trees decodes each layer
on a thread of its own, which waits there for the layer's host copy.

Run with tiny random BERTs of 2 and 4 layers on the corpora of tests/probe_corpora.py, 8 sentences in batches of
4, with replicates (the bootstrap paths) and without example views (``views=0``: where the examples read a layer's
marks, trees waits for that layer's trees, in the batches holding the first sentences of the corpus alone).
trees' head ensemble is chosen once per run, on its selection sample, after the fit phase and before the first
scored batch (``Probe.fitted``): outside the count."""
from __future__ import annotations

from collections import Counter

import pytest
import torch
import transformers

import probes
from host_reads import HostReads
from probe_corpora import probe_run_arguments
from probes.running.runner import Feed
from tiny_models import build_tiny_model

# probe -> (the probe files whose lines are counted, most reads a batch may make there)
SITES = {
    # the gold arcs; the trees are decoded from the host copies on the probe's own thread, which the count (this
    # thread's) leaves out
    "trees": (("probes/builtin/trees/",), 1),
    # --tree-decoding device: the units' lengths, host tensors (each decoder's list of them, their repetition over
    # layers and heads); on CUDA no synchronisation (tests/test_cuda.py)
    "trees_device": (("probes/builtin/trees/",), 6),
    "positional": (("probes/builtin/analyses/positional.py",), 0),
    "patterns": (("probes/builtin/analyses/patterns.py",), 0),
    "rare": (("probes/builtin/analyses/rare.py",), 0),
    "head_distance": (("probes/builtin/analyses/head_distance.py",), 2),  # the drawn rows, the batch's sums
    "word_order": (("probes/builtin/analyses/word_order.py", "probes/encoding/shuffle.py"), 1),  # the twin's layout
    "causal": (("probes/builtin/causal/",), 10),  # the token pairs and their rows, from the ids on the host
    "pos": (("probes/builtin/clustering.py", "probes/builtin/pos.py"), 1),  # the units' rows
    "term_matching": (("probes/builtin/analyses/term_matching.py",), 0),
    # the units found and scored (tally, replicates, examples) on the probe's own thread, from a copy of every layer's
    # ends made without waiting: none on the model's
    "seg": (("probes/builtin/seg/",), 0),
}
FEED_BATCH = Feed.batch  # the runner's own, wrapped anew for each run
BUNDLED = ["trees", "positional", "patterns", "rare", "head_distance", "word_order", "prev_token", "duplicate_token",
           "induction", "sink", "pos"]


@pytest.fixture(scope="module")
def berts(tmp_path_factory):
    """Tiny random BERTs of 2 and 4 layers: {layers: folder}."""
    root = tmp_path_factory.mktemp("berts")
    out = {}
    for layers in (2, 4):
        folder = build_tiny_model("bert", root / f"bert{layers}")
        config = transformers.AutoConfig.from_pretrained(folder)
        config.num_hidden_layers = layers
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            transformers.BertModel(config).save_pretrained(folder)
        out[layers] = folder
    return out


def reads_per_batch(monkeypatch, names: list[str], model, **arguments) -> list[Counter]:
    """The host reads of every scored batch of a run of `names` ({"probes/x.py:12 item": n} each)."""
    batches: list[Counter] = []

    def counted(self, batch_probes, method, sentences, items, *built):
        with HostReads() as reads:
            FEED_BATCH(self, batch_probes, method, sentences, items, *built)
        if method == "update":
            batches.append(reads.sites)

    monkeypatch.setattr(Feed, "batch", counted)
    probes.run(names, model=str(model), batch_size=4, max_tokens=1 << 20, progress=False, replicates=20, views=0,
               **arguments)  # batches of 4 sentences whatever the model (no token budget)
    return batches


def at(sites: Counter, prefixes: tuple[str, ...]) -> int:
    return sum(n for site, n in sites.items() if site.startswith(prefixes))


def assert_few_and_layer_free(counts: dict[int, list[Counter]], group: str) -> None:
    prefixes, most = SITES[group]
    per_batch = {layers: [at(sites, prefixes) for sites in batches] for layers, batches in counts.items()}
    assert per_batch[2] == per_batch[4], (group, per_batch)
    assert max(per_batch[2]) <= most, (group, per_batch, [dict(s) for s in counts[4]])


def test_bundled_sample_probes_read_no_more_with_more_layers(berts, monkeypatch, tmp_path):
    arguments = probe_run_arguments("dep", tmp_path, lambda: None)  # the bundled sample, pos fitted on it
    counts = {layers: reads_per_batch(monkeypatch, BUNDLED, folder, **arguments) for layers, folder in berts.items()}
    assert len(counts[2]) == 2
    for group in ["trees", "positional", "patterns", "rare", "head_distance", "word_order", "causal", "pos"]:
        assert_few_and_layer_free(counts, group)


def test_term_matching_reads_no_more_with_more_layers(berts, monkeypatch, tmp_path):
    arguments = probe_run_arguments("term_matching", tmp_path, lambda: None)
    counts = {layers: reads_per_batch(monkeypatch, ["term_matching"], folder, **arguments)
              for layers, folder in berts.items()}
    assert_few_and_layer_free(counts, "term_matching")


@pytest.mark.filterwarnings("ignore::probes.encoding.subwords.UnknownTokensWarning")  # the tiny vocabulary
def test_seg_reads_no_more_with_more_layers(berts, monkeypatch, tmp_path, shared_corpora):
    arguments = probe_run_arguments("seg", tmp_path, lambda: shared_corpora)
    counts = {layers: reads_per_batch(monkeypatch, ["seg"], folder, **arguments)
              for layers, folder in berts.items()}
    assert_few_and_layer_free(counts, "seg")


def test_trees_decoded_on_the_device_read_no_more_with_more_layers(berts, monkeypatch, tmp_path):
    """``--tree-decoding device``: the trees are decoded on the thread that runs the model, at each batch's last layer,
    and the count holds that decoding too: the gold arcs and the lengths of the units, read from host tensors."""
    arguments = probe_run_arguments("dep", tmp_path, lambda: None)
    counts = {layers: reads_per_batch(monkeypatch, ["trees"], folder, tree_decoding="device", **arguments)
              for layers, folder in berts.items()}
    assert_few_and_layer_free(counts, "trees_device")
