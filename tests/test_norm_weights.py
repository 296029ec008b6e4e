"""Norm-based attention (issue 14 item 2; Kobayashi et al. 2020): `probes run --weights norm`.

On a tiny random model of each of the five families, the maps a run's probes receive (LayerMaps.attention,
read by a spy on the mass analysis's update) are recomputed by hand from the module's parameters, in float64,
independently of probes.capture.norms: each layer's input X recorded by a pre-hook on a separate, uncaptured run,
α from that run's outputs, v = X W_V + b_V per head (DeBERTa v1: the value third of each head's slice of the
fused in_proj plus v_bias), W_O^h = rows h·d..(h+1)·d of the output dense layer's weight transposed, and
the map α_ij ‖v_j^h W_O^h‖ with rows renormalised to sum to 1. Then: the results record the weights kind,
batch size does not move the scores, a layout without a value projection is refused on one line, and on
MiniLM the mass on special tokens drops under norm for most heads (Kobayashi et al.'s finding).
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import json

import numpy as np
import pytest
import torch

import probes
from probe_corpora import grids, same
from probes.builtin.analyses.mass import MassAnalysis
from probes.cli import main
from probes.base.errors import InputError
from probes.capture.model import load_encoder
from probes.capture.norms import factor_cache, head_factors, value_norms

pytestmark = pytest.mark.integration
FAMILIES = ["bert", "roberta", "electra", "deberta-v2", "deberta"]
LIMIT = 12


@pytest.fixture(scope="module")
def encoders(tiny_model):
    """encoders(family): the tiny model of that family, loaded once per module."""
    return functools.cache(lambda family: load_encoder(str(tiny_model(family))))


def _spy(monkeypatch) -> list[tuple]:
    """Records (input_ids, attention_mask, layer, attention) of every mass update from now on."""
    seen = []
    update = MassAnalysis.update

    def spy(self, batch, maps):
        seen.append((batch.input_ids.clone(), batch.attention_mask.clone(), maps.layer, maps.attention.clone()))
        update(self, batch, maps)

    monkeypatch.setattr(MassAnalysis, "update", spy)
    return seen


def _by_hand(model, ids: torch.Tensor, mask: torch.Tensor, heads: int) -> list[torch.Tensor]:
    """Every layer's norm-based map [B,H,T,T] (float64), from the parameters of an uncaptured run's modules."""
    layers = model.encoder.layer
    inputs = []

    def record(_module, args, kwargs):
        inputs.append((args[0] if args else kwargs["hidden_states"]).detach().double())

    hooks = [layer.attention.self.register_forward_pre_hook(record, with_kwargs=True) for layer in layers]
    try:
        with torch.no_grad():
            alphas = model(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
    finally:
        for h in hooks:
            h.remove()
    maps = []
    for layer, x, alpha in zip(layers, inputs, alphas, strict=True):
        sa = layer.attention.self
        b, t, hidden = x.shape
        d = hidden // heads
        with torch.no_grad():
            if hasattr(sa, "in_proj"):  # DeBERTa v1: in_proj rows per head [q | k | v], no bias; v_bias apart
                w_v = sa.in_proj.weight.double().view(heads, 3, d, hidden)[:, 2]  # [H,d,D]
                v = torch.einsum("btD,hdD->bthd", x, w_v) + sa.v_bias.double().view(heads, d)
            else:
                proj = sa.value if hasattr(sa, "value") else sa.value_proj
                v = (x @ proj.weight.double().T + proj.bias.double()).view(b, t, heads, d)  # [B,T,H,d]
            w_o = layer.attention.output.dense.weight.double().T.reshape(heads, d, hidden)  # [H,d,D] = W_O^h
            norms = torch.einsum("bthd,hdD->bhtD", v, w_o).norm(dim=-1)  # [B,H,T] ‖f_h(x_j)‖
        weighted = alpha.double() * norms[:, :, None, :]  # [B,H,T,T]
        maps.append(weighted / weighted.sum(dim=-1, keepdim=True))
    return maps


@pytest.mark.parametrize("family", FAMILIES)
def test_the_maps_probes_read_are_the_norm_based_maps_recomputed_by_hand(family, encoders, monkeypatch):
    encoder = encoders(family)
    seen = _spy(monkeypatch)
    result = probes.run(["mass"], encoder=encoder, limit=LIMIT, batch_size=4, progress=False, weights="norm")["mass"]
    assert result.info.settings["weights"] == "norm"
    assert result.info.sentences > 4 and len(seen) >= 2 * encoder.layers  # two batches or more, every layer of each
    for ids, mask, layer, got in seen:
        expected = _by_hand(encoder.model, ids, mask, encoder.heads)[layer]
        rows, columns = mask.bool()[:, None, :, None], mask.bool()[:, None, None, :]  # [B,1,T,1], [B,1,1,T] real
        torch.testing.assert_close(got.double(), expected.where(rows & columns, got.double()), rtol=0, atol=1e-5)
        assert (got.masked_select(rows & ~columns) == 0).all()  # padding columns of real rows hold nothing
        row_sums = got.sum(-1).masked_select(rows[..., 0])  # real rows sum to 1
        torch.testing.assert_close(row_sums, torch.ones_like(row_sums), rtol=0, atol=1e-5)
        assert not torch.allclose(got, encoder.forward(ids, mask).attentions[layer], atol=1e-3)  # it is not α


def test_the_factorised_norm_is_the_norm_of_v_times_the_head_slice():
    """‖v R_hᵀ‖ (probes.capture.norms) against the explicit ‖v W_O^h‖, on a random output projection."""
    gen = torch.Generator().manual_seed(3)
    heads, d, hidden = 3, 4, 12
    dense = torch.nn.Linear(heads * d, hidden)
    with torch.no_grad():
        dense.weight.copy_(torch.randn(hidden, heads * d, generator=gen))
    v = torch.randn(2, 5, heads, d, generator=gen)  # [B,T,H,d]
    explicit = torch.einsum("bthd,hdD->bhtD", v, dense.weight.T.reshape(heads, d, hidden)).norm(dim=-1)
    cache = factor_cache()
    torch.testing.assert_close(value_norms(v, head_factors(dense, heads, d, cache)), explicit, rtol=1e-5, atol=1e-5)
    assert head_factors(dense, heads, d, cache) is head_factors(dense, heads, d, cache)  # factorised once ...
    assert head_factors(dense, heads, d, factor_cache()) is not head_factors(dense, heads, d, cache)  # ... per cache
    with torch.no_grad():
        dense.weight.mul_(2)  # ... until the weight changes in place
    torch.testing.assert_close(value_norms(v, head_factors(dense, heads, d, cache)), 2 * explicit, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_results_record_the_weights_kind_and_batch_size_moves_nothing(encoders, tmp_path):
    encoder = encoders("bert")
    plain = probes.run(["dep", "mass"], encoder=encoder, limit=LIMIT, progress=False)
    assert plain["dep"].info.settings["weights"] == "attention"
    runs = {size: probes.run(["dep", "mass"], encoder=encoder, limit=LIMIT, batch_size=size, progress=False,
                             weights="norm") for size in (1, 2, 32)}
    outputs = probes.run(["dep", "mass"], encoder=dataclasses.replace(encoder, capture="outputs"), limit=LIMIT,
                         batch_size=3, progress=False, weights="norm")
    for name in ("dep", "mass"):
        for other in (runs[1], runs[2], outputs):
            same(grids(runs[32][name]), grids(other[name]), name)
    assert not np.allclose(runs[32]["mass"].overall.scores, plain["mass"].overall.scores, atol=1e-3)
    out = tmp_path / "out"
    assert main(["run", "mass", "--model", encoder.name, "--limit", str(LIMIT), "--weights", "norm", "--out", str(out),
                 "--no-plots", "--quiet"]) == 0
    saved = json.loads((out / "mass.json").read_text())
    assert saved["settings"]["weights"] == "norm"
    same(grids(probes.load_result(out / "mass.json")), grids(runs[32]["mass"]), "saved")


def test_an_unknown_kind_and_a_layout_without_value_projection_are_refused(encoders, capsys):
    encoder = encoders("bert")
    with pytest.raises(InputError, match="unknown weights 'norms'"):
        probes.run(["mass"], encoder=encoder, limit=2, progress=False, weights="norms")
    with pytest.raises(SystemExit) as exited:  # argparse: the choices are attention and norm
        main(["run", "mass", "--model", encoder.name, "--limit", "2", "--weights", "norms"])
    assert exited.value.code == 2 and "invalid choice: 'norms'" in capsys.readouterr().err
    edited = copy.deepcopy(encoder.model)
    for layer in edited.encoder.layer:
        del layer.attention.self.value  # a layout whose value projection is not found
        layer.attention.self.value = torch.nn.Identity()
    broken = dataclasses.replace(encoder, model=edited, attention_modules=[x.attention.self for x in edited.encoder.layer])
    with pytest.raises(InputError, match=r"norm-based weights need each layer's value projection") as raised:
        probes.run(["mass"], encoder=broken, limit=2, progress=False, weights="norm")
    assert "\n" not in str(raised.value)


@pytest.mark.slow
def test_on_minilm_the_mass_on_special_tokens_drops_under_norm(minilm):
    """Kobayashi et al. 2020 (§4): weighting by ‖f(x)‖ takes most of the mass off the special tokens. MiniLM
    puts its vertical mass on [CLS] (EWT dev, 2001 sentences: 0.428 mean over heads, [SEP] 0.031); under norm
    [CLS] falls to 0.095 and [CLS] + [SEP] from 0.459 to 0.138, lower in every head, while [SEP] alone rises
    a little (0.043). On the first 100 sentences of the bundled EWT dev sample the same directions hold."""
    kinds = {w: probes.run(["mass"], encoder=minilm, limit=100, progress=False, weights=w)["mass"]
             for w in ("attention", "norm")}
    special = {w: r.overall.scores for w, r in kinds.items()}  # [L,H] mean mass on [CLS] + [SEP]
    cls = {w: r.labels["cls"].scores for w, r in kinds.items()}
    assert (special["norm"] < special["attention"]).mean() > 0.9
    assert (cls["norm"] < cls["attention"]).mean() > 0.9
    assert special["norm"].mean() < 0.5 * special["attention"].mean()
