"""The tiny test checkpoints load offline and behave like their real families (tests/tiny_models.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import transformers
from transformers import AutoModel, AutoTokenizer

from tiny_models import FAMILIES, build_tiny_model

BYTE_LEVEL = ("roberta", "deberta")  # byte-level BPE: pre-split words need add_prefix_space=True
SDPA_FAMILIES = ("bert", "roberta", "electra")  # default to SDPA in transformers 5
EAGER_ONLY = ("deberta-v2", "deberta", "fnet")  # no SDPA support: default (and only) implementation is eager

# Pre-split words with punctuation, numbers, a UD-style "n't" clitic, an unseen word, non-ASCII.
WORDS = ["I", "did", "n't", "say", "it", ",", "but", "it", "cost", "$", "3.50", "in", "1999", "!",
         "Zyxwvq", "naïve", "(", "really", ")", "?"]
BATCH = [["The", "court", "met", "."], ["He", "did", "n't", "pay", "$", "15", ",", "did", "he", "?"]]

# Expected special tokens and ids (mirroring the real checkpoints' conventions).
SPECIALS = {
    "bert": {"cls": ("[CLS]", 2), "sep": ("[SEP]", 3), "pad": ("[PAD]", 0), "unk": ("[UNK]", 1), "mask": ("[MASK]", 4)},
    "roberta": {"cls": ("<s>", 0), "sep": ("</s>", 2), "pad": ("<pad>", 1), "unk": ("<unk>", 3), "mask": ("<mask>", -1)},
    "deberta-v2": {"cls": ("[CLS]", 1), "sep": ("[SEP]", 2), "pad": ("[PAD]", 0), "unk": ("[UNK]", 3), "mask": ("[MASK]", -1)},
    "deberta": {"cls": ("[CLS]", 1), "sep": ("[SEP]", 2), "pad": ("[PAD]", 0), "unk": ("[UNK]", 3), "mask": ("[MASK]", -1)},
}
SPECIALS["electra"] = SPECIALS["fnet"] = SPECIALS["bert"]


def load_tokenizer(path: Path, family: str):
    kwargs = {"add_prefix_space": True} if family in BYTE_LEVEL else {}
    return AutoTokenizer.from_pretrained(path, **kwargs)


def encode_batch(tok, batch=BATCH):
    return tok(batch, is_split_into_words=True, padding=True, return_tensors="pt")


@pytest.mark.parametrize("family", FAMILIES)
def test_checkpoint_files_and_sizes(tiny_model, family):
    d = tiny_model(family)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (d / name).is_file(), name
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["model_type"] == family
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["intermediate_size"]) == (2, 32, 64)
    assert cfg["max_position_embeddings"] == 64
    if family == "fnet":
        assert "num_attention_heads" not in cfg  # FNet has no attention heads at all
    else:
        assert cfg["num_attention_heads"] == 4
    tok = load_tokenizer(d, family)
    assert tok.model_max_length == 64
    assert 500 <= len(tok) <= 1000
    assert cfg["vocab_size"] == len(tok)


@pytest.mark.parametrize("family", FAMILIES)
def test_tokenizer_specials_and_word_ids(tiny_model, family):
    tok = load_tokenizer(tiny_model(family), family)
    exp = SPECIALS[family]
    for role, (text, idx) in exp.items():
        assert getattr(tok, f"{role}_token") == text, role
        want = len(tok) - 1 if idx == -1 else idx
        assert getattr(tok, f"{role}_token_id") == want, role
    enc = tok(WORDS, is_split_into_words=True)
    ids, wids = enc["input_ids"], enc.word_ids()
    assert ids[0] == exp["cls"][1] and ids[-1] == exp["sep"][1]
    assert wids[0] is None and wids[-1] is None
    assert all(w is not None for w in wids[1:-1])
    assert sorted(set(wids[1:-1])) == list(range(len(WORDS)))  # every word has >= 1 token
    assert wids[1:-1] == sorted(wids[1:-1])  # in order
    assert len(ids) > len(WORDS) + 2  # the small vocabulary splits words into subwords
    # The unseen word is split into several pieces rather than dropped.
    assert wids.count(WORDS.index("Zyxwvq")) >= 2
    # Batch: padding right with the family's pad id, attention_mask marks real tokens.
    b = encode_batch(tok)
    n_short = len(tok(BATCH[0], is_split_into_words=True)["input_ids"])
    assert b["attention_mask"][0].tolist() == [1] * n_short + [0] * (b["input_ids"].shape[1] - n_short)
    assert (b["input_ids"][0, n_short:] == exp["pad"][1]).all()
    # token_type_ids: RoBERTa's tokenizer does not produce them; the others do (all zeros).
    if family == "roberta":
        assert "token_type_ids" not in b
    else:
        assert (b["token_type_ids"] == 0).all()


def test_roberta_bos_is_id_zero(tiny_model):
    tok = load_tokenizer(tiny_model("roberta"), "roberta")
    assert tok.convert_tokens_to_ids(["<s>", "<pad>", "</s>", "<unk>"]) == [0, 1, 2, 3]
    assert tok.mask_token_id == len(tok) - 1
    b = encode_batch(tok)
    assert (b["input_ids"][:, 0] == 0).all()
    assert tok.convert_ids_to_tokens(b["input_ids"][0, :1].tolist()) == ["<s>"]
    # Position 0 is a real token: id 0 must not be taken for padding (roberta pads with id 1).
    assert b["attention_mask"][:, 0].tolist() == [1, 1]
    assert (b["input_ids"][0][b["attention_mask"][0] == 0] == 1).all()


def test_byte_level_pre_split_words_get_prefix_space(tiny_model):
    """With add_prefix_space=True every pre-split word starts with the byte-level space marker Ġ."""
    for family in BYTE_LEVEL:
        tok = load_tokenizer(tiny_model(family), family)
        enc = tok(["did", "n't", "go"], is_split_into_words=True)
        toks = tok.convert_ids_to_tokens(enc["input_ids"])
        firsts = [toks[i] for i, w in enumerate(enc.word_ids()) if w is not None and enc.word_ids()[i - 1] != w]
        assert all(t.startswith("Ġ") for t in firsts), (family, toks)
        assert enc["input_ids"] == tok("did n't go")["input_ids"]  # same as running text
        # The trap: loaded without add_prefix_space=True, transformers 5 does not raise (4.x did for
        # fast tokenizers); it silently encodes every pre-split word as if glued to the previous one.
        plain = AutoTokenizer.from_pretrained(tiny_model(family))
        glued = plain.convert_ids_to_tokens(plain(["did", "n't", "go"], is_split_into_words=True)["input_ids"])
        assert not any(t.startswith("Ġ") for t in glued), glued


def test_deberta_v2_uses_metaspace(tiny_model):
    tok = load_tokenizer(tiny_model("deberta-v2"), "deberta-v2")
    enc = tok(["did", "n't", "go"], is_split_into_words=True)
    toks = tok.convert_ids_to_tokens(enc["input_ids"])
    firsts = [toks[i] for i, w in enumerate(enc.word_ids()) if w is not None and enc.word_ids()[i - 1] != w]
    assert all(t.startswith("▁") for t in firsts), toks


@pytest.mark.parametrize("family", FAMILIES)
def test_eager_attentions(tiny_model, family):
    d = tiny_model(family)
    tok = load_tokenizer(d, family)
    model = AutoModel.from_pretrained(d, attn_implementation="eager").eval()
    assert model.config._attn_implementation == "eager"
    b = encode_batch(tok)
    with torch.no_grad():
        out = model(**b, output_attentions=True)
    B, T = b["input_ids"].shape
    assert out.last_hidden_state.shape == (B, T, 32)
    if family == "fnet":
        # FNet mixes tokens with a Fourier transform: no attention to capture. It silently accepts
        # (and ignores) attention_mask and output_attentions.
        assert getattr(out, "attentions", None) is None
        return
    att = out.attentions
    assert len(att) == model.config.num_hidden_layers == 2
    mask = b["attention_mask"].bool()
    n_short = int(mask[0].sum())
    assert n_short < T and mask[1].all()
    for layer in att:
        assert layer.shape == (B, 4, T, T)
        assert torch.isfinite(layer).all() and (layer >= 0).all()
        torch.testing.assert_close(layer.sum(-1), torch.ones(B, 4, T), atol=1e-5, rtol=0)
        # Real query rows: all weight on real keys (rows over real keys sum to 1), none on padding.
        real = layer[0, :, :n_short]
        assert (real[..., n_short:] == 0).all()
        torch.testing.assert_close(real[..., :n_short].sum(-1), torch.ones(4, n_short), atol=1e-5, rtol=0)
        # Padded query rows differ by family: BERT-style models mask keys only, so a pad query still
        # attends to the real keys; DeBERTa masks query x key, so a pad query row is uniform over all
        # T keys, padding included. Either way these rows must be dropped by whoever reads them.
        pad_rows = layer[0, :, n_short:]
        if family in ("deberta", "deberta-v2"):
            torch.testing.assert_close(pad_rows, torch.full_like(pad_rows, 1.0 / T), atol=1e-6, rtol=0)
        else:
            assert (pad_rows[..., n_short:] == 0).all()
    # Padding does not change the short sentence's attentions.
    n = int(mask[0].sum())
    single = {k: v[:1, :n] for k, v in b.items()}
    with torch.no_grad():
        alone = model(**single, output_attentions=True).attentions
    torch.testing.assert_close(alone[-1][0], att[-1][0, :, :n, :n], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_default_attention_implementation(tiny_model, family):
    """The silent-SDPA trap, as transformers 5.23 actually behaves.

    bert/roberta/electra load with SDPA by default; output_attentions=True then does NOT fall back to
    eager: `outputs.attentions` is an empty tuple (only a one-time logger warning). The DeBERTa
    families and FNet have no SDPA path: they load eager, and asking for SDPA raises ValueError.
    """
    d = tiny_model(family)
    tok = load_tokenizer(d, family)
    model = AutoModel.from_pretrained(d).eval()
    b = encode_batch(tok)
    with torch.no_grad():
        out = model(**b, output_attentions=True)
    if family in SDPA_FAMILIES:
        assert model.config._attn_implementation == "sdpa"
        assert out.attentions == ()  # empty, not None, and no exception
        # Switching after load works.
        model.set_attn_implementation("eager")
        with torch.no_grad():
            assert len(model(**b, output_attentions=True).attentions) == 2
    else:
        assert family in EAGER_ONLY
        assert model.config._attn_implementation == "eager"
        if family == "fnet":
            assert getattr(out, "attentions", None) is None
        else:
            assert len(out.attentions) == 2
        with pytest.raises(ValueError, match="does not support"):
            AutoModel.from_pretrained(d, attn_implementation="sdpa")


def test_roberta_fits_only_max_positions_minus_two(tiny_model):
    """RoBERTa positions start at pad_token_id + 1 = 2: with 64 position embeddings only 62 tokens
    fit, although config.max_position_embeddings and tokenizer.model_max_length are both 64."""
    d = tiny_model("roberta")
    tok = load_tokenizer(d, "roberta")
    model = AutoModel.from_pretrained(d, attn_implementation="eager").eval()
    ok = tok([["a"] * 60], is_split_into_words=True, return_tensors="pt")
    assert ok["input_ids"].shape[1] == 62
    with torch.no_grad():
        model(**ok)
    bad = tok([["a"] * 61], is_split_into_words=True, return_tensors="pt")
    assert bad["input_ids"].shape[1] == 63
    with pytest.raises((IndexError, RuntimeError)), torch.no_grad():
        model(**bad)


def test_bert_rejects_more_than_64_tokens(tiny_model):
    d = tiny_model("bert")
    tok = load_tokenizer(d, "bert")
    model = AutoModel.from_pretrained(d, attn_implementation="eager").eval()
    with torch.no_grad():
        model(**tok([["a"] * 62], is_split_into_words=True, return_tensors="pt"))  # 64 tokens
        with pytest.raises((IndexError, RuntimeError)):
            model(**tok([["a"] * 63], is_split_into_words=True, return_tensors="pt"))  # 65 tokens


def test_builds_are_deterministic(tiny_model, tmp_path):
    first = tiny_model("deberta-v2")
    again = build_tiny_model("deberta-v2", tmp_path / "again", seed=0)
    other = build_tiny_model("deberta-v2", tmp_path / "other", seed=1)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (first / name).read_bytes() == (again / name).read_bytes(), name
    assert (first / "model.safetensors").read_bytes() != (other / "model.safetensors").read_bytes()
    assert (first / "tokenizer.json").read_bytes() == (other / "tokenizer.json").read_bytes()


def test_unknown_family(tmp_path):
    with pytest.raises(ValueError, match="unknown family"):
        build_tiny_model("gpt2", tmp_path)


FRESH_PROCESS_CODE = textwrap.dedent(
    """
    import json, sys, torch
    from transformers import AutoModel, AutoTokenizer
    dirs = json.loads(sys.argv[1])
    for family, d in dirs.items():
        kw = {"add_prefix_space": True} if family in ("roberta", "deberta") else {}
        tok = AutoTokenizer.from_pretrained(d, **kw)
        model = AutoModel.from_pretrained(d, attn_implementation="eager")
        enc = tok([["Hello", "world", "!"]], is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            out = model(**enc, output_attentions=True)
        att = getattr(out, "attentions", None)
        print(family, type(tok).__name__, type(model).__name__, 0 if att is None else len(att))
    """
)


@pytest.fixture(scope="module", autouse=True)
def fresh_process(tiny_model):
    """Builds all six checkpoints, then starts a fresh offline interpreter loading them; it runs
    alongside the other tests (importing transformers takes seconds) and is checked at the end."""
    dirs = {family: str(tiny_model(family)) for family in FAMILIES}
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, "-c", FRESH_PROCESS_CODE, json.dumps(dirs)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def test_loads_in_fresh_offline_process(fresh_process):
    """A fresh interpreter with HF_HUB_OFFLINE=1 loads every checkpoint (no hidden in-process state)."""
    stdout, stderr = fresh_process.communicate(timeout=120)
    assert fresh_process.returncode == 0, stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in stdout.strip().splitlines())
    assert lines == {
        "bert": "BertTokenizer BertModel 2",
        "roberta": "RobertaTokenizer RobertaModel 2",
        "electra": "BertTokenizer ElectraModel 2",
        "deberta-v2": "DebertaV2Tokenizer DebertaV2Model 2",
        "deberta": "DebertaTokenizer DebertaModel 2",
        "fnet": "BertTokenizer FNetModel 0",
    }


def test_transformers_version_is_the_one_these_tests_describe():
    # The SDPA / tokenizer behaviour asserted above was recorded with transformers 5.x.
    assert int(transformers.__version__.split(".")[0]) >= 5
