"""Token-budget batches, the default budget, per-layer capture as the model runs, segment-sum pooling
against the matrix form, and --invalid-trees (issue 17 items 1-2, issue 16 §2's option wired to run)."""
from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest
import torch

import probes
from probes.encoding.batching import (ACTIVATION_COPIES, DEVICE_TOKENS, MAP_COPIES, MEMORY_SHARE, default_max_tokens,
                             length_sorted_batches, total_memory)
from probes.cli import main
from probes.base.defaults import bundled_corpus
from probes.encoding.subwords import Encoded
from probes.base.choices import POOLING_RULES
from probes.encoding import pooling
from probes.encoding.pooling import pool_attention, pooling_matrices, segments


def _encoded(lengths: list[int]) -> list[Encoded]:
    return [Encoded(index=i, input_ids=[0] * n, columns=np.zeros(n, dtype=np.int64), offsets=np.zeros((n, 2)))
            for i, n in enumerate(lengths)]


def _sizes(batches) -> list[list[int]]:
    return [[len(e.input_ids) for e in b] for b in batches]


def test_batches_are_length_sorted_and_cut_by_the_budget_and_the_cap():
    items = _encoded([5, 3, 9, 4, 3, 30, 8])
    # sorted: 3 3 4 5 8 9 30; budget 16: 3+3+4 → 3·4 = 12, adding 5 gives 4·5 = 20 > 16; 5 8 → 16; 9; 30 alone
    assert _sizes(length_sorted_batches(items, None, 16)) == [[3, 3, 4], [5, 8], [9], [30]]
    assert _sizes(length_sorted_batches(items, 2, 16)) == [[3, 3], [4, 5], [8], [9], [30]]
    assert _sizes(length_sorted_batches(items, 3)) == [[3, 3, 4], [5, 8, 9], [30]]
    assert [e.index for e in length_sorted_batches(items, None)[0][:2]] == [1, 4]  # ties in corpus order


def test_the_default_budget_follows_the_model_shape_and_total_memory():
    # 12 heads, hidden 384, longest 100: 4 · (8·12·100 + 16·384) = 62,976 bytes per position
    per_token = 4 * (MAP_COPIES * 12 * 100 + ACTIVATION_COPIES * 384)
    assert per_token == 62_976 and MEMORY_SHARE == 0.25
    # a quarter of 10 GiB: 2,684,354,560 bytes // 62,976
    assert default_max_tokens(12, 384, 100, 10 * 2**30) == 2_684_354_560 // per_token == 42_625
    # all 6 layers held (capture "outputs"): 4 · (8·12·100·6 + 16·384) = 254,976 bytes per position
    assert default_max_tokens(12, 384, 100, 10 * 2**30, layers_held=6) == 2_684_354_560 // 254_976 == 10_527
    assert default_max_tokens(12, 384, 100, 1000) == 100  # never less than one longest sentence


def test_on_a_cuda_device_the_default_budget_stops_where_the_device_is_busy():
    # 12 heads, hidden 768, longest 40: 4 · (8·12·40 + 16·768) = 64,512 bytes per position
    assert DEVICE_TOKENS == 8_192  # the plateau of the bare pass's curve on an H200 (docs/gpu_bench-h200.json)
    assert default_max_tokens(12, 768, 40, 80 * 2**30) == 21_474_836_480 // 64_512 == 332_881  # the CPU's rule
    assert default_max_tokens(12, 768, 40, 80 * 2**30, cuda=True) == 8_192  # 80 GiB: the device's cap
    assert default_max_tokens(12, 768, 40, 2**29, cuda=True) == 134_217_728 // 64_512 == 2_080  # memory first
    assert default_max_tokens(16, 1024, 512, 2**40, cuda=True) == 8_192  # BERT-large at 512, 1 TiB: the cap
    assert default_max_tokens(4, 64, 100_000, 2**40, cuda=True) == 100_000  # never less than one longest sentence


def test_on_a_cuda_device_no_sentence_cap_unless_one_is_given():
    """The default batch_size (32) caps a batch's sentences on the CPU; on CUDA the token budget alone cuts them,
    and a batch_size that is set caps there too."""
    from probes.settings.run_settings import RunSettings

    assert RunSettings().batch_cap(cuda=False) == 32 and RunSettings().batch_cap(cuda=True) is None
    assert RunSettings(batch_size=8).batch_cap(cuda=True) == 8 == RunSettings(batch_size=8).batch_cap(cuda=False)
    assert RunSettings(batch_size=None).batch_cap(cuda=False) is None
    given = RunSettings(batch_size=32)  # 32 given caps on CUDA too; the default stays the default through replace
    assert given.batch_cap(cuda=True) == 32 and RunSettings().replace(limit=5).batch_cap(cuda=True) is None
    assert RunSettings().batch_size == 32 and json.dumps(RunSettings().batch_size) == "32"
    assert pickle.loads(pickle.dumps(RunSettings())).batch_cap(cuda=True) is None  # to a study's worker process
    assert "batch_size" not in RunSettings().study_settings() and given.study_settings()["batch_size"] == 32

    from probes.cli import build_parser
    from probes.tools.arguments import chosen_settings

    def cap(*flags: str) -> int | None:  # the cap `probes run dep FLAGS` takes on CUDA
        return RunSettings(**chosen_settings(build_parser().parse_args(["run", "dep", *flags]))).batch_cap(cuda=True)

    assert cap() is None and cap("--batch-size", "32") == 32 and cap("--batch-size", "8") == 8


def _meminfo(path, total_kb: int, available_kb: int) -> str:
    path.write_text(f"MemTotal:       {total_kb} kB\nMemFree:        {available_kb // 2} kB\n"
                    f"MemAvailable:   {available_kb} kB\n", encoding="ascii")
    return str(path)


def test_total_memory_reads_memtotal_and_the_cgroup_limit(tmp_path, monkeypatch):
    import probes.encoding.batching as batching
    monkeypatch.setattr(batching, "MEMINFO", _meminfo(tmp_path / "meminfo", 8_000_000, 1_234_567))
    unset, limit = tmp_path / "unset", tmp_path / "limit"
    unset.write_text("max\n")
    limit.write_text(f"{3 * 2**30}\n")
    monkeypatch.setattr(batching, "CGROUP_LIMITS", (str(unset), str(tmp_path / "missing")))
    assert total_memory(torch.device("cpu")) == 8_000_000 * 1024  # MemTotal, not MemAvailable
    monkeypatch.setattr(batching, "CGROUP_LIMITS", (str(unset), str(limit)))
    assert total_memory(torch.device("cpu")) == 3 * 2**30  # a container's limit below MemTotal
    monkeypatch.setattr(batching, "MEMINFO", str(tmp_path / "no-proc"))
    monkeypatch.setattr(batching, "CGROUP_LIMITS", ())
    assert total_memory(torch.device("cpu")) == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _results_without_times(out) -> dict:
    data = json.loads((out / "dep.json").read_text(encoding="utf-8"))
    for key in ("created", "seconds"):
        del data["provenance"][key]
    return data


def test_the_default_budget_does_not_move_with_free_memory(tmp_path, monkeypatch, capsys):
    """Issue 24's acceptance: three consecutive `probes run dep --limit 100 --out DIRk`, the free memory
    different at each (MemAvailable 20, 9 and 2 GB), write the same results JSON, provenance times aside;
    MemTotal halved, the recorded budget halves too (so the check can fail; that run without replicates, which
    do not enter the budget)."""
    import probes.encoding.batching as batching
    total_kb = 16 * 2**20  # 16 GiB
    runs = []
    for k, available_kb in enumerate((20_000_000, 9_000_000, 2_000_000)):
        monkeypatch.setattr(batching, "MEMINFO", _meminfo(tmp_path / f"meminfo{k}", total_kb, available_kb))
        monkeypatch.setattr(batching, "CGROUP_LIMITS", ())
        out = tmp_path / f"dir{k}"
        assert main(["run", "dep", "--limit", "100", "--out", str(out), "--no-plots", "--quiet"]) == 0
        runs.append(_results_without_times(out))
    assert runs[0] == runs[1] == runs[2]
    budget = runs[0]["settings"]["max_tokens"]
    monkeypatch.setattr(batching, "MEMINFO", _meminfo(tmp_path / "meminfo-half", total_kb // 2, 2_000_000))
    assert main(["run", "dep", "--limit", "100", "--out", str(tmp_path / "half"), "--no-plots", "--quiet",
                 "--replicates", "0"]) == 0
    assert _results_without_times(tmp_path / "half")["settings"]["max_tokens"] == budget // 2


@pytest.mark.parametrize("family", ["bert", "deberta-v2", "deberta"])
def test_each_layer_is_handed_over_while_the_model_runs(family, tiny_model):
    """The callback for layer l runs before layer l+1's attention starts, and gives the outputs' maps."""
    encoder = probes.load_encoder(str(tiny_model(family)))
    assert encoder.capture == "hooks"
    enc = encoder.tokenizer([["probe", "heads"], ["one", "layer", "at", "a", "time"]], is_split_into_words=True,
                            padding=True, return_tensors="pt")
    events: list[str] = []
    starts = [m.register_forward_pre_hook(lambda m, a, layer=i: events.append(f"start {layer}"))
              for i, m in enumerate(encoder.attention_modules)]
    maps: list[torch.Tensor] = []
    try:
        encoder.layerwise(enc["input_ids"], enc["attention_mask"],
                          lambda layer, a, c: (events.append(f"maps {layer}"), maps.append(a.clone())))
    finally:
        for h in starts:
            h.remove()
    assert events == [e for layer in range(encoder.layers) for e in (f"start {layer}", f"maps {layer}")]
    outputs = encoder.forward(enc["input_ids"], enc["attention_mask"]).attentions
    assert all(torch.equal(a, b) for a, b in zip(maps, outputs, strict=True))


@pytest.mark.parametrize("family", ["bert", "deberta-v2"])
def test_the_pass_stops_once_the_last_maps_are_handed_on(family, tiny_model):
    """layerwise ends the pass once the last layer's maps are handed on: every block's feed-forward runs once but
    the last's. A full pass after it gives the same output as before it (nothing is left half-done)."""
    encoder = probes.load_encoder(str(tiny_model(family)))
    blocks = encoder.model.encoder.layer
    enc = encoder.tokenizer([["probe", "heads"]], is_split_into_words=True, return_tensors="pt")
    calls: list[int] = []
    hooks = [block.intermediate.register_forward_hook(lambda *_, layer=i: calls.append(layer))
             for i, block in enumerate(blocks)]
    try:
        before = encoder.bare_forward(enc["input_ids"], enc["attention_mask"])
        assert calls == list(range(len(blocks)))
        calls.clear()
        layers: list[int] = []
        encoder.layerwise(enc["input_ids"], enc["attention_mask"], lambda layer, a, c: layers.append(layer))
        assert layers == list(range(len(blocks)))
        assert calls == list(range(len(blocks) - 1))  # every feed-forward block but the last
        assert torch.equal(encoder.bare_forward(enc["input_ids"], enc["attention_mask"]), before)
    finally:
        for h in hooks:
            h.remove()


@pytest.mark.parametrize("way", ["products", "segment-sums", "ordered"])
@pytest.mark.parametrize("rule", POOLING_RULES)
def test_pooling_is_the_matrix_product(rule, way, monkeypatch):
    """query · A · keyᵀ in float64 as the reference, on random maps with words of 1 to 4 subwords and padding,
    by matrix products (narrow batches), by segment sums (wider than PRODUCT_WIDTH, here made 0) and by segment sums
    with each word's subwords past its second summed apart (as on CUDA: probes.encoding.pooling.Tail); a subset of
    the rows pools to the whole batch's values for those rows, bit for bit."""
    products = way == "products"
    if not products:
        monkeypatch.setattr(pooling, "PRODUCT_WIDTH", 0)
    ordered = way == "ordered"
    monkeypatch.setattr(pooling, "in_order", lambda device: ordered)
    generator = torch.Generator().manual_seed(0)
    columns = torch.tensor([[0, 1, 1, 2, 3, 3, 3, 3, 4, -2, -1, -1],
                            [0, 1, 2, 2, 2, 3, 4, 5, 5, 6, 7, -2]])  # -2: end special, -1: padding
    width = 9
    columns = columns.masked_fill(columns == -2, width - 1)
    logits = torch.randn(2, 3, 12, 12, generator=generator).masked_fill((columns < 0)[:, None, None, :], -1e9)
    attention = logits.softmax(-1)
    query, key = pooling_matrices(columns, width, rule)
    expected = query.double()[:, None] @ attention.double() @ key.double().transpose(1, 2)[:, None]  # [B,H,C,C]
    made = []
    given = (segments(query, ordered), segments(key, ordered))
    longest = int((key != 0).sum(-1).max())  # subwords a word's key column reads: 4, or 1 for first and last
    assert (given[1].tail is not None) == (ordered and longest > 2)
    pooled = pool_attention(attention, query, key, segmented=lambda: made.append(1) or given)
    assert made == ([] if products else [1])  # the given Segments: where, and only where, needed
    assert pooled.shape == (2, 3, width, width)
    torch.testing.assert_close(pooled.double(), expected, rtol=0, atol=1e-6)
    assert pooled[0, :, 5:8].abs().max() == 0  # padding word rows of the shorter sentence
    assert torch.equal(pool_attention(attention[1:], query[1:], key[1:]), pooled[1:])


def _broken_tree(tmp_path) -> str:
    """The bundled sample's first 3 sentences, the second's first word made its own head (a cycle)."""
    blocks = open(bundled_corpus(), encoding="utf-8").read().split("\n\n")[:3]
    lines = blocks[1].split("\n")
    row = next(i for i, line in enumerate(lines) if line.split("\t")[0] == "1")
    cells = lines[row].split("\t")
    cells[6] = "1"
    lines[row] = "\t".join(cells)
    blocks[1] = "\n".join(lines)
    path = tmp_path / "broken.conllu"
    path.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return str(path)


def test_invalid_trees_refused_by_default_and_skipped_on_request(tmp_path, minilm, capsys):
    path = _broken_tree(tmp_path)
    with pytest.raises(probes.InputError, match="not a tree"):
        probes.run(["dep"], encoder=minilm, corpus=path, progress=False)
    with pytest.raises(probes.InputError, match="invalid_trees must be one of refuse, skip"):
        probes.run(["dep"], encoder=minilm, corpus=path, progress=False, invalid_trees="keep")
    result = probes.run(["dep"], encoder=minilm, corpus=path, progress=False, invalid_trees="skip")["dep"]
    assert result.info.sentences == 2 and sum(result.info.skipped.values()) == 1
    assert all(k.startswith("invalid_tree_") for k in result.info.skipped)
    assert main(["run", "dep", "--corpus", path, "--quiet"]) == 2
    assert "not a tree" in capsys.readouterr().err
    out = tmp_path / "out"
    assert main(["run", "dep", "--corpus", path, "--quiet", "--invalid-trees", "skip", "--no-plots", "--out",
                 str(out), "--max-tokens", "64"]) == 0
    saved = probes.load_result(out / "dep.json")
    assert saved.info.sentences == 2 and saved.info.settings["max_tokens"] == 64
