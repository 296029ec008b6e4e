"""Probe targets on one shared read: every mask's scores against a separate ``probes.run`` with that mask on
every row; disabled heads not scored in zero mode; keep-masks."""
from __future__ import annotations

import numpy as np
import pytest

import probes
from probes.tools.ablation import ablate
from probes.capture.masking import HeadMasker
from probes.capture.ablation_masks import build_masks, keep_mask, mask_tensor, parse_layers
from probes.cli import main
from probes.base.defaults import bundled_corpus
from probes.base.errors import InputError
from probes.settings.run_settings import RunSettings


def test_keep_masks():
    mask = keep_mask("2:3,3:1", "1-3", 6, 4)
    assert mask.name == "keep 2:3,3:1 in 1-3" and mask.sweep == "keep"
    assert mask.heads == ((1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 1), (2, 2), (3, 0), (3, 2), (3, 3))
    everywhere = keep_mask("0:0", None, 2, 2)
    assert everywhere.heads == ((0, 1), (1, 0), (1, 1)) and everywhere.name == "keep 0:0 in 0-1"
    assert keep_mask("1:0", "1,3", 4, 2).heads == ((1, 1), (3, 0), (3, 1))
    assert parse_layers("3-4,0,1-1", 6) == [0, 1, 3, 4]
    masks = build_masks(2, 2, [], [], percents=[], repeats=1, seed=0, keeps=["1:0", "1:1"], in_layers="1")
    assert [m.name for m in masks] == ["none", "keep 1:0 in 1", "keep 1:1 in 1"]
    assert [m.heads for m in masks[1:]] == [((1, 1),), ((1, 0),)]


@pytest.mark.parametrize("spec, layers, problem", [
    ("2:3", "0-1", "head 2:3 of keep-mask '2:3' is not in the layers it applies to (0-1)"),
    ("0:0", "2-1", "layers '2-1' in '2-1' are out of range or reversed: the model has 6 layers (0-5)"),
    ("0:0", "0-6", "layers '0-6' in '0-6' are out of range or reversed"),
    ("0:0", "a", "bad layers 'a' in 'a': expected LAYER or FIRST-LAST (0-indexed)"),
])
def test_bad_keep_masks(spec, layers, problem):
    with pytest.raises(InputError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        keep_mask(spec, layers, 6, 4)


def test_in_layers_needs_keep():
    with pytest.raises(InputError, match="in-layers applies to keep-masks: give --keep too"):
        build_masks(2, 2, ["heads"], [], percents=[], repeats=1, seed=0, in_layers="0")


def _masked_run(encoder, heads, mode="zero", **options):
    """probes.run with the heads disabled on every row: the per-mask reference."""
    table = mask_tensor([build_masks(encoder.layers, encoder.heads, [], [heads], percents=[], repeats=1,
                                     seed=0)[-1]], encoder.layers, encoder.heads)[0]  # [L,H]
    with HeadMasker(encoder.model, encoder.attention_modules, encoder.heads, encoder.head_dim, mode) as masker:
        masker.set(table)
        return probes.run("dep", encoder=encoder, corpus=bundled_corpus(), progress=False, **options)["dep"], table


@pytest.mark.slow
@pytest.mark.integration
def test_a_probe_target_streams_its_corpus_in_chunks(tiny_model, monkeypatch):
    """Read in chunks of 7 sentences (probes.running.chunks, as runs read), a probe target scores every mask as when the
    corpus is one chunk, and a run under no mask as probes.run does in chunks."""
    from probes.running import chunks

    model = str(tiny_model("bert"))
    kwargs = dict(model=model, corpus=bundled_corpus(), masks=["0:1", "1:*"], limit=30, batch_size=8, progress=False)
    whole = ablate("dep", **kwargs)
    monkeypatch.setattr(chunks, "CHUNK_SENTENCES", 7)
    served, next_chunk = [], chunks.Pass.__next__
    monkeypatch.setattr(chunks.Pass, "__next__", lambda self: served.append(1) or next_chunk(self))
    chunked = ablate("dep", **kwargs)
    assert len(served) >= 5  # 30 sentences in chunks of 7 (and the end)
    plain = probes.run("dep", model, bundled_corpus(), limit=30, batch_size=8, progress=False)["dep"]
    assert chunked.info.sentences == whole.info.sentences == plain.info.sentences
    assert chunked.info.skipped == whole.info.skipped
    np.testing.assert_allclose(chunked.grids, whole.grids, rtol=0, atol=1e-12)
    np.testing.assert_allclose(chunked.grids[0], plain.scores["overall"], rtol=0, atol=1e-12)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("mode", ["zero", "uniform"])
def test_shared_sweep_equals_one_run_per_mask(tiny_model, mode):
    """Every mask's grid equals a separate probes.run under that mask (zero mode: disabled heads NaN), whatever the
    grouping of masks into passes."""
    model = str(tiny_model("bert"))
    specs = ["0:1", "1:2", "0:*", "1:0,1:3"]
    result = ablate("dep", model=model, corpus=bundled_corpus(), settings=RunSettings(limit=40, batch_size=8),
                    masks=specs, sweeps=["heads"], keeps=["1:1"], mode=mode, masks_per_pass=3, progress=False)
    regrouped = ablate("dep", model=model, corpus=bundled_corpus(), masks=specs, sweeps=["heads"], keeps=["1:1"],
                       mode=mode, limit=40, batch_size=16, masks_per_pass=16, tokens_per_pass=400, progress=False)
    np.testing.assert_array_equal(result.grids, regrouped.grids)
    encoder = probes.load_encoder(model)
    plain = probes.run("dep", encoder=encoder, corpus=bundled_corpus(), limit=40, batch_size=8, progress=False)["dep"]
    np.testing.assert_array_equal(result.grids[0], plain.scores["overall"])
    assert result.info.sentences == plain.info.sentences
    for k, mask in enumerate(result.masks[1:], 1):
        spec = ",".join(f"{layer}:{h}" for layer, h in mask.heads)
        reference, table = _masked_run(encoder, spec, mode, limit=40, batch_size=8)
        expected = reference.scores["overall"].copy()
        if mode == "zero":
            expected[table.numpy()] = np.nan
        np.testing.assert_allclose(result.grids[k], expected, rtol=0, atol=1e-12, err_msg=mask.name)
        assert result.values["best"][k] == pytest.approx(np.nanmax(expected), abs=1e-12)


@pytest.mark.slow
@pytest.mark.integration
def test_disabled_best_head_is_not_scored(minilm, tmp_path, capsys):
    """Masking the best dep head in zero mode: its cell is NaN and the best head is the next one, not itself."""
    plain = probes.run("dep", encoder=minilm, limit=60, progress=False)["dep"]
    grid = plain.scores["overall"]
    layer, head = np.unravel_index(int(np.nanargmax(grid)), grid.shape)
    out = tmp_path / "out"
    assert main(["ablate", "dep", "--mask", f"{layer}:{head}", "--limit", "60", "--quiet", "--no-plots",
                 "--out", str(out)]) == 0
    import json

    data = json.loads((out / "ablation-dep.json").read_text())
    masked = np.array(data["masks"][1]["grid"], dtype=float)
    assert np.isnan(masked[layer, head]) and np.isnan(masked).sum() == 1
    np.testing.assert_array_equal(masked[:layer], grid[:layer])  # layers below the mask are untouched
    assert data["masks"][1]["scores"]["best"] == pytest.approx(np.nanmax(masked))
    assert data["masks"][1]["delta"]["best"] < 0  # the head itself no longer counts
    assert data["disabled_heads"] == "not scored (NaN)"


@pytest.mark.integration
def test_a_probe_target_refuses_a_corpus_of_unknown_words_unless_allowed(tiny_model, tmp_path):
    """As probes.run (issue 42 item 6): 20 words that tokenize only to [UNK] are refused before any mask is fed;
    with allow_unknown in the settings they are scored, after the warning."""
    path = tmp_path / "birds.conllu"
    rows = "1\t🦜\t_\tNOUN\t_\t_\t2\tnsubj\t_\t_\n2\t🦩\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n"
    path.write_text("".join(f"# sent_id = s{i}\n{rows}" for i in range(10)), encoding="utf-8")
    model = str(tiny_model("bert"))
    with pytest.raises(InputError, match=r"100\.0% of the words \(20 of 20\) tokenize only to the unknown token"):
        ablate("dep", model=model, corpus=path, masks=["0:1"], progress=False)
    with pytest.warns(UserWarning, match="unknown token"):
        result = ablate("dep", model=model, corpus=path, settings=RunSettings(allow_unknown=True), masks=["0:1"],
                        progress=False)
    assert result.info.sentences == 10
