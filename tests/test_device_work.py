"""benchmarks/device_work.py: its counts on operations worked out by hand, and a run of its long input on a 1-layer
BERT-large shape."""
from __future__ import annotations

import json

import pytest
import torch

from benchmarks import device_work
from benchmarks.device_work import Work


def test_work_counts_bytes_and_products_by_hand():
    a, b = torch.ones(4, 8), torch.ones(8, 2)
    work = Work()
    with work:
        a.view(8, 4)  # a view: nothing counted
        torch.mm(a, b)  # not counting yet
        work.counting = True
        torch.mm(a, b)  # reads 32 + 16 floats, writes 8: 224 bytes; 2·4·8·2 = 128 FLOPs
        a.add_(1)  # reads and writes a (counted once: 128 bytes)
    (calls, moved, products), = [v for k, v in work.sites.items() if "mm" in k]
    assert (calls, moved, products) == (1, 224, 128)
    assert [v for k, v in work.sites.items() if "add_" in k] == [[1, 128, 0]]
    assert device_work.flops("linear", (torch.ones(3, 5, 8), torch.ones(6, 8))) == 2 * 15 * 8 * 6
    assert device_work.estimate(1, 4 * 10 ** 12, 0) == pytest.approx(1 + device_work.LAUNCH)


@pytest.mark.integration
def test_the_long_input_on_one_layer(tmp_path, capsys):
    out = tmp_path / "work.json"
    assert device_work.main(["--runs", "dep", "--inputs", "long", "--layers", "1", "--out", str(out)]) == 0
    record, = json.loads(out.read_text())
    assert record["run"] == ["dep"] and record["cuda_choices"] and record["shape"]["heads"] == 16
    # the model's one layer: Q, K, V (3 · 2 · 8,192 tokens · 1024²) and the maps' two products (2 · 2 · 16 heads ·
    # 16 sentences · 512² · 64); the capture skips the last layer's feed-forward block
    assert record["model"]["gflop"] == pytest.approx((3 * 2 * 8192 * 1024 ** 2 + 4 * 16 * 16 * 512 ** 2 * 64) / 1e9)
    assert record["probes"]["operations"] > record["model"]["operations"] and record["top"][0]["ms"] >= record["top"][-1]["ms"] > 0
    assert any("pooling.py" in row["site"] for row in record["top"])
    assert "dep on long (CUDA's choices)" in capsys.readouterr().out
